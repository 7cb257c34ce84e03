"""Shared helper of the example scripts and the demo: load ABD Joints the way a user's Blender does.

The repository root is the extension. :func:`enable_extension` adds an extension repository
(``abd_dev``) whose folder holds a symlink ``abd_joints`` -> the repository root, and enables
``bl_ext.abd_dev.abd_joints`` with ``addon_utils.enable`` (docs/testing.md, "The bpy wheel"). Nothing is put on
``sys.path``.

Import this module **before** ``bpy``: it points ``BLENDER_USER_RESOURCES`` at a scratch folder
under ``build/blender_dev/`` (unless already set), so the scripts never touch the user's
``~/.config/blender``, and ``ABD_JOINTS_CACHE_DIR`` (the solver's Numba cache) at ``build/cache`` (unless set). The
extension repository folder is the same stable one the add-on tests use
(``$TMPDIR/abd_joints_dev_repo_<uid>``): Numba keys its cache on the source path, so the solver's
kernels compile once for the examples, the demo and the tests.

:func:`finish` disables the extension and ends the process with ``os._exit`` (bpy 4.5.15 can hang
at interpreter exit while Python callbacks are registered, docs/testing.md, "The bpy wheel").
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Scratch folder of Blender's user resources (preferences, extension user data).
DEV_ROOT = REPO / "build" / "blender_dev"
#: The extension repository folder: holds the symlink ``abd_joints`` -> REPO (as tests/addon/conftest.py).
DEV_REPO = Path(tempfile.gettempdir()) / f"abd_joints_dev_repo_{os.getuid()}"
#: Name (and module) of the extension repository that points at this checkout.
REPO_NAME = "abd_dev"
#: The extension's id (blender_manifest.toml).
EXTENSION_ID = "abd_joints"

os.environ.setdefault("BLENDER_USER_RESOURCES", str(DEV_ROOT / "user"))
os.environ.setdefault("ABD_JOINTS_CACHE_DIR", str(REPO / "build" / "cache"))

_enabled: list = []


def _ensure_link(folder: Path) -> None:
    """``folder/abd_joints`` -> the repository root (created once; safe against a concurrent run)."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / EXTENSION_ID
    if link.is_symlink() and Path(os.readlink(link)) == REPO:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(REPO, target_is_directory=True)
    except FileExistsError:  # another process made it meanwhile
        pass


def enable_extension():
    """Enable this checkout as the extension ``bl_ext.abd_dev.abd_joints``; return its ``abd_addon``.

    Call after ``read_factory_settings`` (which resets the preferences, and with them the enabled
    extensions), before using any ``bpy.ops.abd`` operator.
    """
    import addon_utils
    import bpy

    folder = DEV_REPO
    _ensure_link(folder)
    repos = bpy.context.preferences.extensions.repos
    repo = next((r for r in repos if r.module == REPO_NAME), None)
    if repo is None:
        repo = repos.new(name=REPO_NAME, module=REPO_NAME, custom_directory=str(folder), source="USER")
    module_name = f"bl_ext.{repo.module}.{EXTENSION_ID}"
    errors = []
    module = addon_utils.enable(module_name, default_set=True, handle_error=errors.append)
    if module is None or errors:
        raise RuntimeError(f"cannot enable the extension {module_name}: {errors[0] if errors else 'unknown error'}")
    _enabled.append(module_name)
    return importlib.import_module(module_name + ".abd_addon")


def disable_extension() -> None:
    """Disable what :func:`enable_extension` enabled (unregisters every class and handler)."""
    import addon_utils

    while _enabled:
        addon_utils.disable(_enabled.pop(), default_set=True)


def finish(status: int = 0) -> None:
    """Disable the extension, flush, and end the process with ``os._exit(status)``."""
    try:
        disable_extension()
    except Exception as error:  # noqa: BLE001 - exiting anyway; say why
        print(f"warning: disabling the extension failed: {error}", file=sys.stderr)
        status = status or 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def example_arguments(description: str, default_frames: int, argv=None) -> argparse.Namespace:
    """The command line every example takes: ``--out FILE.blend`` and ``--frames N``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", required=True, help="where to save the rig (.blend)")
    parser.add_argument(
        "--frames", type=int, default=default_frames,
        help=f"length of the animation in frames (default {default_frames}); keys scale with it",
    )
    args = parser.parse_args(argv)
    if args.frames < 8:
        parser.error("--frames must be at least 8")
    return args


def run_example(build, description: str, default_frames: int) -> None:
    """Parse the command line, build the rig with ``build(frames)``, save it to ``--out``, exit.

    ``build`` runs in a fresh empty scene with the extension enabled and returns nothing. The
    process ends through :func:`finish` (exit status 1 with a message on any error).
    """
    args = example_arguments(description, default_frames)
    status = 0
    try:
        import bpy

        bpy.ops.wm.read_factory_settings(use_empty=True)
        enable_extension()
        build(args.frames)
        out = Path(args.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=str(out), compress=True)
        print(f"saved {out}")
    except BaseException:  # noqa: BLE001 - report and exit non-zero (never hang)
        import traceback

        traceback.print_exc()
        status = 1
    finish(status)


# ------------------------------------------------------------------------------------------
# Small scene-building helpers shared by the examples (bpy.ops on primitives)
# ------------------------------------------------------------------------------------------


def select_only(*objects) -> None:
    """Select exactly ``objects``; the first one is made active."""
    import bpy

    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = objects[0]


def add_box(name: str, size, location, color, rotation=(0.0, 0.0, 0.0)):
    """A cube primitive of ``size`` (x, y, z) metres, scale applied, with an object colour."""
    import bpy

    bpy.ops.mesh.primitive_cube_add(size=1.0, location=location, rotation=rotation)
    ob = bpy.context.active_object
    ob.name = ob.data.name = name
    ob.scale = size
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    ob.color = (*color, 1.0)
    return ob


def add_cylinder(name: str, radius: float, depth: float, location, color, rotation=(0.0, 0.0, 0.0), vertices=24):
    """A cylinder primitive (axis = local Z before ``rotation``), with an object colour."""
    import bpy

    bpy.ops.mesh.primitive_cylinder_add(
        vertices=vertices, radius=radius, depth=depth, location=location, rotation=rotation
    )
    ob = bpy.context.active_object
    ob.name = ob.data.name = name
    ob.color = (*color, 1.0)
    return ob


def rig():
    """The extension's rig API (``abd_addon.rig``, docs/scripting.md); after :func:`enable_extension`."""
    return importlib.import_module(_enabled[-1] + ".abd_addon.rig")


def make_bodies(*objects, motion: str = "DYNAMIC", density: float = 500.0) -> None:
    """Make ``objects`` affine bodies (``rig.add_body``) with ``motion`` and ``density`` (kg/m^3)."""
    for ob in objects:
        rig().add_body(ob, motion=motion)
        ob.abd_body.mass_density = density


def connect(parent, child, joint_type: str, pivot, axis: str, name: str):
    """Joint Empty ``name`` (``rig.connect``) from ``parent`` to ``child``, at ``pivot`` (world, m);
    ``axis`` is 'X', 'Y' or 'Z' (world), which becomes the Empty's local Z."""
    direction = tuple(1.0 if axis == letter else 0.0 for letter in "XYZ")
    return rig().connect(parent, child, joint_type, pivot=pivot, axis=direction, name=name)


def key_values(owner, data_path: str, keys, index: int = -1, interpolation: str = "BEZIER") -> None:
    """Keyframe ``owner.<data_path>`` (``[index]`` of a vector) at ``keys`` = [(frame, value), ...].

    ``data_path`` may be nested (``"abd_joint.drive.aim_distance"``). The new keys get
    ``interpolation`` ('BEZIER' eases in and out, 'LINEAR' for constant speed).
    """
    head, _, attribute = data_path.rpartition(".")
    target = owner
    for part in filter(None, head.split(".")):
        target = getattr(target, part)
    for frame, value in keys:
        if index >= 0:
            getattr(target, attribute)[index] = value
        else:
            setattr(target, attribute, value)
        owner.keyframe_insert(data_path=data_path, index=index, frame=frame)
    for fcurve in object_fcurves(owner):
        if fcurve.data_path == data_path and index in (-1, fcurve.array_index):
            for point in fcurve.keyframe_points:
                point.interpolation = interpolation


def setup_stage(frames: int, camera_location, camera_target, *, substeps: int = 10, lens: float = 35.0) -> None:
    """Scene range 1..frames at 24 fps and the solver's substeps; a camera at ``camera_location``
    aimed at ``camera_target``; a sun light; Workbench rendering (solid shading, studio light,
    object colours, outlines) at 320x240 on a light grey background."""
    import bpy
    from mathutils import Vector

    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.abd_world.substeps = substeps

    bpy.ops.object.camera_add(location=camera_location)
    camera = bpy.context.active_object
    camera.name = "Camera"
    direction = Vector(camera_target) - Vector(camera_location)
    camera.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    camera.data.lens = lens
    scene.camera = camera

    bpy.ops.object.light_add(type="SUN", location=(camera_location[0], camera_location[1], camera_location[2] + 3.0))
    light = bpy.context.active_object
    light.name = "Sun"
    light.rotation_euler = (0.6, 0.2, 0.8)

    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x, scene.render.resolution_y = 320, 240
    scene.render.resolution_percentage = 100
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.color_type = "OBJECT"
    shading.show_shadows = False
    shading.show_object_outline = True
    scene.render.image_settings.file_format = "PNG"
    world = bpy.data.worlds.new("World")
    world.color = (0.9, 0.9, 0.92)
    scene.world = world
    scene.frame_set(1)


# ------------------------------------------------------------------------------------------
# Reading a baked file back (the demo's plots and tests/addon/test_examples.py)
# ------------------------------------------------------------------------------------------

#: Readout custom property of each joint type that has one (written by the bake on the joint Empty).
READOUTS = {"PRISMATIC": "abd_distance", "REVOLUTE": "abd_angle"}


def object_fcurves(ob) -> list:
    """The F-curves of ``ob``'s assigned action: of its slot's channelbag on Blender 4.4 and later,
    all of the action's on 4.2 / 4.3 (which have no slots); [] without an action."""
    from bpy_extras import anim_utils

    ad = ob.animation_data
    if ad is None or ad.action is None:
        return []
    if not hasattr(ad.action, "slots"):
        return list(ad.action.fcurves)
    bag = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)
    return list(bag.fcurves) if bag is not None else []


def readout_fcurve(ob, data_path: str):
    """The F-curve of ``ob``'s assigned action (and slot) animating ``data_path``, or None."""
    return next((fc for fc in object_fcurves(ob) if fc.data_path == data_path), None)


def read_bake(scene=None) -> dict:
    """What a baked scene shows, frame by frame, as plain data (JSON-ready).

    Keys: ``frames`` (list of frame numbers); ``bodies``: name -> {motion, soft_target};
    ``joints``: name -> {type, l_body, r_body, readout (None for a fixed or ball joint), values
    (from the readout F-curve; None if there is none), limit: {use, lower, upper} (the joint's
    limit settings, m or rad), init (``init_distance`` / ``init_angle``), bounds: [lower, upper]
    of the readout the limit keeps (the settings shifted by the solver's conventions: the
    prismatic limit bounds the raw distance ``abd_distance - init``, so bounds = limit + init;
    the revolute limit bounds the raw angle by limit + init, so bounds = limit + 2 init), aim
    (per-frame aim distance or angle of a position drive that is on, or None)}; ``locations``:
    name -> per-frame world location of every mesh object and soft-transform target;
    ``z_axes``: name -> per-frame world Z axis of every body.
    """
    import bpy

    scene = scene or bpy.context.scene
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    view_layer = bpy.context.view_layer
    bodies = [ob for ob in view_layer.objects if ob.abd_body.enabled]
    joints = [ob for ob in view_layer.objects if ob.abd_joint.enabled]
    tracked = [ob for ob in view_layer.objects if ob.type == "MESH"]
    for ob in bodies:
        target = ob.abd_body.soft_transform.target_object
        if target is not None and target not in tracked:
            tracked.append(target)
    data = {
        "frames": frames,
        "fps": scene.render.fps / scene.render.fps_base,
        "bodies": {
            ob.name: {
                "motion": ob.abd_body.motion,
                "soft": bool(ob.abd_body.soft_transform.is_constrained),
                "soft_target": (ob.abd_body.soft_transform.target_object.name
                                if ob.abd_body.soft_transform.is_constrained
                                and ob.abd_body.soft_transform.target == "OBJECT"
                                and ob.abd_body.soft_transform.target_object is not None else None),
            }
            for ob in bodies
        },
        "joints": {},
        "locations": {ob.name: [] for ob in tracked},
        "z_axes": {ob.name: [] for ob in bodies},
    }
    for ob in joints:
        joint = ob.abd_joint
        readout = READOUTS.get(joint.type)  # fixed and ball joints have none
        fcurve = readout_fcurve(ob, f'["{readout}"]') if readout else None
        limit = joint.limit
        angular = joint.type == "REVOLUTE"
        data["joints"][ob.name] = {
            "type": joint.type,
            "l_body": joint.l_body.name if joint.l_body else None,
            "r_body": joint.r_body.name if joint.r_body else None,
            "readout": readout,
            "values": [fcurve.evaluate(frame) for frame in frames] if fcurve is not None else None,
            "limit": {
                "use": bool(limit.use),
                "lower": limit.lower_angle if angular else limit.lower,
                "upper": limit.upper_angle if angular else limit.upper,
                "strength": limit.strength,
            },
            "init": joint.init_angle if angular else joint.init_distance,
            "aim": [] if joint.drive.is_constrained and joint.drive.mode == "POSITION" else None,
        }
    for record in data["joints"].values():
        shift = record["init"] * (2.0 if record["type"] == "REVOLUTE" else 1.0)
        record["bounds"] = [record["limit"]["lower"] + shift, record["limit"]["upper"] + shift]
    current = scene.frame_current
    for frame in frames:
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for ob in tracked:
            data["locations"][ob.name].append(list(ob.matrix_world.translation))
        for ob in bodies:
            data["z_axes"][ob.name].append(list(ob.matrix_world.col[2][:3]))
        for ob in joints:
            record = data["joints"][ob.name]
            if record["aim"] is not None:
                drive = ob.evaluated_get(depsgraph).abd_joint.drive
                record["aim"].append(drive.aim_angle if record["type"] == "REVOLUTE" else drive.aim_distance)
    scene.frame_set(current)
    return data


def _inspect_main(argv=None) -> int:
    """``python examples/_blender.py inspect BAKED.blend --json OUT.json``: :func:`read_bake` to JSON."""
    import json

    parser = argparse.ArgumentParser(prog="python examples/_blender.py inspect")
    parser.add_argument("blend")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    enable_extension()
    bpy.ops.wm.open_mainfile(filepath=str(Path(args.blend).resolve()), load_ui=False)
    data = read_bake()
    data["file"] = str(args.blend)
    Path(args.json).write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    _status = 1
    try:
        if len(sys.argv) > 1 and sys.argv[1] == "inspect":
            _status = _inspect_main(sys.argv[2:])
        else:
            print("usage: python examples/_blender.py inspect BAKED.blend --json OUT.json", file=sys.stderr)
            _status = 2
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finish(_status)
