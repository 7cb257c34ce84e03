"""Viewport overlay geometry (the drawing itself needs a UI; the geometry is plain NumPy)."""

from __future__ import annotations

import math

import bpy
import numpy as np
from abd_rigs import hinge_rig, slider_rig


def test_prismatic_axis_anchor_and_limit(addon):
    matrix = np.eye(4)
    matrix[:3, 3] = (1.0, 2.0, 3.0)
    matrix[:3, :3] *= 4.0  # scale does not change the drawn lengths
    geometry = addon.overlay.joint_geometry(matrix, "PRISMATIC", True, -0.5, 0.25, size=2.0)
    np.testing.assert_allclose(geometry["anchor"], [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(geometry["axis"], [[1.0, 2.0, 1.0], [1.0, 2.0, 5.0]])
    np.testing.assert_allclose(geometry["limit"][:2], [[1.0, 2.0, 2.5], [1.0, 2.0, 3.25]])
    assert len(geometry["limit"]) % 2 == 0
    assert not len(addon.overlay.joint_geometry(matrix, "PRISMATIC", False, -0.5, 0.25)["limit"])


def test_revolute_limit_arc_spans_lower_to_upper(addon):
    rotation = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # local X->world Y, Z->world X
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    geometry = addon.overlay.joint_geometry(matrix, "REVOLUTE", True, -math.pi / 2, math.pi / 4, size=1.0)
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
