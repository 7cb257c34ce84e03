"""Viewport overlay geometry (the drawing itself needs a UI; the geometry is plain NumPy)."""

from __future__ import annotations

import math

import bpy
import numpy as np
from abd_rigs import hinge_rig, slider_rig


def one_joint(addon, matrix, joint_type: str, use_limit: bool, lower: float, upper: float, size: float = 1.0):
    """The overlay geometry of one joint (joints_geometry of it alone)."""
    return addon.overlay.joints_geometry(np.asarray(matrix, dtype=np.float64)[None], [joint_type == "REVOLUTE"],
                                         [use_limit], [lower], [upper], [size])


def test_prismatic_axis_anchor_and_limit(addon):
    matrix = np.eye(4)
    matrix[:3, 3] = (1.0, 2.0, 3.0)
    matrix[:3, :3] *= 4.0  # scale does not change the drawn lengths
    geometry = one_joint(addon, matrix, "PRISMATIC", True, -0.5, 0.25, size=2.0)
    np.testing.assert_allclose(geometry["anchor"], [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(geometry["axis"], [[1.0, 2.0, 1.0], [1.0, 2.0, 5.0]])
    np.testing.assert_allclose(geometry["limit"][:2], [[1.0, 2.0, 2.5], [1.0, 2.0, 3.25]])
    assert len(geometry["limit"]) % 2 == 0
    assert not len(one_joint(addon, matrix, "PRISMATIC", False, -0.5, 0.25)["limit"])


def test_revolute_limit_arc_spans_lower_to_upper(addon):
    rotation = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # local X->world Y, Z->world X
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    geometry = one_joint(addon, matrix, "REVOLUTE", True, -math.pi / 2, math.pi / 4, size=1.0)
    arc = geometry["limit"][:-4]
    radii = np.linalg.norm(arc, axis=1)
    np.testing.assert_allclose(radii, 0.6, atol=1e-6)
    np.testing.assert_allclose(arc[:, 0], 0.0, atol=1e-6)  # in the plane normal to the axis (world X)
    local_x, local_y = rotation[:, 0], rotation[:, 1]
    angles = np.arctan2(arc @ local_y, arc @ local_x)
    assert np.all(np.diff(angles) >= 0.0)  # one sweep from lower to upper
    assert math.isclose(angles[0], -math.pi / 2, abs_tol=1e-6)
    assert math.isclose(angles[-1], math.pi / 4, abs_tol=1e-6)


def test_scene_geometry_covers_enabled_visible_joints(addon):
    base, slider, joint = slider_rig(frame_end=4)
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 1
    joint.hide_set(True)
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 0
    joint.hide_set(False)
    joint.abd_joint.enabled = False
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 0
    base, arm, hinge = hinge_rig()
    hinge.abd_joint.limit.use = True
    geometry = addon.overlay.scene_geometry(bpy.context.view_layer)
    assert len(geometry["anchor"]) == 1 and len(geometry["limit"]) > 4


def test_many_joints_geometry_is_each_joints_own(addon):
    # joints_geometry of several joints at once is the concatenation of each one's alone.
    rng = np.random.default_rng(3)
    matrices, kinds, limited, lower, upper, size = [], [], [], [], [], []
    for k in range(6):
        matrix = np.eye(4)
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        matrix[:3, :3], matrix[:3, 3] = q * (1.0 + k), rng.normal(size=3)
        matrices.append(matrix)
        kinds.append(k % 2 == 0)
        limited.append(k % 3 != 2)
        lower.append(-0.3 * k)
        upper.append(0.2 * k + 0.1)
        size.append(0.5 + 0.1 * k)
    together = addon.overlay.joints_geometry(np.array(matrices), np.array(kinds), np.array(limited), lower, upper, size)
    alone = [one_joint(addon, m, "REVOLUTE" if r else "PRISMATIC", u, lo, up, s)
             for m, r, u, lo, up, s in zip(matrices, kinds, limited, lower, upper, size)]
    np.testing.assert_allclose(together["axis"], np.concatenate([g["axis"] for g in alone]), atol=1e-6)
    np.testing.assert_allclose(together["anchor"], np.concatenate([g["anchor"] for g in alone]), atol=1e-6)
    # The same limit segments (as a set of point pairs: the batch groups them by kind).
    def segments(points):
        return sorted(tuple(np.round(pair, 5).ravel()) for pair in points.reshape(-1, 2, 3))
    assert segments(together["limit"]) == segments(np.concatenate([g["limit"] for g in alone]))


def test_the_cached_geometry_follows_every_change_of_the_scene(addon):
    # The draw callback reuses the geometry until bpy.app.handlers report a change: a moved
    # joint, a changed limit, another frame.
    base, arm, hinge = hinge_rig()
    assert addon.overlay.invalidate in bpy.app.handlers.depsgraph_update_post
    assert addon.overlay.invalidate in bpy.app.handlers.frame_change_post
    view_layer = bpy.context.view_layer
    view_layer.update()
    first = addon.overlay.cached_scene_geometry(view_layer)
    assert addon.overlay.cached_scene_geometry(view_layer) is first  # nothing changed: reused
    hinge.location.x += 1.0
    view_layer.update()
    moved = addon.overlay.cached_scene_geometry(view_layer)
    np.testing.assert_allclose(moved["anchor"][0], first["anchor"][0] + [1.0, 0.0, 0.0], atol=1e-6)
    hinge.abd_joint.limit.use = True  # a setting the overlay draws (its update callback)
    assert len(addon.overlay.cached_scene_geometry(view_layer)["limit"]) > 0
    hinge.abd_joint.limit.upper_angle = 1.0
    arc_end = addon.overlay.cached_scene_geometry(view_layer)["limit"][-1]
    hinge.abd_joint.limit.upper_angle = 0.5
    assert not np.allclose(addon.overlay.cached_scene_geometry(view_layer)["limit"][-1], arc_end)
    hinge.empty_display_size = 2.0
    view_layer.update()
    np.testing.assert_allclose(np.ptp(addon.overlay.cached_scene_geometry(view_layer)["axis"], axis=0).max(), 4.0,
                               atol=1e-5)
    hinge.hide_set(True)
    view_layer.update()
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 0
    hinge.hide_set(False)
    view_layer.update()
    hinge.abd_joint.enabled = False
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 0
    hinge.abd_joint.enabled = True
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 1
    hinge.rotation_euler.x = 0.3
    hinge.keyframe_insert("rotation_euler", frame=5)
    hinge.rotation_euler.x = 0.0
    hinge.keyframe_insert("rotation_euler", frame=1)
    bpy.context.scene.frame_set(1)
    at_1 = addon.overlay.cached_scene_geometry(view_layer)
    bpy.context.scene.frame_set(5)
    at_5 = addon.overlay.cached_scene_geometry(view_layer)
    assert at_5 is not at_1 and not np.allclose(at_5["axis"], at_1["axis"])


def test_unregister_removes_the_overlay_handlers(addon):
    addon.overlay.unregister()
    try:
        for name in addon.overlay.INVALIDATING_HANDLERS:
            assert addon.overlay.invalidate not in getattr(bpy.app.handlers, name)
    finally:
        addon.overlay.register()
