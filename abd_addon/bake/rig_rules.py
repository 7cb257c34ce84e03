"""The bake's refusal rules (docs/bake_rules.md): which objects form the rig, and what in it the
bake refuses, before anything is simulated (no UI). Each refusal is a :class:`RigError` whose
message names the object and what to change.

- **Playback**: anything that would make an object play back something other than its keys (an
  active rigid body, a constraint, a driver on the transform, a soloed NLA track:
  :func:`playback_override`; NLA tweak mode; Time Stretching) is refused.
- **Evaluation**: an object the export reads that is disabled in viewports is refused
  (:func:`viewport_enabled`): Blender does not evaluate it; so is a driver on a value it reads
  that Blender could not evaluate (:func:`invalid_driver`).
- **Parents**: a keyed object is keyed in its parent's space; a parent that the bake cannot
  account for is refused (:func:`parenting_problem`).
- **One way**: what is sampled is the scene before the bake, so anything read that depends on an
  object the bake keys (through a parent, constraint or driver) is refused
  (:func:`keyed_dependency`).

The export (:mod:`.export`) applies them in :func:`refuse_unbakeable` and
:func:`refuse_invalid_drivers`; the checks that need the sampled values (a zero scale, a Fixed
body that moves, crossed limits) are made where it builds the bodies and joints.
"""

from __future__ import annotations

import bpy

from ..names import TRANSFORM_PATHS


class RigError(ValueError):
    """A rig that cannot be exported; the message names the object and what to fix."""


def _absence(ob: bpy.types.Object, view_layer: bpy.types.ViewLayer) -> str:
    """Why ``ob`` is not among the objects of ``view_layer``, and what to do, as the end of a sentence."""
    if not ob.users_collection:
        return ("is in no collection: it was deleted, or joined into another mesh (Ctrl+J); set another body in "
                "the joint's settings")
    collections = ", ".join(f"'{collection.name}'" for collection in ob.users_collection)
    return (f"is in the file but not in the view layer '{view_layer.name}': the collection holding it ({collections}) "
            "is excluded from the view layer (its checkbox in the Outliner) or belongs to another scene; include it, "
            "or set another body in the joint's settings")


def collect_rig(view_layer: bpy.types.ViewLayer) -> tuple[list, list]:
    """The body objects and joint Empties of a view layer, checked; raises :class:`RigError`.

    Checks that need no evaluation: every body is a mesh; every joint is an Empty whose two
    bodies are set, still in the view layer, affine bodies, and different objects.
    """
    objects = view_layer.objects
    members = set(objects)  # by identity: a linked object may share its name with a local one
    bodies = sorted((ob for ob in objects if ob.abd_body.enabled), key=lambda ob: ob.name_full)
    joints = sorted((ob for ob in objects if ob.abd_joint.enabled), key=lambda ob: ob.name_full)
    for ob in bodies:
        if ob.type != "MESH":
            raise RigError(
                f"Object '{ob.name}' is an affine body but not a mesh ({ob.type.title()}): "
                "convert it to a mesh or use Remove Affine Body"
            )
    for ob in joints:
        if ob.type != "EMPTY":
            raise RigError(f"Object '{ob.name}' has ABD Joint enabled but is not an Empty: use an Empty for a joint")
        joint = ob.abd_joint
        for side, label in (("l_body", "parent"), ("r_body", "child")):
            body = getattr(joint, side)
            if body is None:
                raise RigError(f"Joint '{ob.name}': the {label} body is not set (or its object was deleted)")
            if body not in members:
                raise RigError(f"Joint '{ob.name}': the {label} body '{body.name}' {_absence(body, view_layer)}")
            if not body.abd_body.enabled:
                raise RigError(
                    f"Joint '{ob.name}': the {label} object '{body.name}' is not an affine body (use Add Affine Body)"
                )
        if joint.l_body == joint.r_body:
            raise RigError(
                f"Joint '{ob.name}': the parent and the child are the same object '{joint.l_body.name}'; "
                "a joint connects two different bodies"
            )
    if not bodies:
        raise RigError("No affine bodies in the scene: select mesh objects and use Add Affine Body")
    return bodies, joints


def playback_override(ob: bpy.types.Object, scene: bpy.types.Scene, keyed: bool) -> tuple[str, str] | None:
    """What would make ``ob`` play back something other than the bake, as (what, how to fix), or None.

    - Any affine body: an Active Blender rigid body without its Animated option
      (``rigid_body.kinematic``) in the scene's enabled rigid body world; Bullet's own simulation
      then replaces the object's animation on playback (Passive and Animated rigid bodies follow it).
    - An object the bake keys (``keyed``: a dynamic body or a joint Empty): an object constraint
      that is on (not muted, influence above 0), or a driver on one of :data:`TRANSFORM_PATHS`:
      both act after the keyframes. A driver counts even when muted: with one on an element of
      ``location`` the baked value of another element was once played back stale (a test run,
      not reproduced), so only no driver there is known to be safe. And a soloed NLA track
      (while the NLA is on): Blender then evaluates that track alone, not the active action the
      bake assigns.
    """
    rigid_body, world = ob.rigid_body, scene.rigidbody_world
    if (rigid_body is not None and rigid_body.type == "ACTIVE" and not rigid_body.kinematic
            and world is not None and world.enabled and world.collection is not None
            and world.collection.objects.get(ob.name) == ob):
        return ("active Blender rigid body",
                "remove its Rigid Body (Physics properties) or tick the rigid body's Animated option")
    if not keyed:
        return None
    for constraint in ob.constraints:
        if not constraint.mute and constraint.influence > 0.0:
            return f"constraint '{constraint.name}'", "mute or delete the constraint (Object Constraint properties)"
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if fcurve.data_path in TRANSFORM_PATHS:
            return f"driver on {fcurve.data_path}[{fcurve.array_index}]", "delete the driver (Drivers editor)"
    if ob.animation_data is not None and ob.animation_data.use_nla:
        for track in ob.animation_data.nla_tracks:
            if track.is_solo:
                return (f"soloed NLA track '{track.name}'",
                        "un-solo the NLA track (its star icon in the NLA editor)")
    return None


def refuse_tweak_mode(objects) -> None:
    """Raise :class:`RigError` naming the first of ``objects`` whose animation is in NLA tweak mode
    (a strip's action opened for editing, Tab in the NLA editor): Blender then keeps its action
    read-only, so neither a bake nor Free Bake could change it."""
    for ob in objects:
        if ob.animation_data is not None and ob.animation_data.use_tweak_mode:
            raise RigError(
                f"Object '{ob.name}' is in NLA tweak mode (a strip's action is open for editing), where Blender "
                "does not let its action be replaced: exit tweak mode in the NLA editor (Tab); nothing was changed"
            )


def viewport_enabled(view_layer: bpy.types.ViewLayer) -> set:
    """The objects of ``view_layer`` that its depsgraph evaluates: not disabled in viewports
    (``Object.hide_viewport``, the monitor icon) and in at least one collection that is neither
    excluded from the view layer nor disabled in viewports, itself or through a parent
    collection. Hiding (the eye icon, H) does not stop the evaluation."""
    enabled = set()

    def visit(layer_collection) -> None:
        if layer_collection.exclude or layer_collection.collection.hide_viewport:
            return
        enabled.update(layer_collection.collection.objects)
        for child in layer_collection.children:
            visit(child)

    visit(view_layer.layer_collection)
    return {ob for ob in enabled if not ob.hide_viewport}


def _check_evaluated(view_layer: bpy.types.ViewLayer, objects: list) -> None:
    """Raise :class:`RigError` when one of ``objects`` is disabled in viewports: Blender then
    evaluates neither its animation, drivers and constraints nor its modifiers, and the export
    would read a stale pose and rest shape. (A disabled parent of one is fine: Blender evaluates
    what an evaluated object depends on.)"""
    enabled = viewport_enabled(view_layer)
    for ob in objects:
        if ob not in enabled:
            raise RigError(
                f"Object '{ob.name}' is disabled in viewports (the monitor icon of the object or of a collection "
                "holding it in the Outliner), so Blender does not evaluate its animation or modifiers for "
                "the bake: enable it there (hiding it with the eye icon, H, is fine)"
            )


def parenting_problem(ob: bpy.types.Object, keyed: set) -> str | None:
    """Why the bake could not key ``ob`` (an object it keys; ``keyed``: all of them) in its
    parent's space, or None.

    The keys are ``matrix_basis`` = (parent matrix)^-1 world, with the parent matrix sampled
    before the bake where the parent is not keyed, or the keyed parent's baked world @
    ``matrix_parent_inverse``. Neither holds for a non-Object parent type (vertex, bone) of a
    keyed parent, nor for an unkeyed parent that moves with a keyed object, through a keyed
    ancestor or any dependency of the parent or its ancestors (a constraint's target, a driver's
    variable: :func:`_keyed_source`): its pose after the bake is not the sampled one.
    """
    parent = ob.parent
    if parent is None:
        return None
    fix = "or clear the parent (Alt+P > Clear and Keep Transformation)"
    if parent in keyed:
        if ob.parent_type != "OBJECT":
            return (f"it is parented to the simulated '{parent.name}' by {ob.parent_type.lower()}, which the bake "
                    f"cannot key: parent it as an Object (Ctrl+P > Object) {fix}")
        return None
    ancestor = parent.parent
    while ancestor is not None:
        if ancestor in keyed:
            return (f"its parent '{parent.name}' moves with the simulated '{ancestor.name}' but is not keyed by the "
                    f"bake, so '{ob.name}' cannot be keyed in its space: parent it to '{ancestor.name}' directly {fix}")
        ancestor = ancestor.parent
    found = _keyed_source(parent, keyed, settings_only=False)
    if found is not None:
        source, dependency = found
        return (f"its parent '{parent.name}' moves with the simulated '{source.name}' ({dependency}) "
                f"but is not keyed by the bake, so '{ob.name}' cannot be keyed in its space: remove that dependency "
                f"of '{parent.name}' {fix}")
    return None


#: Data paths of the settings the export reads per frame from a body or joint (drivers on them count).
SETTING_PATHS = ("abd_body", "abd_joint")


def _object_dependencies(ob: bpy.types.Object, settings_only: bool) -> list:
    """(object, how) pairs that ``ob``'s sampled values depend on directly: its parent, the targets
    of its active constraints, and the objects its drivers read (only the drivers of its ABD
    settings where ``settings_only``)."""
    found = []
    if not settings_only:
        if ob.parent is not None:
            found.append((ob.parent, "its parent is"))
        for constraint in ob.constraints:
            target = getattr(constraint, "target", None)
            if not constraint.mute and constraint.influence > 0.0 and isinstance(target, bpy.types.Object):
                found.append((target, f"its constraint '{constraint.name}' targets"))
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if settings_only and not fcurve.data_path.startswith(SETTING_PATHS):
            continue
        for variable in fcurve.driver.variables:
            for target in variable.targets:
                if isinstance(target.id, bpy.types.Object):
                    found.append((target.id, f"the driver on {fcurve.data_path} reads"))
    return found


def invalid_driver(ob: bpy.types.Object) -> str | None:
    """Why a driver on what the export reads from ``ob`` (its transform and ABD settings) gave no
    value, or None: Blender flags a driver it could not evaluate (``driver.is_valid``) and leaves
    the property at its stored value, so the bake would silently use that. A Python expression
    that is not a simple one runs only where the file's scripts may run (Blender's Auto Run Python
    Scripts, off for an untrusted file and in a headless bake); a variable may also read a missing
    object or property. A muted driver is not evaluated (the stored value is what plays), so it
    is not asked about."""
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if (fcurve.data_path in TRANSFORM_PATHS or fcurve.data_path.startswith(SETTING_PATHS)) \
                and not fcurve.mute and not fcurve.driver.is_valid:
            return (f"the driver on {fcurve.data_path}[{fcurve.array_index}] could not be evaluated (a Python "
                    "expression other than a simple one runs only with Auto Run Python Scripts, which an untrusted "
                    "file and a headless bake leave off; or a variable reads something missing): fix the driver or "
                    "use a simple expression (Drivers editor)")
    return None


def keyed_dependency(ob: bpy.types.Object, keyed: set) -> str | None:
    """Why ``ob`` (a body, joint or soft-transform target the export samples) cannot be sampled
    before the bake, or None: what the solver reads from it (its pose, unless it is keyed itself;
    its ABD settings) depends, through parents, constraints or drivers, on an object the bake
    keys. The export samples the scene as it is before the bake, so such a value would be that
    object's pre-bake motion, not the simulated one the baked scene then plays (a Fixed body
    parented to a Dynamic one stays put for the solver and moves on playback).
    ``keyed``: the objects the bake writes keys to. (Where ``ob`` is keyed, its parent is asked
    about by :func:`parenting_problem`.)"""
    found = _keyed_source(ob, keyed, settings_only=ob in keyed)
    if found is None:
        return None
    return (f"{found[1]}, whose motion this bake computes: the solver would read that "
            "motion as it was before the bake, not the simulated one that plays after it; remove the "
            "dependency (a body that should move with another: make it Dynamic and join it to that body)")


def _keyed_source(ob: bpy.types.Object, keyed: set, settings_only: bool) -> tuple | None:
    """The first object of ``keyed`` that ``ob``'s sampled values depend on, through parents,
    constraints and drivers (:func:`_object_dependencies`, only ``ob``'s settings drivers where
    ``settings_only``), as (that object, how ``ob`` depends on it: "its constraint 'C' targets
    'A', which depends on 'S'"), or None."""
    pending = [(dependency, how, dependency) for dependency, how in _object_dependencies(ob, settings_only)]
    seen = set()
    while pending:
        dependency, how, first = pending.pop()
        if dependency in keyed:
            via = "" if dependency == first else f"'{first.name}', which depends on "
            return dependency, f"{how} {via}'{dependency.name}'"
        if dependency in seen:
            continue
        seen.add(dependency)
        pending.extend((further, how, first) for further, _ in _object_dependencies(dependency, settings_only=False))
    return None


def refuse_unbakeable(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, bodies: list, joints: list,
                      keyed: list, start: int, end: int) -> list:
    """Raise :class:`RigError` on the first rule the rig breaks that needs no sampling; return the
    soft-transform target objects the export samples (besides the bodies and joints).

    Args:
        scene: the Blender scene baked.
        view_layer: the view layer the rig was collected from (:func:`collect_rig`).
        bodies: the body objects.
        joints: the joint Empties.
        keyed: the objects the bake keys (dynamic bodies, then joint Empties).
        start: the bake's first Blender frame.
        end: its last Blender frame.
    """
    if end <= start:
        raise RigError(
            f"Scene '{scene.name}': the bake's frame range {start}..{end} is empty: the end must be after the start"
        )
    render = scene.render
    if render.frame_map_old != render.frame_map_new:
        raise RigError(
            f"Scene '{scene.name}': Time Stretching (Output properties > Frame Range) maps {render.frame_map_old} "
            f"frames to {render.frame_map_new}, so the baked keys would play at other times than the solver computed "
            "them: set Old and New to the same value for the bake"
        )
    keyed_set = set(keyed)
    members = set(view_layer.objects)
    targets = []
    for ob in bodies:
        soft = ob.abd_body.soft_transform
        target = soft.target_object
        if soft.target == "OBJECT" and target is not None:
            if target not in members:
                raise RigError(f"Object '{ob.name}': the soft transform's target '{target.name}' is not in the scene")
            if target in keyed_set:
                raise RigError(
                    f"Object '{ob.name}': the soft transform's target '{target.name}' is simulated by this bake, so "
                    "the solver would read its motion as it was before the bake: follow another object, or join the "
                    "two bodies"
                )
            targets.append(target)
    _check_evaluated(view_layer, bodies + joints + targets)

    for ob in bodies + joints:
        is_keyed = ob in keyed_set
        if is_keyed and ob.library is not None:
            raise RigError(
                f"Object '{ob.name}' is linked from the library '{ob.library.filepath}', so its bake would not "
                "be saved with this file: make it local (Object > Relations > Make Local) or give it a "
                "library override (Object > Library Override > Make)"
            )
        override = playback_override(ob, scene, is_keyed)
        if override is not None:
            what, fix = override
            raise RigError(f"Object '{ob.name}': its {what} would override the bake on playback: {fix}")
    refuse_tweak_mode(keyed)
    for ob in keyed:
        problem = parenting_problem(ob, keyed_set)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")
    for ob in bodies + joints + targets:
        problem = keyed_dependency(ob, keyed_set)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")
    return targets


def refuse_invalid_drivers(objects: list) -> None:
    """Raise :class:`RigError` naming the first of ``objects`` with a driver Blender could not
    evaluate on what the export reads (:func:`invalid_driver`); call it once they have been
    evaluated at every frame."""
    for ob in objects:
        problem = invalid_driver(ob)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")
