"""Convert Rigid Bodies on what it cannot convert: a constraint joining a body to itself, and a
body linked from another file, are left as they are and named in the report."""

from __future__ import annotations

import importlib

import bpy
from abd_rigs import clear_objects
from test_convert_rigid_bodies import connect, rigid_box


def test_a_constraint_joining_a_body_to_itself_is_left_and_named(addon):
    """It became a joint whose two bodies are one object."""
    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    box = rigid_box("Box", (0.5, 0.0, 0.0))
    hinge = connect(base, box, "HINGE")
    hinge.rigid_body_constraint.object1 = box
    convert = importlib.import_module(addon.__name__ + ".convert")
    result = convert.convert_rigid_bodies(bpy.context)
    assert result.joints == [] and f"ABD_{hinge.name}" not in bpy.data.objects
    assert dict(result.skipped)[hinge.name] == "it joins 'Box' to itself"
    assert hinge.rigid_body_constraint.enabled


def test_a_body_linked_from_another_file_is_left_and_named(addon, tmp_path):
    """A linked object's settings are not saved with the file: it was reported as converted and
    lost its conversion at the next save."""
    clear_objects()
    rigid_box("Shared", (0.0, 0.0, 1.0))
    library = tmp_path / "library.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(library), copy=True)
    clear_objects()
    rigid_box("Floor", (0.0, 0.0, 0.0), passive=True)
    with bpy.data.libraries.load(str(library), link=True) as (source, target):
        target.objects = ["Shared"]
    linked = target.objects[0]
    bpy.context.scene.collection.objects.link(linked)
    bpy.context.scene.rigidbody_world.collection.objects.link(linked)
    assert linked.library is not None and linked.rigid_body is not None
    convert = importlib.import_module(addon.__name__ + ".convert")
    result = convert.convert_rigid_bodies(bpy.context)
    assert [ob.name for ob in result.bodies] == ["Floor"]
    assert dict(result.skipped)["Shared"].startswith(f"it is linked from {linked.library.filepath}")
    assert not linked.abd_body.enabled
