"""Trajectory: what a simulation returns, and its ``.npz`` file form."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .array_files import ArrayFile, save_npz
from .scene_validation import MAX_TIME_STEPS, MAX_TRAJECTORY_VALUES

#: The most bytes :meth:`Trajectory.load` reads from a file: the largest trajectory a scene
#: within the solver's size limits gives, its values as float64 and up to four 8-byte records
#: per time step, the names included.
MAX_FILE_BYTES = 8 * (MAX_TRAJECTORY_VALUES + 4 * MAX_TIME_STEPS)
#: Fields that files written before they existed lack (:meth:`Trajectory.load` fills them in).
OPTIONAL_FIELDS = ("fast_rotation", "residual", "scene_digest", "rotation", "contact_distance", "contact_count")


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

    def __post_init__(self) -> None:
        frames = len(self.transforms)
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
    def load(cls, path: Union[str, Path]) -> "Trajectory":
        """Read a trajectory written by :meth:`save`: its fields only, each checked before it is
        read (:class:`solver.array_files.ArrayFile`, at most :data:`MAX_FILE_BYTES` in all).

        Raises:
            OSError: the file cannot be opened. KeyError: a field is missing.
            solver.array_files.ArrayFileError: not a regular file or not an ``.npz`` archive, a
                damaged field, or one beyond the limits (a ValueError; the message names the file).
        """
        with ArrayFile(path, MAX_FILE_BYTES) as data:
            stored = {f.name: data[f.name] for f in fields(cls) if f.name in data or f.name not in OPTIONAL_FIELDS}
        steps = len(stored["converged"])  # files from before the newer fields:
        stored.setdefault("fast_rotation", np.zeros(steps, dtype=bool))
        stored.setdefault("residual", np.full(steps, np.nan))
        stored.setdefault("scene_digest", "")
        values = {f.name: stored[f.name] for f in fields(cls) if f.name in stored}  # rotation: see __post_init__
        values["frame_rate"] = float(values["frame_rate"])
        values["substeps"] = int(values["substeps"])
        values["scene_digest"] = str(values["scene_digest"])
        return cls(**values)


def npz_file_name(path: Union[str, Path]) -> Path:
    """The file :meth:`Trajectory.save` writes for ``path``: NumPy's ``savez`` appends ``.npz``
    to a path without it."""
    path = str(path)
    return Path(path if path.endswith(".npz") else path + ".npz")
