"""Object state around a bake: the snapshot that rolls a failed write back, the state recorded
before an object's first bake (``Object.abd_bake``) that Free Bake and a re-bake's export put
back, and carrying the user's edits to the F-curves a bake does not key back into it.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Optional

import bpy

from .fcurves import (add_fcurve_copy, assign_action, baked_slot, fcurve_owner, same_fcurve, slot_identifier,
                      user_fcurves)
from ..names import READOUT_PROPERTIES, TRANSFORM_PROPERTIES
from .rig_rules import refuse_tweak_mode


class Snapshot:
    """Everything :func:`abd_addon.bake.bake.write_bake` may change on one object, to put back on failure."""

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


def record_previous(ob: bpy.types.Object) -> None:
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
    edited = user_fcurves(state.action, baked_slot(state.action))
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


def apply_previous(ob: bpy.types.Object) -> None:
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
    are: :func:`abd_addon.bake.bake.write_bake` keeps their bake, so that is what they play. Edits made since the
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
            swapped.append(Snapshot(ob))
            apply_previous(ob)
        yield
    finally:
        for snapshot in reversed(swapped):
            snapshot.restore()
        if swapped:
            scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)

