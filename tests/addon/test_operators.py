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


def _link_cube(tmp_path, name: str, body: bool):
    """A cube saved in a library file and linked (no override) into a fresh file; returns it."""
    clear_objects()
    cube = add_box(name)
    if body:
        select_only(cube)
        bpy.ops.abd.body_add()
    library = str(tmp_path / f"{name}.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(app_template="")
    clear_objects()
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.objects = [name]
    linked = data_to.objects[0]
    bpy.context.scene.collection.objects.link(linked)
    return linked


def test_body_add_and_remove_skip_linked_objects_whose_change_the_file_would_not_keep(tmp_path):
    linked = _link_cube(tmp_path, "LibCube", body=False)
    local = add_box("Local", 1.0, (3.0, 0.0, 0.0))
    select_only(linked, local)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    assert local.abd_body.enabled and not linked.abd_body.enabled
    select_only(linked)
    with pytest.raises(RuntimeError, match="'LibCube' skipped: linked from a library.*Make Local"):
        bpy.ops.abd.body_add()
    assert not linked.abd_body.enabled

    linked_body = _link_cube(tmp_path, "LibBody", body=True)
    select_only(linked_body)
    with pytest.raises(RuntimeError, match="'LibBody' skipped: linked from a library"):
        bpy.ops.abd.body_remove()
    assert linked_body.abd_body.enabled


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
    a = add_box("A")
    select_only(a)
    bpy.ops.abd.body_add()
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.abd.connect()


def _bodies(locations: dict) -> dict:
    """Affine-body boxes named and placed as ``locations`` says (name -> (x, y, z))."""
    clear_objects()
    boxes = {name: add_box(name, size=0.2, location=location) for name, location in locations.items()}
    select_only(*boxes.values())
    bpy.ops.abd.body_add()
    return boxes


def _new_joints(before: set) -> list:
    return sorted((ob for ob in bpy.data.objects if ob.name not in before), key=lambda ob: ob.name)


def test_connect_chain_by_distance_joins_each_body_to_the_nearest_not_yet_joined():
    # Positions out of name and selection order; the chain from the active "A" is A, C, E, B, D
    # (each step to the nearest body not yet in the chain, as Blender's Connect Rigid Bodies).
    boxes = _bodies({"A": (0.0, 0.0, 0.0), "B": (3.0, 0.0, 0.5), "C": (1.0, 0.0, 0.0), "D": (4.5, 0.0, 0.0),
                     "E": (2.0, 0.0, 0.0)})
    before = {ob.name for ob in bpy.data.objects}
    select_only(*boxes.values(), active=boxes["A"])
    assert bpy.ops.abd.connect(type="REVOLUTE", pivot_type="ACTIVE", axis="Y",
                               connection_pattern="CHAIN_DISTANCE") == {"FINISHED"}
    joints = _new_joints(before)
    pairs = {(j.abd_joint.l_body.name, j.abd_joint.r_body.name) for j in joints}
    assert pairs == {("A", "C"), ("C", "E"), ("E", "B"), ("B", "D")}
    for joint in joints:
        assert joint.abd_joint.enabled and joint.abd_joint.type == "REVOLUTE"
        matrix = world(joint)  # at the parent's origin, local Z along world Y
        np.testing.assert_allclose(matrix[:3, 3], world(joint.abd_joint.l_body)[:3, 3], atol=1e-6)
        np.testing.assert_allclose(matrix[:3, 2], (0.0, 1.0, 0.0), atol=1e-6)
    # The new joints end selected (the bodies not), one of them active: ready for their settings.
    assert all(j.select_get() for j in joints) and not any(b.select_get() for b in boxes.values())
    assert bpy.context.active_object in joints


def test_connect_selected_to_active_makes_the_active_body_every_joints_parent():
    boxes = _bodies({"Hub": (0.0, 0.0, 0.0), "P": (1.0, 0.0, 0.0), "Q": (0.0, 1.0, 0.0), "R": (0.0, 0.0, 1.0)})
    before = {ob.name for ob in bpy.data.objects}
    select_only(*boxes.values(), active=boxes["Hub"])
    assert bpy.ops.abd.connect(type="PRISMATIC", pivot_type="CENTER") == {"FINISHED"}
    joints = _new_joints(before)
    assert sorted((j.abd_joint.l_body.name, j.abd_joint.r_body.name) for j in joints) == [
        ("Hub", "P"), ("Hub", "Q"), ("Hub", "R")]
    for joint in joints:
        expected = (world(joint.abd_joint.l_body)[:3, 3] + world(joint.abd_joint.r_body)[:3, 3]) / 2
        np.testing.assert_allclose(world(joint)[:3, 3], expected, atol=1e-6)


@pytest.mark.parametrize("pattern", ["SELECTED_TO_ACTIVE", "CHAIN_DISTANCE"])
def test_connect_of_many_needs_an_active_body_and_creates_nothing_without(pattern):
    boxes = _bodies({"A": (0.0, 0.0, 0.0), "B": (1.0, 0.0, 0.0), "C": (2.0, 0.0, 0.0)})
    select_only(*boxes.values())
    bpy.context.view_layer.objects.active = None
    count = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match="Make one of the 3 selected bodies active"):
        bpy.ops.abd.connect(connection_pattern=pattern)
    assert len(bpy.data.objects) == count


def test_connect_of_many_refuses_a_non_body_and_creates_nothing():
    boxes = _bodies({"A": (0.0, 0.0, 0.0), "B": (1.0, 0.0, 0.0)})
    loose = add_box("Loose", location=(2.0, 0.0, 0.0))
    select_only(*boxes.values(), loose, active=boxes["A"])
    count = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match="'Loose' is not an affine body"):
        bpy.ops.abd.connect(connection_pattern="CHAIN_DISTANCE")
    assert len(bpy.data.objects) == count


def test_connect_with_a_linked_collection_active_puts_the_joint_in_the_scene_collection(tmp_path):
    """A collection linked from a library takes no new objects: as Blender's own Add menu, the
    joint goes to the Scene Collection (before: a traceback, and an Empty left in no collection)."""
    clear_objects()
    bpy.context.scene.collection.children.link(bpy.data.collections.new("Set"))
    library = str(tmp_path / "set.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(app_template="")
    clear_objects()
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.collections = ["Set"]
    bpy.context.scene.collection.children.link(data_to.collections[0])
    boxes = _bodies({"A": (0.0, 0.0, 0.0), "B": (2.0, 0.0, 0.0)})
    view_layer = bpy.context.view_layer
    view_layer.active_layer_collection = view_layer.layer_collection.children["Set"]  # clicked in the Outliner
    assert bpy.context.collection.library is not None
    select_only(*boxes.values(), active=boxes["A"])
    assert bpy.ops.abd.connect() == {"FINISHED"}
    joint = bpy.context.active_object
    assert joint.abd_joint.enabled and list(joint.users_collection) == [bpy.context.scene.collection]
    assert len(bpy.data.objects) == 3


def test_connect_that_fails_part_way_removes_the_joints_it_made_and_reports(addon, monkeypatch, capsys):
    boxes = _bodies({"Hub": (0.0, 0.0, 0.0), "P": (1.0, 0.0, 0.0), "Q": (0.0, 1.0, 0.0)})
    select_only(*boxes.values(), active=boxes["Hub"])
    names = sorted(ob.name for ob in bpy.data.objects)
    made = []

    def failing_on_the_second(ob):  # the first joint is complete, the second half made
        made.append(ob.name)
        if len(made) == 2:
            raise RuntimeError("could not store the groups")

    monkeypatch.setattr(addon.rig, "store_groups", failing_on_the_second)
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.connect()
    message = str(caught.value)
    assert message.startswith("Error: Connect failed: unexpected RuntimeError: could not store the groups")
    assert "Traceback" not in message and "Traceback" in capsys.readouterr().err  # the details in the console
    assert len(made) == 2 and sorted(ob.name for ob in bpy.data.objects) == names
    assert all(ob.select_get() for ob in boxes.values()) and bpy.context.active_object == boxes["Hub"]


@pytest.mark.slow
def test_a_chain_connected_in_one_call_bakes_as_a_hanging_chain():
    # Five boxes hanging straight down from a fixed one, connected in one Connect call as a chain
    # by distance from the fixed top (selected bottom first): each joint between neighbours, so
    # the bake leaves them hanging where they are.
    boxes = _bodies({f"L{k}": (0.0, 0.0, -0.2 * k) for k in range(6)})
    boxes["L0"].abd_body.motion = "FIXED"
    select_only(*reversed(list(boxes.values())), active=boxes["L0"])
    assert bpy.ops.abd.connect(type="REVOLUTE", pivot_type="CENTER", axis="Y",
                               connection_pattern="CHAIN_DISTANCE") == {"FINISHED"}
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    assert bpy.ops.abd.bake() == {"FINISHED"}
    scene.frame_set(12)
    for k in range(1, 6):
        np.testing.assert_allclose(world(boxes[f"L{k}"])[:3, 3], (0.0, 0.0, -0.2 * k), atol=1e-3)


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
