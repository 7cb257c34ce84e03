"""Key maths: a trajectory's poses -> each keyed object's location / rotation / scale key values.

Pure computation, nothing written. Body poses are the solver's affine transforms projected to
the nearest rotation; the world matrix is [R P | p] with P the stretch (scale) baked into the
rest shape at export. Joint Empties follow their parent body (l): W(f) = T_l(f) T_l(0)^-1 W(0).
Parented objects are keyed in parent space; the object's rotation mode is honoured (quaternion
sign continuity, compatible Euler angles, axis-angle from the continuous quaternion) and its
delta transforms are taken out.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass, field

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion

from ..solver.trajectory import READOUT_ARRAYS
from .export import Export, rigid_transforms
from .names import READOUT_PROPERTIES
from .rig_rules import RigError


@dataclass
class ObjectKeys:
    """Keyframe values of one object, one row per frame.

    Attributes:
        ob: the object.
        location: (N, 3). rotation_path: ``rotation_quaternion``, ``rotation_euler`` or
        ``rotation_axis_angle``; rotation: (N, 4) or (N, 3) in that property's layout.
        scale: (N, 3). custom: custom property name -> (N,) values, or (N, k) for a k-vector
            property (one F-curve per array index).
    """

    ob: bpy.types.Object
    location: np.ndarray
    rotation_path: str
    rotation: np.ndarray
    scale: np.ndarray
    custom: dict = field(default_factory=dict)

def world_matrices(export: Export, trajectory) -> dict:
    """World matrices (N, 4, 4) of every object the bake keys, by ``name_full``."""
    index = {name: k for k, name in enumerate(str(n) for n in trajectory.body_names)}
    rigid = rigid_transforms(trajectory.transforms)
    worlds = {}
    for ob in export.keyed_objects():
        name = ob.name_full
        if ob in export.joints:
            body = index[ob.abd_joint.l_body.name_full]
            relative = rigid[:, body] @ np.linalg.inv(rigid[0, body])
            worlds[name] = relative @ export.joint_matrix[name]
        else:
            world = rigid[:, index[name]].copy()
            world[:, :3, :3] = world[:, :3, :3] @ export.stretch[name]
            worlds[name] = world
    return worlds


def local_matrices(export: Export, worlds: dict) -> dict:
    """Matrices (N, 4, 4) to key as ``matrix_basis``: the world matrices in parent space."""
    local = {}
    for ob in export.keyed_objects():
        name = ob.name_full
        if ob.parent is None:
            local[name] = worlds[name]
            continue
        if ob.parent.name_full in worlds:
            parent = worlds[ob.parent.name_full] @ np.array(ob.matrix_parent_inverse, dtype=np.float64)
        else:
            parent = export.parent_matrix[name]
        local[name] = np.linalg.solve(parent, worlds[name])
    return local


#: Largest |cosine| between two axes of a matrix to key as ``matrix_basis`` that counts as no
#: shear (float32 transforms give about 1e-7).
SHEAR_TOLERANCE = 1e-4


def shear(matrices: np.ndarray) -> np.ndarray:
    """Per matrix (N, 4, 4), the largest |cosine| between two of its 3x3 part's columns (N,): 0
    for rotation times scale, which location/rotation/scale keys hold; more where the matrix
    shears, which they cannot (``Matrix.decompose`` would silently drop it)."""
    axes = matrices[:, :3, :3]
    gram = np.einsum("nki,nkj->nij", axes, axes)
    length = np.sqrt(np.maximum(np.einsum("nii->ni", gram), np.finfo(float).tiny))
    cosine = np.abs(gram / (length[:, :, None] * length[:, None, :]))
    return np.max(cosine - np.eye(3) * cosine, axis=(1, 2))


def compatible_euler(quaternions: np.ndarray, mode: str, start) -> np.ndarray:
    """Euler angles (N, 3) (x, y, z, rad) in Blender's rotation ``mode`` ('XYZ', 'ZXY', ...) of unit
    quaternions (N, 4) [w, x, y, z], in double precision (SciPy's ``Rotation``): each frame's the
    equivalent triple closest to the previous frame's (the first frame's to ``start``), so keys do
    not jump by 360 degrees or flip between the two triples of a pose.

    mathutils' ``Quaternion.to_euler`` works in single precision, which near gimbal lock (a
    middle angle near +-90 degrees, as a URDF wheel's) put the keyed pose up to 1.5e-3 off.
    Blender's mode 'XYZ' rotates about X, then Y, then Z (global axes): SciPy's extrinsic 'xyz'.
    """
    from scipy.spatial.transform import Rotation

    order = mode.lower()
    axes = ["xyz".index(axis) for axis in order]
    with warnings.catch_warnings():
        # At gimbal lock SciPy sets the third angle to 0 and warns; the pose is still exact, and
        # the loop below picks the triple nearest the previous frame's anyway.
        warnings.filterwarnings("ignore", message="Gimbal lock detected", category=UserWarning)
        angles = Rotation.from_quat(np.asarray(quaternions, dtype=np.float64)[:, [1, 2, 3, 0]]).as_euler(order)
    # The other triple of each pose: R_k(c + pi) R_j(pi - b) R_i(a + pi) = R_k(c) R_j(b) R_i(a).
    alternate = np.stack([angles[:, 0] + np.pi, np.pi - angles[:, 1], angles[:, 2] + np.pi], axis=1)
    result = np.empty_like(angles)
    previous = np.asarray(start, dtype=np.float64)[axes]
    for frame in range(len(angles)):
        candidates = np.stack([angles[frame], alternate[frame]])
        candidates += 2.0 * np.pi * np.round((previous - candidates) / (2.0 * np.pi))
        previous = candidates[np.argmin(np.abs(candidates - previous).sum(axis=1))]
        result[frame, axes] = previous
    return result


def object_keys(ob: bpy.types.Object, matrices: np.ndarray) -> ObjectKeys:
    """Decompose ``matrix_basis`` values (N, 4, 4) into location / rotation / scale keys.

    ``matrix_basis`` includes the object's (static) delta transforms: Blender composes it as
    T(location + delta_location) R(delta_rotation) R(rotation) S(scale * delta_scale)
    (``BKE_object_to_mat4``), so the keys are what is left after taking the deltas out.
    The rotation follows ``ob.rotation_mode``: quaternions keep the sign of the previous frame's
    (q and -q are the same rotation, the smaller step is taken); Euler angles are made
    compatible with the previous frame's (no 360 degree jumps), starting from the object's
    current angles, in double precision (:func:`compatible_euler`); axis-angle comes from the
    continuous quaternion.
    """
    mode = ob.rotation_mode
    if mode == "QUATERNION":
        path = "rotation_quaternion"
        delta_rotation = ob.delta_rotation_quaternion.normalized()
    elif mode == "AXIS_ANGLE":  # Blender has no delta axis-angle rotation in its Python API
        path = "rotation_axis_angle"
        delta_rotation = Quaternion()
    else:
        path = "rotation_euler"
        delta_rotation = Euler(ob.delta_rotation_euler, mode).to_quaternion()
    undo_delta_rotation = delta_rotation.inverted()
    # Per frame into lists, converted to arrays once: a NumPy operation on a mathutils value per
    # frame cost more than the decomposition itself.
    locations, rotations, sizes = [], [], []
    previous_quaternion = None
    for values in matrices.tolist():
        loc, quaternion, size = Matrix(values).decompose()
        locations.append(loc[:])
        sizes.append(size[:])
        quaternion = undo_delta_rotation @ quaternion
        if previous_quaternion is not None and quaternion.dot(previous_quaternion) < 0.0:
            quaternion.negate()
        previous_quaternion = quaternion
        if mode == "AXIS_ANGLE":
            axis, angle = quaternion.to_axis_angle()
            rotations.append((angle, *axis))
        else:
            rotations.append(quaternion[:])
    rotations = np.array(rotations, dtype=np.float64).reshape(-1, 4)
    if path == "rotation_euler":
        rotations = compatible_euler(rotations, mode, ob.rotation_euler)
    return ObjectKeys(
        ob=ob,
        location=np.array(locations, dtype=np.float64).reshape(-1, 3) - np.array(ob.delta_location),
        rotation_path=path,
        rotation=rotations,
        scale=np.array(sizes, dtype=np.float64).reshape(-1, 3) / np.array(ob.delta_scale),
    )


def compute_keys(export: Export, trajectory) -> list:
    """Every :class:`ObjectKeys` of a bake, computed without writing anything.

    Raises:
        RigError: an object's keys would need shear (it moves relative to an unevenly scaled parent).
    """
    worlds = world_matrices(export, trajectory)
    local = local_matrices(export, worlds)
    joint_index = {str(name): k for k, name in enumerate(trajectory.joint_names)}
    joint_types = {joint.name: joint.type for joint in export.scene.joints}
    breakable = {joint.name for joint in export.scene.joints
                 if joint.generic is not None and joint.generic.break_force is not None}
    keys = []
    for ob in export.keyed_objects():
        sheared = np.flatnonzero(shear(local[ob.name_full]) > SHEAR_TOLERANCE) if ob.parent is not None else ()
        if len(sheared):
            raise RigError(
                f"Object '{ob.name}': its parent '{ob.parent.name}' is scaled unevenly, so from frame "
                f"{export.frame_start + int(sheared[0])} on its simulated motion in the parent's space needs "
                "shear, which location, rotation and scale keys cannot hold: apply the parent's scale "
                "(Ctrl+A > Scale) or clear the parent (Alt+P > Clear and Keep Transformation); nothing was changed"
            )
        object_key = object_keys(ob, local[ob.name_full])
        if ob in export.joints:
            column = joint_index[ob.name_full]
            joint_type = joint_types[ob.name_full]
            if joint_type == "generic":  # a breakable one: 1 from the frame it broke in (never where it held: NaN)
                if ob.name_full in breakable:
                    frames = np.arange(len(trajectory.transforms))
                    object_key.custom[READOUT_PROPERTIES[joint_type]] = (
                        frames >= trajectory.broken_frame[column]).astype(np.float64)
            elif joint_type in READOUT_PROPERTIES:  # fixed joints have no readout
                readout = getattr(trajectory, READOUT_ARRAYS[joint_type])
                object_key.custom[READOUT_PROPERTIES[joint_type]] = np.asarray(readout[:, column], dtype=np.float64)
        keys.append(object_key)
    return keys
