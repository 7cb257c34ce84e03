"""Viewport overlay (gpu module): each joint's axis, anchor and limit range.

:func:`joint_geometry` computes the lines and points in world space (plain NumPy, testable
headless); :func:`draw` sends them to the GPU. The draw handler is only installed when Blender
has a UI (``bpy.app.background`` is False).
"""

from __future__ import annotations

import math

import bpy
import numpy as np

#: Colours (RGBA) of the axis, the anchor and the limit range.
AXIS_COLOR = (0.25, 0.6, 1.0, 1.0)
ANCHOR_COLOR = (1.0, 0.85, 0.2, 1.0)
LIMIT_COLOR = (1.0, 0.35, 0.3, 1.0)
#: Segments of a full circle for revolute limit arcs.
ARC_SEGMENTS = 48

_handle = None


def _unit(vector: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    length = float(np.linalg.norm(vector))
    return vector / length if length > 1e-12 else fallback


def joint_geometry(matrix_world, joint_type: str, use_limit: bool, lower: float, upper: float,
                   size: float = 1.0) -> dict:
    """World-space overlay geometry of one joint.

    Args:
        matrix_world: the joint Empty's (4, 4) world matrix (origin = anchor, local Z = axis).
        joint_type: ``"PRISMATIC"`` or ``"REVOLUTE"``.
        use_limit: whether to draw the limit range.
        lower, upper: the limit, in m (prismatic, along the axis) or rad (revolute, about it,
            measured from the Empty's local X).
        size: length of the drawn half-axis and radius of the angle arc, in m.

    Returns:
        ``{"axis": (2, 3), "anchor": (1, 3), "limit": (2k, 3)}`` float32 arrays; ``axis`` and
        ``limit`` are line segments (pairs of points).
    """
    matrix = np.asarray(matrix_world, dtype=np.float64)
    anchor = matrix[:3, 3]
    z = _unit(matrix[:3, 2], np.array([0.0, 0.0, 1.0]))
    x = matrix[:3, 0] - z * float(matrix[:3, 0] @ z)
    x = _unit(x, _unit(np.cross(z, [1.0, 0.0, 0.0]), np.cross(z, [0.0, 1.0, 0.0])))
    y = np.cross(z, x)
    axis = np.array([anchor - size * z, anchor + size * z])
    limit = np.empty((0, 3))
    if use_limit:
        if joint_type == "PRISMATIC":
            a, b = anchor + lower * z, anchor + upper * z
            tick = 0.15 * size * x
            limit = np.array([a, b, a - tick, a + tick, b - tick, b + tick])
        else:
            span = max(upper - lower, 0.0)
            count = max(2, int(math.ceil(ARC_SEGMENTS * span / (2.0 * math.pi))) + 1)
            angles = np.linspace(lower, lower + span, count)
            radius = 0.6 * size
            points = anchor + radius * (np.cos(angles)[:, None] * x + np.sin(angles)[:, None] * y)
            arc = np.repeat(points, 2, axis=0)[1:-1]
            spokes = np.array([anchor, points[0], anchor, points[-1]])
            limit = np.concatenate([arc, spokes])
    return {
        "axis": axis.astype(np.float32),
        "anchor": anchor[None, :].astype(np.float32),
        "limit": limit.astype(np.float32),
    }


def scene_geometry(view_layer) -> dict:
    """Overlay geometry of every visible enabled joint of ``view_layer``, concatenated."""
    parts = {"axis": [], "anchor": [], "limit": []}
    for ob in view_layer.objects:
        joint = ob.abd_joint
        if not joint.enabled or not ob.visible_get():
            continue
        prismatic = joint.type == "PRISMATIC"
        limit = joint.limit
        geometry = joint_geometry(
            ob.matrix_world, joint.type, limit.use,
            limit.lower if prismatic else limit.lower_angle,
            limit.upper if prismatic else limit.upper_angle,
            size=max(ob.empty_display_size, 0.1),
        )
        for key, value in geometry.items():
            parts[key].append(value)
    return {key: np.concatenate(value) if value else np.empty((0, 3), np.float32) for key, value in parts.items()}


def draw() -> None:
    """POST_VIEW draw callback of the 3D view.

    Lines use the POLYLINE shader (wide lines work on OpenGL, Vulkan and Metal alike).
    """
    import gpu
    from gpu_extras.batch import batch_for_shader

    context = bpy.context
    if context.view_layer is None:
        return
    geometry = scene_geometry(context.view_layer)
    if not len(geometry["anchor"]):
        return
    gpu.state.blend_set("ALPHA")
    line_shader = gpu.shader.from_builtin("POLYLINE_UNIFORM_COLOR")
    line_shader.uniform_float("viewportSize", gpu.state.viewport_get()[2:])
    line_shader.uniform_float("lineWidth", 2.0)
    for key, color in (("axis", AXIS_COLOR), ("limit", LIMIT_COLOR)):
        if len(geometry[key]):
            batch = batch_for_shader(line_shader, "LINES", {"pos": geometry[key]})
            line_shader.uniform_float("color", color)
            batch.draw(line_shader)
    point_shader = gpu.shader.from_builtin("POINT_UNIFORM_COLOR")
    gpu.state.point_size_set(8.0)
    batch = batch_for_shader(point_shader, "POINTS", {"pos": geometry["anchor"]})
    point_shader.uniform_float("color", ANCHOR_COLOR)
    batch.draw(point_shader)
    gpu.state.point_size_set(1.0)
    gpu.state.blend_set("NONE")


def register() -> None:
    """Install the draw handler (not in background mode: there is no viewport)."""
    global _handle
    if bpy.app.background or _handle is not None:
        return
    _handle = bpy.types.SpaceView3D.draw_handler_add(draw, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    """Remove the draw handler if installed."""
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, "WINDOW")
        _handle = None
