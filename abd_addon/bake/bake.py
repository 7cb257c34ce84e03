"""Trajectory -> keyframes (no UI), and the bake pipeline the operator and the batch share.

One pipeline, :class:`BakeJob`: :meth:`BakeJob.prepare` (export) -> :meth:`BakeJob.simulate`
(warm-up wait, compile, solve) -> :meth:`BakeJob.finish` (convergence check, keyframes). The modal
Bake operator runs these phases, the middle one in a worker thread with progress; the batch
(:func:`abd_addon.batch.bake_file`) and scripts run them in turn (:meth:`BakeJob.run`). A trajectory
computed elsewhere (``python -m solver run`` on the exported scene file, on a render farm) takes
the place of the middle phase through :meth:`BakeJob.load_trajectory`, which first checks that it
was computed for this rig (:meth:`solver.trajectory.Trajectory.damage` and
:meth:`~solver.trajectory.Trajectory.mismatch`).

Writing keyframes:

- Each keyed object (dynamic bodies and joint Empties) gets a new Action, written in bulk with
  ``keyframe_points.add`` + ``foreach_set`` (LINEAR keys on every frame). F-curves of the
  object's previous action that the bake does not key (an animated ``aim_distance`` on a joint,
  a soft-transform toggle, ...) are copied into it, so they keep playing; the user's edits to
  them there are carried back before a re-bake or Free Bake (:func:`keep_animation_edits`).
- The key values (location, rotation in the object's rotation mode, scale) come from
  :mod:`abd_addon.bake.keys`; Actions and F-curves are handled by :mod:`abd_addon.bake.fcurves`.
- Joint readouts are animated custom properties ``abd_distance`` (prismatic, m),
  ``abd_angle`` (revolute, rad), ``abd_rotation`` (ball, a rotation vector in rad: three
  F-curves, array index 0..2) and ``abd_broken`` (generic, 1 from the frame it broke in) on the
  joint Empty.

Atomicity: nothing is written before the simulation has finished and every key has been
computed; if writing fails part way, every object is put back as it was. The state needed by
Free Bake (the action before the bake, its slot, the static transform) is kept in
``Object.abd_bake`` (:mod:`abd_addon.bake.snapshot`); :func:`free_bake` puts it back (with those edits) and
deletes the baked action. A re-bake frees the bake of the objects of the view layer it bakes that it no longer
keys (a body made Fixed, a joint disabled); objects outside that view layer (another rig's
collection excluded, or only in another view layer) keep theirs.
"""

from __future__ import annotations

import subprocess
import zipfile
from typing import Callable, Optional

import bpy
import numpy as np

from .. import warmup
from .export import Export, blender_words, export_scene, new_run
from .fcurves import (KEYED_PREFIXES, action_fcurves, add_fcurve_copy, baked_slot, ensure_fcurve, fcurve_owner,
                       set_linear_keys)
from .keys import ObjectKeys, compute_keys
from ..names import READOUT_PROPERTIES
from .rig_rules import refuse_tweak_mode
from .snapshot import (Snapshot, apply_previous, baked_objects, keep_animation_edits, original_animation,
                       record_previous, unshare_previous_actions)


class TrajectoryFileError(ValueError):
    """A trajectory file that cannot be read, or was not computed for the rig it is applied to;
    the message says which and why."""


# --------------------------------------------------------------------------------------------
# Writing and freeing
# --------------------------------------------------------------------------------------------


def _write_object(keys: ObjectKeys, frames: np.ndarray, created: list, obsolete: list) -> None:
    """Give one object a new baked action holding ``keys`` (and its other previous F-curves)."""
    ob = keys.ob
    state = ob.abd_bake
    if state.is_baked:
        if state.action is not None:
            obsolete.append(state.action)
    else:
        record_previous(ob)
    sources = [
        fc for fc in action_fcurves(state.previous_action, state.previous_slot)
        if not fc.data_path.startswith(KEYED_PREFIXES)
    ]
    action = bpy.data.actions.new(f"{ob.name}_ABDBake")
    created.append(action)
    for key in READOUT_PROPERTIES.values():  # a joint whose type changed: the other readout
        if key in ob.keys() and key not in keys.custom:
            del ob[key]
    for key, values in keys.custom.items():
        ob[key] = values[0].tolist()  # a float, or a list of floats for a vector readout
    ad = ob.animation_data_create()
    ad.action = action
    ad.action_influence, ad.action_blend_type, ad.action_extrapolation = 1.0, "REPLACE", "HOLD"
    for index in range(3):
        set_linear_keys(ensure_fcurve(action, ob, "location", index), frames, keys.location[:, index])
    for index in range(keys.rotation.shape[1]):
        set_linear_keys(ensure_fcurve(action, ob, keys.rotation_path, index), frames, keys.rotation[:, index])
    for index in range(3):
        set_linear_keys(ensure_fcurve(action, ob, "scale", index), frames, keys.scale[:, index])
    for key, values in keys.custom.items():
        columns = values.reshape(len(frames), -1)
        for index in range(columns.shape[1]):
            set_linear_keys(ensure_fcurve(action, ob, f'["{key}"]', index), frames, columns[:, index])
    owner, _ = fcurve_owner(action, baked_slot(action), ob)
    for source in sources:
        add_fcurve_copy(owner, source)
    state.is_baked = True
    state.action = action


def write_bake(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, keys: list, frame_start: int) -> list:
    """Write every object's keys atomically: all or nothing; return the objects whose bake was
    freed as stale.

    Objects of ``view_layer`` (the one the bake exported, of ``scene``) that carry an earlier
    bake but get no keys now (a body made Fixed or Animated, or no longer an affine body; a joint
    disabled) have that bake freed, as :func:`free_bake` does: the re-bake simulated them with
    their own animation, so that is what they play. Baked objects outside the view layer (in an
    excluded collection, or only in another view layer) were not part of the bake and keep
    theirs. A joint's readout property of another joint type than its current one is removed.
    On any error the objects are put back as they were (actions, slots, transforms,
    custom properties, ``abd_bake`` state), each also when putting back another one failed
    (noted on the error), the new actions are deleted, and the error is re-raised. The actions
    of a previous bake are deleted only after everything was written.
    """
    frames = frame_start + np.arange(len(keys[0].location) if keys else 0, dtype=np.float64)
    keyed = {object_keys_.ob for object_keys_ in keys}
    snapshots, created, obsolete = [], [], []
    stale = [ob for ob in baked_objects(scene, view_layer) if ob not in keyed]
    try:
        for object_keys_ in keys:
            snapshots.append(Snapshot(object_keys_.ob))
            _write_object(object_keys_, frames, created, obsolete)
        for ob in stale:
            snapshots.append(Snapshot(ob))
            _free_object(ob, obsolete)
    except BaseException as error:
        for snapshot in reversed(snapshots):
            try:
                snapshot.restore()
            except Exception as restore_error:  # noqa: BLE001 - the others are restored all the same
                error.add_note(f"Putting back '{snapshot.ob.name}' failed: {type(restore_error).__name__}: "
                               f"{restore_error}")
        remove_actions(created)
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
        raise
    remove_actions([action for action in obsolete if action.users == 0])
    scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
    return stale


def remove_actions(actions: list) -> None:
    """Delete ``actions`` from the file in one pass (``bpy.data.batch_remove``): deleting IDs one
    by one scans every ID's references for each (docs/performance.md, "Large rigs in Blender")."""
    if actions:
        bpy.data.batch_remove(list(dict.fromkeys(actions)))


def _free_object(ob: bpy.types.Object, baked_actions: list) -> None:
    """Undo ``ob``'s bake (see :func:`free_bake`); its baked action is appended to ``baked_actions``."""
    keep_animation_edits(ob)
    state = ob.abd_bake
    baked = state.action
    apply_previous(ob)
    ad = ob.animation_data
    for key in READOUT_PROPERTIES.values():
        if key in ob.keys():
            del ob[key]
    if (not state.had_animation_data and ad is not None and ad.action is None
            and len(ad.drivers) == 0 and len(ad.nla_tracks) == 0):
        ob.animation_data_clear()
    state.is_baked = False
    state.action = None
    state.previous_action = None
    state.previous_slot = ""
    state.bake_token = state.baked_name = ""
    if baked is not None:
        baked_actions.append(baked)


def free_bake(scene: bpy.types.Scene, objects: Optional[list] = None) -> int:
    """Undo the bake on ``objects`` (default: every baked object of ``scene``); return how many.

    Puts back the action (and slot, influence, blend type, extrapolation) and the static
    transform each object had before its first bake, with the edits made since to the F-curves
    the bake does not key (:func:`keep_animation_edits`), removes the readout properties
    (``abd_distance``, ``abd_angle``, ``abd_rotation``), and deletes the baked action when
    nothing else uses it. An object duplicated after its bake gets a copy of its original's action
    (:func:`unshare_previous_actions`).

    Raises:
        RigError: one of the objects is in NLA tweak mode (nothing is changed).
    """
    objects = baked_objects(scene) if objects is None else [ob for ob in objects if ob.abd_bake.is_baked]
    refuse_tweak_mode(objects)
    unshare_previous_actions()
    baked_actions = []
    for ob in objects:
        _free_object(ob, baked_actions)
    remove_actions([action for action in baked_actions if action.users == 0])
    if objects:
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
    return len(objects)


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


class BakeNotConverged(RuntimeError):
    """Some time step of a bake did not converge and convergence was required (nothing is
    changed); the message names the frames, how far the worst step ended from the tolerance and
    the bodies strained past the Strain Tolerance (:func:`convergence_problem`)."""


class BakeJob:
    """One bake of a scene, from rig to keys: the one pipeline of the Bake operator (modal, with
    progress), the batch (:func:`abd_addon.batch.bake_file`), Apply Trajectory File and scripts.

    :meth:`prepare` exports the rig (validated there, once); :meth:`simulate` waits for the
    background warm-up where it is still compiling this rig's kernels, compiles the rest, and
    runs the solver (:meth:`load_trajectory` instead reads a result computed elsewhere);
    :meth:`finish` checks convergence and writes the keys. :meth:`run` does all three in turn.
    ``prepare`` and ``finish`` touch Blender data and must run on the main thread; ``simulate``
    only runs the solver on the exported data (safe in a worker thread). Until ``finish`` the
    scene is unchanged.

    Args:
        scene: the Blender scene.
        depsgraph: the evaluated depsgraph of the view layer to bake; default the context's.
        device: ``"cpu"``, ``"cupy"`` or ``"libuipc"`` to solve there instead of the ABD World's setting (the
            setting itself is not changed).

    Attributes:
        export: the :class:`Export` (after prepare).
        view_layer: the view layer exported and baked, the depsgraph's (after prepare).
        simulation: the :class:`solver.simulation.Simulation` that :meth:`simulate` runs (a
            new one, or one handed over by :meth:`adopt`).
        compiling: True while :meth:`simulate` waits for the background compilation.
        trajectory: the solver's :class:`~solver.trajectory.Trajectory` (after simulate).
        problem: after finish, the sentence of :func:`convergence_problem` where some time step
            did not converge (and it was not required), else None.
        freed: the objects of the view layer whose earlier bake :meth:`finish` freed as stale
            (no longer keyed).
    """

    def __init__(self, scene: bpy.types.Scene, depsgraph=None, device: Optional[str] = None):
        self.scene = scene
        self.depsgraph = depsgraph
        self.device = device
        self.view_layer: Optional[bpy.types.ViewLayer] = None
        self.export: Optional[Export] = None
        self.simulation = None
        self.compiling = False
        self.trajectory = None
        self.problem: Optional[str] = None
        self.freed: list = []

    @property
    def frame_count(self) -> int:
        """Frames to simulate (after prepare)."""
        return self.export.frame_count if self.export else 0

    def prepare(self) -> Export:
        """Export the scene's view layer (the depsgraph's; default the context's), with the
        pre-bake animation of its already baked objects.

        Raises:
            abd_addon.bake.rig_rules.RigError, solver.scene.SceneError: invalid rig (nothing changed).
        """
        if self.depsgraph is None:
            self.depsgraph = bpy.context.evaluated_depsgraph_get()
        self.view_layer = self.depsgraph.view_layer
        with original_animation(self.scene, self.view_layer):
            self.export = export_scene(self.scene, self.depsgraph)
        if self.device is not None:
            self.export.scene.settings.device = self.device
        return self.export

    def adopt(self, simulation) -> None:
        """Go on with ``simulation`` (a :class:`solver.simulation.Simulation` of this export's
        scene, the playback preview's; None changes nothing): its frames done are not simulated
        again."""
        if simulation is not None:
            self.simulation = simulation

    def simulate(self, progress: Optional[Callable[[int, int], Optional[bool]]] = None):
        """Run the solver; returns the trajectory. ``progress(frames_done, frame_count)`` is
        called after each frame, and while the background warm-up compiles, and may return False
        to cancel.

        Raises:
            solver.scene.SceneError: bodies intersect at the first frame (naming both).
            solver.simulation.SolverError (incl. SimulationCancelled): solver failure (naming the
                timeline's frame) or cancel.
        """
        from ...solver.simulation import SimulationCancelled, SolverError

        if self.simulation is None:
            self.simulation = new_run(self.export)
        run = self.simulation
        # The solver's first compilation may still be running in the background (warmup): wait
        # until it has written the kernels this rig calls, and load them, instead of compiling
        # them a second time.
        self.compiling = warmup.running() and run.pending_kernels() > 0
        while warmup.running() and run.pending_kernels():
            if progress is not None and progress(0, self.frame_count) is False:
                raise SimulationCancelled("cancelled while the solver was being compiled")
            try:
                warmup.wait(0.1)
            except subprocess.TimeoutExpired:
                pass
        self.compiling = False
        run.compile()
        try:
            self.trajectory = run.run(progress)
        except SimulationCancelled:
            raise
        except SolverError as error:
            raise SolverError(blender_words(str(error), self.export.frame_start)) from error
        return self.trajectory

    def load_trajectory(self, path) -> object:
        """Instead of :meth:`simulate`: read a solver result (``.npz`` of ``python -m solver run``
        or ``Trajectory.save``) computed for this export's scene file.

        Raises:
            TrajectoryFileError: when the file cannot be read as a trajectory, an array of it has
                the wrong shape or a NaN or infinite value the bake would use
                (:meth:`solver.trajectory.Trajectory.damage`), or its bodies, joints, frame count or frame rate are
                not this export's, or a body's first pose is not where the rig has it (nothing is
                changed).
        """
        from ...solver.trajectory import Trajectory

        try:
            trajectory = Trajectory.load(path, self.export.scene)  # no array beyond what the rig needs
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as error:
            # missing, not an .npz, a field missing
            raise TrajectoryFileError(
                f"{path}: not a readable trajectory file ({type(error).__name__}: {error})"
            ) from None
        problem = trajectory.damage(self.export.scene, self.export.frame_start)
        if problem:
            raise TrajectoryFileError(f"{path} is damaged: {problem}")
        problem = trajectory.mismatch(self.export.scene, self.export.frame_start, self.export.frame_end)
        if problem:
            raise TrajectoryFileError(f"{path} was not computed for this rig: {problem}")
        self.trajectory = trajectory
        return trajectory

    def finish(self, require_converged: bool = True) -> list:
        """Check convergence, then compute every key and write them all (atomically); returns
        the keyed objects. The objects whose earlier bake was freed as stale are in
        :attr:`freed`; a convergence problem that was allowed is in :attr:`problem`.

        Raises:
            BakeNotConverged: some time step did not converge and ``require_converged`` (nothing
                changed).
        """
        self.problem = convergence_problem(self)
        if self.problem and require_converged:
            strained = self.trajectory.strain_warnings(self.export.frame_start, self.scene.abd_world.strain_tolerance)
            raise BakeNotConverged("; ".join([self.problem, *strained]))
        keys = compute_keys(self.export, self.trajectory)
        self.freed = write_bake(self.scene, self.view_layer, keys, self.export.frame_start)
        return [k.ob for k in keys]

    def run(self, progress=None, require_converged: bool = True) -> BakeJob:
        """:meth:`prepare`, :meth:`simulate` (with ``progress``) and :meth:`finish`, synchronously;
        returns this job.

        Raises:
            as the three phases (nothing is changed on any of them).
        """
        self.prepare()
        self.simulate(progress)
        self.finish(require_converged)
        return self


def convergence_problem(job: BakeJob) -> Optional[str]:
    """A sentence naming the frames whose time steps did not converge even split in 16, with the
    residual and the remedy (:meth:`solver.trajectory.Trajectory.convergence_problem`), or None."""
    return job.trajectory.convergence_problem(job.export.frame_start)


def bake_warnings(job: BakeJob) -> list[str]:
    """What a finished job's bake reports beside its keys, frames in Blender's numbers
    (:meth:`solver.trajectory.Trajectory.warnings` at ABD World's Strain Tolerance)."""
    return job.trajectory.warnings(job.export.frame_start, job.scene.abd_world.strain_tolerance)


def strain_summary(job: BakeJob) -> str:
    """"largest strain 2.1e-05 ('Cube')": the largest affine strain of a body over the bake, and
    the body ("" where no body is dynamic)."""
    strain = np.asarray(job.trajectory.strain)
    if not strain.size or not strain.max() > 0.0:
        return ""
    body = int(np.argmax(strain.max(axis=0)))
    return f"largest strain {strain.max():.2g} ('{job.trajectory.body_names[body]}')"
