"""Sampling the rig across the bake's frames: what the solver takes per frame, read from Blender.

Per-frame values (animated bodies' poses, soft-transform targets and strengths, the drive and the
limit) are sampled once per frame: ``scene.frame_set``, then read from the objects, so F-curves,
drivers, parents and constraints are all honoured (:class:`Sampler`); the scene is put back at
the frame it was on, even on error (:func:`sample_frames`).
"""

from __future__ import annotations

import bpy
import numpy as np


#: The per-frame values of a joint: properties of its ``abd_joint.limit`` and ``abd_joint.drive``,
#: recorded under ``"<group>.<property>"`` (:attr:`Sampler.joint_values`).
JOINT_SERIES = tuple(f"{group}.{name}" for group, names in (
    ("limit", ("use", "lower", "upper", "lower_angle", "upper_angle", "strength")),
    ("drive", ("is_constrained", "is_passive", "aim_distance", "aim_angle", "aim_velocity", "strength_ratio")),
) for name in names)
#: The per-frame values of a body: properties of its ``abd_body.soft_transform``, by name.
SOFT_SERIES = ("is_constrained", "strength_ratio_p", "strength_ratio_a")


def series(names: tuple, frames: int) -> np.ndarray:
    """A record of ``frames`` float64 values per name: (frames,) with one field per name."""
    return np.zeros(frames, dtype=[(name, np.float64) for name in names])


def matrix_array(matrix) -> np.ndarray:
    """A ``mathutils.Matrix`` as a float64 (4, 4) array."""
    return np.array(matrix, dtype=np.float64)


class Sampler:
    """Per-frame records of everything the solver takes per frame, per object ``name_full``.

    Attributes (F: the number of frames):
        body_matrix: per body, its (F, 4, 4) world matrices.
        soft_target: per body, the (F, 4, 4) world matrices its soft transform aims at (its own
            for an ANIMATION target; NaN where an OBJECT target is not set).
        soft_values: per body, its soft transform's values by name (:data:`SOFT_SERIES`): a
            record of F frames, ``soft_values[name]["strength_ratio_p"]`` (F,).
        joint_values: per joint, its limit's and drive's values by name (:data:`JOINT_SERIES`):
            ``joint_values[name]["limit.lower"]`` (F,), in the properties' units (m, rad, m/s or
            rad/s, J), flags as 0.0 / 1.0.
        joint_matrix0: per joint, its (4, 4) world matrix at the first frame.
        parent_matrix: per object of ``parented``, its (F, 4, 4) parent matrix (world @ basis^-1).
    """

    def __init__(self, frames: int, bodies: list, joints: list, parented: list):
        self.body_matrix = {ob.name_full: np.empty((frames, 4, 4)) for ob in bodies}
        self.soft_target = {ob.name_full: np.full((frames, 4, 4), np.nan) for ob in bodies}
        self.soft_values = {ob.name_full: series(SOFT_SERIES, frames) for ob in bodies}
        self.joint_values = {ob.name_full: series(JOINT_SERIES, frames) for ob in joints}
        self.joint_matrix0 = {}
        self.parent_matrix = {ob.name_full: np.empty((frames, 4, 4)) for ob in parented}

    def sample(self, index: int, bodies: list, joints: list, parented: list) -> None:
        """Record frame ``index`` (the scene is already at that frame).

        Reads the original objects: the active depsgraph writes animated and driven values, and
        world matrices, back to them on ``frame_set``, while an evaluated copy can miss
        property edits made from Python since the last update.
        """
        for ob in bodies:
            name = ob.name_full
            self.body_matrix[name][index] = matrix_array(ob.matrix_world)
            soft = ob.abd_body.soft_transform
            if soft.target == "ANIMATION":
                self.soft_target[name][index] = self.body_matrix[name][index]
            elif soft.target_object is not None:
                self.soft_target[name][index] = matrix_array(soft.target_object.matrix_world)
            self.soft_values[name][index] = tuple(float(getattr(soft, key)) for key in SOFT_SERIES)
        for ob in joints:
            if index == 0:
                self.joint_matrix0[ob.name_full] = matrix_array(ob.matrix_world)
            joint = ob.abd_joint
            self.joint_values[ob.name_full][index] = tuple(
                float(getattr(getattr(joint, group), name)) for group, name in
                (key.split(".") for key in JOINT_SERIES))
        for ob in parented:
            # Whatever Blender puts in front of matrix_basis, for every parent type: an Object
            # parent's world @ matrix_parent_inverse, but also a curve parent's path position
            # (Follow Path), a bone's or vertices' matrix. (pinv: a zero scale is refused later.)
            self.parent_matrix[ob.name_full][index] = (
                matrix_array(ob.matrix_world) @ np.linalg.pinv(matrix_array(ob.matrix_basis)))


def sample_frames(scene: bpy.types.Scene, frames, callback) -> None:
    """Call ``callback(index, frame)`` with the scene set to each frame; restore the frame after.

    The scene's current frame (and subframe) is put back even when ``callback`` raises.
    """
    current, subframe = scene.frame_current, scene.frame_subframe
    try:
        for index, frame in enumerate(frames):
            scene.frame_set(frame)
            callback(index, frame)
    finally:
        scene.frame_set(current, subframe=subframe)
