"""Trajectory -> keyframes (no UI), and the bake pipeline the operator and the batch share.

:func:`bake` = :meth:`BakeJob.prepare` (export) -> :meth:`BakeJob.simulate` -> :meth:`BakeJob.apply`
(write keyframes). The modal Bake operator runs the same three phases, the middle one in a
worker thread; the batch entry point calls :func:`bake`. There is one code path. A trajectory
computed elsewhere (``python -m solver run`` on the exported scene file, on a render farm) takes
the place of the middle phase through :meth:`BakeJob.load_trajectory`, which first checks that it
was computed for this rig.

Writing keyframes:

- Each keyed object (dynamic bodies and joint Empties) gets a new Action, written in bulk with
  ``keyframe_points.add`` + ``foreach_set`` (LINEAR keys on every frame). F-curves of the
  object's previous action that the bake does not key (an animated ``aim_distance`` on a joint,
  a soft-transform toggle, ...) are copied into it, so they keep playing; the user's edits to
  them there are carried back before a re-bake or Free Bake (:func:`keep_animation_edits`).
- Body poses are the solver's affine transforms projected to the nearest rotation; the world
  matrix is [R P | p] with P the stretch (scale) baked into the rest shape at export.
- Joint Empties follow their parent body (l): W(f) = T_l(f) T_l(0)^-1 W(0).
- Parented objects are keyed in parent space; the object's rotation mode is honoured
  (quaternion sign continuity, compatible Euler angles, axis-angle from the continuous
  quaternion).
- Joint readouts are animated custom properties ``abd_distance`` (prismatic, m),
  ``abd_angle`` (revolute, rad) and ``abd_rotation`` (ball, a rotation vector in rad: three
  F-curves, array index 0..2) on the joint Empty.

Atomicity: nothing is written before the simulation has finished and every key has been
computed; if writing fails part way, every object is put back as it was. The state needed by
Free Bake (the action before the bake, its slot, the static transform) is kept in
``Object.abd_bake``; :func:`free_bake` puts it back (with those edits) and deletes the baked
action. A re-bake frees the bake of the objects of the view layer it bakes that it no longer
keys (a body made Fixed, a joint disabled); objects outside that view layer (another rig's
collection excluded, or only in another view layer) keep theirs.
"""

from __future__ import annotations

import contextlib
import uuid
import zipfile
from dataclasses import dataclass, field
from typing import Callable, Optional

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion

from .export import TRANSFORM_PROPERTIES, Export, RigError, export_scene, refuse_tweak_mode, rigid_transforms
from .names import READOUT_ARRAYS, READOUT_PROPERTIES


class TrajectoryFileError(ValueError):
    """A trajectory file that cannot be read, or was not computed for the rig it is applied to;
    the message says which and why."""


#: How far (m, and rad of rotation) a body's first pose in a trajectory file may be from the
#: rig's for the file to count as computed for this rig (the poses round-trip exactly through the
#: scene file; the tolerance only absorbs float32 storage in Blender).
START_POSE_TOLERANCE = 1e-5

#: F-curve data paths the bake owns (never copied from the previous action).
KEYED_PREFIXES = ("location", "rotation_", "scale", "delta_") + tuple(
    f'["{key}"]' for key in READOUT_PROPERTIES.values())

#: Interpolation enum value of LINEAR for ``keyframe_points.foreach_set("interpolation", ...)``.
INTERPOLATION_LINEAR = 1

#: Keyframe point attributes copied from a previous action's F-curves: (name, dtype, values per key).
KEYFRAME_ATTRIBUTES = (
    ("co", np.float32, 2), ("handle_left", np.float32, 2), ("handle_right", np.float32, 2),
    ("interpolation", np.int32, 1), ("handle_left_type", np.int32, 1), ("handle_right_type", np.int32, 1),
    ("easing", np.int32, 1), ("type", np.int32, 1), ("amplitude", np.float32, 1), ("back", np.float32, 1),
    ("period", np.float32, 1),
)


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


# --------------------------------------------------------------------------------------------
# Trajectory -> matrices -> key values (pure computation, nothing written)
# --------------------------------------------------------------------------------------------


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
            if joint_type in READOUT_PROPERTIES:  # fixed joints have no readout
                readout = getattr(trajectory, READOUT_ARRAYS[joint_type])
                object_key.custom[READOUT_PROPERTIES[joint_type]] = np.asarray(readout[:, column], dtype=np.float64)
        keys.append(object_key)
    return keys


# --------------------------------------------------------------------------------------------
# Actions: version-independent helpers (4.2 .. 5.x)
# --------------------------------------------------------------------------------------------


def action_fcurves(action, slot_identifier: str = "") -> list:
    """The F-curves of ``action`` that animate the slot ``slot_identifier`` (4.4+), or all (4.2/4.3).

    Uses the channelbag API (``bpy_extras.anim_utils.action_get_channelbag_for_slot``) that works
    on 4.4, 4.5 and 5.x, where ``Action.fcurves`` is gone.
    """
    if action is None:
        return []
    if not hasattr(action, "slots"):
        return list(action.fcurves)  # Blender 4.2 / 4.3
    from bpy_extras import anim_utils

    slot = next((slot for slot in action.slots if slot.identifier == slot_identifier), None)
    channelbag = anim_utils.action_get_channelbag_for_slot(action, slot) if slot is not None else None
    return list(channelbag.fcurves) if channelbag is not None else []


def ensure_fcurve(action, ob: bpy.types.Object, data_path: str, index: int):
    """An F-curve of ``action`` for ``ob``'s ``data_path[index]`` (creating slot/channelbag on 4.4+)."""
    if hasattr(action, "fcurve_ensure_for_datablock"):
        return action.fcurve_ensure_for_datablock(ob, data_path, index=index)
    return action.fcurves.new(data_path, index=index)  # Blender 4.2 / 4.3


def set_linear_keys(fcurve, frames: np.ndarray, values: np.ndarray) -> None:
    """Write LINEAR keys (frames[i], values[i]) into an empty F-curve in bulk."""
    count = len(frames)
    co = np.empty(2 * count, dtype=np.float32)
    co[0::2], co[1::2] = frames, values
    points = fcurve.keyframe_points
    points.add(count)
    points.foreach_set("co", co)
    points.foreach_set("interpolation", np.full(count, INTERPOLATION_LINEAR, dtype=np.int32))
    fcurve.update()


def fcurve_keys(fcurve) -> list:
    """The keyframe point attributes of ``fcurve`` (:data:`KEYFRAME_ATTRIBUTES`), one flat array each."""
    count = len(fcurve.keyframe_points)
    values = []
    for name, dtype, width in KEYFRAME_ATTRIBUTES:
        buffer = np.empty(count * width, dtype=dtype)
        fcurve.keyframe_points.foreach_get(name, buffer)
        values.append(buffer)
    return values


def fcurve_samples(fcurve) -> np.ndarray:
    """The sampled points of ``fcurve`` (Convert to Samples), flat (frame, value, frame, value, ...)."""
    samples = np.empty(2 * len(fcurve.sampled_points), dtype=np.float32)
    fcurve.sampled_points.foreach_get("co", samples)
    return samples


#: F-curve modifier properties that are interface state, not settings (which one is active in the
#: Graph Editor, whether its panel is open): neither copied nor compared.
MODIFIER_UI_STATE = ("active", "show_expanded")


def modifier_settings(modifier) -> dict:
    """The settings of an F-curve modifier (Cycles, Noise, Generator, Envelope, ...): its writable
    RNA properties by name (arrays as tuples) but :data:`MODIFIER_UI_STATE`, and an Envelope's control points as
    ``control_points`` ((frame, min, max), ...)."""
    values = {}
    for prop in modifier.bl_rna.properties:
        if prop.is_readonly or prop.identifier in MODIFIER_UI_STATE:
            continue
        value = getattr(modifier, prop.identifier)
        values[prop.identifier] = tuple(value) if hasattr(value, "__len__") and not isinstance(value, str) else value
    points = getattr(modifier, "control_points", None)
    if points is not None:
        values["control_points"] = tuple((point.frame, point.min, point.max) for point in points)
    return values


def same_fcurve(first, second) -> bool:
    """Whether two F-curves hold the same keys, handles, interpolation, sampled points, auto handle
    smoothing, extrapolation, mute and modifiers: everything that sets the values they play."""
    return (first.extrapolation == second.extrapolation and first.mute == second.mute
            and first.auto_smoothing == second.auto_smoothing
            and len(first.keyframe_points) == len(second.keyframe_points)
            and all(np.array_equal(a, b) for a, b in zip(fcurve_keys(first), fcurve_keys(second)))
            and np.array_equal(fcurve_samples(first), fcurve_samples(second))
            and [(m.type, modifier_settings(m)) for m in first.modifiers]
            == [(m.type, modifier_settings(m)) for m in second.modifiers])


def copy_fcurve(source, target) -> None:
    """Copy F-curve ``source`` (keys, handles, interpolation, sampled points, auto handle smoothing,
    extrapolation, mute, modifiers) into the empty F-curve ``target``, exactly: the keys in their
    order and their handles as they are, also where a script wrote them without
    ``fcurve.update()`` (out of frame order, handles never computed), so that the copy plays what
    the source plays and compares equal to it (:func:`same_fcurve`). Sampled points
    (Convert to Samples: one per frame) cannot be added from Python; they are made as Blender
    makes them, from a LINEAR key on each, by ``convert_to_samples`` over their frames (its end
    is exclusive), before the modifiers are added (it would bake them in).
    """
    # Set while the curve is empty: setting them updates the curve, which would sort its keys and
    # compute their handles.
    target.auto_smoothing = source.auto_smoothing
    target.extrapolation = source.extrapolation
    target.mute = source.mute
    target.keyframe_points.add(len(source.keyframe_points))
    for (name, _, _), values in zip(KEYFRAME_ATTRIBUTES, fcurve_keys(source)):
        target.keyframe_points.foreach_set(name, values)
    samples = fcurve_samples(source)
    if len(samples):
        set_linear_keys(target, samples[0::2], samples[1::2])
        target.convert_to_samples(int(samples[0]), int(samples[-2]) + 1)
    for modifier in source.modifiers:
        copy = target.modifiers.new(modifier.type)
        settings = modifier_settings(modifier)
        points = settings.pop("control_points", ())
        if "poly_order" in settings:  # sizes the Generator's coefficients
            copy.poly_order = settings.pop("poly_order")
        for name in ("frame_start", "frame_end"):  # the end is kept at or after the start
            settings[name] = settings.pop(name)
        for name, value in settings.items():
            setattr(copy, name, value)
        for frame, low, high in points:
            point = copy.control_points.add(frame)
            point.min, point.max = low, high


def fcurve_owner(action, slot_identifier: str, ob: bpy.types.Object) -> tuple:
    """(owner, slot identifier): what holds ``action``'s F-curves for ``ob`` (its ``fcurves`` and
    channel ``groups``), the channelbag of the slot ``slot_identifier`` (Blender 4.4+: the slot,
    named after ``ob``, and its channelbag created where missing), or the Action itself and ''
    (4.2/4.3). Unlike :func:`ensure_fcurve` it does not need ``action`` to be assigned to ``ob``."""
    if not hasattr(action, "slots"):
        return action, ""  # Blender 4.2 / 4.3
    from bpy_extras import anim_utils

    slot = next((slot for slot in action.slots if slot.identifier == slot_identifier), None)
    if slot is None:
        slot = action.slots.new(id_type="OBJECT", name=ob.name)
    channelbag = anim_utils.action_get_channelbag_for_slot(action, slot)
    if channelbag is None:
        layer = action.layers[0] if len(action.layers) else action.layers.new("Layer")
        strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type="KEYFRAME")
        channelbag = strip.channelbag(slot, ensure=True)
    return channelbag, slot.identifier


def add_fcurve_copy(owner, source):
    """A copy (:func:`copy_fcurve`) of F-curve ``source`` added to ``owner`` (a channelbag, or an
    Action before Blender 4.4: :func:`fcurve_owner`), in a channel group named as ``source``'s
    (made where missing)."""
    target = owner.fcurves.new(source.data_path, index=source.array_index)
    if source.group is not None:
        target.group = owner.groups.get(source.group.name) or owner.groups.new(source.group.name)
    copy_fcurve(source, target)
    return target


def user_fcurves(action, slot_identifier: str = "") -> dict:
    """(data path, index) -> F-curve, for the F-curves of ``action``'s slot ``slot_identifier``
    that a bake does not key (an animated ``aim_distance``, a soft-transform toggle, ...)."""
    return {(fc.data_path, fc.array_index): fc for fc in action_fcurves(action, slot_identifier)
            if not fc.data_path.startswith(KEYED_PREFIXES)}


def assign_action(ad, action, slot_identifier: str = "") -> None:
    """Assign ``action`` (or None) to ``ad``, and its slot ``slot_identifier`` when there is one."""
    ad.action = action
    if action is not None and slot_identifier and hasattr(ad, "action_slot"):
        for slot in action.slots:
            if slot.identifier == slot_identifier:
                if ad.action_slot != slot:
                    ad.action_slot = slot
                break


def slot_identifier(ad) -> str:
    """The identifier of the AnimData's assigned slot ('' if none or before Blender 4.4)."""
    slot = getattr(ad, "action_slot", None) if ad is not None else None
    return slot.identifier if slot is not None else ""


# --------------------------------------------------------------------------------------------
# Object state: snapshot / restore (rollback and Free Bake)
# --------------------------------------------------------------------------------------------


class _Snapshot:
    """Everything :meth:`_write_object` may change on one object, to put back on failure."""

    def __init__(self, ob: bpy.types.Object):
        self.ob = ob
        ad = ob.animation_data
        self.had_animation_data = ad is not None
        self.action = ad.action if ad else None
        self.slot = slot_identifier(ad)
        self.blend = (ad.action_influence, ad.action_blend_type, ad.action_extrapolation) if ad else None
        self.transform = {name: tuple(getattr(ob, name)) for name in TRANSFORM_PROPERTIES}
        self.custom = {key: _copy_custom(ob[key]) for key in READOUT_PROPERTIES.values() if key in ob.keys()}
        state = ob.abd_bake
        self.state = {prop.identifier: _copy_value(getattr(state, prop.identifier))
                      for prop in state.bl_rna.properties if prop.identifier != "rna_type"}

    def restore(self) -> None:
        """Put the object back as it was when the snapshot was taken."""
        ob = self.ob
        for key in READOUT_PROPERTIES.values():
            if key in ob.keys() and key not in self.custom:
                del ob[key]
        for key, value in self.custom.items():
            ob[key] = value
        if self.had_animation_data:
            ad = ob.animation_data_create()
            assign_action(ad, self.action, self.slot)
            ad.action_influence, ad.action_blend_type, ad.action_extrapolation = self.blend
        elif ob.animation_data is not None:
            ob.animation_data_clear()
        for name, value in self.transform.items():
            setattr(ob, name, value)
        for name, value in self.state.items():
            setattr(ob.abd_bake, name, value)


def _copy_custom(value):
    """A plain copy of a custom property value (an array property to a list, which
    ``ob[key] = ...`` takes back)."""
    return value.to_list() if hasattr(value, "to_list") else value


def _copy_value(value):
    """A plain copy of an RNA property value (vectors to tuples; IDs stay references)."""
    if hasattr(value, "__len__") and not isinstance(value, str) and not isinstance(value, bpy.types.ID):
        return tuple(value)
    return value


def _record_previous(ob: bpy.types.Object) -> None:
    """Store in ``ob.abd_bake`` what a first bake replaces (not overwritten by a re-bake)."""
    state = ob.abd_bake
    ad = ob.animation_data
    state.had_animation_data = ad is not None
    state.previous_action = ad.action if ad else None
    state.previous_slot = slot_identifier(ad)
    state.bake_token, state.baked_name = uuid.uuid4().hex, ob.name
    if ad is not None:
        state.previous_influence = ad.action_influence
        state.previous_blend_type = ad.action_blend_type
        state.previous_extrapolation = ad.action_extrapolation
    for name in TRANSFORM_PROPERTIES:
        setattr(state, "previous_" + name, getattr(ob, name))


def _baked_slot(action) -> str:
    """The identifier of a baked action's slot (:func:`_write_object` makes one, for its object);
    '' before Blender 4.4."""
    slots = getattr(action, "slots", None)
    return slots[0].identifier if slots else ""


def keep_animation_edits(ob: bpy.types.Object) -> None:
    """Carry the edits made since the bake to a baked object's F-curves that the bake does not
    key (a re-keyed ``aim_distance``, a soft-transform toggle added or deleted) into the action
    it had before the bake, so that a re-bake exports them and Free Bake keeps them.

    A bake copies those F-curves into its action, where the user then sees and edits them; the
    action before the bake is what a re-bake exports and what Free Bake puts back. Where they
    differ, the earlier action's F-curves are replaced by the baked action's (a linked action is
    first made a local copy; an object without an earlier action gets a new one). Nothing
    changes where they are the same or ``ob`` is not baked.
    """
    state = ob.abd_bake
    if not state.is_baked or state.action is None:
        return
    edited = user_fcurves(state.action, _baked_slot(state.action))
    previous = state.previous_action
    recorded = user_fcurves(previous, state.previous_slot) if previous is not None else {}
    if edited.keys() == recorded.keys() and all(same_fcurve(fc, recorded[key]) for key, fc in edited.items()):
        return
    if previous is None:
        previous = bpy.data.actions.new(f"{ob.name}Action")
    elif previous.library is not None:  # not editable here
        previous = previous.copy()
    owner, state.previous_slot = fcurve_owner(previous, state.previous_slot, ob)
    state.previous_action = previous
    missing = dict(edited)
    for key, fcurve in user_fcurves(previous, state.previous_slot).items():
        if key in edited and same_fcurve(edited[key], fcurve):
            del missing[key]
        else:
            owner.fcurves.remove(fcurve)
    for fcurve in missing.values():
        add_fcurve_copy(owner, fcurve)


def _apply_previous(ob: bpy.types.Object) -> None:
    """Give ``ob`` the action (slot, blending) and static transform recorded before its first bake."""
    state = ob.abd_bake
    if ob.animation_data is not None or state.had_animation_data:
        ad = ob.animation_data_create()
        assign_action(ad, state.previous_action, state.previous_slot)
        ad.action_influence = state.previous_influence
        ad.action_blend_type = state.previous_blend_type
        ad.action_extrapolation = state.previous_extrapolation
    for name in TRANSFORM_PROPERTIES:
        setattr(ob, name, getattr(state, "previous_" + name))


def baked_objects(scene: bpy.types.Scene, view_layer: Optional[bpy.types.ViewLayer] = None) -> list:
    """The objects of ``scene`` that carry an ABD bake; only those of ``view_layer`` where given
    (not an excluded collection's, nor those only in another view layer)."""
    objects = scene.objects if view_layer is None else view_layer.objects
    return [ob for ob in objects if ob.abd_bake.is_baked]


def unshare_previous_actions() -> None:
    """Give each baked object of the file that was duplicated after its bake its own copy of the
    action it is to get back (the action before the bake, and that action's slot).

    Duplicating a baked object (Shift+D) copies its ``abd_bake`` state, the pointer to the action
    from before the bake included: the copy would get the original's action back from Free Bake
    and carry its edits into it. Each object draws a token at its first bake (``bake_token``),
    which a copy takes along: objects with the same action and token are an original and its
    copies, while objects that shared an action before their bake (different tokens) keep sharing
    it. Of an original and its copies, the one with the name recorded at the bake keeps the
    action, or where none has it (renamed since) the earliest-made one (lowest ``session_uid``:
    creation order in a session, name order in a file just opened); the others then restore, and
    carry their edits into, their copies, under tokens of their own. Run before anything
    restores or edits those actions.
    """
    copies = {}
    for ob in bpy.data.objects:
        state = ob.abd_bake
        # Objects baked before tokens were drawn cannot be told from objects that shared an
        # action before their bake: they are left as they are.
        if state.is_baked and state.previous_action is not None and state.bake_token:
            copies.setdefault((state.previous_action, state.previous_slot, state.bake_token), []).append(ob)
    for objects in copies.values():
        named = [ob for ob in objects if ob.name == ob.abd_bake.baked_name]
        original = named[0] if named else min(objects, key=lambda ob: ob.session_uid)
        for ob in objects:
            if ob is not original:
                state = ob.abd_bake
                state.previous_action = state.previous_action.copy()
                state.bake_token, state.baked_name = uuid.uuid4().hex, ob.name


@contextlib.contextmanager
def original_animation(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer):
    """Temporarily give every baked object of ``view_layer`` (of ``scene``) its pre-bake
    animation and transform.

    So a re-bake exports the user's animation (soft-transform targets, animated drives) and the
    pre-bake pose, not the previous bake. Baked objects outside the view layer are left as they
    are: :func:`write_bake` keeps their bake, so that is what they play. Edits made since the
    bake to the F-curves the bake does not key are carried into that animation first
    (:func:`keep_animation_edits`, which stays, as do the copies of that animation
    :func:`unshare_previous_actions` gives objects duplicated after their bake). Everything else
    is put back on exit, and the scene is re-evaluated at its current frame.

    Raises:
        RigError: a baked object is in NLA tweak mode (nothing is changed).
    """
    baked = baked_objects(scene, view_layer)
    refuse_tweak_mode(baked)
    unshare_previous_actions()
    swapped = []
    try:
        for ob in baked:
            keep_animation_edits(ob)
            swapped.append(_Snapshot(ob))
            _apply_previous(ob)
        yield
    finally:
        for snapshot in reversed(swapped):
            snapshot.restore()
        if swapped:
            scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)


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
        _record_previous(ob)
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
    owner, _ = fcurve_owner(action, _baked_slot(action), ob)
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
            snapshots.append(_Snapshot(object_keys_.ob))
            _write_object(object_keys_, frames, created, obsolete)
        for ob in stale:
            snapshots.append(_Snapshot(ob))
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
    _apply_previous(ob)
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


class BakeJob:
    """One bake of a scene, in three phases: :meth:`prepare`, :meth:`simulate`, :meth:`apply`.

    ``prepare`` and ``apply`` touch Blender data and must run on the main thread; ``simulate``
    only runs the solver on the exported data (safe in a worker thread). Until ``apply`` the
    scene is unchanged.

    Attributes:
        scene: the Blender scene. export: the :class:`Export` (after prepare).
        view_layer: the view layer exported and baked, the depsgraph's (after prepare).
        trajectory: the solver's :class:`~solver.trajectory.Trajectory` (after simulate).
        freed: the objects of the view layer whose earlier bake :meth:`apply` freed as stale
            (no longer keyed).
    """

    def __init__(self, scene: bpy.types.Scene, depsgraph=None):
        self.scene = scene
        self.depsgraph = depsgraph
        self.view_layer: Optional[bpy.types.ViewLayer] = None
        self.export: Optional[Export] = None
        self.trajectory = None
        self.freed: list = []

    @property
    def frame_count(self) -> int:
        """Frames to simulate (after prepare)."""
        return self.export.frame_count if self.export else 0

    def prepare(self) -> Export:
        """Export the scene's view layer (the depsgraph's; default the context's), with the
        pre-bake animation of its already baked objects."""
        if self.depsgraph is None:
            self.depsgraph = bpy.context.evaluated_depsgraph_get()
        self.view_layer = self.depsgraph.view_layer
        with original_animation(self.scene, self.view_layer):
            self.export = export_scene(self.scene, self.depsgraph)
        return self.export

    def simulate(self, progress: Optional[Callable[[int, int], Optional[bool]]] = None, run=None):
        """Run the solver; ``progress(frame_done, frame_count)`` may return False to cancel.
        ``run``: a :class:`solver.simulation.Simulation` of this export's scene to go on with
        (the playback preview's), whose frames done are not simulated again; default a new one."""
        from ..solver.simulation import Simulation

        self.trajectory = (run or Simulation(self.export.scene)).run(progress)
        return self.trajectory

    def load_trajectory(self, path) -> object:
        """Instead of :meth:`simulate`: read a solver result (``.npz`` of ``python -m solver run``
        or ``Trajectory.save``) computed for this export's scene file.

        Raises:
            TrajectoryFileError: when the file cannot be read as a trajectory, an array of it has
                the wrong shape or a NaN or infinite value the bake would use
                (:func:`trajectory_damage`), or its bodies, joints, frame count or frame rate are
                not this export's, or a body's first pose is not where the rig has it (nothing is
                changed).
        """
        from ..solver.trajectory import Trajectory

        try:
            trajectory = Trajectory.load(path)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as error:  # missing, not an .npz, a field missing
            raise TrajectoryFileError(f"{path}: not a readable trajectory file ({type(error).__name__}: {error})") from None
        problem = trajectory_damage(self.export, trajectory)
        if problem:
            raise TrajectoryFileError(f"{path} is damaged: {problem}")
        problem = trajectory_mismatch(self.export, trajectory)
        if problem:
            raise TrajectoryFileError(f"{path} was not computed for this rig: {problem}")
        self.trajectory = trajectory
        return trajectory

    def apply(self) -> list:
        """Compute every key, then write them all (atomically); returns the keyed objects. The
        objects whose earlier bake was freed as stale are in :attr:`freed`."""
        keys = compute_keys(self.export, self.trajectory)
        self.freed = write_bake(self.scene, self.view_layer, keys, self.export.frame_start)
        return [k.ob for k in keys]


#: A trajectory's per-time-step arrays (frame count x substeps long).
STEP_ARRAYS = ("newton_iterations", "line_search_iterations", "converged", "fast_rotation", "residual")


def _shape_problem(trajectory, name: str, shape: tuple, layout: str) -> Optional[str]:
    """Why ``trajectory``'s array ``name`` is not numbers of ``shape`` (described by ``layout``), or None."""
    array = np.asarray(getattr(trajectory, name))
    if array.shape == shape and array.dtype.kind in "biuf":
        return None
    return f"its '{name}' array is {array.dtype} of shape {array.shape}, not numbers of shape {shape} ({layout})"


def trajectory_damage(export: Export, trajectory) -> Optional[str]:
    """What makes ``trajectory``'s arrays unfit to bake, naming the array, or None: ``body_names``
    or ``joint_names`` not a list, ``transforms`` not (frames, bodies, 4, 4) for its own body
    names, ``distance`` or ``angle`` not (frames, joints), ``rotation`` not (frames, joints, 3), a
    per-step array (:data:`STEP_ARRAYS`) not frame count x substeps long, or a NaN or infinite
    value where the bake reads one: a transform, or the readout it keys of each of the rig's
    joints (``distance`` of a prismatic joint, ``angle`` of a revolute one, ``rotation`` of a
    spherical one: :data:`~abd_addon.names.READOUT_ARRAYS`; the others are NaN by design, and a
    file written before ``rotation`` existed has it all NaN). Checked before the file is
    compared with the rig (:func:`trajectory_mismatch`), which reads its first poses.
    """
    for name in ("body_names", "joint_names"):
        if np.ndim(getattr(trajectory, name)) != 1:
            return f"its '{name}' array is not a list of names"
    bodies, joints = len(trajectory.body_names), len(trajectory.joint_names)
    frames = len(trajectory.transforms) if np.ndim(trajectory.transforms) else 0
    frame_count, substeps = max(frames - 1, 0), trajectory.substeps
    problem = _shape_problem(trajectory, "transforms", (frames, bodies, 4, 4), "frames, bodies, 4, 4")
    for name in ("distance", "angle"):
        problem = problem or _shape_problem(trajectory, name, (frames, joints), "frames, joints")
    problem = problem or _shape_problem(trajectory, "rotation", (frames, joints, 3), "frames, joints, 3")
    for name in STEP_ARRAYS:
        problem = problem or _shape_problem(trajectory, name, (frame_count * substeps,),
                                            f"{frame_count} frames x {substeps} substeps")
    if problem:
        return problem
    not_finite = ~np.isfinite(trajectory.transforms).all(axis=(2, 3))
    if not_finite.any():
        frame, body = np.argwhere(not_finite)[0]
        return (f"its 'transforms' array holds a NaN or infinite value for body '{trajectory.body_names[body]}' "
                f"at frame {export.frame_start + int(frame)}")
    types = {joint.name: joint.type for joint in export.scene.joints}
    for column, name in enumerate(map(str, trajectory.joint_names)):
        if types.get(name) not in READOUT_ARRAYS:
            continue  # not the rig's (trajectory_mismatch says so), or a joint without a readout
        readout = READOUT_ARRAYS[types[name]]
        values = np.asarray(getattr(trajectory, readout)[:, column]).reshape(frames, -1)
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if len(bad):
            return (f"its '{readout}' array holds a NaN or infinite value for joint '{name}' "
                    f"at frame {export.frame_start + int(bad[0])}")
    return None


def trajectory_mismatch(export: Export, trajectory) -> Optional[str]:
    """Why ``trajectory`` was not computed for ``export``'s scene, or None: its body or joint
    names (in order), its frame count or frame rate differ, a body's first pose is more than
    :data:`START_POSE_TOLERANCE` (m, rad) from the rig's pose at the first frame, or (where the
    file records it, as ``python -m solver run`` does) the digest of the scene it was computed
    for is not this scene's (:func:`solver.scene_io.scene_digest`: a mass, an aim curve, a
    setting changed since the export)."""
    from ..solver.scene_io import scene_digest

    scene = export.scene
    bodies = [body.name for body in scene.bodies]
    joints = [joint.name for joint in scene.joints]
    if [str(name) for name in trajectory.body_names] != bodies:
        return f"its bodies are {[str(name) for name in trajectory.body_names]}, the rig's {bodies}"
    if [str(name) for name in trajectory.joint_names] != joints:
        return f"its joints are {[str(name) for name in trajectory.joint_names]}, the rig's {joints}"
    if trajectory.frame_count != export.frame_count:
        return (f"it has {trajectory.frame_count + 1} frames, the bake {export.frame_count + 1} "
                f"(frames {export.frame_start}-{export.frame_end})")
    if not np.isclose(trajectory.frame_rate, scene.settings.frame_rate, rtol=1e-9):
        return f"it was computed at {trajectory.frame_rate:g} fps, the scene runs at {scene.settings.frame_rate:g} fps"
    start = rigid_transforms(np.asarray(trajectory.transforms[:1], dtype=np.float64))[0]
    for body, pose in zip(scene.bodies, start):
        offset = float(np.linalg.norm(pose[:3, 3] - body.transform[:3, 3]))
        turn = float(np.arccos(np.clip((np.trace(pose[:3, :3].T @ body.transform[:3, :3]) - 1.0) / 2.0, -1.0, 1.0)))
        if offset > START_POSE_TOLERANCE or turn > START_POSE_TOLERANCE:
            return (f"body '{body.name}' starts {offset:.3g} m and {np.degrees(turn):.3g} degrees away from its pose "
                    f"at frame {export.frame_start} (was the rig changed after the scene file was exported?)")
    if trajectory.scene_digest and trajectory.scene_digest != scene_digest(scene):
        return ("the rig, its animated settings or the ABD World settings changed after the scene file was "
                "exported (its scene digest differs): export and solve it again, or Bake here")
    return None


def convergence_problem(trajectory) -> Optional[str]:
    """A sentence saying how many time steps did not converge, or None when all did."""
    if trajectory.all_converged:
        return None
    unconverged = ~np.asarray(trajectory.converged, dtype=bool)
    worst = float(np.max(trajectory.residual[unconverged]))
    return (f"{int(np.count_nonzero(unconverged))} of {len(trajectory.converged)} time steps did not converge "
            f"(the worst ended with a Newton step {worst:.3g} times the tolerance; raise Max Iterations or "
            "Substeps in ABD World)")


def bake(scene: bpy.types.Scene, depsgraph=None, progress=None) -> BakeJob:
    """Export -> simulate -> write keyframes, synchronously. Returns the finished :class:`BakeJob`.

    Raises:
        abd_addon.export.RigError, solver.scene.SceneError: invalid rig (nothing changed).
        solver.simulation.SolverError (incl. SimulationCancelled): solver failure or cancel
            (nothing changed).
    """
    job = BakeJob(scene, depsgraph)
    job.prepare()
    job.simulate(progress)
    job.apply()
    return job
