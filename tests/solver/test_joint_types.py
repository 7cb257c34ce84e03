"""Scene tests of the driven revolute joint (#19), the velocity drives, the fixed (#25) and the
spherical (#26) joint, whose answers are known from physics."""

from __future__ import annotations

import numpy as np
import pytest

from solver import Body, Driving, Joint, Scene, Settings, simulate
from solver.model import body_mass
from solver.primitives import box_mesh

G = 9.81


def rotation(axis, angle: float) -> np.ndarray:
    """Right-hand rotation (3, 3) by ``angle`` about ``axis`` (Rodrigues)."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    cross = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * cross @ cross


def pose(turn=None, translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    transform = np.eye(4)
    if turn is not None:
        transform[:3, :3] = turn
    transform[:3, 3] = translation
    return transform


def fixed_base() -> Body:
    return Body(name="base", mesh=box_mesh([0.2, 0.2, 0.2], center=(0.0, 0.0, 0.2)), motion="fixed")


def arm_scene(driving: Driving, frame_count: int, gravity=(0.0, 0.0, -G)) -> Scene:
    """A 1 x 0.2 x 0.2 m arm (40 kg) held horizontal along +x by a hinge about +y at its end."""
    arm = Body(name="arm", mesh=box_mesh([1.0, 0.2, 0.2], center=(0.5, 0.0, 0.0)))
    hinge = Joint(name="motor", type="revolute", l_body="base", r_body="arm", position0=np.zeros(3),
                  position1=np.array([0.0, 1.0, 0.0]), driving=driving)
    settings = Settings(frame_count=frame_count, gravity=np.array(gravity, dtype=float))
    return Scene(settings, [fixed_base(), arm], [hinge])


def test_a_motor_servos_a_loaded_arm_to_its_keyed_angle_and_holds_it():
    """The aim is keyed from 0 to -0.8 rad over frames 0-24 and held to frame 48 (a turn about +y by
    -0.8 lifts the +x arm). Held, the drive carries the arm's weight: K (θ − θ̃) = τ dt² (the drive
    is not dt²-scaled), with τ = m g (L/2) cos θ and K = γ (m_base + m_arm): it sags by
    τ dt² / K from the aim back towards 0. It follows the ramp within a frame's worth of aim."""
    frames = 48
    aim = np.concatenate([np.linspace(0.0, -0.8, 25), np.full(frames - 24, -0.8)])
    scene = arm_scene(Driving(strength_ratio=100.0, aim_angle=aim), frames)
    trajectory = simulate(scene)
    angle = trajectory.angle[:, 0]
    torque = 40.0 * G * 0.5 * np.cos(0.8)
    sag = torque * scene.settings.dt ** 2 / (100.0 * (8.0 + 40.0))
    np.testing.assert_allclose(angle[30:] + 0.8, sag, rtol=0.02)
    assert np.max(np.abs(angle[:25] - aim[:25])) < 0.8 / 24
    rotation_y = trajectory.transforms[-1, 1, :3, :3]  # the pose agrees with the readout
    assert np.arctan2(rotation_y[0, 2], rotation_y[0, 0]) == pytest.approx(-0.8, abs=1e-5)
    assert trajectory.all_converged


def test_an_aim_of_ten_pi_turns_the_joint_five_times():
    """Multi-turn: an aim keyed from 0 to 10 pi over 2 s turns a wheel five times and stops there."""
    wheel = Body(name="wheel", mesh=box_mesh([0.6, 0.6, 0.1]))
    aim = np.concatenate([np.linspace(0.0, 10 * np.pi, 49), np.full(12, 10 * np.pi)])
    axle = Joint(name="axle", type="revolute", l_body="base", r_body="wheel", position0=np.zeros(3),
                 position1=np.array([0.0, 0.0, 1.0]), init_angle=0.5, driving=Driving(aim_angle=aim + 0.5))
    trajectory = simulate(Scene(Settings(frame_count=60, gravity=np.zeros(3)), [fixed_base(), wheel], [axle]))
    angle = trajectory.angle[:, 0] - 0.5
    np.testing.assert_allclose(angle[52:], 10 * np.pi, atol=1e-6)
    turn = trajectory.transforms[:, 1, :3, :3]
    from_pose = np.unwrap(np.arctan2(turn[:, 1, 0], turn[:, 0, 0]))
    np.testing.assert_allclose(angle, from_pose, atol=1e-6)
    assert trajectory.all_converged and not trajectory.fast_rotation.any()


def test_a_velocity_drive_spins_a_wheel_at_the_keyed_speed():
    """aim_velocity keyed at 2 pi rad/s for 5 s, then -pi rad/s for 1 s: each step aims at the
    step-start angle + dt omega, so the wheel turns 5 times (counted from its poses), then back by
    half a turn less the frame over which the keyed velocity moves from 2 pi to -pi (as Blender
    interpolates it: its ten steps average 0.45 (2 pi) - 0.55 pi). The first step reaches
    omega K / (K + I) (the drive against the wheel's inertia), so the wheel lags by far less than
    a degree."""
    frames = 24 * 6
    omega = np.where(np.arange(frames + 1) <= 120, 2 * np.pi, -np.pi)
    wheel = Body(name="wheel", mesh=box_mesh([0.6, 0.6, 0.1]))
    axle = Joint(name="axle", type="revolute", l_body="base", r_body="wheel", position0=np.zeros(3),
                 position1=np.array([0.0, 0.0, 1.0]), driving=Driving(aim_velocity=omega))
    trajectory = simulate(Scene(Settings(frame_count=frames, gravity=np.zeros(3)), [fixed_base(), wheel], [axle]))
    turn = trajectory.transforms[:, 1, :3, :3]
    turns = np.unwrap(np.arctan2(turn[:, 1, 0], turn[:, 0, 0])) / (2 * np.pi)
    assert turns[120] == pytest.approx(5.0, abs=1e-3)
    back = (0.45 * 2 * np.pi - 0.55 * np.pi - 23 * np.pi) / 24.0 / (2 * np.pi)
    assert turns[-1] - turns[120] == pytest.approx(back, abs=1e-3)
    speed = np.diff(trajectory.angle[:, 0]) * 24.0
    np.testing.assert_allclose(speed[10:120], 2 * np.pi, rtol=1e-4)
    assert trajectory.all_converged


def test_a_velocity_drive_moves_a_slider_at_the_keyed_rate():
    """aim_velocity 0.25 m/s on a prismatic drive: 0.25 m after 1 s (gravity off)."""
    slider = Body(name="slider", mesh=box_mesh([1.0, 0.2, 0.2]))
    rail = Joint(name="rail", type="prismatic", l_body="base", r_body="slider", position0=np.zeros(3),
                 position1=np.array([1.0, 0.0, 0.0]), driving=Driving(aim_velocity=0.25))
    trajectory = simulate(Scene(Settings(frame_count=24, gravity=np.zeros(3)), [fixed_base(), slider], [rail]))
    np.testing.assert_allclose(trajectory.distance[:, 0], 0.25 * np.arange(25) / 24.0, atol=1e-4)
    assert trajectory.all_converged


def welded_l_scene(seconds: float) -> Scene:
    """An L of two boxes welded at their corner (fixed joint), thrown spinning at 3 rad/s about an
    oblique axis through its centre of mass, falling under gravity."""
    upright = Body(name="upright", mesh=box_mesh([0.2, 0.2, 1.0], center=(0.0, 0.0, 0.5)))
    foot = Body(name="foot", mesh=box_mesh([0.6, 0.2, 0.2], center=(0.3, 0.0, -0.1)))
    masses = [body_mass(body) for body in (upright, foot)]
    centres = [mass.mass_center for mass in masses]
    centre = sum(mass.mass * c for mass, c in zip(masses, centres)) / sum(mass.mass for mass in masses)
    omega = 3.0 * np.array([0.3, 1.0, 0.5]) / np.linalg.norm([0.3, 1.0, 0.5])
    for body, c in zip((upright, foot), centres):  # one rigid motion: v = omega x (c - centre)
        body.angular_velocity = omega
        body.linear_velocity = np.cross(omega, c - centre)
    weld = Joint(name="weld", type="fixed", l_body="upright", r_body="foot", position=np.zeros(3))
    return Scene(Settings(frame_count=int(seconds * 24)), [upright, foot], [weld])


def test_a_welded_l_shape_falls_as_one_rigid_body():
    """Internal forces only: the centre of mass falls by the backward Euler recurrence of free fall,
    g dt² n (n + 1) / 2 after n steps, and the pieces keep their relative pose within the joint's
    tolerance: the centripetal force f ~ m omega² r (tens of newtons) stretches a weld of
    stiffness K / dt² = γ (m_i + m_j) / dt² by f dt² / K ~ 1e-7 m; the readout (body j's turn
    relative to body i) stays below 1e-6 rad."""
    scene = welded_l_scene(1.0)
    trajectory = simulate(scene)
    masses = [body_mass(body) for body in scene.bodies]
    total = sum(mass.mass for mass in masses)
    transforms = trajectory.transforms
    centre = sum(mass.mass * (transforms[:, b, :3, :3] @ mass.mass_center + transforms[:, b, :3, 3])
                 for b, mass in enumerate(masses)) / total
    steps = np.arange(trajectory.frame_count + 1) * scene.settings.substeps
    dt = scene.settings.dt
    np.testing.assert_allclose(centre[:, 2] - centre[0, 2], -G * dt**2 * steps * (steps + 1) / 2, atol=1e-9)
    np.testing.assert_allclose(centre[:, :2] - centre[0, :2], 0.0, atol=1e-9)
    relative = np.linalg.inv(transforms[:, 0]) @ transforms[:, 1]
    assert np.abs(relative[:, :3, 3] - relative[0, :3, 3]).max() < 1e-6
    assert np.abs(relative[:, :3, :3] - relative[0, :3, :3]).max() < 1e-5  # affine: A near a rotation
    assert np.abs(trajectory.rotation[:, 0]).max() < 1e-6
    turned = transforms[-1, 0, :3, :3] @ np.linalg.inv(transforms[0, 0, :3, :3])
    assert np.degrees(np.arccos((np.trace(turned) - 1) / 2)) > 90.0  # it did tumble
    assert np.isnan(trajectory.angle).all() and np.isnan(trajectory.distance).all()
    assert trajectory.all_converged


#: The 1 x 0.2 x 0.2 m box (40 kg) hanging from a ball joint at its top end: its moments of inertia
#: about the pivot across and along its length, kg m².
INERTIA_PIVOT = 40.0 * (1.0 + 0.04) / 12.0 + 40.0 * 0.25
INERTIA_AXIAL = 40.0 * 0.08 / 12.0


def ball_pendulum_scene(turn: np.ndarray, seconds: float, frame_rate: float = 24.0, substeps: int = 10) -> Scene:
    """The box turned by ``turn`` (3, 3) about the ball joint at the origin, from hanging straight
    down, below a fixed base."""
    box = Body(name="box", mesh=box_mesh([0.2, 0.2, 1.0], center=(0.0, 0.0, -0.5)), transform=pose(turn))
    ball = Joint(name="ball", type="spherical", l_body="base", r_body="box", position=np.zeros(3))
    settings = Settings(frame_rate=frame_rate, substeps=substeps, frame_count=int(round(seconds * frame_rate)))
    return Scene(settings, [fixed_base(), box], [ball])


def upward_zero_crossings(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    crossings = []
    for k in range(len(values) - 1):
        if values[k] < 0.0 <= values[k + 1]:
            crossings.append(times[k] - values[k] * (times[k + 1] - times[k]) / (values[k + 1] - values[k]))
    return np.array(crossings)


@pytest.mark.parametrize("axis", [0, 1], ids=["about x", "about y"])
def test_a_ball_joint_pendulum_swings_with_the_compound_pendulum_period_in_both_planes(axis):
    """Released 0.05 rad sideways about the x or the y axis, it swings in that plane with
    T = 2 pi sqrt(I / (m g d)) (1 + theta0² / 16), I about the pivot (the same across both axes of
    the square box), d = 0.5 m; backward Euler lengthens it by omega dt / arctan(omega dt). The
    rotation readout carries the swing on that axis alone."""
    theta0, seconds = 0.05, 5.0
    scene = ball_pendulum_scene(rotation(np.eye(3)[axis], theta0), seconds)
    trajectory = simulate(scene)
    period_exact = 2 * np.pi * np.sqrt(INERTIA_PIVOT / (40.0 * G * 0.5)) * (1 + theta0**2 / 16)
    omega, dt = 2 * np.pi / period_exact, scene.settings.dt
    period_bdf1 = period_exact * omega * dt / np.arctan(omega * dt)
    swing = trajectory.rotation[:, 0, axis] + theta0  # relative to frame 0, where it was theta0
    crossings = upward_zero_crossings(np.arange(trajectory.frame_count + 1) / 24.0, swing)
    assert len(crossings) >= 3
    assert np.mean(np.diff(crossings)) == pytest.approx(period_bdf1, rel=5e-4)
    assert np.abs(swing).max() == pytest.approx(theta0, rel=0.02)
    assert np.abs(np.delete(trajectory.rotation[:, 0], axis, axis=1)).max() < 1e-6 * theta0
    assert trajectory.all_converged


def test_a_conical_spherical_pendulum_loses_angular_momentum_about_the_vertical_only_as_backward_euler_does():
    """Steady conical motion: tilted alpha = 0.3 rad and turning about the vertical at
    Omega² = m g d / ((I_pivot − I_axial) cos alpha). Gravity, the joint (a force through the
    pivot) and the shape energy exert no torque about the vertical through the pivot, so only the
    integrator changes L_z. Backward Euler with v_n = (x_n − x_(n−1)) / dt changes it per step by
    exactly dt ∫ρ (v_(n+1) × v_n)_z (from m (v_(n+1) − v_n) = dt f(x_(n+1)) and
    x_(n+1) = x_n + dt v_(n+1)): the balance must hold to round-off plus the Newton tolerance. For a
    body turning rigidly at Omega that is −Omega² dt² L_z a step, so L_z decays as
    exp(−Omega² dt t): 12 % over 2 s at dt = 1/240 s, which the run must match to 5 %.
    One step per frame, so that the frames are the steps."""
    alpha, seconds, rate = 0.3, 2.0, 240.0
    scene = ball_pendulum_scene(rotation([0.0, 1.0, 0.0], alpha), seconds, frame_rate=rate, substeps=1)
    box = scene.bodies[1]
    mass = body_mass(box)
    spin = np.sqrt(40.0 * G * 0.5 / ((INERTIA_PIVOT - INERTIA_AXIAL) * np.cos(alpha)))
    box.angular_velocity = np.array([0.0, 0.0, spin])
    box.linear_velocity = np.cross(box.angular_velocity, box.transform[:3, :3] @ mass.mass_center)
    trajectory = simulate(scene)
    dt = scene.settings.dt
    X = trajectory.transforms[:, 1]
    m, m_x_bar, S = mass.mass, mass.mass_x_bar, mass.second_moment

    def moment(a: int, b: int) -> np.ndarray:
        """∫ρ x_a ⊗ v_b (3, 3) over the body for poses a and b, v_b = (x_b − x_(b−1)) / dt."""
        A, p = X[a, :3, :3], X[a, :3, 3]
        A_dot, p_dot = (X[b, :3, :3] - X[b - 1, :3, :3]) / dt, (X[b, :3, 3] - X[b - 1, :3, 3]) / dt
        return m * np.outer(p, p_dot) + np.outer(p, A_dot @ m_x_bar) + np.outer(A @ m_x_bar, p_dot) + A @ S @ A_dot.T

    def z_part(matrix: np.ndarray) -> float:  # (∫ x × v)_z from ∫ x ⊗ v
        return matrix[0, 1] - matrix[1, 0]

    def velocity_moment(a: int, b: int) -> np.ndarray:  # ∫ρ v_a ⊗ v_b
        A_a, p_a = (X[a, :3, :3] - X[a - 1, :3, :3]) / dt, (X[a, :3, 3] - X[a - 1, :3, 3]) / dt
        A_b, p_b = (X[b, :3, :3] - X[b - 1, :3, :3]) / dt, (X[b, :3, 3] - X[b - 1, :3, 3]) / dt
        return m * np.outer(p_a, p_b) + np.outer(p_a, A_b @ m_x_bar) + np.outer(A_a @ m_x_bar, p_b) + A_a @ S @ A_b.T

    last = len(X) - 1
    momentum = np.array([z_part(moment(n, n)) for n in (1, last)])
    balance = sum(dt * z_part(velocity_moment(n + 1, n)) for n in range(1, last))
    assert momentum[1] - momentum[0] == pytest.approx(balance, rel=1e-6)
    loss = 1.0 - momentum[1] / momentum[0]
    assert loss == pytest.approx(1.0 - np.exp(-spin**2 * dt * (last - 1) * dt), rel=0.05)
    assert trajectory.all_converged
