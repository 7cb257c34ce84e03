"""Rig builders and scene snapshots shared by the add-on tests (built with the extension's rig API,
``abd_addon.rig``; the operators are tested on their own)."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import bpy
import numpy as np

#: The repository root (the extension's source).
ROOT = Path(__file__).resolve().parents[2]
#: The extension repository module the tests add, and the extension's package name in it.
REPO_MODULE = "abd_dev"
PACKAGE = f"bl_ext.{REPO_MODULE}.abd_joints"


def select_only(*objects, active=None) -> None:
    """Select exactly ``objects`` and make ``active`` (default the first) the active object."""
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = active if active is not None else (objects[0] if objects else None)


def clear_objects() -> None:
    """Delete every object of the scene (a clean slate, keeping the scene and view layer)."""
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)


def add_box(name: str, size: float = 1.0, location=(0.0, 0.0, 0.0), scale=(1.0, 1.0, 1.0), rotation=(0.0, 0.0, 0.0)):
    """A cube mesh object of edge ``size`` (before ``scale``)."""
    bpy.ops.mesh.primitive_cube_add(size=size, location=location, rotation=rotation)
    ob = bpy.context.active_object
    ob.name = name
    ob.scale = scale
    return ob


def joined_to_fixed_base(base, child, joint_type: str, axis: str = "Z", operators: bool = False):
    """Make ``base`` a fixed and ``child`` a dynamic affine body and join them with a joint of
    ``joint_type`` at the base's origin, its local Z along the world ``axis`` ('X', 'Y' or 'Z'):
    through ``abd_addon.rig``, or with ``operators`` through Add Affine Body and Connect (pivot at
    the active body), which make the same. Either way the joint is left selected and active.
    Returns the joint Empty."""
    if operators:
        select_only(base, child)
        assert bpy.ops.abd.body_add() == {"FINISHED"}
        base.abd_body.motion = "FIXED"
        select_only(base, child, active=base)
        assert bpy.ops.abd.connect(type=joint_type, pivot_type="ACTIVE", axis=axis) == {"FINISHED"}
        return bpy.context.active_object
    rig = importlib.import_module(PACKAGE + ".abd_addon.rig")
    bpy.context.view_layer.update()  # the world matrices of the boxes just added and scaled
    rig.add_body(base, motion="FIXED")
    rig.add_body(child)
    joint = rig.connect(base, child, joint_type, pivot=base.matrix_world.translation.copy(),
                        axis=[float(name == axis) for name in "XYZ"])
    select_only(joint)
    bpy.context.view_layer.update()
    return joint


def key_property(owner, path: str, keys, interpolation: str = "LINEAR") -> None:
    """Keyframe ``owner.path`` at (frame, value) pairs with ``interpolation``."""
    for frame, value in keys:
        setattr(owner, path, value)
        owner.keyframe_insert(path, frame=frame)
    ob = owner.id_data
    for fc in fcurves(ob):
        for point in fc.keyframe_points:
            point.interpolation = interpolation


def fcurves(ob) -> list:
    """F-curves of the object's assigned action (channelbag API on 4.4+ and 5.x, Action.fcurves on 4.2/4.3)."""
    from bpy_extras import anim_utils

    ad = ob.animation_data
    if ad is None or ad.action is None:
        return []
    if not hasattr(ad.action, "slots"):
        return list(ad.action.fcurves)
    channelbag = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)
    return list(channelbag.fcurves) if channelbag is not None else []


def slider_rig(frame_end: int = 24, aim_keys=((1, 0.0), (12, -0.5)), operators: bool = False):
    """Fixed base + dynamic slider, joined by a prismatic joint along world Z at the base's centre
    (with ``operators``, made by Add Affine Body and Connect: :func:`joined_to_fixed_base`).

    The joint has a limit and a drive whose ``aim_distance`` is animated. Returns
    ``(base, slider, joint)``.
    """
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    base = add_box("Base", 1.0, (0.0, 0.0, 0.0))
    slider = add_box("Slider", 1.0, (0.0, 0.0, -1.2), scale=(0.5, 0.5, 1.0))
    joint = joined_to_fixed_base(base, slider, "PRISMATIC", operators=operators)
    joint.abd_joint.limit.use = True
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = -0.8, 0.3
    joint.abd_joint.drive.is_constrained = True
    key_property(joint.abd_joint.drive, "aim_distance", aim_keys)
    return base, slider, joint


def hinge_rig(frame_end: int = 12, rotation_mode: str = "XYZ"):
    """Fixed base + dynamic arm swinging about world Y under gravity (revolute joint).

    Returns ``(base, arm, joint)``; the arm's ``rotation_mode`` is ``rotation_mode``.
    """
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    base = add_box("Base", 0.4, (0.0, 0.0, 0.0))
    arm = add_box("Arm", 1.0, (0.6, 0.0, 0.0), scale=(1.0, 0.2, 0.2))
    arm.rotation_mode = rotation_mode
    return base, arm, joined_to_fixed_base(base, arm, "REVOLUTE", axis="Y")


def hanging_pair(joint_type: str, frame_end: int = 24):
    """A fixed base and a box hanging 0.6 m below it, tilted 0.3 rad about world X, joined at the
    base's centre by a joint of ``joint_type`` (local Z along world Z)."""
    clear_objects()
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frame_end
    base = add_box("Base", 0.2, (0.0, 0.0, 0.0))
    bob = add_box("Bob", 0.2, (0.0, 0.6 * math.sin(0.3), -0.6 * math.cos(0.3)))
    return base, bob, joined_to_fixed_base(base, bob, joint_type)


def hinge_rig_library(folder) -> str:
    """Save :func:`hinge_rig` (8 frames) as ``folder/library.blend`` and start an empty file to link
    it into; returns the library's path."""
    hinge_rig(frame_end=8)
    library = str(folder / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(app_template="")
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    return library


def world(ob) -> np.ndarray:
    """The object's evaluated world matrix as a (4, 4) float64 array."""
    return np.array(ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world, dtype=np.float64)


def scene_snapshot(frames=None) -> dict:
    """Everything a bake may change: per object its animation, custom properties, bake state,
    static transform and evaluated world matrix at ``frames``; the list of actions; the frame.
    """
    scene = bpy.context.scene
    frames = frames or (scene.frame_start, (scene.frame_start + scene.frame_end) // 2, scene.frame_end)
    current = (scene.frame_current, scene.frame_subframe)
    data = {"frame": current, "actions": sorted(action.name for action in bpy.data.actions), "objects": {}}
    for ob in scene.objects:
        ad = ob.animation_data
        entry = {
            "action": ad.action.name if ad and ad.action else None,
            "has_animation_data": ad is not None,
            "keys": {
                (fc.data_path, fc.array_index): _points(fc) for fc in fcurves(ob)
            },
            "custom": {key: _custom_value(ob[key]) for key in ob.keys()
                       if key.startswith("abd_") and _custom_value(ob[key]) is not None},
            "baked": ob.abd_bake.is_baked,
            "transform": tuple(tuple(getattr(ob, name)) for name in
                               ("location", "rotation_euler", "rotation_quaternion", "scale")),
        }
        data["objects"][ob.name] = entry
    poses = {}
    for frame in frames:
        scene.frame_set(frame)
        for ob in scene.objects:
            poses[(ob.name, frame)] = world(ob).round(9).tolist()
    scene.frame_set(*current[:1], subframe=current[1])
    data["poses"] = poses
    return data


def _custom_value(value):
    """A float custom property as it is, an array one (``abd_rotation``) as a tuple of floats;
    None for any other."""
    if isinstance(value, float):
        return value
    return tuple(float(item) for item in value.to_list()) if hasattr(value, "to_list") else None


def _points(fc) -> tuple:
    count = len(fc.keyframe_points)
    values = []
    for name, width in (("co", 2), ("handle_left", 2), ("handle_right", 2), ("interpolation", 1)):
        buffer = np.empty(count * width, dtype=np.float64 if name != "interpolation" else np.int32)
        fc.keyframe_points.foreach_get(name, buffer)
        values.append(tuple(buffer.tolist()))
    return tuple(values)
