"""PropertyGroups saved in the .blend: ``Object.abd_body``, ``Object.abd_joint``, ``Scene.abd_world``.

Identifiers follow the solver's fields (:mod:`solver.scene`): ``strength_ratio``,
``aim_distance``, ``is_passive``, ``is_constrained``, ``init_distance``, ``init_angle``,
``l_body``/``r_body``, ``kappa``, ``mass_density``. Labels and tooltips are in the words of
Blender's physics panels (Mass, Friction, Stiffness, Limits, Margin): units in the field where
Blender has the unit and otherwise in the tooltip, a symbol at most in the tooltip after the plain
name. Values the solver takes per frame (the drive, the limit, the soft transform) are animatable,
and the exporter samples them once per frame; everything else is
read once, at the first frame of the bake, and is therefore not animatable.

``Object.abd_bake`` is internal bookkeeping of a bake (the action that was there before, so that
Free Bake can put it back exactly); it is not shown in the UI.
"""

from __future__ import annotations

import math

import bpy
from bpy.props import (
    BoolProperty,
    BoolVectorProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)
from bpy.types import PropertyGroup


#: Options of a property that is read once (not sampled per frame).
STATIC = set()

#: Every property here may differ on a library override of its object (or scene) and is saved with
#: it: the settings, so that a shot can tweak a linked rig, and the bake state, so that Free Bake
#: works on an override's bake.
OVERRIDABLE = {"LIBRARY_OVERRIDABLE"}

MOTION_ITEMS = (
    ("DYNAMIC", "Dynamic", "Simulated: moved by gravity, joints and the soft transform"),
    ("FIXED", "Fixed", "Never moves: stays at its pose of the first frame"),
    ("ANIMATED", "Animated", "Follows its own animation; pushes the bodies jointed to it"),
)

MASS_MODE_ITEMS = (
    ("DENSITY", "Density", "Mass from the mesh volume and a density"),
    ("MASS", "Mass", "An explicit total mass, spread uniformly over the mesh volume or with an explicit inertia"),
)

SOFT_TARGET_ITEMS = (
    ("ANIMATION", "Own Animation", "The object's own animation (its action before the bake) is the target pose"),
    ("OBJECT", "Object", "Another object's world transform is the target pose"),
)

JOINT_TYPE_ITEMS = (
    ("PRISMATIC", "Prismatic", "Slides along the joint's local Z axis"),
    ("REVOLUTE", "Revolute", "Rotates about the joint's local Z axis"),
    ("FIXED", "Fixed", "Welds the two bodies together at the joint's origin"),
    ("BALL", "Ball", "Holds the two bodies together at the joint's origin, free to turn about it"),
    ("GENERIC", "Generic", "Each of the joint's local axes locked, limited or free, for sliding along it and "
     "turning about it, with optional springs (as Blender's Generic Spring constraint)"),
)
#: The solver's joint type of each of :data:`JOINT_TYPE_ITEMS` (:data:`solver.scene.JOINT_TYPES`).
SOLVER_JOINT_TYPES = {"PRISMATIC": "prismatic", "REVOLUTE": "revolute", "FIXED": "fixed", "BALL": "spherical",
                      "GENERIC": "generic"}
#: The joint types with an axis, a limit and a drive (the others have one anchor point).
AXIS_JOINT_TYPES = ("PRISMATIC", "REVOLUTE")

DRIVE_MODE_ITEMS = (
    ("POSITION", "Position", "Drive the joint to the aim (a servo)"),
    ("VELOCITY", "Velocity", "Drive the joint at the aim velocity (a motor, as Blender's Motor constraint)"),
)


#: Called with no arguments when a setting the viewport overlay draws changes (the overlay
#: registers its cache's ``invalidate``), so this module does not import the overlay.
OVERLAY_SETTING_CHANGED: list = []


def _overlay_changed(_group, _context) -> None:
    """``update`` of the settings the viewport overlay draws (a joint's type, whether it is one,
    its limit, and the contact settings that decide which bodies intersect): a change made in a
    panel or by a script redraws nothing else that would tell the overlay's cache
    (:func:`.overlay.invalidate`, which the overlay adds to :data:`OVERLAY_SETTING_CHANGED`)."""
    for callback in OVERLAY_SETTING_CHANGED:
        callback()


def _is_mesh_object(self, ob: bpy.types.Object) -> bool:
    """Poll for body pointers: mesh objects only (the UI search list)."""
    return ob.type == "MESH"


class ABDSoftTransformProperties(PropertyGroup):
    """Soft Transform Constraint (#16): pull the body towards a target pose."""

    is_constrained: BoolProperty(
        override=OVERRIDABLE,
        name="Soft Transform",
        description="Pull the body towards the target pose (animatable: it may pull on some frames only)",
        default=False,
    )
    strength_ratio_p: FloatProperty(
        override=OVERRIDABLE,
        name="Translation",
        description=("Translation strength (η_p): how hard the centre of mass is pulled, per kilogram of the body; "
                     "keep within 0 to 100"),
        default=100.0, min=0.0, soft_max=100.0,
    )
    strength_ratio_a: FloatProperty(
        override=OVERRIDABLE,
        name="Rotation",
        description=("Rotation strength (η_a): how hard the rotation is pulled, relative to the body's inertia; "
                     "keep within 0 to 100"),
        default=100.0, min=0.0, soft_max=100.0,
    )
    target: EnumProperty(
        override=OVERRIDABLE, name="Target", description="The pose the body is pulled towards",
        items=SOFT_TARGET_ITEMS, default="ANIMATION", options=STATIC,
    )
    target_object: PointerProperty(
        override=OVERRIDABLE,
        name="Target Object", type=bpy.types.Object,
        description="The object whose world transform (rotation and location) is the target pose",
        options=STATIC,
    )


class ABDBodyProperties(PropertyGroup):
    """Affine body settings of a mesh object (``Object.abd_body``)."""

    enabled: BoolProperty(
        override=OVERRIDABLE,
        name="Affine Body", description="Simulate this mesh as an affine body", default=False, options=STATIC,
    )
    motion: EnumProperty(override=OVERRIDABLE, name="Motion", description="How the body moves during the simulation",
                         items=MOTION_ITEMS, default="DYNAMIC", options=STATIC)
    mass_mode: EnumProperty(
        override=OVERRIDABLE, name="Mass From", description="Where the body's mass comes from",
        items=MASS_MODE_ITEMS, default="DENSITY", options=STATIC,
    )
    mass_density: FloatProperty(
        override=OVERRIDABLE,
        name="Density",
        description=("Mass per volume of the mesh, in kg/m³. On a fixed or animated body it only sets how stiffly "
                     "its joints hold, as their strength is per kilogram of their two bodies"),
        default=1000.0, min=1e-6, soft_max=20000.0,
        precision=1, options=STATIC,
    )
    mass: FloatProperty(
        override=OVERRIDABLE,
        name="Mass",
        description=("Total mass of the body, spread over the mesh volume. On a fixed or animated body it only sets "
                     "how stiffly its joints hold, as their strength is per kilogram of their two bodies"),
        default=1.0, min=1e-9,
        unit="MASS", options=STATIC,
    )
    thickness: FloatProperty(
        override=OVERRIDABLE,
        name="Thickness",
        description=("For an open mesh (a plane, Suzanne; a closed one ignores it): its mass is that of a shell this "
                     "thick about its surface. 0 takes the mass of its convex hull, as Bullet's Convex Hull shape"),
        default=0.0, min=0.0, soft_max=0.1, precision=4, unit="LENGTH", options=STATIC,
    )
    use_inertia: BoolProperty(
        override=OVERRIDABLE,
        name="Explicit Inertia",
        description=("Use the centre of mass and inertia tensor below with the mass, instead of spreading the mass "
                     "uniformly over the mesh volume (as a URDF <inertial> gives them)"),
        default=False, options=STATIC,
    )
    mass_center: FloatVectorProperty(
        override=OVERRIDABLE,
        name="Centre of Mass", description="Centre of mass in the object's local coordinates",
        size=3, subtype="TRANSLATION", unit="LENGTH", options=STATIC,
    )
    inertia: FloatVectorProperty(
        override=OVERRIDABLE,
        name="Inertia",
        description=("Inertia tensor about the centre of mass in the object's local axes, kg m², "
                     "as Ixx, Ixy, Ixz, Iyy, Iyz, Izz (the URDF order)"),
        size=6, default=(1.0, 0.0, 0.0, 1.0, 0.0, 1.0), precision=6, options=STATIC,
    )
    precise: StringProperty(
        override=OVERRIDABLE,
        name="Precise Values", options=STATIC | {"HIDDEN"},
        description=("Double-precision copies of the mass, centre of mass and inertia as an importer wrote them, "
                     "used while a field still shows the same single-precision value"),
    )
    kappa: FloatProperty(
        override=OVERRIDABLE,
        name="Stiffness",
        description=("Shape stiffness (κ), in Pa: how rigidly the body keeps its shape. Higher is stiffer; "
                     "rubber is about 1e7, wood 1e10"),
        default=1e8, min=1.0, soft_min=1e4, soft_max=1e11, precision=0, options=STATIC,
    )
    linear_velocity: FloatVectorProperty(
        override=OVERRIDABLE,
        name="Linear Velocity", description="Initial velocity of the centre of mass (world axes)",
        size=3, subtype="VELOCITY", unit="VELOCITY", options=STATIC,
    )
    angular_velocity: FloatVectorProperty(
        override=OVERRIDABLE,
        name="Angular Velocity", description="Initial angular velocity in rad/s (world axes)",
        size=3, subtype="XYZ", options=STATIC,
    )
    soft_transform: PointerProperty(override=OVERRIDABLE, type=ABDSoftTransformProperties)
    use_collision: BoolProperty(
        override=OVERRIDABLE,
        name="Collision", description="Touch other bodies when Contact is on in the ABD World",
        default=True, options=STATIC, update=_overlay_changed,
    )
    use_friction: BoolProperty(
        override=OVERRIDABLE,
        name="Own Friction", description="Use this body's friction instead of the ABD World's",
        default=False, options=STATIC,
    )
    friction: FloatProperty(
        override=OVERRIDABLE,
        name="Friction",
        description="Friction coefficient (μ) of the body; two touching bodies use the geometric mean of theirs",
        default=0.5, min=0.0, soft_max=2.0, options=STATIC,
    )
    collision_shape: EnumProperty(
        override=OVERRIDABLE,
        name="Shape", description="What the body collides with (its mass always comes from the mesh)",
        items=(
            ("MESH", "Mesh", "The evaluated mesh"),
            ("CONVEX_HULL", "Convex Hull", "The convex hull of the mesh's vertices: fewer primitives, faster"),
        ),
        default="MESH", options=STATIC, update=_overlay_changed,
    )
    collision_collections: BoolVectorProperty(
        override=OVERRIDABLE,
        name="Collections", description="Collision collections: two bodies touch only when they share one",
        size=20, subtype="LAYER_MEMBER", default=(True,) + (False,) * 19, options=STATIC, update=_overlay_changed,
    )


def set_precise(group, **values) -> None:
    """Set float properties of ``group`` and keep double-precision copies of the values.

    Blender stores ``FloatProperty`` values in single precision (about 7 digits). An importer
    that knows exact values (a URDF mass or inertia) sets them through this function; readers use
    :func:`get_precise`, which returns the exact value for as long as the property still holds
    its single-precision rounding (that is, until someone edits it).
    """
    import json

    stored = json.loads(group.precise) if group.precise else {}
    for name, value in values.items():
        setattr(group, name, value)
        stored[name] = [float(v) for v in value] if isinstance(value, (list, tuple)) else float(value)
    group.precise = json.dumps(stored)


def get_precise(group, name: str):
    """The value of float property ``name`` of ``group``: the exact copy kept by :func:`set_precise`
    if the property still holds its single-precision rounding, else the property's own value.

    Returns a float, or a tuple of floats for a vector property.
    """
    import json

    import numpy as np

    current = getattr(group, name)
    vector = not isinstance(current, float)
    value = tuple(float(v) for v in current) if vector else float(current)
    if not group.precise:
        return value
    try:
        exact = json.loads(group.precise).get(name)
    except ValueError:
        return value
    if exact is None or vector != isinstance(exact, list) or (vector and len(exact) != len(value)):
        return value
    if np.array_equal(np.float32(exact), np.float32(value)):
        return tuple(exact) if vector else float(exact)
    return value


#: A new limit's strength (J): the URDF importer's (:data:`solver.urdf.DEFAULT_LIMIT_STRENGTH`). The
#: penalty is not scaled by mass or dt², so its default must hold a typical part; the scene file's
#: default (1, libuipc's) lets a 1 m, 10 kg arm through its stop by several degrees.
DEFAULT_LIMIT_STRENGTH = 1.0e4


class ABDLimitProperties(PropertyGroup):
    """Joint limit: Prismatic Joint Limit (#669) or Revolute Joint Limit (#670). Animatable."""

    use: BoolProperty(
        override=OVERRIDABLE,
        name="Limit", description="Keep the joint between lower and upper", default=False, update=_overlay_changed,
    )
    lower: FloatProperty(
        override=OVERRIDABLE,
        name="Lower", description="Lower limit of the distance along Z", default=-1.0, unit="LENGTH",
        update=_overlay_changed,
    )
    upper: FloatProperty(
        override=OVERRIDABLE,
        name="Upper", description="Upper limit of the distance along Z", default=1.0, unit="LENGTH",
        update=_overlay_changed,
    )
    lower_angle: FloatProperty(
        override=OVERRIDABLE,
        name="Lower", description="Lower limit of the angle about Z", default=-math.pi / 4.0,
        subtype="ANGLE", unit="ROTATION", update=_overlay_changed,
    )
    upper_angle: FloatProperty(
        override=OVERRIDABLE,
        name="Upper", description="Upper limit of the angle about Z", default=math.pi / 4.0,
        subtype="ANGLE", unit="ROTATION", update=_overlay_changed,
    )
    strength: FloatProperty(
        override=OVERRIDABLE,
        name="Strength",
        description=("How hard the limit pushes back beyond its bounds, in J. The default holds a 1 m, 10 kg arm "
                     "falling onto its stop within a degree at 10 substeps; 1 lets it through by several degrees"),
        default=DEFAULT_LIMIT_STRENGTH, min=0.0, soft_max=1.0e5,
    )


class ABDDriveProperties(PropertyGroup):
    """Driving Prismatic Joint (#21) or Driving Revolute Joint (#19): drive the joint to
    ``aim_distance`` / ``aim_angle``, or at ``aim_velocity``. Animatable but for the mode."""

    is_constrained: BoolProperty(
        override=OVERRIDABLE,
        name="Drive", description="Drive the joint: to the aim (Position) or at the aim velocity (Velocity)",
        default=False,
    )
    is_passive: BoolProperty(
        override=OVERRIDABLE,
        name="Passive", description="Lock the joint where it is instead of driving it", default=False,
    )
    mode: EnumProperty(override=OVERRIDABLE, name="Mode", description="What the drive aims at",
                       items=DRIVE_MODE_ITEMS, default="POSITION", options=STATIC)
    aim_distance: FloatProperty(
        override=OVERRIDABLE,
        name="Aim Distance", description="Target distance, in the same frame as the reported distance", default=0.0,
        unit="LENGTH",
    )
    aim_angle: FloatProperty(
        override=OVERRIDABLE,
        name="Aim Angle", description="Target angle, in the same frame as the reported angle (any number of turns)",
        default=0.0, subtype="ANGLE", unit="ROTATION",
    )
    aim_velocity: FloatProperty(
        override=OVERRIDABLE,
        name="Aim Velocity",
        description="Target speed of the joint: m/s along a prismatic joint, rad/s about a revolute one",
        default=0.0,
    )
    strength_ratio: FloatProperty(
        override=OVERRIDABLE,
        name="Strength",
        description=("Drive strength (γ): how hard the drive pulls towards its aim, per kilogram of the joint's "
                     "two bodies"),
        default=100.0, min=0.0, soft_max=1000.0,
    )
    max_force: FloatProperty(
        override=OVERRIDABLE,
        name="Max Force",
        description=("Largest force the drive of a prismatic joint exerts, in newtons; 0: no limit. A drive "
                     "at its limit stalls against a larger load"),
        default=0.0, min=0.0, soft_max=1.0e4, options=STATIC,
    )
    max_torque: FloatProperty(
        override=OVERRIDABLE,
        name="Max Torque",
        description=("Largest torque the drive of a revolute joint exerts, in newton metres (τ_max); 0: no "
                     "limit. A drive at its limit stalls against a larger load"),
        default=0.0, min=0.0, soft_max=1.0e4, options=STATIC,
    )
    max_speed: FloatProperty(
        override=OVERRIDABLE,
        name="Max Speed",
        description=("Fastest the drive moves the joint towards its aim: m/s along a prismatic joint, rad/s "
                     "about a revolute one; 0: no limit"),
        default=0.0, min=0.0, soft_max=100.0, options=STATIC,
    )


class ABDGenericProperties(PropertyGroup):
    """A Generic joint's axes (docs/constitutions/generic_joint.md): per local axis, a limit on
    sliding along it and on turning about it (lower = upper locks it there), a spring with
    stiffness and damping, a swing cone and twist limit, and a break force. As Blender's Generic
    Spring constraint's settings; read once (not animatable)."""

    use_limit_linear: BoolVectorProperty(
        override=OVERRIDABLE, name="Limit Linear", size=3, default=(True, True, True), options=STATIC,
        description="Limit sliding along the joint's local X, Y, Z (a Lower equal to Upper locks the axis there)",
    )
    limit_linear_lower: FloatVectorProperty(
        override=OVERRIDABLE, name="Linear Lower", size=3, unit="LENGTH", options=STATIC,
        description="Lower limit of sliding along the joint's local X, Y, Z",
    )
    limit_linear_upper: FloatVectorProperty(
        override=OVERRIDABLE, name="Linear Upper", size=3, unit="LENGTH", options=STATIC,
        description="Upper limit of sliding along the joint's local X, Y, Z",
    )
    use_limit_angular: BoolVectorProperty(
        override=OVERRIDABLE, name="Limit Angular", size=3, default=(True, True, True), options=STATIC,
        description="Limit turning about the joint's local X, Y, Z, as XYZ Euler angles of the child relative "
                    "to the parent (a Lower equal to Upper locks the axis there)",
    )
    limit_angular_lower: FloatVectorProperty(
        override=OVERRIDABLE, name="Angular Lower", size=3, unit="ROTATION", options=STATIC,
        description="Lower limit of the angle about the joint's local X, Y, Z",
    )
    limit_angular_upper: FloatVectorProperty(
        override=OVERRIDABLE, name="Angular Upper", size=3, unit="ROTATION", options=STATIC,
        description="Upper limit of the angle about the joint's local X, Y, Z",
    )
    limit_strength: FloatProperty(
        override=OVERRIDABLE, name="Limit Strength", default=DEFAULT_LIMIT_STRENGTH, min=0.0, soft_max=1.0e6,
        options=STATIC,
        description="Strength of the cubic penalty beyond a limit that is not a lock, and beyond the swing cone "
                    "and the twist limit (J)",
    )
    use_cone: BoolProperty(
        override=OVERRIDABLE, name="Swing Cone", default=False, options=STATIC,
        description="Limit the turning by a swing cone about the cone's X (elliptical: its own angle about Y and "
                    "about Z) and a twist limit about it, in place of the angular limits",
    )
    swing_limit: FloatVectorProperty(
        override=OVERRIDABLE, name="Swing", size=2, unit="ROTATION", default=(math.pi / 4, math.pi / 4),
        min=1e-3, max=math.pi / 2 - 1e-3, options=STATIC,
        description="Half-angles of the swing cone about its Y and its Z (below 90°)",
    )
    twist_limit: FloatProperty(
        override=OVERRIDABLE, name="Twist", unit="ROTATION", default=math.pi / 4, min=1e-3, max=math.pi,
        options=STATIC, description="Half-angle of the twist about the cone's X (180°: no twist limit)",
    )
    cone_rotation: FloatVectorProperty(
        override=OVERRIDABLE, name="Cone Center", size=3, unit="ROTATION", options=STATIC,
        description="The cone's axes in the joint's, as XYZ Euler angles composed as Bullet composes them (about "
                    "X first, in the parent's axes): the child's rotation at the middle of the cone and the twist",
    )
    use_spring_linear: BoolVectorProperty(
        override=OVERRIDABLE, name="Linear Springs", size=3, options=STATIC,
        description="A spring along the joint's local X, Y, Z, at rest where the bodies start",
    )
    spring_stiffness_linear: FloatVectorProperty(
        override=OVERRIDABLE, name="Linear Stiffness", size=3, min=0.0, default=(10.0, 10.0, 10.0), options=STATIC,
        description="Stiffness of the linear springs, N/m",
    )
    spring_damping_linear: FloatVectorProperty(
        override=OVERRIDABLE, name="Linear Damping", size=3, min=0.0, default=(0.5, 0.5, 0.5), options=STATIC,
        description="Damping of the linear springs, N s/m",
    )
    use_spring_angular: BoolVectorProperty(
        override=OVERRIDABLE, name="Angular Springs", size=3, options=STATIC,
        description="A spring about the joint's local X, Y, Z, at rest where the bodies start",
    )
    spring_stiffness_angular: FloatVectorProperty(
        override=OVERRIDABLE, name="Angular Stiffness", size=3, min=0.0, default=(10.0, 10.0, 10.0), options=STATIC,
        description="Stiffness of the angular springs, N m/rad",
    )
    spring_damping_angular: FloatVectorProperty(
        override=OVERRIDABLE, name="Angular Damping", size=3, min=0.0, default=(0.5, 0.5, 0.5), options=STATIC,
        description="Damping of the angular springs, N m s/rad",
    )
    use_breaking: BoolProperty(
        override=OVERRIDABLE, name="Breakable", default=False, options=STATIC,
        description="The joint releases for good once a locked linear axis carries more than the threshold",
    )
    breaking_threshold: FloatProperty(
        override=OVERRIDABLE, name="Threshold", default=100.0, min=0.0, options=STATIC,
        description="The force that breaks the joint, N (Blender's rigid-body threshold is an impulse per "
                    "substep: that impulse times the frame rate and the substeps per frame)",
    )


class ABDJointProperties(PropertyGroup):
    """A joint on an Empty (``Object.abd_joint``): origin = anchor, local Z = axis."""

    enabled: BoolProperty(
        override=OVERRIDABLE,
        name="ABD Joint", description="This Empty is an affine-body joint", default=False,
        options=STATIC, update=_overlay_changed,
    )
    type: EnumProperty(override=OVERRIDABLE, name="Type", description="How the joint lets its two bodies move",
                       items=JOINT_TYPE_ITEMS, default="REVOLUTE", options=STATIC, update=_overlay_changed)
    l_body: PointerProperty(
        override=OVERRIDABLE,
        name="Parent", type=bpy.types.Object, poll=_is_mesh_object, options=STATIC,
        description="Parent body: the joint Empty follows it after the bake",
    )
    r_body: PointerProperty(
        override=OVERRIDABLE,
        name="Child", type=bpy.types.Object, poll=_is_mesh_object, options=STATIC,
        description="Child body: the body the joint moves relative to the parent",
    )
    strength_ratio: FloatProperty(
        override=OVERRIDABLE,
        name="Strength",
        description="Joint strength (γ): how stiffly the joint holds, per kilogram of its two bodies",
        default=100.0, min=0.0, soft_max=1000.0, options=STATIC,
    )
    init_distance: FloatProperty(
        override=OVERRIDABLE,
        name="Init Distance", description="The distance the joint reports at the first frame",
        default=0.0, unit="LENGTH", options=STATIC,
    )
    init_angle: FloatProperty(
        override=OVERRIDABLE,
        name="Init Angle", description="The angle the joint reports at the first frame",
        default=0.0, subtype="ANGLE", unit="ROTATION", options=STATIC,
    )
    damping: FloatProperty(
        override=OVERRIDABLE,
        name="Damping",
        description=("Viscous damping of the joint's motion (c): N s/m along a prismatic joint, N m s/rad "
                     "about a revolute one; 0: none"),
        default=0.0, min=0.0, soft_max=100.0, options=STATIC,
    )
    limit: PointerProperty(override=OVERRIDABLE, type=ABDLimitProperties)
    drive: PointerProperty(override=OVERRIDABLE, type=ABDDriveProperties)
    generic: PointerProperty(override=OVERRIDABLE, type=ABDGenericProperties)
    disable_collisions: BoolProperty(
        override=OVERRIDABLE,
        name="Disable Collisions",
        description="The two bodies of this joint do not touch each other",
        default=True, options=STATIC, update=_overlay_changed,
    )


#: Called with the scene whenever its Preview on Playback changes (the preview adds its own,
#: :func:`.preview.register`: this module does not import it).
PREVIEW_TOGGLED: list = []


def _preview_toggled(world, _context) -> None:
    """``update`` of Preview on Playback: the :data:`PREVIEW_TOGGLED` callbacks."""
    for callback in PREVIEW_TOGGLED:
        callback(world.id_data)


class ABDWorldProperties(PropertyGroup):
    """Scene settings of the solver (``Scene.abd_world``)."""

    use_preview: BoolProperty(
        override=OVERRIDABLE,
        name="Preview on Playback",
        description=("Simulate as the frame changes (playback, stepping) and show the poses without keyframes; "
                     "any change to the rig frees the simulated frames, and Bake keys those still valid"),
        default=True, options=STATIC, update=_preview_toggled,
    )

    substeps: IntProperty(
        override=OVERRIDABLE,
        name="Substeps", description="Time steps per frame", default=10, min=1, soft_max=100, options=STATIC,
    )
    use_scene_frame_range: BoolProperty(
        override=OVERRIDABLE,
        name="Scene Frame Range", description="Bake the scene's frame range", default=True, options=STATIC,
    )
    frame_start: IntProperty(
        override=OVERRIDABLE,
        name="Start", description="First frame of the bake", default=1, min=0, options=STATIC,
    )
    frame_end: IntProperty(
        override=OVERRIDABLE,
        name="End", description="Last frame of the bake", default=250, min=0, options=STATIC,
    )
    use_scene_gravity: BoolProperty(
        override=OVERRIDABLE,
        name="Scene Gravity", description="Use the scene's gravity (Scene properties)", default=True, options=STATIC,
    )
    gravity: FloatVectorProperty(
        override=OVERRIDABLE,
        name="Gravity", description="Gravity of the simulation when it does not use the scene's",
        size=3, subtype="ACCELERATION", unit="ACCELERATION", default=(0.0, 0.0, -9.81), options=STATIC,
    )
    max_iterations: IntProperty(
        override=OVERRIDABLE,
        name="Max Iterations", description="Most solver iterations per time step",
        default=100, min=1, soft_max=1000, options=STATIC,
    )
    velocity_tol: FloatProperty(
        override=OVERRIDABLE,
        name="Velocity Tolerance",
        description="A time step has converged when no vertex's velocity changes by more than this, in m/s",
        default=0.05, min=1e-9, precision=4, options=STATIC,
    )
    transrate_tol: FloatProperty(
        override=OVERRIDABLE,
        name="Rotation Tolerance",
        description=("A time step has converged when no body's rate of rotation (and stretch) changes by more "
                     "than this, in 1/s"),
        default=0.1, min=1e-9, precision=4, options=STATIC,
    )
    strain_tolerance: FloatProperty(
        override=OVERRIDABLE,
        name="Strain Tolerance",
        description=("Largest strain of a dynamic body (its stretch or squeeze, which its keyed rigid poses drop) "
                     "that a bake keeps without a warning naming the body and the frames"),
        default=1e-3, min=1e-9, soft_max=0.1, precision=5, options=STATIC,
    )
    line_search_max_iterations: IntProperty(
        override=OVERRIDABLE,
        name="Line Search Steps", description="Most halvings of a solver step that would not lower the energy",
        default=8, min=0, max=100,
        options=STATIC,
    )
    device: EnumProperty(
        override=OVERRIDABLE,
        name="Device", description="Where the scene is solved",
        items=(
            ("CPU", "CPU", "This solver on the CPU: banded Cholesky or sparse LU"),
            ("CUPY", "GPU (CuPy)", "This solver with its equations solved on an NVIDIA GPU through CuPy, which must be "
             "installed in Blender's Python (the same result within round-off); for rigs of about a thousand "
             "bodies joined in many loops (a net, a grid); on chains, trees and smaller rigs the CPU is faster"),
            ("LIBUIPC", "GPU (libuipc)", "The scene run by libuipc on an NVIDIA GPU (the pyuipc package must be "
             "installed in Blender's Python; Linux and Windows); for piles and heaps of colliding bodies; "
             "jointed rigs without much contact run faster on the CPU"),
        ),
        default="CPU", options=STATIC,
    )
    use_contact: BoolProperty(
        override=OVERRIDABLE,
        name="Contact", description="Bodies touch instead of passing through each other (needs the ipctk package)",
        default=False, options=STATIC, update=_overlay_changed,
    )
    d_hat: FloatProperty(
        override=OVERRIDABLE,
        name="Margin",
        description="Contact distance (d̂): surfaces closer than this push apart, and bodies rest this close at most",
        default=1e-3, min=1e-5, soft_max=0.1, precision=4, unit="LENGTH", options=STATIC, update=_overlay_changed,
    )
    friction: FloatProperty(
        override=OVERRIDABLE,
        name="Friction", description="Friction coefficient (μ) of the bodies without their own",
        default=0.5, min=0.0, soft_max=2.0, options=STATIC,
    )
    use_auto_resistance: BoolProperty(
        override=OVERRIDABLE,
        name="Auto Resistance",
        description="Set the contact resistance from the heaviest dynamic body's weight",
        default=True, options=STATIC,
    )
    resistance: FloatProperty(
        override=OVERRIDABLE,
        name="Resistance",
        description="Contact resistance, in J/m⁴: how hard touching surfaces push apart (the barrier's stiffness)",
        default=1e9, min=1e-6, precision=0, options=STATIC,
    )


class ABDBakeState(PropertyGroup):
    """What a bake replaced on one object, so Free Bake can put it back (``Object.abd_bake``)."""

    is_baked: BoolProperty(override=OVERRIDABLE, default=False, options=STATIC)
    action: PointerProperty(override=OVERRIDABLE, type=bpy.types.Action, options=STATIC, description="The baked action")
    previous_action: PointerProperty(
        override=OVERRIDABLE, type=bpy.types.Action, options=STATIC, description="The action before the bake",
    )
    previous_slot: StringProperty(
        override=OVERRIDABLE, options=STATIC, description="Identifier of the action slot before the bake",
    )
    bake_token: StringProperty(override=OVERRIDABLE, options=STATIC,
                               description="Drawn at the object's first bake: a copy made since has the same one")
    baked_name: StringProperty(override=OVERRIDABLE, options=STATIC, description="The object's name at its first bake")
    had_animation_data: BoolProperty(override=OVERRIDABLE, default=False, options=STATIC)
    previous_influence: FloatProperty(override=OVERRIDABLE, default=1.0, options=STATIC)
    previous_blend_type: StringProperty(override=OVERRIDABLE, default="REPLACE", options=STATIC)
    previous_extrapolation: StringProperty(override=OVERRIDABLE, default="HOLD", options=STATIC)
    previous_location: FloatVectorProperty(override=OVERRIDABLE, size=3, options=STATIC)
    previous_rotation_euler: FloatVectorProperty(override=OVERRIDABLE, size=3, options=STATIC)
    previous_rotation_quaternion: FloatVectorProperty(
        override=OVERRIDABLE, size=4, default=(1.0, 0.0, 0.0, 0.0), options=STATIC,
    )
    previous_rotation_axis_angle: FloatVectorProperty(
        override=OVERRIDABLE, size=4, default=(0.0, 0.0, 1.0, 0.0), options=STATIC,
    )
    previous_scale: FloatVectorProperty(override=OVERRIDABLE, size=3, default=(1.0, 1.0, 1.0), options=STATIC)


def store_groups(ob: bpy.types.Object) -> None:
    """Write every ABD property group of ``ob`` (``abd_body``, ``abd_joint``, ``abd_bake`` and the
    groups inside them) into its stored ID properties, each property at its current value.

    Blender 5.0 cannot override a property of a group that the linked object never stored: its
    override diff then replaces the whole group, which fails when the shot is reopened, and the
    overridden values are lost (4.2 to 4.5 override such properties one by one). Add Affine Body
    and Connect store every group of the objects they make, so that a library made with them can
    be overridden in a shot on 5.0 too, its bake and Free Bake's record of it included.
    """
    for owner, name, _group in POINTERS:
        if owner is bpy.types.Object:
            _store(getattr(ob, name))


def _store(group) -> None:
    """Set every writable property of ``group`` to its own value, nested groups recursively."""
    for prop in group.bl_rna.properties:
        if prop.identifier in ("rna_type", "name") or prop.is_readonly and prop.type != "POINTER":
            continue
        value = getattr(group, prop.identifier)
        if isinstance(value, PropertyGroup):
            _store(value)
        else:
            setattr(group, prop.identifier, value)


#: Registration order: nested groups before the groups that point to them.
CLASSES = (
    ABDSoftTransformProperties,
    ABDBodyProperties,
    ABDLimitProperties,
    ABDDriveProperties,
    ABDGenericProperties,
    ABDJointProperties,
    ABDWorldProperties,
    ABDBakeState,
)

#: (owner type, attribute, PropertyGroup) added by :func:`abd_addon.register`.
POINTERS = (
    (bpy.types.Object, "abd_body", ABDBodyProperties),
    (bpy.types.Object, "abd_joint", ABDJointProperties),
    (bpy.types.Object, "abd_bake", ABDBakeState),
    (bpy.types.Scene, "abd_world", ABDWorldProperties),
)
