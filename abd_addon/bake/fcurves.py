"""Actions and F-curves: version-independent helpers (Blender 4.2 .. 5.x).

Blender 4.4 gave Actions slots, layers and channelbags; 5.0 removed ``Action.fcurves``. These
helpers read, create, compare and copy F-curves and assign Actions the same way on all of them.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..names import READOUT_PROPERTIES

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

def baked_slot(action) -> str:
    """The identifier of a baked action's slot (:func:`abd_addon.bake.bake.write_bake` makes one, for its object);
    '' before Blender 4.4."""
    slots = getattr(action, "slots", None)
    return slots[0].identifier if slots else ""
