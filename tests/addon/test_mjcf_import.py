"""File > Import > MJCF as ABD Rig in real Blender, and a URDF with ball joints through the URDF import."""

from __future__ import annotations

from pathlib import Path

import bpy
import pytest
from abd_rigs import clear_objects

pybullet_data = pytest.importorskip("pybullet_data")
pytest.importorskip("mujoco")

DATA = Path(pybullet_data.getDataPath())


def _import(operator, path: Path) -> bpy.types.Collection:
    clear_objects()
    before = set(bpy.data.collections)
    assert operator(filepath=str(path)) == {"FINISHED"}
    (collection,) = set(bpy.data.collections) - before
    return collection


def test_hopper_imports_as_a_rig_that_exports_and_names_what_it_leaves_out(addon, capfd):
    collection = _import(bpy.ops.import_scene.abd_mjcf, DATA / "mjcf" / "hopper.xml")
    bodies = sorted(ob.name for ob in collection.objects if ob.abd_body.enabled)
    joints = sorted(ob.name for ob in collection.objects if ob.abd_joint.enabled)
    assert bodies == ["foot", "leg", "thigh", "torso"]
    assert joints == ["foot_joint", "leg_joint", "thigh_joint"]
    assert bpy.data.objects["thigh_joint"].abd_joint.damping == pytest.approx(1.0)
    export = addon.export.export_scene(bpy.context.scene)
    assert len(export.scene.joints) == 3
    assert "several joints" in capfd.readouterr().out  # the operator's warning reports


def test_a_refused_mjcf_file_is_reported_and_changes_nothing(addon):
    clear_objects()
    before = set(bpy.data.objects)
    with pytest.raises(RuntimeError, match="MuJoCo cannot read it"):
        bpy.ops.import_scene.abd_mjcf(filepath=str(DATA / "mjcf" / "swimmer.xml"))
    assert set(bpy.data.objects) == before


def test_humanoid_urdf_ball_joints_become_ball_joints(addon):
    collection = _import(bpy.ops.import_scene.abd_urdf, DATA / "humanoid" / "humanoid.urdf")
    types = [ob.abd_joint.type for ob in collection.objects if ob.abd_joint.enabled]
    assert types.count("BALL") == 8 and types.count("REVOLUTE") == 4
    export = addon.export.export_scene(bpy.context.scene)
    assert sorted(j.type for j in export.scene.joints).count("spherical") == 8


def test_contact_groups_carry_over(addon):
    """inverted_pendulum.xml's geoms have contype 0: its bodies touch nothing, in Blender too."""
    collection = _import(bpy.ops.import_scene.abd_mjcf, DATA / "mjcf" / "inverted_pendulum.xml")
    bodies = [ob for ob in collection.objects if ob.abd_body.enabled]
    assert bodies and not any(ob.abd_body.use_collision for ob in bodies)
