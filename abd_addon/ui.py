"""Panels: Physics properties (Affine Body, ABD Joint with Limits and Drive, ABD World, Bake)
and a 3D-view sidebar tab (ABD: the rig's buttons, World, Solver and Bake, so that every world
and bake setting is reachable without an active object). Laid out like Blender's Rigid Body
Constraint panels. Drawing only: no logic lives here.
"""

from __future__ import annotations

import importlib.util
import math

from bpy.types import Panel

from . import preview
from .export import mesh_is_open
from .gpu_advice import UIPC_FRICTION_VELOCITY_TOL, gpu_advice, uipc_advice
from .properties import AXIS_JOINT_TYPES
from .rig_rules import playback_override
from .snapshot import baked_objects


class _PhysicsPanel:
    """Common settings of the Physics properties panels."""

    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"


def _body(context):
    ob = context.object
    return ob.abd_body if ob is not None and ob.type == "MESH" else None


def _joint(context):
    ob = context.object
    return ob.abd_joint if ob is not None and ob.type == "EMPTY" else None


def _override_warning(layout, context, keyed: bool) -> None:
    """An error line when something would override the context object's bake on playback
    (:func:`abd_addon.rig_rules.playback_override`; the bake refuses it)."""
    override = playback_override(context.object, context.scene, keyed)
    if override is not None:
        layout.label(text=f"Its {override[0]} would override the bake", icon="ERROR")


class PHYSICS_PT_abd_body(_PhysicsPanel, Panel):
    """Affine body settings of a mesh."""

    bl_label = "Affine Body"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return _body(context) is not None

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_body, "enabled", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        body = context.object.abd_body
        row = layout.row(align=True)
        if body.enabled:
            button = row.operator("abd.body_remove", icon="REMOVE")
        else:
            button = row.operator("abd.body_add", icon="ADD")
        button.context_object = True  # on this panel's object (active or pinned), as Blender's Physics buttons
        row.operator_menu_enum("abd.connect", "type", text="Connect", icon="CONSTRAINT")
        if body.enabled:
            _override_warning(layout, context, body.motion == "DYNAMIC")
        layout.use_property_split = True
        layout.active = body.enabled
        layout.prop(body, "motion")
        # A fixed or animated body's mass still counts: it sets the stiffness of its joints,
        # K = strength_ratio (m_l + m_r) with m the total body mass
        # (docs/constitutions/20_prismatic_joint.md), so it stays editable.
        col = layout.column()
        col.prop(body, "mass_mode")
        col.prop(body, "mass" if body.mass_mode == "MASS" else "mass_density")
        if body.mass_mode == "MASS":
            col.prop(body, "use_inertia")
            if body.use_inertia:
                col.prop(body, "mass_center")
                col.prop(body, "inertia")
        if mesh_is_open(context.object.data):
            col.prop(body, "thickness")
            source = f"a shell {body.thickness * 1000:.3g} mm thick" if body.thickness > 0 else "its convex hull"
            col.label(text=f"Open mesh: collides as a surface, mass from {source}", icon="INFO")
        if body.motion != "DYNAMIC":
            col.label(text="Mass sets only its joints' stiffness", icon="INFO")
        kappa = layout.column()
        kappa.active = body.motion == "DYNAMIC"  # the orthogonality potential acts on dynamic bodies only
        kappa.prop(body, "kappa")


class PHYSICS_PT_abd_body_velocity(_PhysicsPanel, Panel):
    """Initial velocity of a dynamic body."""

    bl_label = "Initial Velocity"
    bl_parent_id = "PHYSICS_PT_abd_body"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return _body(context) is not None

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        body = context.object.abd_body
        layout.active = body.enabled and body.motion == "DYNAMIC"
        layout.prop(body, "linear_velocity")
        layout.prop(body, "angular_velocity")


class PHYSICS_PT_abd_body_soft_transform(_PhysicsPanel, Panel):
    """Soft Transform Constraint: pull towards a target pose."""

    bl_label = "Soft Transform"
    bl_parent_id = "PHYSICS_PT_abd_body"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return _body(context) is not None

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_body.soft_transform, "is_constrained", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        body = context.object.abd_body
        soft = body.soft_transform
        layout.active = body.enabled and soft.is_constrained
        layout.prop(soft, "target")
        if soft.target == "OBJECT":
            layout.prop(soft, "target_object")
        col = layout.column(align=True)
        col.prop(soft, "strength_ratio_p")
        col.prop(soft, "strength_ratio_a")


class PHYSICS_PT_abd_body_collision(_PhysicsPanel, Panel):
    """Contact settings of a body (used when the ABD World's Contact is on)."""

    bl_label = "Collision"
    bl_parent_id = "PHYSICS_PT_abd_body"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return _body(context) is not None

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_body, "use_collision", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        body = context.object.abd_body
        layout.active = body.enabled and body.use_collision
        layout.prop(body, "collision_shape")
        layout.prop(body, "use_friction")
        row = layout.row()
        row.active = body.use_friction
        row.prop(body, "friction")
        layout.prop(body, "collision_collections", text="Collections")
        if not context.scene.abd_world.use_contact:
            layout.label(text="Contact is off in the ABD World", icon="INFO")


class PHYSICS_PT_abd_joint(_PhysicsPanel, Panel):
    """Joint settings of an Empty (origin = anchor, local Z = axis)."""

    bl_label = "ABD Joint"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return _joint(context) is not None

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_joint, "enabled", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        joint = context.object.abd_joint
        layout.active = joint.enabled
        if joint.enabled:
            _override_warning(layout, context, True)
        layout.prop(joint, "type")
        col = layout.column(align=True)
        col.prop(joint, "l_body", text="Parent")
        col.prop(joint, "r_body", text="Child")
        layout.prop(joint, "strength_ratio")
        if joint.type in AXIS_JOINT_TYPES:
            layout.prop(joint, "init_distance" if joint.type == "PRISMATIC" else "init_angle")
            unit = "N·s/m" if joint.type == "PRISMATIC" else "N·m·s/rad"
            layout.prop(joint, "damping", text=f"Damping ({unit})")
        layout.prop(joint, "disable_collisions")
        ob = context.object
        labels = {"abd_distance": "Baked Distance", "abd_angle": "Baked Angle", "abd_rotation": "Baked Rotation",
                  "abd_broken": "Baked Broken"}
        key = next((key for key in labels if key in ob.keys()), None)
        if key is not None:
            layout.prop(ob, f'["{key}"]', text=labels[key])


def revolute_stops(joint) -> tuple[float, float]:
    """(lower, upper) where a revolute joint's limit stops it in the reported angle (rad): its
    bounds plus twice Init Angle, since the limit compares the raw angle with the bounds offset by
    Init Angle (docs/constitutions/670_revolute_joint_limit.md) and the reported angle adds Init Angle again
    (docs/constitutions/670_revolute_joint_limit.md)."""
    limit = joint.limit
    return limit.lower_angle + 2.0 * joint.init_angle, limit.upper_angle + 2.0 * joint.init_angle


def _angle_text(context, angle: float) -> str:
    """``angle`` (rad) in the scene's rotation unit."""
    if context.scene.unit_settings.system_rotation == "RADIANS":
        return f"{angle:.4g} rad"
    return f"{math.degrees(angle):.4g}°"


class PHYSICS_PT_abd_joint_limits(_PhysicsPanel, Panel):
    """Joint limit (#669 / #670)."""

    bl_label = "Limits"
    bl_parent_id = "PHYSICS_PT_abd_joint"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene: a prismatic or revolute joint."""
        joint = _joint(context)
        return joint is not None and joint.type in AXIS_JOINT_TYPES

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_joint.limit, "use", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        joint = context.object.abd_joint
        limit = joint.limit
        layout.active = joint.enabled and limit.use
        col = layout.column(align=True)
        if joint.type == "PRISMATIC":
            col.prop(limit, "lower", text="Z Lower")
            col.prop(limit, "upper", text="Upper")
        else:
            col.prop(limit, "lower_angle", text="Z Lower")
            col.prop(limit, "upper_angle", text="Upper")
            if joint.init_angle != 0.0:
                col.label(text="Stops at {} and {} in the reported angle".format(
                    *(_angle_text(context, stop) for stop in revolute_stops(joint))), icon="INFO")
        layout.prop(limit, "strength")


class PHYSICS_PT_abd_joint_generic(_PhysicsPanel, Panel):
    """A Generic joint's limits, springs, cone and break threshold, in Blender's Generic Spring words."""

    bl_label = "Limits and Springs"
    bl_parent_id = "PHYSICS_PT_abd_joint"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene: a Generic joint."""
        joint = _joint(context)
        return joint is not None and joint.type == "GENERIC"

    def draw(self, context):
        """Draw the panel's settings: per axis, its limit (lower = upper locks it) and its spring."""
        layout = self.layout
        layout.use_property_split = True
        joint = context.object.abd_joint
        generic = joint.generic
        layout.active = joint.enabled
        for kind, title, unit, damping_unit in (("linear", "Linear", "N/m", "N s/m"),
                                                ("angular", "Angular", "N m/rad", "N m s/rad")):
            layout.label(text=f"{title} Limits")
            for axis, name in enumerate("XYZ"):
                row = layout.row(align=True)
                row.prop(generic, f"use_limit_{kind}", index=axis, text=f"{name}")
                sub = row.row(align=True)
                sub.active = generic.path_resolve(f"use_limit_{kind}")[axis]
                sub.prop(generic, f"limit_{kind}_lower", index=axis, text="Lower")
                sub.prop(generic, f"limit_{kind}_upper", index=axis, text="Upper")
            layout.label(text=f"{title} Springs")
            for axis, name in enumerate("XYZ"):
                row = layout.row(align=True)
                row.prop(generic, f"use_spring_{kind}", index=axis, text=f"{name}")
                sub = row.row(align=True)
                sub.active = generic.path_resolve(f"use_spring_{kind}")[axis]
                sub.prop(generic, f"spring_stiffness_{kind}", index=axis, text=f"Stiffness ({unit})")
                sub.prop(generic, f"spring_damping_{kind}", index=axis, text=f"Damping ({damping_unit})")
        layout.prop(generic, "use_cone")
        col = layout.column(align=True)
        col.active = generic.use_cone
        col.prop(generic, "swing_limit", index=0, text="Swing Y")
        col.prop(generic, "swing_limit", index=1, text="Swing Z")
        col.prop(generic, "twist_limit", text="Twist")
        col.prop(generic, "cone_rotation", text="Cone Center")
        layout.prop(generic, "limit_strength", text="Limit Strength (J)")
        row = layout.row(align=True)
        row.prop(generic, "use_breaking")
        sub = row.row(align=True)
        sub.active = generic.use_breaking
        sub.prop(generic, "breaking_threshold", text="Threshold (N)")


class PHYSICS_PT_abd_joint_drive(_PhysicsPanel, Panel):
    """Driving Prismatic Joint (#21) or Driving Revolute Joint (#19)."""

    bl_label = "Drive"
    bl_parent_id = "PHYSICS_PT_abd_joint"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        joint = _joint(context)
        return joint is not None and joint.type in AXIS_JOINT_TYPES

    def draw_header(self, context):
        """The enable checkbox in the panel header."""
        self.layout.prop(context.object.abd_joint.drive, "is_constrained", text="")

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        layout.use_property_split = True
        joint = context.object.abd_joint
        drive = joint.drive
        layout.active = joint.enabled and drive.is_constrained
        layout.prop(drive, "is_passive")
        col = layout.column()
        col.active = not drive.is_passive
        col.prop(drive, "mode")
        if drive.mode == "VELOCITY":
            unit = "m/s" if joint.type == "PRISMATIC" else "rad/s"
            col.prop(drive, "aim_velocity", text=f"Aim Velocity ({unit})")
        else:
            col.prop(drive, "aim_distance" if joint.type == "PRISMATIC" else "aim_angle")
        layout.prop(drive, "strength_ratio")
        if joint.type == "PRISMATIC":
            layout.prop(drive, "max_force", text="Max Force (N)")
            layout.prop(drive, "max_speed", text="Max Speed (m/s)")
        else:
            layout.prop(drive, "max_torque", text="Max Torque (N·m)")
            layout.prop(drive, "max_speed", text="Max Speed (rad/s)")


class PHYSICS_PT_abd_world(_PhysicsPanel, Panel):
    """Scene settings of the solver."""

    bl_label = "ABD World"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return context.scene is not None

    def draw(self, context):
        """Draw the panel's settings."""
        draw_world(self.layout, context.scene)


class PHYSICS_PT_abd_world_solver(_PhysicsPanel, Panel):
    """Newton settings."""

    bl_label = "Solver"
    bl_parent_id = "PHYSICS_PT_abd_world"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        """Draw the panel's settings."""
        draw_solver(self.layout, context)


class PHYSICS_PT_abd_world_contact(_PhysicsPanel, Panel):
    """Contact between bodies (IPC)."""

    bl_label = "Contact"
    bl_parent_id = "PHYSICS_PT_abd_world"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        """Draw the panel's settings."""
        draw_contact(self.layout, context.scene)


class PHYSICS_PT_abd_bake(_PhysicsPanel, Panel):
    """Bake and Free Bake."""

    bl_label = "ABD Bake"

    @classmethod
    def poll(cls, context):
        """Whether the panel applies to the context's object or scene."""
        return context.scene is not None

    def draw(self, context):
        """Draw the panel's settings."""
        draw_bake(self.layout, context.scene)


def draw_world(layout, scene) -> None:
    """Draw ``Scene.abd_world``'s preview, time and gravity settings."""
    layout.use_property_split = True
    world = scene.abd_world
    layout.prop(world, "use_preview")
    status = preview.status(scene)
    if status:
        layout.label(text=status, icon="INFO")
    layout.prop(world, "substeps")
    layout.prop(world, "use_scene_frame_range")
    col = layout.column(align=True)
    col.active = not world.use_scene_frame_range
    col.prop(world, "frame_start", text="Frame Start")
    col.prop(world, "frame_end", text="End")
    layout.prop(world, "use_scene_gravity")
    if world.use_scene_gravity:
        row = layout.row()
        row.active = scene.use_gravity
        row.prop(scene, "gravity")
    else:
        layout.prop(world, "gravity")


def draw_solver(layout, context) -> None:
    """Draw ``Scene.abd_world``'s Newton and device settings."""
    layout.use_property_split = True
    world = context.scene.abd_world
    layout.prop(world, "max_iterations")
    layout.prop(world, "velocity_tol")
    layout.prop(world, "transrate_tol")
    layout.prop(world, "line_search_max_iterations")
    layout.prop(world, "strain_tolerance")
    layout.prop(world, "device")
    if world.device == "CUPY":
        if importlib.util.find_spec("cupy") is None:
            layout.label(text="CuPy is not installed in Blender's Python: bakes will stop", icon="ERROR")
        advice = gpu_advice(context.view_layer)
        if advice is not None:
            layout.label(text=advice, icon="INFO")
    elif world.device == "LIBUIPC":
        if importlib.util.find_spec("uipc") is None:
            layout.label(text="pyuipc is not installed in Blender's Python: bakes will stop", icon="ERROR")
        advice = uipc_advice(context.view_layer, world.use_contact)
        if advice is not None:
            layout.label(text=advice, icon="INFO")
        if world.use_contact and world.velocity_tol > UIPC_FRICTION_VELOCITY_TOL * (1.0 + 1e-6):  # a float32 property
            layout.label(text=f"libuipc slides bodies under friction as the CPU does at a Velocity Tolerance of "
                              f"{UIPC_FRICTION_VELOCITY_TOL} m/s or less", icon="INFO")


def draw_contact(layout, scene) -> None:
    """Draw ``Scene.abd_world``'s contact settings."""
    layout.use_property_split = True
    world = scene.abd_world
    layout.prop(world, "use_contact")
    col = layout.column()
    col.active = world.use_contact
    col.prop(world, "d_hat")
    col.prop(world, "friction")
    col.prop(world, "use_auto_resistance")
    row = col.row()
    row.active = world.use_contact and not world.use_auto_resistance
    row.prop(world, "resistance")
    if world.use_contact and importlib.util.find_spec("ipctk") is None:
        layout.label(text="The ipctk package is not installed: bakes will stop", icon="ERROR")


def draw_bake(layout, scene) -> None:
    """Draw the Bake / Free Bake / Export buttons and the bake status."""
    col = layout.column(align=True)
    col.operator("abd.bake", icon="PHYSICS")
    col.operator("abd.bake_free", icon="TRASH")
    baked = len(baked_objects(scene))
    layout.label(text=f"{baked} object(s) baked" if baked else "Not baked", icon="INFO")
    row = layout.row(align=True)
    row.operator("abd.export_scene", icon="EXPORT")
    row.operator("abd.apply_trajectory", icon="IMPORT")


class VIEW3D_PT_abd(Panel):
    """3D-view sidebar tab: build the rig and bake."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "ABD"
    bl_label = "ABD Joints"

    def draw(self, context):
        """Draw the panel's settings."""
        layout = self.layout
        col = layout.column(align=True)
        col.operator("abd.body_add", icon="ADD")
        col.operator("abd.body_remove", icon="REMOVE")
        layout.operator_menu_enum("abd.connect", "type", text="Connect", icon="CONSTRAINT")
        layout.operator("abd.convert_rigid_bodies", icon="RIGID_BODY")


class _SidebarPanel:
    """Common settings of the 3D-view sidebar's ABD panels below the first."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "ABD"
    bl_parent_id = "VIEW3D_PT_abd"


class VIEW3D_PT_abd_world(_SidebarPanel, Panel):
    """3D-view sidebar: the ABD World settings (as in the Physics tab, which needs an active object)."""

    bl_label = "World"

    def draw(self, context):
        """Draw the panel's settings."""
        draw_world(self.layout, context.scene)


class VIEW3D_PT_abd_world_solver(_SidebarPanel, Panel):
    """3D-view sidebar: the Newton and device settings."""

    bl_label = "Solver"
    bl_parent_id = "VIEW3D_PT_abd_world"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        """Draw the panel's settings."""
        draw_solver(self.layout, context)


class VIEW3D_PT_abd_world_contact(_SidebarPanel, Panel):
    """3D-view sidebar: the contact settings."""

    bl_label = "Contact"
    bl_parent_id = "VIEW3D_PT_abd_world"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        """Draw the panel's settings."""
        draw_contact(self.layout, context.scene)


class VIEW3D_PT_abd_bake(_SidebarPanel, Panel):
    """3D-view sidebar: Bake, Free Bake, Export Scene File, Apply Trajectory File."""

    bl_label = "Bake"

    def draw(self, context):
        """Draw the panel's settings."""
        draw_bake(self.layout, context.scene)


CLASSES = (
    PHYSICS_PT_abd_body,
    PHYSICS_PT_abd_body_velocity,
    PHYSICS_PT_abd_body_soft_transform,
    PHYSICS_PT_abd_body_collision,
    PHYSICS_PT_abd_joint,
    PHYSICS_PT_abd_joint_limits,
    PHYSICS_PT_abd_joint_generic,
    PHYSICS_PT_abd_joint_drive,
    PHYSICS_PT_abd_world,
    PHYSICS_PT_abd_world_solver,
    PHYSICS_PT_abd_world_contact,
    PHYSICS_PT_abd_bake,
    VIEW3D_PT_abd,
    VIEW3D_PT_abd_world,
    VIEW3D_PT_abd_world_solver,
    VIEW3D_PT_abd_world_contact,
    VIEW3D_PT_abd_bake,
)
