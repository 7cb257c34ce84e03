"""Panels draw without errors: every property and operator they name exists (headless check).

Blender cannot draw panels without a window, so each panel's ``draw`` runs against a recording
layout that checks every ``prop`` and ``operator`` call against the real RNA definitions.
"""

from __future__ import annotations

import importlib.util
import re

import bpy
import pytest
from abd_rigs import add_box, clear_objects, hanging_pair, hinge_rig, select_only, slider_rig


class OperatorProperties:
    """Stands in for the properties of a button's operator: validates and records each one set
    as ``("set", idname, name, value)``."""

    def __init__(self, idname, calls):
        object.__setattr__(self, "idname", idname)
        object.__setattr__(self, "calls", calls)

    def __setattr__(self, name, value):
        module, operator = self.idname.split(".")
        assert name in getattr(getattr(bpy.ops, module), operator).get_rna_type().properties, (self.idname, name)
        self.calls.append(("set", self.idname, name, value))


def press(calls, idname):
    """Run the operator of the button ``idname`` recorded in ``calls`` with the properties the
    panel set on it, as pressing the button does."""
    properties = {call[2]: call[3] for call in calls if call[0] == "set" and call[1] == idname}
    module, name = idname.split(".")
    return getattr(getattr(bpy.ops, module), name)(**properties)


class RecordingLayout:
    """Stands in for ``UILayout``: validates and records prop/operator/label calls, and also
    records ``("inactive", name)`` for a property drawn greyed out (``active`` False on its
    layout or on one it was made from, as Blender greys out a sub-layout's contents)."""

    def __init__(self, calls, parent=None):
        self.calls = calls
        self.parent = parent
        self.use_property_split = False
        self.active = True
        self.enabled = True

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.calls, self)

    def _greyed(self) -> bool:
        return not self.active or (self.parent is not None and self.parent._greyed())

    row = column = box = split = grid_flow = column_flow = _child

    def prop(self, data, name, **kwargs):
        if name.startswith('["'):
            assert name[2:-2] in data.keys(), name
        else:
            assert name in data.bl_rna.properties, f"{type(data).__name__} has no property {name!r}"
        self.calls.append(("prop", name))
        if "text" in kwargs:
            self.calls.append(("text", name, kwargs["text"]))
        if self._greyed():
            self.calls.append(("inactive", name))

    def operator(self, idname, **kwargs):
        module, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, module), name) and getattr(getattr(bpy.ops, module), name).idname(), idname
        self.calls.append(("operator", idname))
        return OperatorProperties(idname, self.calls)

    def operator_menu_enum(self, idname, property, **kwargs):
        module, name = idname.split(".")
        assert property in getattr(getattr(bpy.ops, module), name).get_rna_type().properties, (idname, property)
        self.calls.append(("operator_menu_enum", idname, property, kwargs.get("text")))

    def label(self, **kwargs):
        self.calls.append(("label", kwargs.get("text")))

    def separator(self, **kwargs):
        pass


def draw_panel(panel_class, context):
    """Run a panel's poll, draw_header and draw; return the recorded calls ([] if poll fails)."""
    if hasattr(panel_class, "poll") and not panel_class.poll(context):
        return []
    calls = []
    panel = type("Panel", (), {"layout": RecordingLayout(calls)})()
    if hasattr(panel_class, "draw_header"):
        panel_class.draw_header(panel, context)
    panel_class.draw(panel, context)
    return calls


@pytest.mark.parametrize("rig", [slider_rig, hinge_rig])
def test_every_panel_draws(addon, rig):
    base, body, joint = rig()
    bpy.ops.abd.bake()
    drawn = {}
    for ob in (body, joint):
        bpy.context.view_layer.objects.active = ob
        for panel_class in addon.ui.CLASSES:
            calls = draw_panel(panel_class, bpy.context)
            if calls:
                drawn.setdefault(panel_class.__name__, []).extend(calls)
    assert {"PHYSICS_PT_abd_body", "PHYSICS_PT_abd_joint", "PHYSICS_PT_abd_joint_limits", "PHYSICS_PT_abd_world",
            "PHYSICS_PT_abd_bake", "VIEW3D_PT_abd", "VIEW3D_PT_abd_world", "VIEW3D_PT_abd_world_solver",
            "VIEW3D_PT_abd_bake"} <= set(drawn)
    assert "PHYSICS_PT_abd_joint_drive" in drawn  # prismatic and revolute joints have drives
    assert ("operator", "abd.bake") in drawn["PHYSICS_PT_abd_bake"]
    readout = "abd_distance" if joint.abd_joint.type == "PRISMATIC" else "abd_angle"
    assert ("prop", f'["{readout}"]') in drawn["PHYSICS_PT_abd_joint"]
    assert ("label", "2 object(s) baked") in drawn["PHYSICS_PT_abd_bake"]


def test_joint_panel_shows_a_ball_joints_baked_rotation(addon):
    """A baked Ball joint's panel shows its abd_rotation (the three numbers)."""
    base, bob, joint = hanging_pair("BALL", frame_end=4)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.view_layer.objects.active = joint
    assert ("prop", '["abd_rotation"]') in draw_panel(addon.ui.PHYSICS_PT_abd_joint, bpy.context)


def test_solver_panel_warns_when_the_gpu_device_lacks_cupy(addon):
    slider_rig()
    world = bpy.context.scene.abd_world
    warning = ("label", "CuPy is not installed in Blender's Python: bakes will stop")
    assert ("prop", "device") in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    world.device = "CUPY"
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    assert (warning in calls) == (importlib.util.find_spec("cupy") is None)


def test_solver_panel_says_when_the_cpu_would_bake_faster_than_the_gpu(addon):
    """The GPU path pays only on rigs of many dynamic bodies whose joints couple them in a wide
    band (gpu_advice.gpu_advice); the Solver panel says so under Device: GPU."""
    clear_objects()
    cubes = [add_box(f"Cube{i}", 0.2, (0.4 * (i % 3), 0.0, -0.4 * (i // 3))) for i in range(9)]
    select_only(*cubes)
    assert bpy.ops.abd.body_add() == {"FINISHED"}

    def connect(a, b):
        select_only(cubes[a], cubes[b], active=cubes[a])
        assert bpy.ops.abd.connect(type="REVOLUTE", pivot_type="ACTIVE", axis="Y") == {"FINISHED"}

    for a, b in ((0, 1), (1, 2), (2, 5), (5, 4), (4, 3), (3, 6), (6, 7), (7, 8)):
        connect(a, b)  # a chain snaking through the 3 x 3 grid: a band one body wide
    advice, view_layer = addon.gpu_advice.gpu_advice, bpy.context.view_layer
    few = "9 dynamic bodies: the CPU is usually faster below about 500"
    assert advice(view_layer) == few
    assert advice(view_layer, min_bodies=9, min_band=2) == "Its joints form a band 1 body wide: the CPU is faster"
    for a, b in ((0, 3), (1, 4), (3, 6), (4, 7), (2, 5), (5, 8)):
        connect(a, b)  # every cell of the grid a loop: the band is as wide as a row
    assert advice(view_layer, min_bodies=9, min_band=2) is None
    assert advice(view_layer, min_bodies=9, min_band=4) == "Its joints form a band 3 bodies wide: the CPU is faster"
    for cube in cubes[3:6]:  # joints to fixed bodies couple nothing: two rows of three, each a chain
        cube.abd_body.motion = "FIXED"
    assert advice(view_layer, min_bodies=6, min_band=2) == "Its joints form a band 1 body wide: the CPU is faster"

    world = bpy.context.scene.abd_world
    six = ("label", "6 dynamic bodies: the CPU is usually faster below about 500")
    assert six not in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    world.device = "CUPY"
    assert six in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)


def test_solver_panel_says_when_the_cpu_would_bake_faster_than_libuipc(addon):
    """libuipc pays on contact-heavy scenes only (gpu_advice.uipc_advice); under Device: GPU
    (libuipc) the Solver panel says when the CPU is faster, and when pyuipc is missing."""
    clear_objects()
    cubes = [add_box(f"Cube{i}", 0.2, (0.5 * i, 0.0, 0.0)) for i in range(4)]
    select_only(*cubes)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    world, view_layer = bpy.context.scene.abd_world, bpy.context.view_layer
    contact_off = ("label", "Contact is off: this solver on the CPU is faster for jointed rigs")
    assert contact_off not in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    world.device = "LIBUIPC"
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    assert contact_off in calls
    missing = ("label", "pyuipc is not installed in Blender's Python: bakes will stop")
    assert (missing in calls) == (importlib.util.find_spec("uipc") is None)
    world.use_contact = True
    assert ("label", "4 colliding dynamic bodies: the CPU is usually faster below about 50") in draw_panel(
        addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    advice = addon.gpu_advice.uipc_advice
    assert advice(view_layer, True, min_colliding=4) is None
    cubes[0].abd_body.use_collision = False
    cubes[1].abd_body.motion = "FIXED"
    assert advice(view_layer, True, min_colliding=3) == (
        "2 colliding dynamic bodies: the CPU is usually faster below about 3")
    friction = ("label", "libuipc slides bodies under friction as the CPU does at a Velocity Tolerance of "
                         "0.0005 m/s or less")
    assert friction in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    world.velocity_tol = 0.0005
    assert friction not in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)


def test_panels_warn_about_what_would_override_the_bake(addon):
    base, slider, joint = slider_rig(frame_end=8)
    warning = ("label", "Its active Blender rigid body would override the bake")
    select_only(slider)
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    assert warning in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    slider.rigid_body.kinematic = True
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    select_only(joint)
    joint.constraints.new("CHILD_OF")
    assert ("label", "Its constraint 'Child Of' would override the bake") in draw_panel(
        addon.ui.PHYSICS_PT_abd_joint, bpy.context)


def test_a_fixed_bodys_mass_stays_editable_as_it_sets_its_joints_stiffness(addon):
    # K = strength_ratio (m_l + m_r) counts a fixed or animated body's mass too (docs/constitutions/):
    # its mass settings must not look inert; the orthogonality stiffness kappa does not apply.
    base, slider, joint = slider_rig(frame_end=8)
    note = ("label", "Mass sets only its joints' stiffness")
    for body, motion in ((base, "FIXED"), (base, "ANIMATED"), (slider, "DYNAMIC")):
        body.abd_body.motion = motion
        select_only(body)
        calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
        assert ("prop", "mass_density") in calls and ("inactive", "mass_density") not in calls
        assert (note in calls) == (motion != "DYNAMIC")
        assert (("inactive", "kappa") in calls) == (motion != "DYNAMIC")
    base.abd_body.mass_mode = "MASS"
    select_only(base)
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("prop", "mass") in calls and ("inactive", "mass") not in calls


def test_affine_body_buttons_act_on_the_panels_object_not_the_selection(addon):
    """The Physics properties show the active object (selected or not), or a pinned one: their
    Add / Remove Affine Body button acts on it, as Blender's own Physics buttons do; the sidebar's
    act on the selection."""
    base, arm, joint = hinge_rig(frame_end=4)
    cube = add_box("Cube", location=(4.0, 0.0, 0.0))
    select_only(base, active=arm)  # Arm active but not selected (Ctrl+click), Base selected
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("operator", "abd.body_remove") in calls
    assert press(calls, "abd.body_remove") == {"FINISHED"}
    assert not arm.abd_body.enabled and base.abd_body.enabled
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert press(calls, "abd.body_add") == {"FINISHED"}
    assert arm.abd_body.enabled and not cube.abd_body.enabled
    with bpy.context.temp_override(object=cube):  # Cube pinned in the Physics properties
        calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
        assert press(calls, "abd.body_add") == {"FINISHED"}
    assert cube.abd_body.enabled and base.abd_body.enabled and arm.abd_body.enabled
    select_only(active=cube)  # nothing selected: the panel's button still works
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert press(calls, "abd.body_remove") == {"FINISHED"}
    assert not cube.abd_body.enabled and base.abd_body.enabled and arm.abd_body.enabled
    select_only(cube, arm, active=base)  # the sidebar: on the selected objects
    calls = draw_panel(addon.ui.VIEW3D_PT_abd, bpy.context)
    assert press(calls, "abd.body_add") == {"FINISHED"}
    assert cube.abd_body.enabled
    assert press(calls, "abd.body_remove") == {"FINISHED"}
    assert not cube.abd_body.enabled and not arm.abd_body.enabled and base.abd_body.enabled
    select_only(active=base)  # nothing selected: the sidebar's buttons say so (the active body is kept)
    with pytest.raises(RuntimeError, match="Select one or more affine bodies"):
        press(calls, "abd.body_remove")
    with pytest.raises(RuntimeError, match="Select one or more mesh objects"):
        press(calls, "abd.body_add")
    assert base.abd_body.enabled


def test_the_sidebar_reaches_every_world_and_bake_setting(addon):
    """The Physics tab shows nothing without an active object: the ABD sidebar tab draws every
    ABD World setting (the Solver's too) and every bake button."""
    slider_rig(frame_end=8)
    bpy.context.view_layer.objects.active = None
    world = bpy.context.scene.abd_world
    world.use_scene_frame_range, world.use_scene_gravity = False, False
    sidebar = [call for panel in (addon.ui.VIEW3D_PT_abd, addon.ui.VIEW3D_PT_abd_world,
                                  addon.ui.VIEW3D_PT_abd_world_solver, addon.ui.VIEW3D_PT_abd_world_contact,
                                  addon.ui.VIEW3D_PT_abd_bake)
               for call in draw_panel(panel, bpy.context)]
    settings = {prop.identifier for prop in world.bl_rna.properties if prop.identifier not in ("rna_type", "name")}
    assert settings <= {call[1] for call in sidebar if call[0] == "prop"}
    buttons = {call[1] for call in sidebar if call[0] == "operator"}
    assert {"abd.bake", "abd.bake_free", "abd.export_scene", "abd.apply_trajectory"} <= buttons
    assert all(getattr(addon.ui, name).bl_category == "ABD" for name in
               ("VIEW3D_PT_abd", "VIEW3D_PT_abd_world", "VIEW3D_PT_abd_world_solver", "VIEW3D_PT_abd_world_contact",
                "VIEW3D_PT_abd_bake"))


def test_both_connect_buttons_offer_every_joint_type(addon):
    """The Physics tab's and the sidebar's Connect are the same menu of joint types."""
    base, slider, joint = slider_rig(frame_end=8)
    select_only(slider)
    menu = ("operator_menu_enum", "abd.connect", "type", "Connect")
    assert menu in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert menu in draw_panel(addon.ui.VIEW3D_PT_abd, bpy.context)


@pytest.mark.parametrize("operator, setup, reason", [
    ("connect", lambda base, slider: select_only(slider), "Select two or more affine bodies"),
    ("bake", lambda base, slider: [select_only(ob) or bpy.ops.abd.body_remove() for ob in (base, slider)],
     "No affine bodies in this view layer"),
    ("export_scene", lambda base, slider: [setattr(ob.abd_body, "enabled", False) for ob in (base, slider)],
     "No affine bodies in this view layer"),
    ("body_remove", lambda base, slider: select_only(active=None), "Select one or more affine bodies"),
    ("body_add", lambda base, slider: select_only(active=None), "Select one or more mesh objects"),
])
def test_greyed_out_buttons_say_why(addon, operator, setup, reason):
    base, slider, joint = slider_rig(frame_end=8)
    setup(base, slider)
    function = getattr(bpy.ops.abd, operator)
    assert not function.poll()
    with pytest.raises(RuntimeError, match=reason):
        function()


def test_add_affine_body_names_the_objects_that_are_not_meshes(addon):
    clear_objects()
    cube = add_box("Cube")
    bpy.ops.object.empty_add()
    empty = bpy.context.active_object
    empty.name = "Handle"
    select_only(empty)
    with pytest.raises(RuntimeError, match=r"'Handle' is not a mesh \(Empty\): only meshes can be affine bodies"):
        bpy.ops.abd.body_add()
    select_only(cube, empty)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    assert cube.abd_body.enabled and not empty.abd_body.enabled


def test_connect_settings_have_tooltips(addon):
    properties = bpy.ops.abd.connect.get_rna_type().properties
    for name in ("type", "pivot_type", "axis", "connection_pattern"):
        assert properties[name].description, name
        assert all(item.description for item in properties[name].enum_items), name


#: What the panels must not say (the solver's identifiers and formulas, not Blender's words).
SOLVER_WORDS = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b|\bkappa\b|Transrate|Strength Ratio|\bNewton\b|=|\w\.\w+\b")
#: Greek letters and hatted symbols: in a tooltip only in parentheses after the plain name.
SYMBOL = re.compile(r"[\u0370-\u03ff]|\u0302")


def words_problem(name: str, description: str) -> str | None:
    """Why a label and tooltip are not in Blender's physics-panel words, or None."""
    if not name or not description:
        return "empty label or tooltip"
    if SYMBOL.search(name) or SOLVER_WORDS.search(name):
        return f"label {name!r}"
    outside = re.sub(r"\([^)]*\)", "", description)  # a symbol may stand in parentheses
    if SYMBOL.search(outside) or SOLVER_WORDS.search(description.replace("e.g.", "")):
        return f"tooltip {description!r}"
    return None


def every_branch(addon):
    """Rigs and settings that make the panels draw every property they can: each joint type (a
    Generic one with its cone, springs and break threshold on), a drive in either mode, a soft
    transform aiming at an object, an explicit mass and inertia, contact with its own resistance,
    the world's own gravity and frame range, an open mesh."""
    scene = bpy.context.scene
    world = scene.abd_world
    world.use_contact, world.use_auto_resistance = True, False
    world.use_scene_gravity, world.use_scene_frame_range = False, False
    rigs = (slider_rig, hinge_rig, *(lambda kind=kind: hanging_pair(kind, frame_end=4)
                                     for kind in ("BALL", "FIXED", "GENERIC")))
    for index, rig in enumerate(rigs):
        base, body, joint = rig()
        generic = joint.abd_joint.generic
        generic.use_cone = generic.use_breaking = True
        generic.use_spring_linear = generic.use_spring_angular = (True, True, True)
        body.abd_body.mass_mode, body.abd_body.use_inertia = ("MASS", True) if index % 2 else ("DENSITY", False)
        soft = body.abd_body.soft_transform
        soft.is_constrained, soft.target, soft.target_object = True, "OBJECT", base
        for mode in ("POSITION", "VELOCITY"):
            joint.abd_joint.drive.mode = mode
            yield body, joint
    bpy.ops.mesh.primitive_monkey_add(location=(3.0, 0.0, 0.0))  # an open mesh: its Thickness
    select_only(bpy.context.active_object)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    yield bpy.context.active_object, joint


def test_every_property_of_every_panel_speaks_blender_words(addon):
    """Every property every panel draws, in every branch (:func:`every_branch`), has a label and a
    tooltip; neither holds a solver identifier, formula or (outside the tooltip's parentheses after
    the plain name) a symbol; the labels a panel gives a property or writes itself, likewise; and
    every item of every enum has a tooltip. Blender's own properties (the scene's gravity) are
    Blender's words already."""
    problems = set()
    drawn = set()
    for body, joint in every_branch(addon):
        for ob in (body, joint):
            bpy.context.view_layer.objects.active = ob
            for panel_class in addon.ui.CLASSES:
                for call in draw_panel(panel_class, bpy.context):
                    if call[0] == "prop" and not call[1].startswith('["'):
                        drawn.add(call[1])
                    if call[0] in ("label", "text") and call[-1] and SOLVER_WORDS.search(call[-1]):
                        problems.add(f"{panel_class.__name__}: text {call[-1]!r}")
    for group in addon.properties.CLASSES:
        if group is addon.properties.ABDBakeState:
            continue  # the bake's bookkeeping: never drawn
        for prop in group.bl_rna.properties:
            if prop.identifier in ("rna_type", "name") or prop.is_hidden:
                continue
            if prop.type == "POINTER" and prop.fixed_type.identifier.startswith("ABD"):
                continue  # a nested group: its own properties are checked
            problem = words_problem(prop.name, prop.description)
            if problem:
                problems.add(f"{group.__name__}.{prop.identifier}: {problem}")
            for item in getattr(prop, "enum_items", ()):
                if not item.description:
                    problems.add(f"{group.__name__}.{prop.identifier}: item {item.name!r} has no tooltip")
    assert sorted(problems) == []
    settings = {prop.identifier for group in addon.properties.CLASSES if group is not addon.properties.ABDBakeState
                for prop in group.bl_rna.properties if prop.type != "POINTER" and not prop.is_hidden}
    assert settings - {"rna_type", "name"} - drawn == set()  # every setting is drawn somewhere


def test_every_operator_property_has_a_tooltip_in_blender_words(addon):
    """The operators' settings (the redo panel, the file browser's side panel) and their own
    tooltips: labelled, described, no solver identifiers."""
    problems = []
    for operator in addon.operators.CLASSES + addon.urdf_import.CLASSES + addon.convert.CLASSES:
        module, name = operator.bl_idname.split(".")
        rna = getattr(getattr(bpy.ops, module), name).get_rna_type()
        if not rna.description:
            problems.append(f"{operator.bl_idname}: no tooltip")
        for prop in rna.properties:
            if prop.identifier == "rna_type" or prop.is_hidden or prop.identifier in ("filepath", "filter_glob"):
                continue
            problem = words_problem(prop.name, prop.description)
            if problem:
                problems.append(f"{operator.bl_idname}.{prop.identifier}: {problem}")
    assert problems == []


def test_an_open_mesh_shows_its_thickness_and_where_its_mass_comes_from(addon):
    """Suzanne (open) shows Thickness and a line saying its mass comes from its convex hull, or
    from a shell of the Thickness set; a closed cube shows neither."""
    base, slider, joint = slider_rig(frame_end=8)
    bpy.ops.mesh.primitive_monkey_add(location=(3.0, 0.0, 0.0))
    suzanne = bpy.context.active_object
    select_only(suzanne)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("prop", "thickness") in calls
    assert ("label", "Open mesh: collides as a surface, mass from its convex hull") in calls
    suzanne.abd_body.thickness = 0.002
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("label", "Open mesh: collides as a surface, mass from a shell 2 mm thick") in calls
    select_only(slider)
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("prop", "thickness") not in calls and not any(call[0] == "label" and "Open mesh" in str(call[1])
                                                          for call in calls)
