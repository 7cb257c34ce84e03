"""Viewport overlay (gpu module): each joint's axis, anchor and limit range, and with contact on,
the bodies that intersect where they stand (the pairs a bake starting at this frame refuses).

:func:`joints_geometry` computes the lines and points of all joints in world space at once
(plain NumPy, testable headless); :func:`draw` sends them to the GPU. A revolute limit is drawn
where the solver applies it: from the child body's current direction, offset by the joint's
current angle (:func:`scene_geometry`). The geometry is kept until the scene changes
(:func:`invalidate` on ``bpy.app.handlers`` and on the drawn settings' updates), so orbiting or
zooming a view with a thousand joints computes nothing (the first draw's time after a change:
docs/performance.md, "Large rigs in Blender"). :func:`intersecting_geometry` (the edges of the
intersecting bodies, in :data:`INTERSECTING_COLOR`, and a line naming each pair) is cached the
same way. The draw handlers are only installed when Blender has a UI (``bpy.app.background`` is
False).
"""

from __future__ import annotations

import math

import bpy
import numpy as np

from .bake.export import export_frame
from .names import READOUT_PROPERTIES
from .properties import OVERLAY_SETTING_CHANGED
from .bake.rig_rules import RigError

#: Colours (RGBA) of the axis, the anchor and the limit range.
AXIS_COLOR = (0.25, 0.6, 1.0, 1.0)
ANCHOR_COLOR = (1.0, 0.85, 0.2, 1.0)
LIMIT_COLOR = (1.0, 0.35, 0.3, 1.0)
#: Colour (RGBA) of the edges and names of contact bodies that intersect.
INTERSECTING_COLOR = (1.0, 0.1, 0.75, 1.0)
#: Segments of a full circle for revolute limit arcs.
ARC_SEGMENTS = 48

_handles: list = []


def _unit_rows(vectors: np.ndarray, fallback: np.ndarray, tolerance=1e-12) -> np.ndarray:
    """Rows of ``vectors`` (n, 3) normalised, ``fallback`` (n, 3) where a row is no longer than
    ``tolerance`` (a scalar or (n,), in the rows' unit)."""
    length = np.linalg.norm(vectors, axis=1)
    tiny = length <= tolerance
    return np.where(tiny[:, None], fallback, vectors / np.where(tiny, 1.0, length)[:, None])


def _in_plane(vectors: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Rows of ``vectors`` (n, 3) projected onto the planes normal to the unit rows of ``z`` (n, 3)."""
    return vectors - z * np.einsum("ij,ij->i", vectors, z)[:, None]


#: Where a revolute joint's reference direction falls back to the next candidate: a child origin
#: closer to the axis than this fraction of the drawn size (a wheel's, on its axle), or a child
#: X axis within this sine of the joint axis.
REFERENCE_TOLERANCE = 1e-3


def joints_geometry(matrices: np.ndarray, revolute: np.ndarray, use_limit: np.ndarray, lower: np.ndarray,
                    upper: np.ndarray, size: np.ndarray, children: np.ndarray) -> dict:
    """World-space overlay geometry of n joints at once.

    A revolute joint's angles are measured about the axis (right-handed, as the solver's angle)
    from its child's current direction: the direction from the anchor to the child's origin in
    the plane normal to the axis, or where that origin is (nearly) on the axis the child's local
    X in that plane, or where that is (nearly) along the axis the Empty's local X.

    Args:
        matrices: (n, 4, 4) the joint Empties' world matrices (origin = anchor, local Z = axis).
        revolute: (n,) bool, True for a revolute joint, False for a prismatic one.
        use_limit: (n,) bool, whether to draw each joint's limit range.
        lower: (n,) the lower limits, in m (prismatic, along the axis from the anchor) or rad
            (revolute, about it from the child's current direction).
        upper: (n,) the upper limits, in the same units; a revolute span (upper - lower) of a
            full turn or more is drawn as the full circle.
        size: (n,) length of the drawn half-axis and radius scale of the angle arc, in m.
        children: (n, 4, 4) the world matrices of the joints' child bodies (r), or of the
            Empties themselves for joints without one.

    Returns:
        ``{"axis": (2n, 3), "anchor": (n, 3), "limit": (2k, 3)}`` float32 arrays; ``axis`` and
        ``limit`` are line segments (pairs of points): the prismatic ranges with their end ticks,
        then the revolute arcs (one segment per 1/48 turn or less), then each arc's two spokes.
    """
    matrices = np.asarray(matrices, dtype=np.float64).reshape(-1, 4, 4)
    children = np.asarray(children, dtype=np.float64).reshape(-1, 4, 4)
    count = len(matrices)
    size = np.asarray(size, dtype=np.float64)[:, None]
    anchor = matrices[:, :3, 3]
    z = _unit_rows(matrices[:, :3, 2], np.tile([0.0, 0.0, 1.0], (count, 1)))
    # Local X along the axis (or zero): any direction normal to the axis.
    normal = _unit_rows(np.cross(z, [1.0, 0.0, 0.0]), np.cross(z, [0.0, 1.0, 0.0]))
    x = _unit_rows(_in_plane(matrices[:, :3, 0], z), normal)
    axis = np.stack([anchor - size * z, anchor + size * z], axis=1).reshape(-1, 3)

    slider = np.asarray(use_limit, dtype=bool) & ~np.asarray(revolute, dtype=bool)
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    a = anchor[slider] + lower[slider, None] * z[slider]
    b = anchor[slider] + upper[slider, None] * z[slider]
    tick = 0.15 * size[slider] * x[slider]
    ranges = np.stack([a, b, a - tick, a + tick, b - tick, b + tick], axis=1).reshape(-1, 3)

    hinge = np.asarray(use_limit, dtype=bool) & np.asarray(revolute, dtype=bool)
    pivot, hinge_z, child = anchor[hinge], z[hinge], children[hinge]
    child_x = child[:, :3, 0]
    reference = _unit_rows(_in_plane(child_x, hinge_z), x[hinge],
                           REFERENCE_TOLERANCE * np.linalg.norm(child_x, axis=1))
    reference = _unit_rows(_in_plane(child[:, :3, 3] - pivot, hinge_z), reference,
                           REFERENCE_TOLERANCE * size[hinge, 0])
    side = np.cross(hinge_z, reference)
    span = np.clip(upper[hinge] - lower[hinge], 0.0, 2.0 * math.pi)
    points_per_arc = np.maximum(2, np.ceil(ARC_SEGMENTS * span / (2.0 * math.pi)).astype(np.int64) + 1)
    owner = np.repeat(np.arange(len(span)), points_per_arc)  # the arc of each point
    first = np.cumsum(points_per_arc) - points_per_arc  # each arc's first point
    last = first + points_per_arc - 1
    step = (np.arange(len(owner)) - first[owner]) / (points_per_arc[owner] - 1)
    angles = lower[hinge][owner] + span[owner] * step
    radius = 0.6 * size[hinge][owner]
    points = pivot[owner] + radius * (np.cos(angles)[:, None] * reference[owner]
                                       + np.sin(angles)[:, None] * side[owner])
    starts = np.setdiff1d(np.arange(len(points)), last)  # all but each arc's last
    arcs = np.stack([points[starts], points[starts + 1]], axis=1).reshape(-1, 3)
    spokes = np.stack([pivot, points[first], pivot, points[last]], axis=1).reshape(-1, 3)
    return {
        "axis": axis.astype(np.float32),
        "anchor": anchor.astype(np.float32),
        "limit": np.concatenate([ranges, arcs, spokes]).astype(np.float32),
    }


def scene_geometry(view_layer) -> dict:
    """Overlay geometry of every visible enabled joint of ``view_layer``, concatenated
    (:func:`joints_geometry` of them all: one pass of NumPy, not one per joint).

    A revolute limit is drawn where it acts: the solver measures the angle x from the bodies'
    relative pose at the bake's first frame and keeps it within [lower + init_angle, upper +
    init_angle] (rad); the child is now at x_now = ``abd_angle`` - init_angle (the baked readout,
    init_angle + x, on the Empty), or 0 where the Empty has none (not baked: the current pose is
    the first frame's), so the wedge spans lower + init_angle - x_now .. upper + init_angle -
    x_now from the child's current direction.
    """
    # Every object's world matrix in one read (foreach_get gives each column by column).
    objects = bpy.data.objects
    flat = np.empty(len(objects) * 16, dtype=np.float32)
    objects.foreach_get("matrix_world", flat)
    worlds = flat.reshape(-1, 4, 4).transpose(0, 2, 1).astype(np.float64)
    row = {ob: k for k, ob in enumerate(objects)}
    joints = [ob for ob in view_layer.objects if ob.abd_joint.enabled and ob.visible_get()]
    settings = [ob.abd_joint for ob in joints]
    revolute = np.array([joint.type == "REVOLUTE" for joint in settings], dtype=bool)
    limits = [joint.limit for joint in settings]
    lower = np.array([limit.lower_angle if hinge else limit.lower for limit, hinge in zip(limits, revolute)])
    upper = np.array([limit.upper_angle if hinge else limit.upper for limit, hinge in zip(limits, revolute)])
    init_angle = np.array([joint.init_angle for joint in settings])
    readout = READOUT_PROPERTIES["revolute"]
    x_now = np.array([ob.get(readout, joint.init_angle) for ob, joint in zip(joints, settings)], dtype=np.float64)
    x_now -= init_angle
    offset = np.where(revolute, init_angle - x_now, 0.0)
    return joints_geometry(
        worlds[np.array([row[ob] for ob in joints], dtype=np.intp)],
        revolute,
        np.array([limit.use and joint.type in ("PRISMATIC", "REVOLUTE") for limit, joint in zip(limits, settings)],
                 dtype=bool),
        lower + offset,
        upper + offset,
        np.array([max(ob.empty_display_size, 0.1) for ob in joints]),
        worlds[np.array([row[joint.r_body or ob] for ob, joint in zip(joints, settings)], dtype=np.intp)],
    )


def _world_edges(ob, depsgraph) -> np.ndarray:
    """The edges of an object's evaluated mesh as world-space segments: (2 E, 3) float32, E its edges."""
    evaluated = ob.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        vertices = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
        mesh.vertices.foreach_get("co", vertices)
        edges = np.empty(len(mesh.edges) * 2, dtype=np.int64)
        mesh.edges.foreach_get("vertices", edges)
    finally:
        evaluated.to_mesh_clear()
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    world = vertices.reshape(-1, 3) @ matrix[:3, :3].T + matrix[:3, 3]
    return world[edges].astype(np.float32)


def intersecting_geometry(view_layer) -> dict:
    """The contact-enabled bodies of ``view_layer`` that intersect at the current frame: the pairs
    a bake starting here refuses (:func:`solver.model.intersecting_bodies`, the solver's own test,
    on :func:`.export.export_frame`).

    Returns:
        ``{"pairs": [(name, name), ...], "edges": (2k, 3) float32}``: the pairs (``name_full``s)
        and the edges of their bodies' meshes as world-space segments; none where contact is off,
        ipctk is not installed or the rig does not export (the bake says why).
    """
    from ..solver.contact import ContactUnavailable
    from ..solver.model import intersecting_bodies
    from ..solver.scene import SceneError

    none = {"pairs": [], "edges": np.zeros((0, 3), dtype=np.float32)}
    scene = view_layer.id_data
    if not scene.abd_world.use_contact:
        return none
    depsgraph = view_layer.depsgraph
    meshes = _validated_meshes.setdefault(view_layer.as_pointer(), {})
    try:
        pairs = intersecting_bodies(export_frame(scene, depsgraph, meshes))
    except (RigError, SceneError, ContactUnavailable):
        return none
    if not pairs:
        return none
    objects = {ob.name_full: ob for ob in view_layer.objects}
    names = sorted({name for pair in pairs for name in pair})
    return {"pairs": pairs, "edges": np.concatenate([_world_edges(objects[name], depsgraph) for name in names])}


#: The bodies' validated meshes of each view layer's last :func:`intersecting_geometry`, by the
#: view layer's pointer (:func:`.export.export_frame`'s ``meshes``): a body whose mesh is unchanged
#: is not checked again when another moves. Kept across scene changes (a mesh is reused only where
#: its vertices and triangles are equal), emptied on file load.
_validated_meshes: dict[int, dict] = {}


@bpy.app.handlers.persistent
def forget_meshes(*_arguments) -> None:
    """Empty :data:`_validated_meshes` (installed on ``load_post``: another file's view layers)."""
    _validated_meshes.clear()


def intersecting_lines(geometry: dict) -> list[str]:
    """The overlay's text for :func:`intersecting_geometry`'s pairs, one line each."""
    return [f"Intersecting at the start of a bake: '{first}' and '{second}'" for first, second in geometry["pairs"]]


#: :func:`scene_geometry` and :func:`intersecting_geometry` per view layer (keyed by the function
#: and its pointer) until the scene next changes: a viewport redraws at every view rotation or
#: zoom, the bodies and joints only move when the scene changes.
_geometry_cache: dict = {}


def _cached(function, view_layer) -> dict:
    key = (function.__name__, view_layer.as_pointer())
    if key not in _geometry_cache:
        _geometry_cache[key] = function(view_layer)
    return _geometry_cache[key]


def cached_scene_geometry(view_layer) -> dict:
    """:func:`scene_geometry` of ``view_layer``, computed again only after :func:`invalidate`."""
    return _cached(scene_geometry, view_layer)


def cached_intersecting_geometry(view_layer) -> dict:
    """:func:`intersecting_geometry` of ``view_layer``, computed again only after :func:`invalidate`."""
    return _cached(intersecting_geometry, view_layer)


@bpy.app.handlers.persistent
def invalidate(*_arguments) -> None:
    """Forget the cached geometry: installed on ``bpy.app.handlers`` for every change of the
    evaluated scene (an edit, a transform, a visibility or property change), frame change, file
    load, undo and redo."""
    _geometry_cache.clear()


#: The ``bpy.app.handlers`` lists :func:`invalidate` is installed on.
INVALIDATING_HANDLERS = ("depsgraph_update_post", "frame_change_post", "load_post", "undo_post", "redo_post")


def draw() -> None:
    """POST_VIEW draw callback of the 3D view.

    Lines use the POLYLINE shader (wide lines work on OpenGL, Vulkan and Metal alike).
    """
    import gpu
    from gpu_extras.batch import batch_for_shader

    context = bpy.context
    if context.view_layer is None:
        return
    geometry = cached_scene_geometry(context.view_layer)
    intersecting = cached_intersecting_geometry(context.view_layer)
    if not len(geometry["anchor"]) and not len(intersecting["edges"]):
        return
    gpu.state.blend_set("ALPHA")
    line_shader = gpu.shader.from_builtin("POLYLINE_UNIFORM_COLOR")
    line_shader.uniform_float("viewportSize", gpu.state.viewport_get()[2:])
    line_shader.uniform_float("lineWidth", 2.0)
    for points, color in ((geometry["axis"], AXIS_COLOR), (geometry["limit"], LIMIT_COLOR),
                          (intersecting["edges"], INTERSECTING_COLOR)):
        if len(points):
            batch = batch_for_shader(line_shader, "LINES", {"pos": points})
            line_shader.uniform_float("color", color)
            batch.draw(line_shader)
    if len(geometry["anchor"]):
        point_shader = gpu.shader.from_builtin("POINT_UNIFORM_COLOR")
        gpu.state.point_size_set(8.0)
        batch = batch_for_shader(point_shader, "POINTS", {"pos": geometry["anchor"]})
        point_shader.uniform_float("color", ANCHOR_COLOR)
        batch.draw(point_shader)
        gpu.state.point_size_set(1.0)
    gpu.state.blend_set("NONE")


def draw_text() -> None:
    """POST_PIXEL draw callback of the 3D view: :func:`intersecting_lines`, bottom left."""
    import blf

    context = bpy.context
    if context.view_layer is None:
        return
    lines = intersecting_lines(cached_intersecting_geometry(context.view_layer))
    scale = context.preferences.system.ui_scale
    blf.size(0, 12.0 * scale)
    blf.color(0, *INTERSECTING_COLOR)
    for row, line in enumerate(reversed(lines)):
        blf.position(0, 20.0 * scale, (20.0 + 18.0 * row) * scale, 0.0)
        blf.draw(0, line)


def register() -> None:
    """Install the cache's invalidation handlers and (not in background mode: there is no
    viewport) the draw handlers."""
    for name in INVALIDATING_HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if invalidate not in handlers:
            handlers.append(invalidate)
    if forget_meshes not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(forget_meshes)
    if invalidate not in OVERLAY_SETTING_CHANGED:
        OVERLAY_SETTING_CHANGED.append(invalidate)
    invalidate()
    if bpy.app.background or _handles:
        return
    _handles.append(bpy.types.SpaceView3D.draw_handler_add(draw, (), "WINDOW", "POST_VIEW"))
    _handles.append(bpy.types.SpaceView3D.draw_handler_add(draw_text, (), "WINDOW", "POST_PIXEL"))


def unregister() -> None:
    """Remove the handlers :func:`register` installed."""
    for name in INVALIDATING_HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while invalidate in handlers:
            handlers.remove(invalidate)
    while forget_meshes in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(forget_meshes)
    forget_meshes()
    while invalidate in OVERLAY_SETTING_CHANGED:
        OVERLAY_SETTING_CHANGED.remove(invalidate)
    invalidate()
    while _handles:
        bpy.types.SpaceView3D.draw_handler_remove(_handles.pop(), "WINDOW")
