"""File > Import > URDF as ABD Rig: PyBullet's cartpole and Franka Panda as affine-body rigs.

Expected values come from the URDF files themselves, parsed here with yourdfpy; the export round
trip compares against :func:`solver.urdf.import_urdf`, which the importer builds on.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import bpy
import numpy as np
import pytest
from abd_rigs import PACKAGE, add_box, clear_objects, fcurves, select_only

pybullet_data = pytest.importorskip("pybullet_data")
yourdfpy = pytest.importorskip("yourdfpy")

DATA = Path(pybullet_data.getDataPath())
CARTPOLE = DATA / "cartpole.urdf"
PANDA = DATA / "franka_panda" / "panda.urdf"


def _reference(solver, path: Path):
    """What :func:`solver.urdf.import_urdf` makes of the file (its warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", solver.urdf.UrdfWarning)
        return solver.urdf.import_urdf(path, load_visuals=False).scene


def _urdf(path: Path):
    """The file parsed by yourdfpy (no meshes): the reference for masses and limits."""
    return yourdfpy.URDF.load(str(path), build_scene_graph=False, build_collision_scene_graph=False,
                              load_meshes=False, load_collision_meshes=False)


def _import(path: Path, **options) -> bpy.types.Collection:
    """Import through the operator on an empty scene; return the robot's new collection."""
    clear_objects()
    before = set(bpy.data.collections)
    assert bpy.ops.import_scene.abd_urdf(filepath=str(path), **options) == {"FINISHED"}
    (collection,) = set(bpy.data.collections) - before
    return collection


def _bodies(collection) -> dict:
    return {ob.name: ob for ob in collection.objects if ob.abd_body.enabled}


def _joints(collection) -> dict:
    return {ob.name: ob for ob in collection.objects if ob.abd_joint.enabled}


@pytest.fixture
def urdf_import(addon):
    """The extension's ``abd_addon.urdf_import`` module as currently loaded."""
    return sys.modules[PACKAGE + ".abd_addon.urdf_import"]


def _z_axis(ob) -> np.ndarray:
    matrix = np.array(ob.matrix_world, dtype=np.float64)
    return matrix[:3, 2] / np.linalg.norm(matrix[:3, 2])


def test_operator_and_menu_entry_registered(urdf_import):
    module = urdf_import
    assert bpy.ops.import_scene.abd_urdf.idname() == "IMPORT_SCENE_OT_abd_urdf"
    assert module.menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()
    defaults = bpy.ops.import_scene.abd_urdf.get_rna_type().properties
    assert defaults["limit_strength"].default == pytest.approx(module.DEFAULT_LIMIT_STRENGTH)
    assert defaults["fixed_base"].default is False


def test_cartpole(addon):
    collection = _import(CARTPOLE)
    robot = _urdf(CARTPOLE)
    assert collection.name == robot.robot.name == "physics"
    bodies, joints = _bodies(collection), _joints(collection)
    assert sorted(bodies) == ["cart", "pole", "slideBar"]
    assert sorted(joints) == ["cart_to_pole", "slider_to_cart"]
    assert all(ob.type == "MESH" for ob in bodies.values()) and all(ob.type == "EMPTY" for ob in joints.values())
    # The massless slide bar is the fixed base; cart and pole carry the file's masses and inertias.
    assert bodies["slideBar"].abd_body.motion == "FIXED"
    links = {link.name: link for link in robot.robot.links}
    for name in ("cart", "pole"):
        props = bodies[name].abd_body
        assert props.motion == "DYNAMIC" and props.mass_mode == "MASS" and props.use_inertia
        assert props.mass == pytest.approx(links[name].inertial.mass, rel=1e-6)
        np.testing.assert_allclose(np.array(props.inertia), (1.0, 0.0, 0.0, 1.0, 0.0, 1.0), atol=1e-6)
    np.testing.assert_allclose(np.array(bodies["pole"].abd_body.mass_center), (0.0, 0.0, 0.5), atol=1e-6)
    # The visuals' colours.
    np.testing.assert_allclose(np.array(bodies["cart"].color), (0.0, 0.0, 0.8, 1.0), atol=1e-6)
    # Joints: parent/child, axis along local Z at the child link's origin, the limit of the file.
    urdf_joints = {joint.name: joint for joint in robot.robot.joints}
    slider = joints["slider_to_cart"].abd_joint
    assert slider.type == "PRISMATIC" and slider.l_body == bodies["slideBar"] and slider.r_body == bodies["cart"]
    np.testing.assert_allclose(_z_axis(joints["slider_to_cart"]), urdf_joints["slider_to_cart"].axis, atol=1e-6)
    assert slider.limit.use
    assert (slider.limit.lower, slider.limit.upper) == pytest.approx(
        (urdf_joints["slider_to_cart"].limit.lower, urdf_joints["slider_to_cart"].limit.upper), abs=1e-6)
    assert slider.limit.strength > 0.0
    pole = joints["cart_to_pole"].abd_joint
    assert pole.type == "REVOLUTE" and pole.l_body == bodies["cart"] and pole.r_body == bodies["pole"]
    assert not pole.limit.use  # continuous
    np.testing.assert_allclose(_z_axis(joints["cart_to_pole"]), (0.0, 1.0, 0.0), atol=1e-6)
    # Everything imported is selected; the root body is active.
    assert set(bpy.context.selected_objects) == set(collection.objects)
    assert bpy.context.view_layer.objects.active == bodies["slideBar"]


def test_panda_masses_limits_and_warnings(addon, capfd):
    collection = _import(PANDA)
    robot = _urdf(PANDA)
    bodies, joints = _bodies(collection), _joints(collection)
    # link8, the hand and the grasp target are welded to link7 by fixed joints.
    assert len(bodies) == 10 and len(joints) == 9
    assert set(joints) == {joint.name for joint in robot.robot.joints if joint.type != "fixed"}
    links = {link.name: link for link in robot.robot.links}
    assert all(ob.abd_body.motion == "DYNAMIC" for ob in bodies.values())  # the base has mass: a free robot
    for name in ("panda_link0", "panda_link3", "panda_link5", "panda_leftfinger"):
        assert bodies[name].abd_body.mass == pytest.approx(links[name].inertial.mass, rel=1e-6)
    welded = sum(links[name].inertial.mass
                 for name in ("panda_link7", "panda_link8", "panda_hand", "panda_grasptarget"))
    assert bodies["panda_link7"].abd_body.mass == pytest.approx(welded, rel=1e-6)
    urdf_joints = {joint.name: joint for joint in robot.robot.joints}
    for name in ("panda_joint4", "panda_joint6"):
        limit = joints[name].abd_joint.limit
        assert joints[name].abd_joint.type == "REVOLUTE" and limit.use
        assert (limit.lower_angle, limit.upper_angle) == pytest.approx(
            (urdf_joints[name].limit.lower, urdf_joints[name].limit.upper), abs=1e-6)
    finger = joints["panda_finger_joint1"].abd_joint
    assert finger.type == "PRISMATIC" and finger.r_body == bodies["panda_leftfinger"]
    assert finger.l_body == bodies["panda_link7"]
    assert (finger.limit.lower, finger.limit.upper) == pytest.approx((0.0, 0.04), abs=1e-7)
    output = capfd.readouterr()
    assert "mimic" in output.out + output.err  # the importer's warnings are reported


def test_fixed_base_option(addon):
    collection = _import(PANDA, fixed_base=True)
    assert _bodies(collection)["panda_link0"].abd_body.motion == "FIXED"


def test_import_with_a_linked_collection_active_goes_to_the_scene_collection(tmp_path):
    """A collection linked from a library takes no new objects: as with Blender's Add menu, the
    robot's collection goes into the Scene Collection (before: "Could not (un)link the collection",
    and the import failed)."""
    bpy.context.scene.collection.children.link(bpy.data.collections.new("Set"))
    library = str(tmp_path / "set.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(app_template="")
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.collections = ["Set"]
    bpy.context.scene.collection.children.link(data_to.collections[0])
    view_layer = bpy.context.view_layer
    view_layer.active_layer_collection = view_layer.layer_collection.children["Set"]  # clicked in the Outliner
    assert bpy.context.collection.library is not None
    collection = _import(CARTPOLE)
    assert collection.name in bpy.context.scene.collection.children
    assert len(_bodies(collection)) == 3 and len(_joints(collection)) == 2


def test_a_visual_without_volume_is_skipped_with_a_warning(addon, capfd):
    """pybullet_data's laikago_toes_zup.urdf marks its toes with ``<visual><sphere radius="0">``,
    which PyBullet loads; the import skips them, saying so (before: it failed on the first)."""
    collection = _import(DATA / "laikago" / "laikago_toes_zup.urdf")
    assert len(_bodies(collection)) == 13 and len(_joints(collection)) == 12
    output = capfd.readouterr()
    message = "link 'toeFR': <visual> #1: <sphere radius> must be > 0, got 0.0; this <visual> is skipped"
    assert message in output.out + output.err


def test_export_round_trip_gives_the_urdf_scene(addon, solver):
    _import(PANDA)
    reference = _reference(solver, PANDA)
    export = addon.bake.export.export_scene(bpy.context.scene)
    exported = {body.name: body for body in export.scene.bodies}
    assert len(exported) == len(reference.bodies) == 10
    for body in reference.bodies:
        got = exported[body.name]
        assert got.motion == body.motion
        assert got.mass is not None
        assert abs(got.mass.mass - body.mass.mass) <= 1e-9 * body.mass.mass
        np.testing.assert_allclose(got.mass.mass_center, body.mass.mass_center, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got.mass.inertia, body.mass.inertia, rtol=1e-12, atol=1e-15)
        # The same simulation shape, in the same place.
        assert got.mesh.triangles.tolist() == np.asarray(body.mesh.triangles).tolist()
        world_got = got.mesh.vertices @ got.transform[:3, :3].T + got.transform[:3, 3]
        world_ref = body.mesh.vertices @ body.transform[:3, :3].T + body.transform[:3, 3]
        np.testing.assert_allclose(world_got, world_ref, atol=1e-5)
    exported_joints = {joint.name: joint for joint in export.scene.joints}
    assert len(exported_joints) == len(reference.joints) == 9
    for joint in reference.joints:
        got = exported_joints[joint.name]
        assert (got.type, got.l_body, got.r_body) == (joint.type, joint.l_body, joint.r_body)
        np.testing.assert_allclose(got.position0, joint.position0, atol=1e-6)
        axis = np.asarray(joint.position1) - np.asarray(joint.position0)
        np.testing.assert_allclose(got.position1 - got.position0, axis / np.linalg.norm(axis), atol=1e-6)
        # The limit goes into the solver as the importer converted it (per-frame series now).
        np.testing.assert_allclose(got.limit.lower, joint.limit.lower, atol=1e-6)
        np.testing.assert_allclose(got.limit.upper, joint.limit.upper, atol=1e-6)
        np.testing.assert_allclose(got.limit.strength, joint.limit.strength, rtol=1e-6)


def test_massless_root_keeps_the_importer_mass(addon, solver):
    collection = _import(CARTPOLE)
    reference = {body.name: body for body in _reference(solver, CARTPOLE).bodies}
    exported = {body.name: body for body in addon.bake.export.export_scene(bpy.context.scene).scene.bodies}
    assert exported["slideBar"].mass is None and exported["slideBar"].motion == "fixed"
    assert exported["slideBar"].mass_density == pytest.approx(reference["slideBar"].mass_density, rel=1e-6)
    assert exported["cart"].mass.mass == reference["cart"].mass.mass == 1.0
    assert "slideBar" in _bodies(collection)


def test_exact_masses_survive_save_and_reload(addon, tmp_blend):
    _import(PANDA)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_blend), compress=True)
    bpy.ops.wm.open_mainfile(filepath=str(tmp_blend))
    exported = {body.name: body for body in addon.bake.export.export_scene(bpy.context.scene).scene.bodies}
    assert exported["panda_link3"].mass.mass == 2.04  # the URDF's value, not its float32 rounding
    assert exported["panda_link7"].mass.mass == pytest.approx(1.01, rel=1e-12)


def test_body_panel_shows_the_explicit_inertia(addon):
    from test_ui import draw_panel

    collection = _import(CARTPOLE)
    bpy.context.view_layer.objects.active = _bodies(collection)["cart"]
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert {("prop", "mass"), ("prop", "use_inertia"), ("prop", "mass_center"), ("prop", "inertia")} <= set(calls)


def test_imported_panda_bakes_and_falls(addon):
    collection = _import(PANDA, fixed_base=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 7
    bodies = _bodies(collection)
    end_link = bodies["panda_link7"]
    scene.frame_set(1)
    start = np.array(end_link.matrix_world.translation)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    for ob in bodies.values():
        if ob.abd_body.motion == "DYNAMIC":
            assert fcurves(ob), ob.name  # keyframes were written
    assert not fcurves(bodies["panda_link0"])  # the fixed base is not keyed
    scene.frame_set(7)
    end = np.array(end_link.matrix_world.translation)
    # The arm sags under gravity: PyBullet drops this link's origin 6 mm in these 0.25 s, the soft
    # joints here about 8 mm.
    assert end[2] < start[2] - 1e-3, (start, end)


BROKEN = """<?xml version="1.0"?>
<robot name="broken">
  <link name="base"><inertial>
    <mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>
  </inertial></link>
  <link name="arm"><inertial>
    <mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>
  </inertial></link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="arm"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="arm"/><child link="forearm"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def _data_counts() -> dict:
    return {name: len(getattr(bpy.data, name)) for name in ("objects", "meshes", "collections")}


def test_broken_urdf_reports_the_element_and_creates_nothing(tmp_path):
    path = tmp_path / "broken.urdf"
    path.write_text(BROKEN)
    before = _data_counts()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.import_scene.abd_urdf(filepath=str(path))
    message = str(caught.value)
    assert message.startswith("Error: URDF import failed")
    assert "broken.urdf" in message and "joint 'elbow'" in message and "'forearm'" in message
    assert "Traceback" not in message
    assert _data_counts() == before


def test_missing_file_is_an_error(tmp_path):
    before = _data_counts()
    with pytest.raises(RuntimeError, match="no such file"):
        bpy.ops.import_scene.abd_urdf(filepath=str(tmp_path / "nothing.urdf"))
    assert _data_counts() == before


def test_missing_packages_are_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "yourdfpy", None)  # makes `import yourdfpy` fail
    before = _data_counts()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.import_scene.abd_urdf(filepath=str(CARTPOLE))
    message = str(caught.value)
    assert "yourdfpy, trimesh and lxml" in message and "missing here: yourdfpy" in message
    assert _data_counts() == before


def test_failure_while_building_rolls_back(urdf_import, monkeypatch):
    module = urdf_import

    def broken(empty, joint, bodies):
        raise ZeroDivisionError("broken joint set-up")

    monkeypatch.setattr(module, "_setup_joint", broken)
    before = _data_counts()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        bpy.ops.import_scene.abd_urdf(filepath=str(CARTPOLE))
    assert _data_counts() == before


# -- the explicit inertia of Object.abd_body -----------------------------------------------------


def test_explicit_inertia_is_exported_as_mass_override(addon, solver):
    """A scaled box with the unit box's explicit inertia exports the scaled box's inertia."""
    clear_objects()
    box = add_box("Box", 1.0, (0.0, 0.0, 2.0), scale=(2.0, 3.0, 4.0), rotation=(0.3, 0.2, 0.1))
    select_only(box)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    props = box.abd_body
    mass = 7.0
    evaluated = box.evaluated_get(bpy.context.evaluated_depsgraph_get())
    # density = mass / 1 m^3 for the unit cube
    unit = solver.mass.mesh_mass_properties(*addon.bake.export.mesh_arrays(evaluated), mass)
    inertia = unit.inertia
    props.mass_mode, props.use_inertia, props.mass = "MASS", True, mass
    props.mass_center = (0.0, 0.0, 0.0)
    props.inertia = (inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2], inertia[2, 2])
    body = addon.bake.export.export_scene(bpy.context.scene).scene.bodies[0]
    assert body.mass is not None and body.mass.mass == pytest.approx(mass, rel=1e-6)
    expected = solver.mass.mesh_mass_properties(body.mesh.vertices, body.mesh.triangles, mass / 24.0)
    np.testing.assert_allclose(body.mass.inertia, expected.inertia, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(body.mass.mass_center, expected.mass_center, atol=1e-6)
    # Without use_inertia the mass is spread over the mesh: no override.
    props.use_inertia = False
    assert addon.bake.export.export_scene(bpy.context.scene).scene.bodies[0].mass is None


def test_precise_values_give_way_to_edits(addon):
    clear_objects()
    box = add_box("Box")
    props = box.abd_body
    addon.properties.set_precise(props, mass=0.6298, mass_center=(0.1, 0.2, 0.3))
    assert props.mass != 0.6298  # single precision in the property
    assert addon.properties.get_precise(props, "mass") == 0.6298
    assert addon.properties.get_precise(props, "mass_center") == (0.1, 0.2, 0.3)
    props.mass = 2.5  # edited by the user: the edit wins
    assert addon.properties.get_precise(props, "mass") == 2.5
    assert addon.properties.get_precise(props, "inertia") == tuple(props.inertia)  # never stored


def test_menu_removed_when_the_extension_is_disabled(addon):
    import addon_utils

    module = sys.modules[PACKAGE + ".abd_addon.urdf_import"]
    addon_utils.disable(PACKAGE, default_set=True)
    try:
        assert module.menu_import not in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()
        assert not hasattr(bpy.types, "IMPORT_SCENE_OT_abd_urdf")
    finally:
        addon_utils.enable(PACKAGE, default_set=True, handle_error=lambda error: (_ for _ in ()).throw(error))
    module = sys.modules[PACKAGE + ".abd_addon.urdf_import"]
    assert module.menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()
