"""Trajectory.damage and Trajectory.mismatch: a trajectory checked against the scene it is to be
applied to (array shapes, NaN, names, frame count, first poses) before anything reads it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solver import Body, Joint, Scene, Settings, simulate
from solver.primitives import box_mesh


def drawer_scene(frame_count: int = 2) -> Scene:
    """A fixed cabinet and a drawer on a prismatic joint, a few frames long."""
    cabinet = Body(name="cabinet", mesh=box_mesh([1.0, 1.0, 1.0]), motion="fixed")
    drawer = Body(name="drawer", mesh=box_mesh([0.8, 0.8, 0.2], center=(0.0, 0.0, 0.6)))
    rail = Joint(name="rail", type="prismatic", l_body="cabinet", r_body="drawer", position0=np.zeros(3),
                 position1=np.array([1.0, 0.0, 0.0]))
    return Scene(settings=Settings(frame_rate=24.0, substeps=1, frame_count=frame_count),
                 bodies=[cabinet, drawer], joints=[rail])


@pytest.fixture(scope="module")
def computed():
    """The drawer scene and its simulated trajectory."""
    scene = drawer_scene()
    return scene, simulate(scene)


def test_a_trajectory_passes_the_checks_for_the_scene_it_was_computed_for(computed):
    """Neither check finds a problem with a trajectory simulated for the scene."""
    scene, trajectory = computed
    assert trajectory.damage(scene, 10) is None
    assert trajectory.mismatch(scene, 10, 12) is None


def test_a_nan_readout_is_named_with_its_joint_and_frame(computed):
    """A NaN prismatic distance is reported with the array, the joint and the frame counted from frame_start."""
    scene, trajectory = computed
    distance = trajectory.distance.copy()
    distance[1, 0] = np.nan
    damaged = dataclasses.replace(trajectory, distance=distance)
    expected = "its 'distance' array holds a NaN or infinite value for joint 'rail' at frame 11"
    assert damaged.damage(scene, 10) == expected


def test_a_wrong_shape_is_named_with_its_array(computed):
    """A per-step array of the wrong length is reported with its shape and the expected one."""
    scene, trajectory = computed
    damaged = dataclasses.replace(trajectory, converged=trajectory.converged[:1])
    assert damaged.damage(scene).startswith("its 'converged' array is bool of shape (1,), not numbers of shape (2,)")


def test_another_frame_range_or_start_pose_is_a_mismatch(computed):
    """Another frame range, or a first pose 1 mm off the scene's, is not this scene's trajectory."""
    scene, trajectory = computed
    assert trajectory.mismatch(scene, 10, 13) == "it has 3 frames, the bake 4 (frames 10-13)"
    transforms = trajectory.transforms.copy()
    transforms[0, 1, 0, 3] += 1e-3
    moved = dataclasses.replace(trajectory, transforms=transforms)
    assert moved.mismatch(scene, 10, 12).startswith("body 'drawer' starts 0.001 m and 0 degrees away")
