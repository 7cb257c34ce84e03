"""Add / Remove Affine Body, Connect and Export Scene File, driven through bpy.ops."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, select_only, slider_rig, world


def test_body_add_enables_selected_meshes_only():
    cube, camera = bpy.data.objects["Cube"], bpy.data.objects["Camera"]
    select_only(cube, camera)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    assert cube.abd_body.enabled
    assert not camera.abd_body.enabled


def test_body_add_without_a_mesh_reports_an_error():
    camera = bpy.data.objects["Camera"]
    select_only(camera)
    with pytest.raises(RuntimeError, match="mesh"):
        bpy.ops.abd.body_add()
    assert not camera.abd_body.enabled


def test_body_remove():
    cube = bpy.data.objects["Cube"]
    select_only(cube)
    bpy.ops.abd.body_add()
    assert bpy.ops.abd.body_remove() == {"FINISHED"}
    assert not cube.abd_body.enabled


@pytest.mark.parametrize("pivot_type", ["ACTIVE", "CENTER", "CURSOR"])
@pytest.mark.parametrize("axis", ["X", "Y", "Z"])
def test_connect_places_the_joint(pivot_type, axis):
    clear_objects()
    a = add_box("A", location=(1.0, 2.0, 3.0))
    b = add_box("B", location=(3.0, 2.0, -1.0))
    bpy.context.scene.cursor.location = (-5.0, 0.5, 7.0)
    select_only(a, b)
    bpy.ops.abd.body_add()
    select_only(a, b, active=b)
    assert bpy.ops.abd.connect(type="PRISMATIC", pivot_type=pivot_type, axis=axis) == {"FINISHED"}
    joint = bpy.context.active_object
    assert joint.type == "EMPTY" and joint.select_get() and not a.select_get()
    props = joint.abd_joint
    assert props.enabled and props.type == "PRISMATIC"
    assert props.l_body == b and props.r_body == a  # the active object is the parent
    expected = {"ACTIVE": (3.0, 2.0, -1.0), "CENTER": (2.0, 2.0, 1.0), "CURSOR": (-5.0, 0.5, 7.0)}[pivot_type]
    matrix = world(joint)
    np.testing.assert_allclose(matrix[:3, 3], expected, atol=1e-6)
    np.testing.assert_allclose(matrix[:3, 2], [float(axis == name) for name in "XYZ"], atol=1e-6)


def test_connect_view_axis_falls_back_to_z_without_a_view():
    clear_objects()
    a, b = add_box("A"), add_box("B", location=(0.0, 0.0, 2.0))
    select_only(a, b)
    bpy.ops.abd.body_add()
    assert bpy.ops.abd.connect(axis="VIEW") == {"FINISHED"}
    np.testing.assert_allclose(world(bpy.context.active_object)[:3, 2], (0.0, 0.0, 1.0), atol=1e-6)


def test_connect_refuses_a_non_body_and_creates_nothing():
    clear_objects()
    a, b = add_box("A"), add_box("Loose", location=(0.0, 0.0, 2.0))
    select_only(a)
    bpy.ops.abd.body_add()
    select_only(a, b)
    count = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match="'Loose' is not an affine body"):
        bpy.ops.abd.connect()
    assert len(bpy.data.objects) == count


def test_connect_needs_two_selected():
    clear_objects()
    objects = [add_box(name, location=(k, 0.0, 0.0)) for k, name in enumerate("ABC")]
    select_only(*objects)
    bpy.ops.abd.body_add()
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.abd.connect()


def test_export_scene_file_round_trips(tmp_path, solver):
    base, slider, joint = slider_rig()
    path = tmp_path / "rig.json"
    assert bpy.ops.abd.export_scene(filepath=str(path)) == {"FINISHED"}
    scene = solver.load_scene(path)
    assert [body.name for body in scene.bodies] == ["Base", "Slider"]
    assert [body.motion for body in scene.bodies] == ["fixed", "dynamic"]
    assert scene.joints[0].name == joint.name and scene.joints[0].type == "prismatic"
    assert scene.joints[0].l_body == "Base" and scene.joints[0].r_body == "Slider"
    assert scene.settings.frame_count == 23
    aim = np.asarray(scene.joints[0].driving.aim_distance, dtype=float)
    assert aim.shape == (24,) and aim[0] == pytest.approx(0.0) and aim[11] == pytest.approx(-0.5)
    assert math.isclose(float(np.asarray(scene.joints[0].limit.lower)[0]), -0.8, abs_tol=1e-6)


def test_export_scene_file_writes_big_meshes_beside_it(tmp_path, solver):
    base, slider, joint = slider_rig()
    bpy.ops.mesh.primitive_uv_sphere_add(segments=64, ring_count=32, radius=0.3, location=(2.0, 0.0, 0.0))
    ball = bpy.context.active_object  # 1986 vertices: more than the 1000 a scene file keeps inline
    ball.name = "Ball"
    select_only(ball)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    path = tmp_path / "rig.json"
    assert bpy.ops.abd.export_scene(filepath=str(path)) == {"FINISHED"}
    assert (tmp_path / "rig_meshes.npz").is_file()
    scene = solver.load_scene(path)
    sphere = next(body for body in scene.bodies if body.name == "Ball")
    assert sphere.mesh.vertices.shape == (len(ball.data.vertices), 3)
    assert sphere.mesh.triangles.shape == (2 * len(ball.data.vertices) - 4, 3)  # a closed genus-0 triangulation
    box = next(body for body in scene.bodies if body.name == "Slider")
    assert box.mesh.vertices.shape == (8, 3)  # small meshes stay inline
    assert '"vertices": [' in path.read_text() and '"arrays": "rig_meshes.npz"' in path.read_text()
