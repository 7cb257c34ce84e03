"""Drives with an effort limit, a speed limit, and joint damping (docs/constitutions/drive_effort.md):
scenes whose answer is known from physics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from solver import Body, Driving, Joint, Scene, SceneError, Settings, simulate
from solver.primitives import box_mesh
from solver.scene_io import scene_from_dict, scene_to_dict
from solver.scene_validation import validate_scene

G = 9.81


def base() -> Body:
    return Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1], center=(0.0, 0.0, -0.2)), motion="fixed")


def arm_scene(driving: Driving, frame_count: int = 48) -> Scene:
    """A 1 x 0.1 x 0.1 m bar of 10 kg hinged at one end about +y, horizontal at frame 0: gravity's
    torque about the hinge is m g L/2 = 49.05 N m."""
    bar = Body(name="bar", mesh=box_mesh([1.0, 0.1, 0.1], center=(0.5, 0.0, 0.0)))
    hinge = Joint(name="hinge", type="revolute", l_body="base", r_body="bar", position0=np.zeros(3),
                  position1=np.array([0.0, 1.0, 0.0]), driving=driving)
    return Scene(Settings(frame_count=frame_count, substeps=10), [base(), bar], [hinge])


@pytest.mark.parametrize("max_torque, holds", [(40.0, False), (60.0, True), (None, True)])
def test_servo_holds_a_load_only_with_enough_torque(max_torque, holds):
    """A servo aiming at the horizontal pose holds a bar whose gravity torque (49 N m) is below its
    torque limit, and lets it fall when the limit is below it: with 40 N m the bar swings down
    until the drive's work 40 angle has taken back gravity's 49.05 sin(angle) (energy balance,
    no damping), 1.07 rad."""
    trajectory = simulate(arm_scene(Driving(strength_ratio=1000.0, aim_angle=0.0, max_torque=max_torque)))
    fall = trajectory.angle[:, 0]  # gravity turns the +x bar about +y by a positive angle
    if holds:
        assert np.abs(fall).max() < 0.02
    else:
        turning = scipy.optimize.brentq(lambda angle: 49.05 * np.sin(angle) - 40.0 * angle, 0.5, np.pi / 2)
        assert fall.max() == pytest.approx(turning, abs=0.02)


def test_capped_servo_lifts_with_its_limit_torque():
    """A velocity drive (1 rad/s) lifting the 10 kg bar from its hanging pose: with a 100 N m
    limit the torque left over at the horizontal pose (100 - 49 N m) still lifts it over; with
    30 N m (below the largest gravity torque) it stalls where m g L/2 sin(angle) = 30 N m, 37.7
    degrees from hanging (the joint's damping, 20 N m s/rad, settles the swing about it)."""
    for max_torque, stall in ((30.0, np.arcsin(30.0 / 49.05)), (100.0, None)):
        scene = arm_scene(Driving(strength_ratio=1000.0, aim_velocity=1.0, max_torque=max_torque), 96)
        scene.bodies[1].transform = np.array([[0.0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 1]])
        scene.joints[0].damping = 20.0
        angle = simulate(scene).angle[:, 0]
        if stall is None:
            assert angle[-1] > np.pi / 2 + 0.5
        else:
            assert angle[-1] == pytest.approx(stall, abs=0.03)


def test_speed_limit_slows_a_servo():
    """A servo with max_speed 0.5 rad/s aiming 1 rad away turns at that speed (no gravity)."""
    scene = arm_scene(Driving(strength_ratio=1000.0, aim_angle=1.0, max_speed=0.5), 48)
    scene.settings.gravity = np.zeros(3)
    angle = simulate(scene).angle[:, 0]
    assert angle[24] == pytest.approx(0.5, abs=0.03)  # after 1 s
    assert angle[-1] == pytest.approx(1.0, abs=0.01)


def test_damped_slider_falls_at_its_terminal_velocity():
    """A 10 kg block on a vertical prismatic joint with damping c = 200 N s/m falls at m g / c."""
    block = Body(name="block", mesh=box_mesh([0.1, 0.1, 0.1]), mass_density=10.0 / 0.001)
    rail = Joint(name="rail", type="prismatic", l_body="base", r_body="block", position0=np.zeros(3),
                 position1=np.array([0.0, 0.0, 1.0]), damping=200.0)
    trajectory = simulate(Scene(Settings(frame_count=48, substeps=10), [base(), block], [rail]))
    speed = -np.diff(trajectory.distance[:, 0]) * 24.0
    assert speed[-1] == pytest.approx(10.0 * G / 200.0, rel=0.01)


def test_drive_limits_round_trip_and_are_checked():
    scene = arm_scene(Driving(aim_angle=0.0, max_torque=5.0, max_speed=2.0))
    scene.joints[0].damping = 0.5
    again = scene_from_dict(scene_to_dict(validate_scene(scene)))
    assert again.joints[0].driving.max_torque == 5.0 and again.joints[0].driving.max_speed == 2.0
    assert again.joints[0].damping == 0.5
    with pytest.raises(SceneError, match="driving.max_force: is for prismatic"):
        validate_scene(arm_scene(Driving(max_force=5.0)))
    with pytest.raises(SceneError, match="driving.max_torque: must be > 0"):
        validate_scene(arm_scene(Driving(max_torque=0.0)))
    scene.joints[0].damping = -1.0
    with pytest.raises(SceneError, match="damping: must be >= 0"):
        validate_scene(scene)


def test_door_pushed_into_a_wall_by_a_capped_motor_stops_there():
    """A velocity drive (2 rad/s) with a 20 N m limit swings a door into a wall: it stalls at the
    wall, its keyed (rigid) pose outside the wall, the door unstrained."""
    pytest.importorskip("ipctk")
    from solver import ContactSettings

    door = Body(name="door", mesh=box_mesh([0.6, 0.04, 1.0], center=(0.3, 0.0, 0.0)))
    frame = Body(name="frame", mesh=box_mesh([0.05, 0.05, 0.05], center=(-0.1, 0.0, 0.0)), motion="fixed")
    wall = Body(name="wall", mesh=box_mesh([1.0, 0.1, 1.2], center=(0.3, 0.37, 0.0)), motion="fixed")
    hinge = Joint(name="hinge", type="revolute", l_body="frame", r_body="door", position0=np.zeros(3),
                  position1=np.array([0.0, 0.0, 1.0]),
                  driving=Driving(strength_ratio=1000.0, aim_velocity=2.0, max_torque=20.0))
    settings = Settings(frame_rate=24.0, substeps=1, frame_count=36, gravity=np.zeros(3),
                        contact=ContactSettings(enable=True))
    trajectory = simulate(Scene(settings, [frame, door, wall], [hinge]))
    assert trajectory.all_converged
    affine = trajectory.transforms[:, 1, :3, :3]
    strain = np.abs(np.einsum("fji,fjk->fik", affine, affine) - np.eye(3)).max()
    assert strain < 1e-3
    u, _, vt = np.linalg.svd(affine)
    rotation = u @ vt  # the keyed pose's rotation (polar decomposition)
    corners = np.array([[x, y, z] for x in (0.0, 0.6) for y in (-0.02, 0.02) for z in (-0.5, 0.5)])
    y = np.einsum("fij,vj->fvi", rotation, corners)[..., 1] + trajectory.transforms[:, None, 1, 1, 3]
    assert y.max() < 0.32  # the wall's face
    assert y[-1].max() > 0.32 - 0.01  # at the wall


def test_a_stalled_drive_converges_in_few_newton_iterations():
    """Past its effort limit a drive's energy is linear (no curvature): the Newton loop uses the
    secant curvature there, so a stalled servo costs about as few iterations as a free one."""
    scene = arm_scene(Driving(strength_ratio=1000.0, aim_velocity=1.0, max_torque=30.0), 48)
    scene.bodies[1].transform = np.array([[0.0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 1]])
    trajectory = simulate(scene)
    assert trajectory.all_converged
    assert trajectory.newton_iterations.mean() < 4.0
