"""Frames and substeps: per-step inputs, prediction, Newton solve, state update.

Source: docs/constitutions/affine_body.md (the time step, frames and substeps, joint
readouts). Per time step of frame f (1..frame_count), with dt = 1 / (frame_rate substeps):

1. animated bodies move to their pose at s / substeps of the way from frame f - 1 to f, the
   rotation turning about a fixed axis and the stretch and origin changing linearly
   (:class:`solver.affine_body.PoseInterpolation`; exact at the frame boundaries); fixed bodies
   stay at q0;
2. the step's inputs to the energy terms go into the run's :class:`solver.control.Control` (the
   model is not changed): per-frame values of frame f (drive and limit strengths, soft-transform
   strengths, the flags); targets and bounds at s / substeps of the way from frame f - 1 to f (a
   drive's aim or aim velocity linearly, limit bounds linearly, a soft transform's aim as animated
   poses move: :meth:`_Stepper.begin_step`); per-step values taken from the committed state
   (passive drive target, a velocity drive's target = committed coordinate + dt times the
   velocity, the revolute limit's and drive's accumulated angle);
3. prediction q_tilde = q^t + dt dq/dt + dt^2 [g, 0_9] for dynamic bodies (M^-1 G = [g, 0] for a
   uniform field, docs/constitutions/affine_body.md);
4. Newton (:mod:`solver.newton`, the incremental potential bound to q and the Control) from the
   last step's motion repeated (T^t (T^(t-1))^-1 T^t, :func:`solver.affine_body.repeated_motion`),
   or from q^t where a joint-limit penalty is active at either (:meth:`_Stepper.start_newton`);
   with contact, from the repeated motion only where the straight way there is free of
   collisions, the friction re-lagged there (:meth:`_Stepper._start_contact_newton`);
5. dq/dt = (q - q^t) / dt, and the joint readouts are committed (:mod:`solver.joint_state`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

import numpy as np
import threadpoolctl

from .affine_body import PoseInterpolation, nearest_rotation, q_from_transform, repeated_motion, transform_from_q
from .compilation import compile_in_parallel, compile_tasks
from .constitutions import DrivingRevoluteJointInput, RevoluteJointLimitInput
from .constitutions.joint_limit_penalty import any_active
from .contact import ContactSurface, ContactUnavailable
from .control import Control, drive_targets
from .device_solver import DeviceUnavailable
from .joint_state import JointState
from .model import Model
from .newton import NewtonFailure, solve_contact_step, solve_step
from .potential import IncrementalPotential, row_selector
from .scene import ContactSettings, Driving, Scene
from .scene_validation import scene_notes, validate_scene
from .trajectory import Trajectory


#: A time step that does not converge is split in halves, and those again, at most this many
#: times: down to 1 / 2^MAX_SPLITS of its dt (:meth:`Simulation._split_step`).
MAX_SPLITS = 4


class SolverError(RuntimeError):
    """The solver failed: a non-finite state, a singular system, or a cancelled run."""


class SimulationCancelled(SolverError):
    """The progress callback returned False; nothing is returned."""


def simulate(scene: Scene, progress: Optional[Callable[[int, int], Optional[bool]]] = None) -> Trajectory:
    """Simulate ``scene`` and return its :class:`Trajectory` (:meth:`Simulation.run` of a new
    :class:`Simulation`).

    Args:
        scene: a :class:`Scene`; it is validated (and normalised) first.
        progress: called as ``progress(frame_done, frame_count)`` after each frame; returning
            ``False`` cancels the run.

    Returns:
        The trajectory. Steps that did not converge within ``max_iterations`` are flagged in
        ``Trajectory.converged``; callers decide whether that is an error.

    Raises:
        SceneError: the scene is invalid.
        SolverError: a non-finite state or a singular Newton system (the message names the frame
            and step); the settings' device cannot be used (CuPy missing, no GPU, too little GPU
            memory: before any step; the GPU out of memory during a step: naming the frame and
            step); contact is on but ipctk is not installed; :class:`SimulationCancelled` when
            ``progress`` returned False.
    """
    return Simulation(scene).run(progress)


class Simulation:
    """A run that advances on request, one time step at a time, keeping every finished frame.

    :func:`simulate` is ``Simulation(scene).run()``; a caller that shows frames as they are
    computed (the add-on's playback preview) calls :meth:`advance` with a bound on the time steps
    or the time per call, reads :attr:`frames_done` and :meth:`transforms`, and may later finish the same run
    with :meth:`run`: the result is the one :func:`simulate` returns, since the same steps are
    taken in the same order.

    Attributes:
        scene: the validated :class:`Scene`.
        frames_done: frames finished (0 to ``frame_count``); frame 0 is the initial state.

    The constructor compiles (or loads) the kernels the run calls (:meth:`compile`) unless
    ``compile_now`` is False. It validates the scene (:func:`validate_scene`) unless ``validated``
    says that it is what :func:`validate_scene` returned (the add-on's export validates it).

    Raises (constructor):
        SceneError: the scene is invalid.
        SolverError: the settings' device cannot be used.
    """

    def __init__(self, scene: Scene, compile_now: bool = True, validated: bool = False):
        self.scene = scene = scene if validated else validate_scene(scene)
        settings = scene.settings
        self._uipc = None
        if settings.device == "libuipc":
            # libuipc solves the steps and handles contact; the model serves the joint readouts.
            model = Model(dataclasses.replace(scene, settings=dataclasses.replace(settings, contact=ContactSettings())))
            control = Control.for_model(model)
            from .uipc_backend import UipcRefused, UipcRun, UipcUnavailable

            try:
                self._uipc = UipcRun(scene, model)
            except (UipcUnavailable, UipcRefused) as error:
                raise SolverError(str(error)) from error
            self._compile_tasks: list = []
        else:
            try:
                model = Model(scene)
            except ContactUnavailable as error:
                raise SolverError(str(error)) from error
            try:
                pull = [model.animated_pull] if model.animated_pull is not None else []
                self._potential = IncrementalPotential(model.terms + pull, model.unknown_slot, settings.device,
                                                       model.term_inputs + [("animated_pull",)] * len(pull))
            except DeviceUnavailable as error:
                raise SolverError(str(error)) from error
            control = Control.for_model(model)
            self._compile_tasks = compile_tasks(model, self._potential, model.q0, control)
        if compile_now:
            self.compile()
        self._stepper = stepper = _Stepper(scene, model, control)
        frames, steps = settings.frame_count, settings.frame_count * settings.substeps
        self._transforms = np.empty((frames + 1, len(scene.bodies), 4, 4))
        self._distance = np.full((frames + 1, len(scene.joints)), np.nan)
        self._angle = np.full((frames + 1, len(scene.joints)), np.nan)
        self._rotation = np.full((frames + 1, len(scene.joints), 3), np.nan)
        self._iterations = np.zeros(steps, dtype=np.int64)
        self._line_search = np.zeros(steps, dtype=np.int64)
        self._converged = np.zeros(steps, dtype=bool)
        self._fast_rotation = np.zeros(steps, dtype=bool)
        self._residual = np.zeros(steps)
        self._pieces = np.ones(steps, dtype=np.int64)
        self._contact_distance = np.full(frames + 1, np.inf)
        self._contact_count = np.zeros(frames + 1, dtype=np.int64)
        self._strain = np.zeros((frames + 1, len(scene.bodies)))
        self._keyed_overlap = np.full(frames + 1, "", dtype=object)
        self._record_contact(0)
        self._record_keys(0)
        self._transforms[0] = transform_from_q(stepper.q)
        self._distance[0], self._angle[0] = stepper.joints.distance, stepper.joints.angle
        self._rotation[0] = stepper.joints.rotation(model, stepper.q)
        self.frames_done = 0
        self._step = 0  # time steps done

    def _culprit(self, error: Exception) -> str:
        """`` at body '<name>' (...)`` where ``error`` comes from a singular Newton system that
        names the block of its failed pivot (:class:`solver.linear_solver.SingularSystem`, on
        every linear solver path), else ""."""
        block = getattr(error.__cause__, "block", None)
        if block is None:
            return ""
        (body,) = np.flatnonzero(self._potential.slot == block)
        return (f" at body {self.scene.bodies[body].name!r} (a mass or inertia too small beside its kappa or its "
                "joints' strength makes the system singular)")

    def pending_kernels(self) -> int:
        """How many of the compiled kernels the run calls are neither loaded in this process nor in
        the on-disk cache (those the first step would compile, one after the other)."""
        return sum(task.pending() for task in self._compile_tasks)

    def compile(self) -> None:
        """Compile the kernels the run calls that are not cached, over several cores where
        possible (:func:`solver.compilation.compile_in_parallel`), or load them; the constructor
        does it unless told not to (a caller that first waits for a compilation elsewhere)."""
        compile_in_parallel(self._compile_tasks)

    @property
    def frame_count(self) -> int:
        """Frames of the run after the initial one."""
        return self.scene.settings.frame_count

    @property
    def finished(self) -> bool:
        """Whether every frame is done."""
        return self.frames_done == self.frame_count

    def transforms(self, frame: int) -> np.ndarray:
        """(bodies, 4, 4) affine transforms of finished ``frame`` (0 to :attr:`frames_done`).

        Raises:
            IndexError: the frame is not finished."""
        if not 0 <= frame <= self.frames_done:
            raise IndexError(f"frame {frame} is not simulated yet (frames 0 to {self.frames_done} are)")
        return self._transforms[frame]

    def advance(self, until_frame: Optional[int] = None, max_steps: Optional[int] = None,
                deadline: Optional[float] = None) -> int:
        """Take time steps until frame ``until_frame`` (default the next one; at most
        ``frame_count``) is finished, ``max_steps`` were taken, or ``time.perf_counter()`` has
        passed ``deadline`` (s, checked after each step: at least one step is taken); return the
        frames this call finished. Nothing is done when :attr:`finished`.

        Raises:
            SolverError: a non-finite state or a singular Newton system (naming the frame and
                step); the run cannot go on after it.
        """
        target = min(self.frames_done + 1 if until_frame is None else until_frame, self.frame_count)
        before = self.frames_done
        # BLAS on one thread while stepping: the banded Cholesky (LAPACK dpbtf2, a rank-1 update of
        # at most 23x23 per column) is slower with OpenBLAS's threads (docs/benchmark_runs.md,
        # "Where a small chain's step goes"), and nothing else of a step calls a multi-threaded
        # BLAS routine. Restored on the way out.
        with _one_blas_thread():
            taken = 0
            while self.frames_done < target:
                self._step_once()
                taken += 1
                if (max_steps is not None and taken >= max_steps
                        or deadline is not None and time.perf_counter() >= deadline):
                    break
        return self.frames_done - before

    def _step_once(self) -> None:
        """One time step (the next of the current frame; finishing the frame after its last)."""
        substeps = self.scene.settings.substeps
        frame = self.frames_done + 1
        substep = self._step - self.frames_done * substeps + 1
        if self._uipc is not None:
            self._uipc_step(frame, substep)
            return
        stepper, potential = self._stepper, self._potential
        if substep == 1:
            stepper.begin_frame(frame)
            if stepper.constant_hessian_changes(frame):
                potential.refresh_constant_hessian(stepper.q, stepper.control)
        step = self._step
        try:
            results, self._fast_rotation[step] = self._split_step(frame, substep)
        except (NewtonFailure, DeviceUnavailable) as error:
            raise SolverError(f"frame {frame}, step {substep}: {error}{self._culprit(error)}") from error
        if len(results) == 1:  # unsplit (the pieces' count is 1 already)
            (result,) = results
            self._iterations[step], self._line_search[step] = result.iterations, result.line_search_iterations
            self._converged[step], self._residual[step] = result.converged, result.residual
        else:
            self._iterations[step] = sum(result.iterations for result in results)
            self._line_search[step] = sum(result.line_search_iterations for result in results)
            self._converged[step] = all(result.converged for result in results)
            self._residual[step] = max(result.residual for result in results)
            self._pieces[step] = len(results)
        self._step += 1
        if substep == substeps:
            self._finish_frame(frame)

    def _uipc_step(self, frame: int, substep: int) -> None:
        """One time step in libuipc (:class:`solver.uipc_backend.UipcRun`): the bodies' states read
        back, the joint readouts committed from them as after a step of this solver's own."""
        from .uipc_backend import UipcRefused

        stepper, step, uipc = self._stepper, self._step, self._uipc
        assert uipc is not None
        try:
            q, (iterations, line_search, converged) = uipc.step(frame, substep)
        except UipcRefused as error:
            raise SolverError(f"frame {frame}, step {substep}: {error}") from error
        stepper.q[:] = q
        self._fast_rotation[step] = stepper.joints.commit(stepper.model, stepper.q)
        self._iterations[step], self._line_search[step] = iterations, line_search
        self._converged[step], self._residual[step] = converged, np.nan
        self._pieces[step] = 1
        self._step += 1
        if substep == self.scene.settings.substeps:
            self._finish_frame(frame)

    def _finish_frame(self, frame: int) -> None:
        """Record the state at the end of ``frame`` (its last time step done)."""
        stepper = self._stepper
        if not np.isfinite(stepper.q).all():
            raise SolverError(f"frame {frame}: the state is not finite")
        self._transforms[frame] = transform_from_q(stepper.q)
        self._distance[frame], self._angle[frame] = stepper.joints.distance, stepper.joints.angle
        self._rotation[frame] = stepper.joints.rotation(stepper.model, stepper.q)
        self._record_contact(frame)
        self._record_keys(frame)
        self.frames_done = frame

    def _split_step(self, frame: int, substep: int) -> tuple[list, bool]:
        """Time step ``substep`` of ``frame``, split where it does not converge: a step whose
        Newton solve misses the tolerances within ``max_iterations`` is taken again from its start
        as two steps of half its dt (the animated poses, targets and bounds at the halves'
        ends), each split again where it misses them, down to 1 / 2^:data:`MAX_SPLITS` of the
        time step. A piece that misses them at that size keeps Newton's last iterate (with
        contact, collision-free: every iterate is, by the CCD-capped line search; it has the
        least incremental potential of the iterates, the line search only accepting decreases).
        Returns the pieces' :class:`solver.newton.NewtonResult`, in order, and whether a revolute
        joint turned by more than 0.9 pi in one of them."""
        stepper, substeps = self._stepper, self.scene.settings.substeps
        try:
            return stepper.advance(self._potential, frame, (substep - 1) / substeps, substep / substeps,
                                   self.scene.settings.dt, MAX_SPLITS)
        finally:
            stepper.set_dt(self._potential, self.scene.settings.dt)

    def _record_contact(self, frame: int) -> None:
        """The contact read-outs of ``frame`` (:meth:`solver.contact.ContactSurface.minimum_distance`)."""
        contact = self._stepper.model.contact
        if contact is not None:
            self._contact_distance[frame], self._contact_count[frame] = contact.minimum_distance(self._stepper.q)

    def _record_keys(self, frame: int) -> None:
        """What the keys of ``frame`` lose of the state: each dynamic body's largest affine strain,
        max |s_i - 1| over the singular values s_i of its A, the least taken negative where det A
        < 0 (a body crushed through itself: a strain above 1; 0 for the other bodies), and, with
        contact, the bodies whose keyed poses (a dynamic body's [R | p], R the rotation nearest
        to A; the others' states) intersect (ipctk ``has_intersections``; "" where none do).
        Keying moves a vertex x̄ of a dynamic body by |(A - R) x̄| <= strain |x̄| (A - R has the
        singular values s_i - 1): where twice the largest such move is under the state's smallest
        gap, no two keyed surfaces can meet, and the test is skipped."""
        stepper = self._stepper
        q = stepper.q
        dynamic = stepper.model.dynamic
        matrices = q[:, 3:12].reshape(-1, 3, 3)
        stretches = np.linalg.svd(matrices, compute_uv=False)
        stretches[:, 2] *= np.where(np.linalg.det(matrices) < 0.0, -1.0, 1.0)  # crushed through itself
        self._strain[frame] = np.where(dynamic, np.abs(stretches - 1.0).max(axis=1), 0.0)
        contact = stepper.model.contact
        if contact is None:
            return
        moved = float(np.max(self._strain[frame] * contact.radii, initial=0.0))
        if 2.0 * moved < min(self._contact_distance[frame], contact.d_hat):
            self._keyed_overlap[frame] = ""
            return
        rigid = q.copy()
        rigid[dynamic, 3:12] = nearest_rotation(matrices[dynamic]).reshape(-1, 9)
        pairs = contact.intersecting_pairs(rigid)
        self._keyed_overlap[frame] = ", ".join(f"{first!r} and {second!r}" for first, second in pairs[:3])

    def run(self, progress: Optional[Callable[[int, int], Optional[bool]]] = None) -> Trajectory:
        """Simulate the frames not done yet and return the whole :class:`Trajectory`.

        Args:
            progress: called as ``progress(frame_done, frame_count)`` after each frame this call
                simulates; returning ``False`` cancels the run.

        Raises:
            SolverError: as :meth:`advance`; :class:`SimulationCancelled` when ``progress``
                returned False (the frames done so far are kept, and a later call goes on).
        """
        frames = self.frame_count
        with _one_blas_thread():
            while not self.finished:
                frame = self.frames_done
                while self.frames_done == frame:
                    self._step_once()
                if progress is not None and progress(self.frames_done, frames) is False:
                    raise SimulationCancelled(f"cancelled after frame {self.frames_done} of {frames}")
        return self.trajectory()

    def trajectory(self) -> Trajectory:
        """The :class:`Trajectory` of the finished run.

        Raises:
            SolverError: the run is not finished."""
        if not self.finished:
            raise SolverError(f"the run has finished {self.frames_done} of its {self.frame_count} frames")
        scene = self.scene
        return Trajectory(
            transforms=self._transforms,
            body_names=np.array([body.name for body in scene.bodies], dtype=str),
            joint_names=np.array([joint.name for joint in scene.joints], dtype=str),
            distance=self._distance,
            angle=self._angle,
            rotation=self._rotation,
            newton_iterations=self._iterations,
            line_search_iterations=self._line_search,
            converged=self._converged,
            fast_rotation=self._fast_rotation,
            residual=self._residual,
            step_pieces=self._pieces,
            strain=self._strain,
            keyed_overlap=self._keyed_overlap.astype(str),
            notes=np.array(scene_notes(scene), dtype=str),
            contact_distance=self._contact_distance,
            contact_count=self._contact_count,
            broken_frame=self._stepper.broken_frame.copy(),
            frame_rate=float(scene.settings.frame_rate),
            substeps=int(scene.settings.substeps),
        )


_blas_controller: Optional[threadpoolctl.ThreadpoolController] = None


def _one_blas_thread():
    """A context that limits BLAS to one thread and restores it on exit; the libraries are
    looked up once per process (``threadpool_limits`` looks them up at every call, which cost
    more than a time step where a caller advances a run a frame at a time)."""
    global _blas_controller
    if _blas_controller is None:
        _blas_controller = threadpoolctl.ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


class _Stepper:
    """The mutable state of a run (q, dq/dt, joint readouts) and the per-step updates: the
    energy terms' inputs go into ``control`` (:class:`solver.control.Control`, sized for
    ``model``); ``model`` is only read."""

    def __init__(self, scene: Scene, model: Model, control: Control):
        self.scene = scene
        self.model = model
        self.control = control
        self.settings = scene.settings
        self.dt = scene.settings.dt
        self.q = model.q0.copy()
        self.velocity = model.dq0.copy()
        self.gravity_q = np.zeros(12)
        self.gravity_q[0:3] = scene.settings.gravity
        joints = scene.joints
        frames = scene.settings.frame_count + 1
        self.joints = JointState(
            len(joints),
            np.array([joint.init_distance for joint in joints], dtype=np.float64),
            np.array([joint.init_angle for joint in joints], dtype=np.float64),
        )
        self.joints.reset(model, self.q)
        #: (joints,) the frame in which each breakable joint broke (NaN: not broken, or unbreakable).
        self.broken_frame = np.full(len(joints), np.nan)
        self.has_limits = bool(len(model.revolute_limit.joint_indices) or len(model.prismatic_limit.joint_indices))
        self.breakable = bool(np.isfinite(model.generic.break_force).any())  # a generic joint with a break force
        self.dynamic = row_selector(np.flatnonzero(model.dynamic))
        # The prescribed bodies whose q changes over the run (animated ones); fixed bodies keep
        # their q0 and need no interpolation per step.
        moving = [b for b in np.flatnonzero(~model.dynamic) if np.any(model.animated_q[:, b] != model.animated_q[0, b])]
        self.kinematic = row_selector(np.array(moving, dtype=np.int64)) if moving else None
        self.kinematic_poses = PoseInterpolation(model.animated_q[:, moving]) if moving else None

        # Per kind of drive: its term, its inputs, its series, the offsets of its coordinate and the
        # committed raw coordinates (JointState updates both arrays in place).
        self.drives = tuple(
            (term, inputs, _DriveSeries([joints[k].driving for k in term.joint_indices], aim_key, frames), init, raw)
            for term, inputs, aim_key, init, raw in (
                (model.driving, control.driving, "aim_distance", self.joints.init_distance, self.joints.raw_distance),
                (model.revolute_driving, control.revolute_driving, "aim_angle", self.joints.init_angle,
                 self.joints.raw_angle))
        )
        # Effort caps and damping in the incremental potential's units (docs/constitutions/drive_effort.md):
        # a revolute drive's one coordinate takes the whole torque, each of a prismatic drive's two
        # sides half the force.
        for (term, inputs, _, _, _), effort_key, share in zip(self.drives, ("max_force", "max_torque"), (0.5, 1.0)):
            drivings = [joints[k].driving for k in term.joint_indices]
            effort = np.array([np.inf if d is None or getattr(d, effort_key) is None else getattr(d, effort_key)
                               for d in drivings], dtype=np.float64)
            inputs.cap = share * effort * self.dt * self.dt
            inputs.damping = share * self.dt * np.array([joints[k].damping for k in term.joint_indices],
                                                        dtype=np.float64)
        self.limit_series = {}
        for key, extra in (("prismatic", model.prismatic_limit), ("revolute", model.revolute_limit)):
            limits = [joints[k].limit for k in extra.joint_indices]
            self.limit_series[key] = {
                name: np.array([getattr(limit, name) for limit in limits], dtype=np.float64).reshape(
                    len(limits), frames)
                for name in ("lower", "upper", "strength")}
        soft = [scene.bodies[b].soft_transform for b in model.soft_indices]
        self.soft_strength = np.array([s.strength_ratio for s in soft], dtype=np.float64).reshape(len(soft), frames, 2)
        self.soft_active = np.array([s.is_constrained for s in soft], dtype=np.float64).reshape(len(soft), frames)
        self.soft_aim_q = q_from_transform(
            np.array([s.aim_transform for s in soft], dtype=np.float64).reshape(len(soft), frames, 4, 4))
        # Whether any target or bound interpolated between frames (begin_step) changes from frame
        # f - 1 to frame f: only then is it set per step, else once per frame.
        series = [self.soft_aim_q]
        series += [values for _, _, drive, _, _ in self.drives for values in (drive.aim, drive.velocity)]
        series += [limits[name] for limits in self.limit_series.values() for name in ("lower", "upper")]
        self.targets_move = np.zeros(frames, dtype=bool)
        for values in series:  # (series, frames) or (series, frames, 12): one row per frame
            by_frame = np.moveaxis(values, 1, 0).reshape(frames, values.size // frames)
            self.targets_move[1:] |= np.any(by_frame[1:] != by_frame[:-1], axis=1)
        self.soft_aim_poses = PoseInterpolation(np.swapaxes(self.soft_aim_q, 0, 1)) if len(soft) else None
        if model.contact is not None:  # the residual test of solve_contact_step, over its unknowns
            matrices = np.empty((int(model.unknown_slot.max()) + 1, 12, 12))
            matrices[model.unknown_slot[model.dynamic]] = model.kinetic.mass_matrix
            if model.animated_pull is not None:
                pulled = model.animated_pull.bodies[:, 0]
                matrices[model.unknown_slot[pulled]] = model.animated_pull.mass_matrix
                self.pulled = pulled
                self.pulled_moving = np.isin(pulled, moving)  # those of kinematic_poses, in order
            self.mass_inverse = np.linalg.inv(matrices)

    def begin_frame(self, frame: int) -> None:
        """Put the per-frame series values of ``frame`` (1..frame_count) that hold for all its
        steps (strengths and flags) into the control; the targets and bounds that move between
        frames are set per step (:meth:`begin_step`)."""
        # (Parts without elements keep their empty defaults: a small rig has most of them.)
        control = self.control
        for term, inputs, drive, _, _ in self.drives:
            if len(term.joint_indices):
                inputs.stiffness = drive.strength_ratio[:, frame] * drive.is_constrained[:, frame] * term.masses
                drive.passive = drive.is_passive[:, frame] != 0.0
        for key, inputs in (("prismatic", control.prismatic_limit), ("revolute", control.revolute_limit)):
            if len(self.limit_series[key]["strength"]):
                inputs.strength = self.limit_series[key]["strength"][:, frame].copy()
        if len(self.soft_strength):
            control.soft.strength_ratio = self.soft_strength[:, frame].copy()
            control.soft.active = self.soft_active[:, frame].copy()
        if not self.targets_move[frame]:
            self.begin_step(frame, 1.0)  # the targets and bounds are the frame's in every step

    def begin_step(self, frame: int, ratio: float) -> None:
        """Put the targets and bounds at ``ratio`` in (0, 1] of the way from frame - 1 to
        ``frame`` (exactly the frame's values at 1) into the control: a drive's aim (aim_distance,
        aim_angle or aim_velocity) and a joint limit's lower and upper bounds linearly, a soft
        transform's aim_transform as animated bodies' poses (:class:`PoseInterpolation`). As
        Blender interpolates an animated value between its frames: a target held at the frame's
        value for all the frame's steps would be reached in the first step and then held, so that
        a body following a moving target would move in jumps and stand still at every frame's end
        (released there, it would stop dead instead of keeping its speed), and the motion would
        change with the substeps."""
        control = self.control

        def between(series: np.ndarray) -> np.ndarray:
            return (1.0 - ratio) * series[:, frame - 1] + ratio * series[:, frame]

        for _, _, drive, _, _ in self.drives:
            if len(drive.aim):
                drive.step_aim, drive.step_velocity = between(drive.aim), between(drive.velocity)
        limits = self.limit_series["prismatic"]
        if len(limits["lower"]):
            control.prismatic_limit.lower = between(limits["lower"])
            control.prismatic_limit.upper = between(limits["upper"])
        # #670 (docs/constitutions/670_revolute_joint_limit.md): the effective bounds are offset by init_angle.
        limits = self.limit_series["revolute"]
        if len(limits["lower"]):
            init_angle = self.joints.init_angle[self.model.revolute_limit.joint_indices]
            control.revolute_limit.lower = between(limits["lower"]) + init_angle
            control.revolute_limit.upper = between(limits["upper"]) + init_angle
        if self.soft_aim_poses is not None:
            control.soft.aim_q = self.soft_aim_poses.at(frame, ratio)

    def constant_hessian_changes(self, frame: int) -> bool:
        """Whether the constant Hessians (kinetic M, revolute K JᵀJ, soft transform) differ in
        ``frame`` from the frame before: always for frame 1; later only when a soft transform's
        strength_ratio or is_constrained changes (M and the base joints' K are fixed per run)."""
        if frame == 1:
            return True
        if not len(self.soft_strength):
            return False
        return bool(np.any(self.soft_strength[:, frame] != self.soft_strength[:, frame - 1])
                    or np.any(self.soft_active[:, frame] != self.soft_active[:, frame - 1]))

    def start_newton(self, start: np.ndarray) -> bool:
        """Set the dynamic rows of q, holding q^t (``start``, (dynamic, 12)) on entry, to Newton's
        starting point: the last step's motion repeated (:func:`solver.affine_body.repeated_motion`,
        T^t (T^(t-1))^-1 T^t), nearer the answer than q^t (fewer iterations and factorisations),
        unless a joint-limit penalty is active (its coordinate outside [lower, upper]; the step's
        limit inputs must be in the control) at q^t or at the prediction, where q^t is kept. Returns
        whether one is (the Newton loop then confirms every direction it accepts:
        :func:`solver.newton.solve_step`).

        The repeated motion turns a turning body on, where the explicit prediction q^t + dt dq/dt
        moves its points along their tangents and stretches its A against the stiff shape energy
        (libuipc starts at q^t). The cubic limit penalty has no curvature at its bound, so a
        direction taken on the other side of a bound than the answer overshoots into it and
        Newton closes the overshoot only linearly; a joint resting on its limit would be carried
        across the bound at many steps, hence q^t there (docs/performance.md, "Accuracy of the
        shortcuts")."""
        if self.has_limits and _any_limit_active(self.model, self.control, self.q):
            return True
        predicted = np.empty_like(start)
        repeated_motion(start, np.ascontiguousarray(self.velocity[self.dynamic]), self.dt, predicted)
        self.q[self.dynamic] = predicted
        if self.has_limits and _any_limit_active(self.model, self.control, self.q):
            self.q[self.dynamic] = start
            return True
        return False

    def set_dt(self, potential: IncrementalPotential, dt: float) -> None:
        """Make the steps that follow ``dt`` s long (the OrthoPotential's dt^2 and the generic
        joints' spring and damping scales with it; a factorisation kept from a step of another dt
        is not reused)."""
        if dt != self.dt:
            self.dt = dt
            self.model.ortho.dt = dt
            self.model.generic.dt = dt
            potential.factorization_reusable = False

    def advance(self, potential: IncrementalPotential, frame: int, begin: float, end: float, dt: float,
                splits: int) -> tuple[list, bool]:
        """Step from ``begin`` to ``end`` (fractions of the way from frame - 1 to ``frame``) in one
        implicit Euler step of ``dt`` s or, where it does not converge and ``splits`` > 0, from
        the same start in two halves, each advanced the same way with ``splits`` - 1
        (:meth:`Simulation._split_step`). Returns the pieces' Newton results and whether a
        revolute joint turned by more than 0.9 pi in one."""
        saved = self._state() if splits else None
        self.set_dt(potential, dt)
        result, fast = self.step(potential, frame, end)
        if result.converged or saved is None:
            return [result], fast
        self._restore(saved)
        middle = 0.5 * (begin + end)
        first, fast_first = self.advance(potential, frame, begin, middle, 0.5 * dt, splits - 1)
        second, fast_second = self.advance(potential, frame, middle, end, 0.5 * dt, splits - 1)
        return first + second, fast_first or fast_second

    def _state(self) -> tuple:
        """Copies of what a step changes: q, dq/dt and the committed joint coordinates."""
        joints = self.joints
        return tuple(array.copy() for array in (self.q, self.velocity, joints.raw_distance, joints.raw_angle,
                                                joints.sin, joints.cos))

    def _restore(self, saved: tuple) -> None:
        """Put back a :meth:`_state` (in place: the drives hold the joint arrays)."""
        joints = self.joints
        for array, copy in zip((self.q, self.velocity, joints.raw_distance, joints.raw_angle, joints.sin,
                                joints.cos), saved):
            np.copyto(array, copy)

    def step(self, potential: IncrementalPotential, frame: int, ratio: float):
        """One implicit Euler step of :attr:`dt` ending at ``ratio`` in (0, 1] of the way from frame
        - 1 to ``frame``; returns its :class:`solver.newton.NewtonResult` and whether a revolute
        joint turned by more than 0.9 π in it (:meth:`JointState.commit`)."""
        model, dt = self.model, self.dt
        if model.contact is not None:
            return self._contact_step(potential, model.contact, frame, ratio)
        if self.kinematic is not None and self.kinematic_poses is not None:
            self.q[self.kinematic] = self.kinematic_poses.at(frame, ratio)
        start = self._set_step_inputs(frame, ratio)
        limited = self.start_newton(start)
        # About rad per step (the ufunc's own reduce: ndarray.max's Python wrapper costs more than it).
        turning = float(np.maximum.reduce(np.abs(self.velocity[self.dynamic, 3:]), axis=None, initial=0.0)) * dt
        potential.bind(self.q, self.control)
        result = solve_step(potential, self.q, model.corners, dt, self.settings, confirm_every_direction=limited,
                            turning=turning)
        self.velocity[self.dynamic] = (self.q[self.dynamic] - start) / dt
        self._break_joints(frame)
        return result, self.joints.commit(model, self.q)

    def _break_joints(self, frame: int) -> None:
        """Release for good the generic joints whose locked linear coordinates carry more than
        their break force at the step's end (:meth:`GenericJoint.constraint_force`), as Bullet
        disables a constraint whose impulse passes its threshold; record the frame."""
        if not self.breakable:
            return
        generic = self.model.generic
        active = self.control.generic.active
        force = generic.constraint_force(self.q)
        broken = (active > 0.0) & (force > generic.break_force)
        if broken.any():
            active[broken] = 0.0
            self.broken_frame[generic.joint_indices[broken]] = frame

    def _set_step_inputs(self, frame: int, ratio: float) -> np.ndarray:
        """Put the step's targets, prediction q_tilde and lagged joint values into the control;
        returns q^t of the dynamic bodies (dynamic, 12)."""
        model, control, dt = self.model, self.control, self.dt
        if self.targets_move[frame]:
            self.begin_step(frame, ratio)
        start = self.q[self.dynamic].copy()
        control.kinetic.q_tilde = start + dt * self.velocity[self.dynamic] + dt * dt * self.gravity_q
        for term, inputs, drive, init, raw in self.drives:
            if len(term.joint_indices):
                inputs.target = drive.target(raw[term.joint_indices], init[term.joint_indices], dt)
        if len(model.driving.joint_indices):  # the step start of the prismatic damping
            control.driving.start = self.joints.raw_distance[model.driving.joint_indices].copy()
        # The step start of the unwrapped angle.
        self._lag_angle(model.revolute_limit.joint_indices, control.revolute_limit)
        self._lag_angle(model.revolute_driving.joint_indices, control.revolute_driving)
        if len(model.generic.joint_indices):  # the step start of the generic joints' damping
            control.generic.x_t = model.generic.coordinates(self.q)
        return start

    def _lag_angle(self, joint_indices: np.ndarray,
                   inputs: RevoluteJointLimitInput | DrivingRevoluteJointInput) -> None:
        """Put the committed (step-start) unwrapped angle of the joints ``joint_indices`` (n,), rad, and
        its sine and cosine into a revolute extra's ``inputs``."""
        if len(joint_indices):
            inputs.angle_t = self.joints.raw_angle[joint_indices].copy()
            inputs.sin_t = self.joints.sin[joint_indices].copy()
            inputs.cos_t = self.joints.cos[joint_indices].copy()

    def _start_contact_newton(self, contact: ContactSurface, start: np.ndarray) -> None:
        """Set the dynamic rows of q, holding q^t (``start``, (dynamic, 12)) on entry, to the
        contact step's Newton start, and lag the friction there (normal forces and tangents; its
        velocities stay measured from q^t): the last step's motion repeated (:meth:`start_newton`)
        where the straight way there from q^t is free of collisions (CCD), else q^t. A body
        moving steadily, resting, sliding or in free flight, then starts near its answer, with its
        friction lagged near the step's end."""
        if not self.start_newton(start):  # else a joint-limit penalty is active: q^t
            repeated = self.q[self.dynamic].copy()
            self.q[self.dynamic] = start
            self._move_where_free(contact, self.dynamic, repeated)
        contact.relag(self.q)

    def _move_where_free(self, contact: ContactSurface, rows, target: np.ndarray) -> None:
        """Set the ``rows`` of q to ``target`` where the straight way there from q is free of
        collisions (CCD, :meth:`solver.contact.ContactSurface.collision_free_step`); else keep q."""
        motion = np.zeros_like(self.q)
        motion[rows] = target - self.q[rows]
        if np.any(motion) and contact.collision_free_step(self.q, motion) >= 1.0:
            self.q[rows] = target

    def _contact_step(self, potential: IncrementalPotential, contact: ContactSurface, frame: int, ratio: float):
        """One implicit Euler step with contact (:func:`solver.newton.solve_contact_step`): Newton
        from :meth:`_start_contact_newton` (the last step's motion repeated where the way there is
        collision-free, else q^t), the friction lagged there. Animated bodies are unknowns there
        too, pulled to their pose at the step's end by :attr:`solver.model.Model.animated_pull`, so
        that CCD bounds their motion and the barrier pushes the dynamic bodies out of their way;
        after the solve each is set exactly to its pose where the way there is collision-free
        (CCD), which it is unless a body is jammed against it."""
        model, dt = self.model, self.dt
        start = self._set_step_inputs(frame, ratio)
        contact.begin_step(self.q, dt, lag=False)
        self._start_contact_newton(contact, start)
        if model.animated_pull is not None:
            poses = self.q[self.pulled].copy()
            if self.kinematic_poses is not None:
                poses[self.pulled_moving] = self.kinematic_poses.at(frame, ratio)
            self.control.animated_pull.q_tilde = poses
        potential.bind(self.q, self.control)
        result = solve_contact_step(potential, contact, self.q, model.corners, dt, self.settings, self.mass_inverse)
        if model.animated_pull is not None:
            self._move_where_free(contact, self.pulled, poses)
        self.velocity[self.dynamic] = (self.q[self.dynamic] - start) / dt
        self._break_joints(frame)
        return result, self.joints.commit(model, self.q)




class _DriveSeries:
    """The per-frame values of one kind of drive (prismatic #21 or revolute #19), (drives,
    frames) each, and the current step's aims.

    Args:
        drivings: the validated :class:`solver.scene.Driving` of each drive, in the order of its
            term; None for a joint that has the term only for its damping (disabled drive).
        aim_key: ``"aim_distance"`` or ``"aim_angle"``, the position aim of this kind.
        frames: frame_count + 1.

    Attributes:
        strength_ratio, is_constrained, is_passive: (drives, frames).
        max_speed: (drives,) the speed limit, m/s or rad/s (inf: none).
        aim: (drives, frames) the position aim in the reported frame (zeros in velocity mode), m or rad.
        velocity: (drives, frames) aim_velocity (zeros in position mode), m/s or rad/s.
        by_velocity: (drives,) bool, whether each drive is in velocity mode.
        passive: (drives,) bool, is_passive of the current frame (:meth:`_Stepper.begin_frame`).
        step_aim, step_velocity: (drives,) the aim and velocity of the current step (:meth:`_Stepper.begin_step`).
    """

    def __init__(self, drivings: list, aim_key: str, frames: int):
        count, zeros = len(drivings), np.zeros(frames)
        drivings = [Driving(strength_ratio=zeros, is_constrained=zeros, is_passive=zeros, aim_velocity=zeros)
                    if d is None else d for d in drivings]
        self.max_speed = np.array([np.inf if d.max_speed is None else d.max_speed for d in drivings], dtype=float)

        def series(values: list) -> np.ndarray:
            return np.array(values, dtype=np.float64).reshape(count, frames)

        self.strength_ratio = series([d.strength_ratio for d in drivings])
        self.is_constrained = series([d.is_constrained for d in drivings])
        self.is_passive = series([d.is_passive for d in drivings])
        self.by_velocity = np.array([d.aim_velocity is not None for d in drivings], dtype=bool)
        self.aim = series([zeros if d.aim_velocity is not None else getattr(d, aim_key) for d in drivings])
        self.velocity = series([zeros if d.aim_velocity is None else d.aim_velocity for d in drivings])
        self.passive = np.zeros(count, dtype=bool)
        self.step_aim, self.step_velocity = np.zeros(count), np.zeros(count)

    def target(self, committed: np.ndarray, init: np.ndarray, dt: float) -> np.ndarray:
        """(drives,) raw targets of the step from the ``committed`` (step-start) raw coordinates
        and the offsets ``init`` (init_distance or init_angle), at this step's aims
        (:func:`solver.control.drive_targets`: passive drives hold, velocity drives move on,
        position drives aim, within the speed limit)."""
        return drive_targets(committed, init, self.step_aim, self.step_velocity, self.max_speed, self.by_velocity,
                             self.passive, dt)


def _any_limit_active(model: Model, control: Control, q: np.ndarray) -> bool:
    """Whether a joint-limit penalty is active at q (bodies, 12): a limited joint's coordinate
    outside [lower, upper] of ``control`` (the revolute one measured from the step start, so the
    step's limit inputs must be set)."""
    if len(model.revolute_limit.joint_indices):
        revolute = control.revolute_limit
        if any_active(model.revolute_limit.angle(q, revolute), revolute.lower, revolute.upper):
            return True
    if len(model.prismatic_limit.joint_indices):
        prismatic = control.prismatic_limit
        return bool(any_active(model.prismatic_limit.distance(q), prismatic.lower, prismatic.upper))
    return False
