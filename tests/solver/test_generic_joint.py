"""Scene tests of the generic joint whose answers are known from physics: a mass on a
spring oscillates with period 2π√(m/k) and its damping adds c/(2m) to the decay rate; a joint
locked at an angle holds its offset; a cylindrical joint slides and turns; a breakable joint
releases at its break force."""

from __future__ import annotations

import numpy as np
import pytest

from solver import Body, Joint, Scene, Settings, simulate
from solver.primitives import box_mesh
from solver.scene import Generic

G = 9.81
LOCKED_ALL = (True,) * 6


def spring_scene(stiffness: float, damping: float, seconds: float, substeps: int = 10,
                 velocity: float = 0.2) -> Scene:
    """A 1 kg cube (0.1 m, 1000 kg/m³) below a fixed base on a generic joint whose z coordinate is
    a spring (every other coordinate locked), set moving at ``velocity`` m/s along z."""
    base = Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1]), motion="fixed")
    mass = Body(name="mass", mesh=box_mesh([0.1, 0.1, 0.1]), transform=_translation((0.0, 0.0, -0.3)),
                linear_velocity=np.array([0.0, 0.0, velocity]))
    generic = Generic(locked=(True, True, False, True, True, True), stiffness=(0.0, 0.0, stiffness, 0.0, 0.0, 0.0),
                      damping=(0.0, 0.0, damping, 0.0, 0.0, 0.0))
    joint = Joint(name="spring", type="generic", l_body="base", r_body="mass", position=np.array([0.0, 0.0, -0.3]),
                  generic=generic)
    settings = Settings(frame_rate=24.0, substeps=substeps, frame_count=int(round(seconds * 24)),
                        gravity=np.zeros(3))
    return Scene(settings=settings, bodies=[base, mass], joints=[joint])


def _translation(position) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, 3] = position
    return matrix


def _crossings(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Times where ``values`` crosses 0 upwards, interpolated linearly."""
    k = np.flatnonzero((values[:-1] < 0.0) & (values[1:] >= 0.0))
    return times[k] - values[k] * (times[k + 1] - times[k]) / (values[k + 1] - values[k])


def _decay_rate(times: np.ndarray, values: np.ndarray) -> float:
    """The exponential decay rate, 1/s, of the peaks of an oscillation."""
    peaks = np.flatnonzero((values[1:-1] > values[:-2]) & (values[1:-1] >= values[2:])) + 1
    return -float(np.polyfit(times[peaks], np.log(values[peaks]), 1)[0])


def test_spring_mass_oscillates_with_the_period_of_its_stiffness():
    """m = 1 kg on k = 4π² N/m: T = 2π√(m/k) = 1 s. Backward Euler lengthens the period by
    about (ω dt)²/3 (0.02 % at dt = 1/240 s): within 2 %."""
    k = 4.0 * np.pi**2
    trajectory = simulate(spring_scene(k, 0.0, seconds=3.0))
    z = trajectory.transforms[:, 1, 2, 3] + 0.3
    times = np.arange(len(z)) / 24.0
    period = float(np.mean(np.diff(_crossings(times, z))))
    assert period == pytest.approx(2.0 * np.pi * np.sqrt(1.0 / k), rel=0.02)
    assert np.abs(trajectory.transforms[:, 1, :2, 3]).max() < 1e-4  # the locked x and y hold


def test_spring_damping_adds_c_over_2m_to_the_decay_rate():
    """A damped spring's amplitude decays as exp(−c t / 2m); backward Euler damps the undamped
    one too (about ω² dt / 2), so the damping's share is the difference of the two rates."""
    k, c = 4.0 * np.pi**2, 0.6
    rates = []
    for damping in (0.0, c):
        trajectory = simulate(spring_scene(k, damping, seconds=4.0, substeps=20))
        z = trajectory.transforms[:, 1, 2, 3] + 0.3
        rates.append(_decay_rate(np.arange(len(z)) / 24.0, z))
    assert rates[1] - rates[0] == pytest.approx(c / 2.0, rel=0.05)


def test_angle_locked_at_an_offset_turns_the_child_to_it():
    """A generic joint with every coordinate locked, angle x at rest −10°: the child turns to −10°
    about x and stays there (no gravity)."""
    generic = Generic(locked=LOCKED_ALL, rest=(0.0, 0.0, 0.0, np.radians(-10.0), 0.0, 0.0))
    base = Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1]), motion="fixed")
    head = Body(name="head", mesh=box_mesh([0.1, 0.1, 0.1]), transform=_translation((0.0, 0.0, 0.2)))
    joint = Joint(name="neck", type="generic", l_body="base", r_body="head", position=np.array([0.0, 0.0, 0.1]),
                  generic=generic)
    settings = Settings(frame_rate=24.0, substeps=10, frame_count=24, gravity=np.zeros(3))
    trajectory = simulate(Scene(settings=settings, bodies=[base, head], joints=[joint]))
    rotation = trajectory.transforms[-1, 1, :3, :3]
    assert np.degrees(np.arctan2(rotation[2, 1], rotation[1, 1])) == pytest.approx(-10.0, abs=0.1)
    assert np.linalg.norm(rotation @ [0.0, 0.0, -0.1] + trajectory.transforms[-1, 1, :3, 3] - [0, 0, 0.1]) < 1e-3


def test_cylindrical_joint_slides_along_and_turns_about_its_axis():
    """Linear x and angle x free (a Piston): a box set moving along and spinning about x keeps
    both motions (no gravity, no friction) and stays on the axis."""
    generic = Generic(locked=(False, True, True, False, True, True))
    base = Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1]), motion="fixed")
    rod = Body(name="rod", mesh=box_mesh([0.4, 0.1, 0.1]), transform=_translation((0.3, 0.0, 0.0)),
               linear_velocity=np.array([0.5, 0.0, 0.0]), angular_velocity=np.array([2.0, 0.0, 0.0]))
    joint = Joint(name="piston", type="generic", l_body="base", r_body="rod", position=np.array([0.3, 0.0, 0.0]),
                  generic=generic)
    settings = Settings(frame_rate=24.0, substeps=10, frame_count=24, gravity=np.zeros(3))
    trajectory = simulate(Scene(settings=settings, bodies=[base, rod], joints=[joint]))
    end = trajectory.transforms[-1, 1]
    assert end[0, 3] == pytest.approx(0.8, rel=0.02)  # 0.5 m/s for 1 s
    assert np.abs(end[1:3, 3]).max() < 1e-3
    assert np.arctan2(end[2, 1], end[1, 1]) == pytest.approx(2.0, rel=0.03)  # 2 rad/s for 1 s


@pytest.mark.parametrize("load_ratio", [0.8, 1.25])
def test_breakable_joint_breaks_when_its_force_passes_the_threshold(load_ratio):
    """A 1 kg cube hanging from a fixed base on a locked generic joint carries m g = 9.81 N: with
    a break force of m g / ``load_ratio`` it holds below 1 and breaks (and falls) above."""
    generic = Generic(locked=LOCKED_ALL, break_force=G / load_ratio)
    base = Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1]), motion="fixed")
    weight = Body(name="weight", mesh=box_mesh([0.1, 0.1, 0.1]), transform=_translation((0.0, 0.0, -0.2)))
    joint = Joint(name="hook", type="generic", l_body="base", r_body="weight", position=np.array([0.0, 0.0, -0.1]),
                  generic=generic)
    settings = Settings(frame_rate=24.0, substeps=10, frame_count=12)
    trajectory = simulate(Scene(settings=settings, bodies=[base, weight], joints=[joint]))
    drop = -0.2 - trajectory.transforms[-1, 1, 2, 3]
    if load_ratio < 1.0:
        assert np.isnan(trajectory.broken_frame[0]) and drop < 1e-3
    else:
        assert trajectory.broken_frame[0] == 1 and drop > 0.5 * 0.5 * G * 0.4**2


def test_a_generic_joint_round_trips_through_the_scene_file():
    """Every field of a generic joint survives scene_to_dict and scene_from_dict; a misplaced or
    wrong field is refused naming the joint and the field."""
    import json

    from solver.scene import SceneError
    from solver.scene_io import scene_from_dict, scene_to_dict

    axes = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    generic = Generic(axes=axes, locked=(True, True, False, True, False, False), rest=(0.0, 0.0, 0.0, -0.2, 0, 0),
                      stiffness=(0.0, 0.0, 40.0, 0.0, 3.0, 0.0), damping=(0.0, 0.0, 0.5, 0.0, 0.1, 0.0),
                      limited=(False, False, False, False, False, True), lower=(0.0,) * 5 + (-0.4,),
                      upper=(0.0,) * 5 + (0.6,), limit_strength=1e4, break_force=250.0)
    scene = spring_scene(10.0, 0.0, seconds=0.1)
    scene.joints[0].generic = generic
    document = json.loads(json.dumps(scene_to_dict(scene)))
    again = scene_from_dict(document).joints[0].generic
    assert again is not None
    for name in ("axes", "rest", "stiffness", "damping", "lower", "upper"):
        assert np.array_equal(getattr(again, name), np.asarray(getattr(generic, name), dtype=float)), name
    assert (again.locked, again.limited, again.limit_strength, again.break_force) == (
        generic.locked, generic.limited, generic.limit_strength, generic.break_force)
    document["joints"][0]["generic"]["damping"][2] = -1.0
    with pytest.raises(SceneError, match=r"joint 'spring': generic.damping: must be >= 0"):
        scene_from_dict(document)
    document["joints"][0]["generic"]["damping"][2] = 0.5
    document["joints"][0]["generic"]["limited"][0] = True
    document["joints"][0]["generic"]["lower"][0] = 1.0
    with pytest.raises(SceneError, match=r"joint 'spring': generic.lower\[0\]: lower 1.0 > upper 0.0"):
        scene_from_dict(document)
    document["joints"][0]["generic"]["limited"][0] = False
    document["joints"][0]["type"] = "spherical"
    with pytest.raises(SceneError, match="generic: is only valid on generic joints"):
        scene_from_dict(document)


#: A joint frame whose x points down (the cone's centre for a body hanging below), y along world
#: y and z along world x.
DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


def cone_pendulum(angular_velocity, swing=(0.3, 0.6), twist=0.4) -> Scene:
    """A 0.1 x 0.1 x 0.6 m bar hanging from a fixed base by a ragdoll joint (linear coordinates
    locked, an elliptical swing cone of half-angles ``swing`` about the frame's y and z and a twist
    limit), its centre 0.5 m below the joint, set turning at ``angular_velocity`` about the joint."""
    generic = Generic(axes=DOWN, locked=(True, True, True, False, False, False), swing_limit=swing,
                      twist_limit=twist, limit_strength=1e4)
    omega = np.asarray(angular_velocity, dtype=float)
    bar = Body(name="bar", mesh=box_mesh([0.1, 0.1, 0.6]), transform=_translation((0.0, 0.0, -0.5)),
               angular_velocity=omega, linear_velocity=np.cross(omega, [0.0, 0.0, -0.5]))
    base = Body(name="base", mesh=box_mesh([0.1, 0.1, 0.1]), motion="fixed", transform=_translation((0, 0, 0.1)))
    joint = Joint(name="hip", type="generic", l_body="base", r_body="bar", position=np.zeros(3), generic=generic)
    settings = Settings(frame_rate=24.0, substeps=10, frame_count=24)
    return Scene(settings=settings, bodies=[base, bar], joints=[joint])


@pytest.mark.parametrize("axis, half_angle", [((1.0, 0.0, 0.0), 0.6), ((0.0, 1.0, 0.0), 0.3)],
                         ids=["about z: 0.6 rad", "about y: 0.3 rad"])
def test_the_swing_cone_stops_a_swing_at_its_half_angle_about_that_axis(axis, half_angle):
    """Swung hard (5 rad/s, enough for 1.4 rad) about the cone's z (world x) or y (world y), the
    bar stops within 2° of the elliptical cone's half-angle about that axis, 0.6 or 0.3 rad."""
    trajectory = simulate(cone_pendulum(5.0 * np.array(axis)))
    down = trajectory.transforms[:, 1, :3, :3] @ np.array([0.0, 0.0, -1.0])
    swing = np.arccos(np.clip(-down[:, 2] / np.linalg.norm(down, axis=1), -1.0, 1.0))
    assert np.degrees(swing.max()) == pytest.approx(np.degrees(half_angle), abs=2.0)


def test_the_twist_limit_stops_a_turn_about_the_cones_centre():
    """Spun at 3 rad/s about its own long axis (the cone's x), the bar turns to the twist limit,
    0.4 rad, and no more than 2° past it."""
    trajectory = simulate(cone_pendulum((0.0, 0.0, 3.0)))
    rotations = trajectory.transforms[:, 1, :3, :3]
    twist = np.arctan2(rotations[:, 1, 0], rotations[:, 0, 0])
    assert np.degrees(np.abs(twist).max()) == pytest.approx(np.degrees(0.4), abs=2.0)
