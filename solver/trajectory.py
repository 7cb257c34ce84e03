"""Trajectory: what a simulation returns, and its ``.npz`` file form."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .array_files import ArrayFile, save_npz
from .scene_validation import MAX_TIME_STEPS, MAX_TRAJECTORY_VALUES

#: The most bytes :meth:`Trajectory.load` reads from a file: the largest trajectory a scene
#: within the solver's size limits gives, its values as float64 and up to four 8-byte records
#: per time step, the names included.
MAX_FILE_BYTES = 8 * (MAX_TRAJECTORY_VALUES + 4 * MAX_TIME_STEPS)
#: Fields that files written before they existed lack (:meth:`Trajectory.load` fills them in).
OPTIONAL_FIELDS = ("fast_rotation", "residual", "scene_digest", "rotation", "contact_distance", "contact_count",
                   "step_pieces", "strain", "keyed_overlap", "notes", "broken_frame")
#: Largest affine strain of a body (max |s_i - 1| over the singular values of its A) that its
#: keys, rigid poses, may drop without a warning (:meth:`Trajectory.warnings`).
STRAIN_TOLERANCE = 1e-3

#: How far (m, and rad of rotation) a body's first pose in a trajectory may be from the scene's
#: for the trajectory to count as computed for that scene (the poses round-trip exactly through
#: the scene file; the tolerance only absorbs float32 storage in Blender).
START_POSE_TOLERANCE = 1e-5
#: A trajectory's per-time-step arrays (frame count x substeps long).
STEP_ARRAYS = ("newton_iterations", "line_search_iterations", "converged", "fast_rotation", "residual", "step_pieces")
#: The array each joint type's readout is reported in (the other joint types have none).
READOUT_ARRAYS = {"prismatic": "distance", "revolute": "angle", "spherical": "rotation"}


@dataclass
class Trajectory:
    """Per-frame body transforms and joint readouts, and per-step Newton statistics.

    Attributes:
        transforms: (frame_count + 1, bodies, 4, 4) affine transforms x = A x_bar + p, frame 0
            the initial pose. Dynamic bodies are affine (nearly rigid, the OrthoPotential keeps
            A close to a rotation); callers that need a rigid pose project A to the nearest
            rotation (:func:`solver.affine_body.nearest_rotation`).
        body_names: (bodies,) str.
        joint_names: (joints,) str.
        distance: (frame_count + 1, joints) reported prismatic distance (raw + init_distance),
            m; NaN for the other joints.
        angle: (frame_count + 1, joints) reported revolute angle (raw accumulated, unwrapped
            across turns, + init_angle), rad; NaN for the other joints.
        newton_iterations: (frame_count * substeps,) Newton iterations of each time step.
        line_search_iterations: (frame_count * substeps,) total line-search halvings per step.
        converged: (frame_count * substeps,) bool, whether each step met the tolerances
            within ``max_iterations``.
        fast_rotation: (frame_count * substeps,) bool, whether some revolute joint turned by
            more than 0.9 π (162°) in that step, where its unwrapped ``angle`` may have counted
            a turn the wrong way round (:meth:`solver.joint_state.JointState.commit`; more
            substeps avoid it). All False in files written before this field existed.
        residual: (frame_count * substeps,) the last Newton direction's size relative to the
            tolerance in each step (:attr:`solver.newton.NewtonResult.residual`): at most 1 where
            the step converged, how far from converged it ended where not. NaN in files
            written before this field existed.
        scene_digest: :func:`solver.scene_io.scene_digest` of the scene it was computed for
            (``python -m solver run`` sets it), or "" where unknown (a run in Blender, an
            older file).
        frame_rate: frames per second, 1/s.
        substeps: time steps per frame.
        contact_distance: (frame_count + 1,) smallest distance between two contact-enabled
            bodies that may touch, m, at each frame: measured where it is below the barrier's
            d_hat, +inf otherwise (and where contact is off).
        contact_count: (frame_count + 1,) active contacts at each frame: the barrier's primitive
            pairs (point-triangle, edge-edge ...) closer than d_hat; 0 where contact is off.
        rotation: (frame_count + 1, joints, 3) rotation vector (axis times angle, rad) of a fixed
            or spherical joint's body j relative to its body i since frame 0, in body i's axes
            as they were at frame 0; NaN for the other joints (all NaN when not given, and in
            files written before this field existed).
        step_pieces: (frame_count * substeps,) how many pieces each time step was solved in: 1,
            or more where it did not converge whole and was split in halves (down to 16 pieces,
            :meth:`solver.simulation.Simulation._split_step`). A step still not converged then
            (``converged`` False) kept Newton's last iterate.
        strain: (frame_count + 1, bodies) largest affine strain of each body at each frame, max
            |s_i - 1| over the singular values s_i of its A (0 for fixed and animated bodies):
            what its keys, rigid poses, drop of the solver's state.
        keyed_overlap: (frame_count + 1,) the bodies (up to three pairs, "'a' and 'b', ...")
            whose keyed rigid poses intersect at each frame, "" where none do (or contact is off).
        notes: (n,) sentences about the scene the run read as it was not given (a mesh turned
            the right way round).
        broken_frame: (joints,) the frame in which each breakable generic joint broke (counting
            from frame 0), NaN for a joint that held or cannot break (all NaN when not given).
    """

    transforms: np.ndarray
    body_names: np.ndarray
    joint_names: np.ndarray
    distance: np.ndarray
    angle: np.ndarray
    newton_iterations: np.ndarray
    line_search_iterations: np.ndarray
    converged: np.ndarray
    fast_rotation: np.ndarray
    residual: np.ndarray
    frame_rate: float
    substeps: int
    scene_digest: str = ""
    rotation: Optional[np.ndarray] = None
    contact_distance: Optional[np.ndarray] = None
    contact_count: Optional[np.ndarray] = None
    step_pieces: Optional[np.ndarray] = None
    strain: Optional[np.ndarray] = None
    keyed_overlap: Optional[np.ndarray] = None
    notes: Optional[np.ndarray] = None
    broken_frame: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        frames = len(self.transforms)
        if self.step_pieces is None:
            self.step_pieces = np.ones(len(self.converged), dtype=np.int64)
        if self.strain is None:
            self.strain = np.zeros((frames, len(self.body_names)))
        if self.keyed_overlap is None:
            self.keyed_overlap = np.full(frames, "", dtype=str)
        if self.notes is None:
            self.notes = np.zeros(0, dtype=str)
        if self.broken_frame is None:
            self.broken_frame = np.full(len(self.joint_names), np.nan)
        if self.rotation is None:  # no fixed or spherical joint readouts given
            self.rotation = np.full(np.shape(self.angle) + (3,), np.nan)
        if self.contact_distance is None:  # contact off, or a file from before contact
            self.contact_distance = np.full(frames, np.inf)
        if self.contact_count is None:
            self.contact_count = np.zeros(frames, dtype=np.int64)

    @property
    def frame_count(self) -> int:
        """Number of simulated frames after frame 0."""
        return self.transforms.shape[0] - 1

    @property
    def all_converged(self) -> bool:
        """True when every time step converged."""
        return bool(np.all(self.converged))

    def fast_rotation_warning(self) -> Optional[str]:
        """A sentence saying in how many time steps a revolute joint turned by more than 0.9 π
        (:attr:`fast_rotation`), or None when none did."""
        count = int(np.count_nonzero(self.fast_rotation))
        if count == 0:
            return None
        return (f"in {count} of {len(self.fast_rotation)} time steps a revolute joint turned by more than "
                "0.9 pi (162 degrees): its angle readout and limit may have counted a turn the wrong way "
                "round; raise the substeps")

    def warnings(self, frame_start: int = 0, strain_tolerance: float = STRAIN_TOLERANCE) -> list[str]:
        """Sentences on what a bake of this trajectory should not keep quiet about, frames counted
        from ``frame_start`` (the Blender frame of frame 0): the notes, the frames whose time steps
        did not converge even split in 16, the bodies strained by more than ``strain_tolerance``,
        the frames whose keyed rigid poses intersect, and the revolute joints that turned too fast
        in a step (:meth:`fast_rotation_warning`); each with its remedy."""
        sentences = [str(note) for note in np.asarray(self.notes)]
        problem = self.convergence_problem(frame_start)
        if problem:
            sentences.append(f"{problem} (each such step is kept at Newton's last iterate)")
        sentences += self.strain_warnings(frame_start, strain_tolerance)
        overlap = np.asarray(self.keyed_overlap, dtype=str)
        overlapping = np.flatnonzero(overlap != "")
        if len(overlapping):
            first = int(overlapping[0])
            sentences.append(
                f"the keyed poses of {overlap[first]} intersect at {_frames(overlapping, frame_start)} (the "
                "solver's states do not: the keys drop the bodies' strain); raise those bodies' Stiffness (kappa) "
                "or the Substeps")
        warning = self.fast_rotation_warning()
        if warning:
            sentences.append(warning)
        return sentences

    def strain_warnings(self, frame_start: int = 0, strain_tolerance: float = STRAIN_TOLERANCE) -> list[str]:
        """One sentence per body strained by more than ``strain_tolerance`` at some frame
        (:attr:`strain`), naming it, its largest strain and the frames, with the remedy."""
        strain = np.asarray(self.strain)
        sentences = []
        for body in np.flatnonzero(strain.max(axis=0, initial=0.0) > strain_tolerance) if strain.size else []:
            frames = np.flatnonzero(strain[:, body] > strain_tolerance)
            worst = int(np.argmax(strain[:, body]))
            how = ("crushed through itself (turned inside out)" if strain[worst, body] > 1.0
                   else "squeezed or stretched, not rigid")
            sentences.append(
                f"body '{self.body_names[body]}' is strained by up to {strain[worst, body]:.3g} (at frame "
                f"{frame_start + worst}; over {strain_tolerance:g} at {_frames(frames, frame_start)}): it is {how}, "
                "and its keys show it at full size; raise its Stiffness (kappa) or the Substeps")
        return sentences

    def convergence_problem(self, frame_start: int = 0) -> Optional[str]:
        """A sentence naming the frames (counted from ``frame_start``) whose time steps did not
        converge even split in pieces, with their largest residual and the remedy; None when all
        did."""
        converged = np.asarray(self.converged, dtype=bool)
        if converged.all():
            return None
        substeps = max(int(self.substeps), 1)
        steps = np.flatnonzero(~converged)
        frames = np.unique(steps // substeps + 1)
        worst = float(np.nanmax(np.asarray(self.residual)[steps]))
        pieces = int(np.asarray(self.step_pieces)[steps].max())
        return (f"{len(steps)} of {len(converged)} time steps did not converge at {_frames(frames, frame_start)} even "
                f"split into {pieces} pieces, down to 1/16 of a step (the worst ended {worst:.3g} times Newton's "
                "tolerance); raise Max Iterations or Substeps, or the Stiffness (kappa) of a body that is crushed")

    def damage(self, scene, frame_start: int = 0) -> Optional[str]:
        """What makes this trajectory's arrays unfit to bake for ``scene`` (a
        :class:`solver.scene.Scene`), naming the array, or None: ``body_names`` or ``joint_names``
        not a list, ``transforms`` not (frames, bodies, 4, 4) for its own body names, ``distance``
        or ``angle`` not (frames, joints), ``rotation`` not (frames, joints, 3), a per-step array
        (:data:`STEP_ARRAYS`) not frame count x substeps long, or a NaN or infinite value where a
        bake reads one: a transform, or the readout of each of the scene's joints
        (:data:`READOUT_ARRAYS`; the others are NaN by design, and a file written before
        ``rotation`` existed has it all NaN). Frames are named counting from ``frame_start``
        (the Blender frame of frame 0). Checked before :meth:`mismatch`, which reads the first poses.
        """
        for name in ("body_names", "joint_names"):
            if np.ndim(getattr(self, name)) != 1:
                return f"its '{name}' array is not a list of names"
        bodies, joints = len(self.body_names), len(self.joint_names)
        frames = len(self.transforms) if np.ndim(self.transforms) else 0
        frame_count, substeps = max(frames - 1, 0), self.substeps
        problem = self._shape_problem("transforms", (frames, bodies, 4, 4), "frames, bodies, 4, 4")
        for name in ("distance", "angle"):
            problem = problem or self._shape_problem(name, (frames, joints), "frames, joints")
        problem = problem or self._shape_problem("rotation", (frames, joints, 3), "frames, joints, 3")
        for name in STEP_ARRAYS:
            problem = problem or self._shape_problem(name, (frame_count * substeps,),
                                                     f"{frame_count} frames x {substeps} substeps")
        if problem:
            return problem
        not_finite = ~np.isfinite(self.transforms).all(axis=(2, 3))
        if not_finite.any():
            frame, body = np.argwhere(not_finite)[0]
            return (f"its 'transforms' array holds a NaN or infinite value for body '{self.body_names[body]}' "
                    f"at frame {frame_start + int(frame)}")
        types = {joint.name: joint.type for joint in scene.joints}
        for column, name in enumerate(map(str, self.joint_names)):
            if types.get(name) not in READOUT_ARRAYS:
                continue  # not the scene's (mismatch says so), or a joint without a readout
            readout = READOUT_ARRAYS[types[name]]
            values = np.asarray(getattr(self, readout)[:, column]).reshape(frames, -1)
            bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
            if len(bad):
                return (f"its '{readout}' array holds a NaN or infinite value for joint '{name}' "
                        f"at frame {frame_start + int(bad[0])}")
        return None

    def _shape_problem(self, name: str, shape: tuple, layout: str) -> Optional[str]:
        """Why the array ``name`` is not numbers of ``shape`` (described by ``layout``), or None."""
        array = np.asarray(getattr(self, name))
        if array.shape == shape and array.dtype.kind in "biuf":
            return None
        return f"its '{name}' array is {array.dtype} of shape {array.shape}, not numbers of shape {shape} ({layout})"

    def mismatch(self, scene, frame_start: int, frame_end: int) -> Optional[str]:
        """Why this trajectory was not computed for ``scene`` (a :class:`solver.scene.Scene`
        sampled over the Blender frames ``frame_start`` to ``frame_end``), or None: its body or
        joint names (in order), its frame count or frame rate differ, a body's first pose is more
        than :data:`START_POSE_TOLERANCE` (m, rad) from the scene's, or (where the file records
        it, as ``python -m solver run`` does) the digest of the scene it was computed for is not
        this scene's (:func:`solver.scene_io.scene_digest`: a mass, an aim curve, a setting
        changed since the export). Call :meth:`damage` first."""
        from .affine_body import nearest_rotation
        from .scene_io import scene_digest

        bodies = [body.name for body in scene.bodies]
        joints = [joint.name for joint in scene.joints]
        if [str(name) for name in self.body_names] != bodies:
            return f"its bodies are {[str(name) for name in self.body_names]}, the rig's {bodies}"
        if [str(name) for name in self.joint_names] != joints:
            return f"its joints are {[str(name) for name in self.joint_names]}, the rig's {joints}"
        frame_count = frame_end - frame_start
        if self.frame_count != frame_count:
            return (f"it has {self.frame_count + 1} frames, the bake {frame_count + 1} "
                    f"(frames {frame_start}-{frame_end})")
        if not np.isclose(self.frame_rate, scene.settings.frame_rate, rtol=1e-9):
            return f"it was computed at {self.frame_rate:g} fps, the scene runs at {scene.settings.frame_rate:g} fps"
        start = np.array(self.transforms[0], dtype=np.float64)
        rotations = nearest_rotation(start[:, :3, :3])
        for body, rotation, position in zip(scene.bodies, rotations, start[:, :3, 3]):
            offset = float(np.linalg.norm(position - body.transform[:3, 3]))
            turn = float(np.arccos(np.clip((np.trace(rotation.T @ body.transform[:3, :3]) - 1.0) / 2.0, -1.0, 1.0)))
            if offset > START_POSE_TOLERANCE or turn > START_POSE_TOLERANCE:
                return (f"body '{body.name}' starts {offset:.3g} m and {np.degrees(turn):.3g} degrees away from its "
                        f"pose at frame {frame_start} (was the rig changed after the scene file was exported?)")
        if self.scene_digest and self.scene_digest != scene_digest(scene):
            return ("the rig, its animated settings or the ABD World settings changed after the scene file was "
                    "exported (its scene digest differs): export and solve it again, or Bake here")
        return None

    def save(self, path) -> None:
        """Write every field to a compressed ``.npz`` file at ``path`` (a str or Path, to which
        ``.npz`` is appended when missing: :func:`npz_file_name`; or a binary file object), as
        ``np.savez_compressed`` would (:func:`solver.array_files.save_npz`).

        Raises:
            OSError: the write failed (a full disk).
        """
        target = npz_file_name(path) if isinstance(path, (str, Path)) else path
        save_npz(target, {f.name: np.asarray(getattr(self, f.name)) for f in fields(self)})

    @classmethod
    def load(cls, path: Union[str, Path], scene=None) -> "Trajectory":
        """Read a trajectory written by :meth:`save`: its fields only, each checked before it is
        read (:class:`solver.array_files.ArrayFile`, at most :data:`MAX_FILE_BYTES` in all), and
        none larger than the trajectory can need: that of ``scene`` (a
        :class:`solver.scene.Scene` it is to be baked for: its bodies, joints, frame count and
        substeps) where given, else that of the file's own names and time steps, read first.

        Raises:
            OSError: the file cannot be opened. KeyError: a field is missing.
            solver.array_files.ArrayFileError: not a regular file or not an ``.npz`` archive, a
                damaged field, or one beyond the limits (a ValueError; the message names the file).
        """
        from .scene_validation import MAX_NAME_LENGTH

        wanted = [f.name for f in fields(cls)]
        with ArrayFile(path, MAX_FILE_BYTES) as data:
            names = [name for name in wanted if name in data or name not in OPTIONAL_FIELDS]
            stored: dict[str, Any] = {}
            for name in ("substeps", "frame_rate", "scene_digest"):
                if name in names:
                    stored[name] = data.read(name, shape=(), max_size=4 * MAX_NAME_LENGTH)
            if scene is not None:
                bodies, joints = len(scene.bodies), len(scene.joints)
                steps = scene.settings.frame_count * scene.settings.substeps
                frames = scene.settings.frame_count + 1
                for name, count in (("body_names", bodies), ("joint_names", joints)):
                    stored[name] = data.read(name, max_size=4 * MAX_NAME_LENGTH * count,
                                             need=f"{count} names of at most {MAX_NAME_LENGTH} characters")
            else:
                for name in ("body_names", "joint_names"):
                    stored[name] = data.read(name)
                bodies, joints = len(stored["body_names"]), len(stored["joint_names"])
            if scene is None:
                stored["converged"] = data.read("converged", shape=(None,), max_size=8 * MAX_TIME_STEPS)
                steps = len(stored["converged"])
                frames = steps // max(int(stored["substeps"]), 1) + 1
            sizes = {"transforms": (16 * bodies, f"{bodies} bodies x {frames} frames x 16 values"),
                     "distance": (joints, f"{joints} joints x {frames} frames"),
                     "angle": (joints, f"{joints} joints x {frames} frames"),
                     "rotation": (3 * joints, f"{joints} joints x {frames} frames x 3 values"),
                     "contact_distance": (1, f"{frames} frames"), "contact_count": (1, f"{frames} frames"),
                     "strain": (bodies, f"{bodies} bodies x {frames} frames"),
                     # up to three pairs of names a frame, as 4-byte characters
                     "keyed_overlap": (3 * MAX_NAME_LENGTH + 30, f"{frames} frames of up to 3 pairs of names")}
            for name in names:
                if name in stored:
                    continue
                if name == "notes":  # at most one sentence per body
                    stored[name] = data.read(name, max_size=4 * (MAX_NAME_LENGTH + 1000) * max(bodies, 1),
                                             need=f"a note per body of {bodies}")
                elif name in sizes:
                    per_frame, need = sizes[name]
                    stored[name] = data.read(name, max_size=8 * per_frame * frames, need=need)
                else:  # a per-time-step array
                    stored[name] = data.read(name, max_size=8 * steps, need=f"{steps} time steps")
        steps = len(stored["converged"])  # files from before the newer fields:
        stored.setdefault("fast_rotation", np.zeros(steps, dtype=bool))
        stored.setdefault("residual", np.full(steps, np.nan))
        stored.setdefault("scene_digest", "")
        stored.setdefault("step_pieces", np.ones(steps, dtype=np.int64))
        values = {f.name: stored[f.name] for f in fields(cls) if f.name in stored}  # rotation: see __post_init__
        values["frame_rate"] = float(values["frame_rate"])
        values["substeps"] = int(values["substeps"])
        values["scene_digest"] = str(values["scene_digest"])
        return cls(**values)


def _frames(frames: np.ndarray, frame_start: int) -> str:
    """"frame 3" or "frames 3, 4, 9" (the first ten, then how many more), from ``frame_start``."""
    named = [str(frame_start + int(frame)) for frame in frames[:10]]
    more = f" and {len(frames) - 10} more" if len(frames) > 10 else ""
    return f"frame{'s' if len(frames) > 1 else ''} {', '.join(named)}{more}"


def npz_file_name(path: Union[str, Path]) -> Path:
    """The file :meth:`Trajectory.save` writes for ``path``: NumPy's ``savez`` appends ``.npz``
    to a path without it."""
    path = str(path)
    return Path(path if path.endswith(".npz") else path + ".npz")
