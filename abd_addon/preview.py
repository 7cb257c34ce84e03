"""Playback preview: the simulated poses shown as the frame changes, without keyframes (no UI).

As Blender's rigid bodies do with their point cache: when the frame changes (playback, stepping,
scrubbing), the bodies and joint Empties a bake would key show the solver's pose of that frame.
A :class:`solver.simulation.Simulation` of the exported rig is kept per scene and advanced from
its last frame to the frame shown; frames it has already simulated are shown from it (going back,
or playing again). Frames before the bake's first show the objects' own transforms, frames after
its last hold the last pose.

- **The cache is freed** by any change that the bake reads: a setting of ABD World, of a body or
  of a joint, an object of the rig moved (also while a later frame shows it: its moved
  transform becomes its own), an F-curve or driver of the rig (a keyed aim), a body's mesh. Each
  frame change after a depsgraph update (every frame change in the ``bpy`` module, which reports
  none) compares a fingerprint of those (:func:`fingerprint`) with the cache's.
- **Nothing is left behind**: the poses are written to the objects' transform properties, and
  their own values are kept here and written back whenever something reads or stores the
  objects (``save_pre``; the Bake, Export and Apply Trajectory operators through
  :func:`suspended`), after undo (a pose of the preview that an undo step recorded is put back
  to the object's own), and when the preview is turned off or the rig is baked (the keys then
  play). The previewed poses are written again after saving.
- **Responsive**: in an interactive session a frame change simulates for at most one frame's
  time (1 / fps); the frames still missing are simulated by a timer in the same slices, showing
  the newest simulated frame meanwhile. Without an event loop (``blender -b``, the ``bpy``
  module) the frame is simulated at once. :func:`step_toward` is the slice, callable directly.
- **Bake reuses it**: :func:`take_run` hands the bake the cache's run where it was made for the
  very scene the bake exported (the same :func:`solver.scene_io.scene_digest` and device); the
  bake then simulates only the frames still missing, with the same result as from scratch.

Frame ``f`` of the bake range is run frame ``f - frame_start``. Objects are held by name, so
that undo (which rebuilds every ID) leaves no stale reference here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Optional

import bpy
import numpy as np
from bpy.types import ID, PropertyGroup
from mathutils import Matrix

from . import warmup
from .bake.export import Export, export_scene, frame_range, new_run, rigid_transforms
from .bake.fcurves import action_fcurves, fcurve_keys, slot_identifier
from .bake.keys import local_matrices
from .names import TRANSFORM_PATHS, TRANSFORM_PROPERTIES
from .properties import PREVIEW_TOGGLED
from .bake.rig_rules import RigError, collect_rig

#: ABD World properties that do not change the simulation (left out of :func:`fingerprint`).
NOT_SIMULATED = ("use_preview",)


@dataclasses.dataclass
class _Cache:
    """A run of one export of the rig, and the fingerprint of what it was exported from."""

    export: Export
    run: object  # solver.simulation.Simulation
    fingerprint: tuple
    offsets: dict  # _offsets(export, run)


@dataclasses.dataclass
class _State:
    """The preview of one scene.

    Attributes:
        own: per object name, its own transform (:func:`_transform`) while the preview shows
            another pose on it.
        written: per object name, the transform the preview last wrote (as read back).
        uids: per object name, its ``session_uid`` (to find it again after a rename).
        history: per object name, hashes of every transform the preview wrote (for undo).
        cache: the run, or None (freed, or not made yet).
        failed: the fingerprint of a rig whose export or run failed (not tried again until it
            changes), and ``message``, why.
        suspended: how many :func:`suspended` blocks are open (the preview then writes nothing).
        runs: how many runs were started (a new one after each freeing of the cache).
        timer: whether a timer is simulating missing frames.
        changed: whether something may have changed since the fingerprint was last compared:
            set by every depsgraph update outside a frame change (an edit, a move, a key), and
            always where none are reported (the ``bpy`` module).
    """

    own: dict = dataclasses.field(default_factory=dict)
    written: dict = dataclasses.field(default_factory=dict)
    uids: dict = dataclasses.field(default_factory=dict)
    history: dict = dataclasses.field(default_factory=dict)
    cache: Optional[_Cache] = None
    failed: Optional[tuple] = None
    message: str = ""
    suspended: int = 0
    runs: int = 0
    timer: bool = False
    changed: bool = True


#: Per scene (``Scene.name_full``), its :class:`_State`.
_states: dict = {}


def state(scene: bpy.types.Scene) -> _State:
    """The preview state of ``scene`` (made on first use)."""
    return _states.setdefault(scene.name_full, _State())


def status(scene: bpy.types.Scene) -> str:
    """One line for the panel: how many frames the preview holds, or why it shows nothing."""
    current = _states.get(scene.name_full)
    if current is None or not scene.abd_world.use_preview:
        return ""
    if current.message:
        return current.message
    if current.cache is None:
        return "Preview: play or step the frames to simulate"
    run = current.cache.run
    start = current.cache.export.frame_start
    return f"Preview: frames {start}-{start + run.frames_done} simulated"


# --------------------------------------------------------------------------------------------
# Transforms: read, written, put back
# --------------------------------------------------------------------------------------------


def _transform(ob: bpy.types.Object) -> tuple:
    """The object's own transform properties (:data:`TRANSFORM_PROPERTIES`) as nested tuples."""
    return tuple(tuple(getattr(ob, name)) for name in TRANSFORM_PROPERTIES)


def _set_transform(ob: bpy.types.Object, values: tuple) -> None:
    for name, value in zip(TRANSFORM_PROPERTIES, values):
        setattr(ob, name, value)


def _animated_paths(owner) -> set:
    """The data paths of ``owner``'s (an ID's) properties that an F-curve or driver sets."""
    ad = getattr(owner, "animation_data", None)
    if ad is None:
        return set()
    return {fc.data_path for fc in action_fcurves(ad.action, slot_identifier(ad)) + list(ad.drivers)}


def _animated_transform(ob: bpy.types.Object) -> bool:
    """Whether an F-curve or driver sets a transform property of ``ob`` (Blender writes it at
    every frame change)."""
    return bool(_animated_paths(ob) & set(TRANSFORM_PROPERTIES))


def _objects(current: _State) -> list:
    """(name, object) of every object the preview wrote to that still exists: by the name it had
    then, or where it was renamed since, by its session identifier."""
    found, missing = [], []
    for name in current.written:
        ob = bpy.data.objects.get(name)
        if ob is not None and ob.session_uid == current.uids.get(name, ob.session_uid):
            found.append((name, ob))
        else:
            missing.append(name)
    if missing:
        by_uid = {ob.session_uid: ob for ob in bpy.data.objects}
        found += [(name, by_uid[current.uids[name]]) for name in missing if current.uids.get(name) in by_uid]
    return found


def _put_back(current: _State) -> None:
    """Give every object the preview wrote to its own transform back, and forget them."""
    for name, ob in _objects(current):
        if _transform(ob) == current.written[name]:  # else changed since: that is its own now
            _set_transform(ob, current.own[name])
    current.own.clear()
    current.written.clear()
    current.uids.clear()


def _show_written(current: _State) -> None:
    """Write the poses last shown again (after :func:`_hide_written`)."""
    for name, ob in _objects(current):
        _set_transform(ob, current.written[name])


def _hide_written(current: _State) -> None:
    """Write the objects' own transforms, keeping the record of the poses shown."""
    for name, ob in _objects(current):
        if _transform(ob) == current.written[name]:
            _set_transform(ob, current.own[name])


def _offsets(export: Export, run) -> dict:
    """Per keyed object (by name): the index of the body it follows and the (4, 4) matrix that
    takes that body's rigid pose to the object's world matrix, as :func:`.keys.world_matrices`
    composes them: a body's stretch P (world = [R P | p]), or a joint Empty's pose relative to
    its parent body at the first frame (world(f) = T_l(f) T_l(0)^-1 W(0))."""
    index = {body.name: k for k, body in enumerate(export.scene.bodies)}
    first = rigid_transforms(run.transforms(0))
    offsets = {}
    for ob in export.keyed_objects():
        name = ob.name_full
        if ob in export.joints:
            body = index[ob.abd_joint.l_body.name_full]
            offsets[name] = (body, np.linalg.solve(first[body], export.joint_matrix[name]))
        else:
            stretch = np.eye(4)
            stretch[:3, :3] = export.stretch[name]
            offsets[name] = (index[name], stretch)
    return offsets


def _write_pose(current: _State, cache: _Cache, index: int) -> None:
    """Write the run's frame ``index`` onto the keyed objects, as the bake would key it (in
    parent space, Blender decomposing ``matrix_basis`` by the object's rotation mode and deltas)."""
    export = cache.export
    rigid = rigid_transforms(cache.run.transforms(index))
    worlds = {name: (rigid[body] @ offset)[None] for name, (body, offset) in cache.offsets.items()}
    parented = {name: matrices[index:index + 1] for name, matrices in export.parent_matrix.items()}
    local = local_matrices(dataclasses.replace(export, parent_matrix=parented), worlds)
    for ob in export.keyed_objects():
        name = ob.name_full
        current.own.setdefault(name, _transform(ob))
        current.uids[name] = ob.session_uid
        ob.matrix_basis = Matrix(local[name][0].tolist())
        written = current.written[name] = _transform(ob)
        current.history.setdefault(name, set()).add(hash(written))


def _adopt_changes(current: _State) -> bool:
    """Take what changed on an object since the preview wrote to it as its own transform: the
    user moved it (or, where it has transform animation, Blender evaluated it); return whether
    one did."""
    changed = False
    for name, ob in _objects(current):
        transform = _transform(ob)
        if transform != current.written[name]:
            current.own[name] = transform
            current.written[name] = transform
            changed = True
    return changed


# --------------------------------------------------------------------------------------------
# What the bake reads
# --------------------------------------------------------------------------------------------


_IDENTIFIERS: dict = {}


def _identifiers(group) -> tuple:
    """The names of a PropertyGroup type's properties that :func:`_values` reads (once per type:
    listing RNA properties from Python is slow)."""
    kind = type(group)
    if kind not in _IDENTIFIERS:
        _IDENTIFIERS[kind] = tuple(prop.identifier for prop in group.bl_rna.properties
                                   if prop.identifier not in ("rna_type", "name") + NOT_SIMULATED)
    return _IDENTIFIERS[kind]


def _values(group, path: str, animated: set) -> tuple:
    """The values of a PropertyGroup's properties (nested groups recursively, IDs by name) but
    those whose data path (``path`` + name) is in ``animated``: they change from frame to frame,
    and their F-curves and drivers are compared instead (:func:`_animation`)."""
    values = []
    for name in _identifiers(group):
        if animated and f"{path}.{name}" in animated:
            continue
        value = getattr(group, name)
        if isinstance(value, PropertyGroup):
            value = _values(value, f"{path}.{name}", animated)
        elif isinstance(value, ID):
            value = value.name_full
        elif hasattr(value, "__len__") and not isinstance(value, str):
            value = tuple(value)
        values.append((name, value))
    return tuple(values)


def _animation(owner) -> tuple:
    """The F-curves (keys, handles, modifiers) and drivers of an ID's animation."""
    ad = getattr(owner, "animation_data", None)
    if ad is None:
        return ()
    curves = []
    for fc in action_fcurves(ad.action, slot_identifier(ad)):
        curves.append((fc.data_path, fc.array_index, fc.mute, fc.extrapolation, len(fc.modifiers),
                       b"".join(values.tobytes() for values in fcurve_keys(fc))))
    for fc in ad.drivers:
        variables = tuple((v.name, v.type, tuple((t.id.name_full if t.id else "", t.data_path, t.transform_type)
                                                 for t in v.targets)) for v in fc.driver.variables)
        curves.append((fc.data_path, fc.array_index, fc.mute, fc.driver.expression, variables))
    return (ad.action.name_full if ad.action else "", ad.action_influence, ad.action_blend_type,
            len(ad.nla_tracks), tuple(curves))


def _object(ob: bpy.types.Object, own: dict) -> tuple:
    """What the bake reads of one object but its per-frame pose: its settings, own transform (or
    its transform animation), deltas, parent chain, animation and mesh."""
    name = ob.name_full
    animated = _animated_paths(ob)
    transform = None if animated & set(TRANSFORM_PROPERTIES) else own.get(name, _transform(ob))
    parent = ob.parent
    mesh = ()
    if ob.type == "MESH":
        co = np.empty(3 * len(ob.data.vertices), dtype=np.float32)
        ob.data.vertices.foreach_get("co", co)
        corners = np.empty(len(ob.data.loops), dtype=np.int32)  # each face's vertices in order: its winding
        ob.data.loops.foreach_get("vertex_index", corners)
        mesh = (ob.data.name_full, hash(co.tobytes()), hash(corners.tobytes()), len(ob.data.polygons),
                tuple((m.type, m.show_viewport) for m in ob.modifiers))
    return (name, ob.type, ob.rotation_mode, transform,
            tuple(tuple(getattr(ob, path)) for path in TRANSFORM_PATHS if path.startswith("delta_")),
            _values(ob.abd_body, "abd_body", animated), _values(ob.abd_joint, "abd_joint", animated),
            _animation(ob), mesh,
            ob.parent_type, tuple(map(tuple, ob.matrix_parent_inverse)),
            _object(parent, own) if parent is not None else None)


def fingerprint(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, own: dict) -> tuple:
    """What a bake of ``view_layer`` reads, but the per-frame values that Blender evaluates from
    it: ABD World, the frame range and rate, gravity, and of every body, joint and
    soft-transform target its settings, own transform (``own`` by name, where the preview shows
    another pose), parents, animation and mesh. Equal fingerprints export equal scenes.

    Raises:
        RigError: the rig is invalid (:func:`abd_addon.bake.rig_rules.collect_rig`).
    """
    bodies, joints = collect_rig(view_layer)
    targets = [ob.abd_body.soft_transform.target_object for ob in bodies
               if ob.abd_body.soft_transform.target_object is not None]
    render = scene.render
    return (_values(scene.abd_world, "abd_world", _animated_paths(scene)), _animation(scene), frame_range(scene),
            render.fps, render.fps_base, render.frame_map_old, render.frame_map_new, scene.use_gravity,
            tuple(scene.gravity),
            tuple(_object(ob, own) for ob in bodies + joints + targets))


# --------------------------------------------------------------------------------------------
# Showing a frame
# --------------------------------------------------------------------------------------------


def _view_layer(scene: bpy.types.Scene) -> bpy.types.ViewLayer:
    """The view layer a bake of ``scene`` would export: the context's (the scene's first where
    the context has none of this scene's, as while rendering)."""
    layer = bpy.context.view_layer if bpy.context.scene == scene else None
    return layer if layer is not None else scene.view_layers[0]


def _active(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer) -> bool:
    """Whether the preview shows anything: it is on, the view layer has an affine body, and no
    object of it carries a bake (its keys then play)."""
    objects = view_layer.objects
    return (scene.abd_world.use_preview and any(ob.abd_body.enabled for ob in objects)
            and not any(ob.abd_bake.is_baked for ob in objects))


def _release(current: _State, message: str = "") -> None:
    """Free the cache and give the objects their own transforms back."""
    _put_back(current)
    current.cache = None
    current.message = message


def _ensure_cache(scene: bpy.types.Scene, current: _State, view_layer, build: bool) -> Optional[_Cache]:
    """The cache of the rig as it is now: kept where its fingerprint is unchanged, else (where
    ``build``) made anew: the objects given their own transforms, an export (which sets every
    frame of the range in turn) and a new run. None where it is not made, the rig cannot be
    exported or the solver is still being compiled (:attr:`_State.message` says why)."""
    from ..solver.scene import SceneError
    from ..solver.simulation import SolverError

    moved = _adopt_changes(current)
    if current.cache is not None and not moved and not current.changed:
        return current.cache
    try:
        print_ = fingerprint(scene, view_layer, current.own)
    except RigError as error:
        _release(current, f"Preview: {error}")
        return None
    current.changed = not _interactive()  # no depsgraph updates are reported there: compare every time
    if current.cache is not None and current.cache.fingerprint == print_:
        return current.cache
    if current.failed == print_:
        return None
    _release(current)  # and the message of an earlier failure: this rig is another
    if not build:
        return None
    try:
        with suspended(scene):  # the export's own frame changes show nothing
            export = export_scene(scene, bpy.context.evaluated_depsgraph_get())
        run = new_run(export)
    except (RigError, SceneError, SolverError) as error:
        current.failed, current.message = print_, f"Preview: {error}"
        return None
    current.failed, current.message = None, ""
    current.runs += 1
    current.cache = _Cache(export=export, run=run, fingerprint=print_, offsets=_offsets(export, run))
    return current.cache


#: What the panel says while the preview waits for the background compilation.
COMPILING = "Preview: compiling the solver (first use only)"


def _compiled(current: _State, run) -> bool:
    """Whether ``run``'s kernels are ready: loaded, or in the on-disk cache. While the add-on's
    background warm-up is still compiling some of them the preview waits (it starts as soon as
    the kernels of its own rig are written, before the warm-up ends); with no warm-up running
    they are compiled here."""
    if run.pending_kernels():
        if warmup.running():
            current.message = COMPILING
            return False
        run.compile()
    if current.message == COMPILING:
        current.message = ""
    return True


def step_toward(scene: bpy.types.Scene, frame: int, seconds: Optional[float] = None, build: bool = True) -> bool:
    """Simulate toward Blender frame ``frame`` for at most ``seconds`` (None: until it is done;
    at least one time step), then show the newest simulated frame up to it; return whether
    ``frame`` itself is shown. Frames before the bake's first show the objects' own transforms,
    frames after its last the last pose; nothing is shown where the preview is off, suspended,
    or the rig is baked, invalid or empty (its objects get their own transforms back), or where
    the cache must be made anew and ``build`` is False (from a frame change handler, which must
    not set frames itself as the export does)."""
    current = state(scene)
    view_layer = _view_layer(scene)
    if current.suspended:
        return False
    if not _active(scene, view_layer):
        _release(current)
        return False
    cache = _ensure_cache(scene, current, view_layer, build)
    if cache is None:
        return False
    export, run = cache.export, cache.run
    if not _compiled(current, run):
        return False
    index = min(frame, export.frame_end) - export.frame_start
    if index <= 0:
        _put_back(current)
        return True
    from ..solver.simulation import SolverError

    try:
        run.advance(until_frame=index, deadline=None if seconds is None else time.perf_counter() + seconds)
    except SolverError as error:
        current.failed = cache.fingerprint
        _release(current, f"Preview: {error}")
        return False
    _write_pose(current, cache, min(index, run.frames_done))
    return run.frames_done >= index


def _interactive() -> bool:
    """Whether this is a session with an event loop (timers run, depsgraph updates are reported):
    not ``blender -b``, not the ``bpy`` module."""
    return not bpy.app.background


def _frame_seconds(scene: bpy.types.Scene) -> Optional[float]:
    """How long a frame change may simulate: one frame's time interactively, unbounded without
    an event loop (``blender -b``, the ``bpy`` module: no timer would finish the work)."""
    if not _interactive():
        return None
    return scene.render.fps_base / max(scene.render.fps, 1)


def _continue(scene_name: str):
    """Timer: simulate the missing frames of the scene's current frame in slices of a frame's
    time; stops when it is shown (or the scene is gone)."""
    scene = bpy.data.scenes.get(scene_name)
    current = _states.get(scene_name)
    if scene is None or current is None:
        return None
    if step_toward(scene, scene.frame_current, _frame_seconds(scene)) or current.cache is None:
        current.timer = False
        return None
    return 0.25 if current.message == COMPILING else 0.0


def _needs_work(scene: bpy.types.Scene, current: _State, frame: int) -> bool:
    """Whether the frame still needs an export or time steps after a frame change showed what
    it could."""
    if current.suspended or not _active(scene, _view_layer(scene)):
        return False
    if current.cache is None:
        return not current.message
    export = current.cache.export
    return current.cache.run.frames_done < min(frame, export.frame_end) - export.frame_start


@bpy.app.handlers.persistent
def on_frame_change_pre(scene, _depsgraph=None) -> None:
    """``frame_change_pre``: show the frame's simulated pose (before Blender evaluates it, so that
    whatever follows the objects sees the pose)."""
    if not scene.abd_world.use_preview and scene.name_full not in _states:
        return
    interactive = _interactive()
    done = step_toward(scene, scene.frame_current, _frame_seconds(scene), build=not interactive)
    current = state(scene)
    if interactive and not done and not current.timer and _needs_work(scene, current, scene.frame_current):
        current.timer = True
        bpy.app.timers.register(lambda name=scene.name_full: _continue(name), first_interval=0.0)


@bpy.app.handlers.persistent
def on_frame_change_post(scene, _depsgraph=None) -> None:
    """``frame_change_post``: write the pose again on objects whose transform animation Blender
    evaluated over it (their animated values are their own transforms of this frame)."""
    current = _states.get(scene.name_full)
    if current is None or current.cache is None or current.suspended:
        return
    for name, ob in _objects(current):
        if _animated_transform(ob) and _transform(ob) != current.written[name]:
            current.own[name] = _transform(ob)
            _set_transform(ob, current.written[name])


@bpy.app.handlers.persistent
def on_depsgraph_update_post(scene, _depsgraph=None) -> None:
    """``depsgraph_update_post`` (an edit, a move, a key; not a frame change): compare the
    fingerprint at the next frame change (:attr:`_State.changed`)."""
    for current in _states.values():
        current.changed = True


@bpy.app.handlers.persistent
def on_save_pre(*_arguments) -> None:
    """``save_pre``: the file gets the objects' own transforms, not the previewed poses."""
    for current in _states.values():
        _hide_written(current)


@bpy.app.handlers.persistent
def on_save_post(*_arguments) -> None:
    """``save_post``: show the previewed poses again."""
    for current in _states.values():
        if not current.suspended:
            _show_written(current)


@bpy.app.handlers.persistent
def on_undo_post(*_arguments) -> None:
    """``undo_post``/``redo_post``: an undo step may have recorded a previewed pose as an
    object's transform; such a pose is put back to the object's own. Every cache is freed (undo
    rebuilds the objects it read)."""
    for current in _states.values():
        for name, ob in _objects(current):
            if hash(_transform(ob)) in current.history.get(name, ()):
                _set_transform(ob, current.own[name])
        current.own.clear()
        current.written.clear()
        current.uids.clear()
        current.cache = None


@bpy.app.handlers.persistent
def on_load_pre(*_arguments) -> None:
    """``load_pre``: another file replaces every object; forget them all."""
    _states.clear()


#: (``bpy.app.handlers`` list, function) installed by :func:`register`.
HANDLERS = (
    ("frame_change_pre", on_frame_change_pre),
    ("frame_change_post", on_frame_change_post),
    ("depsgraph_update_post", on_depsgraph_update_post),
    ("save_pre", on_save_pre),
    ("save_post", on_save_post),
    ("undo_post", on_undo_post),
    ("redo_post", on_undo_post),
    ("load_pre", on_load_pre),
)


def register() -> None:
    """Install the preview's handlers."""
    if toggled not in PREVIEW_TOGGLED:
        PREVIEW_TOGGLED.append(toggled)
    for name, function in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if function not in handlers:
            handlers.append(function)


def toggled(scene: bpy.types.Scene) -> None:
    """ABD World > Preview on Playback changed: turned off, the objects get their own transforms
    back; turned on, the current frame is shown."""
    if scene.abd_world.use_preview:
        step_toward(scene, scene.frame_current, _frame_seconds(scene), build=not _interactive())
    elif scene.name_full in _states:
        _release(_states[scene.name_full])


def unregister() -> None:
    """Give every previewed object its own transform back and remove the handlers."""
    while toggled in PREVIEW_TOGGLED:
        PREVIEW_TOGGLED.remove(toggled)
    for name, function in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while function in handlers:
            handlers.remove(function)
    for current in _states.values():
        _release(current)
    _states.clear()


# --------------------------------------------------------------------------------------------
# The bake's side
# --------------------------------------------------------------------------------------------


def suspend(scene: bpy.types.Scene) -> None:
    """Give the previewed objects of ``scene`` their own transforms and stop previewing until
    :func:`resume` (for what reads or keys the objects: an export, a bake)."""
    current = state(scene)
    current.suspended += 1
    _hide_written(current)
    for name, ob in _objects(current):
        current.written[name] = _transform(ob)


def resume(scene: bpy.types.Scene) -> None:
    """End a :func:`suspend`; the next frame change shows the preview again."""
    current = _states.get(scene.name_full)
    if current is not None and current.suspended:
        current.suspended -= 1


@contextlib.contextmanager
def suspended(scene: bpy.types.Scene):
    """:func:`suspend` for the block."""
    suspend(scene)
    try:
        yield
    finally:
        resume(scene)


def take_run(scene: bpy.types.Scene, export: Export):
    """The preview's run if it was made for the scene ``export`` holds (the same scene digest and
    device), handed over (the preview forgets it), or None. A bake continues it: the frames it
    holds are not simulated again."""
    from ..solver.scene_io import scene_digest

    current = _states.get(scene.name_full)
    cache = current.cache if current is not None else None
    if cache is None:
        return None
    current.cache = None
    mine, theirs = cache.run.scene, export.scene
    if mine.settings.device != theirs.settings.device or scene_digest(mine) != scene_digest(theirs):
        return None
    return cache.run
