"""URDF importer (:mod:`solver.urdf`): the robots shipped in ``pybullet_data`` imported and checked
against their files and against PyBullet's own forward kinematics, side-by-side simulations with
PyBullet, joint-limit and initial-state conventions, and clear errors for malformed files.

Reference values in the simulation tests come from PyBullet 3.2.7 (reduced coordinates,
semi-implicit Euler, hard joint constraints) run on the same file with motors off, zero damping,
no collisions and the same time step.
"""

from __future__ import annotations

import math
import warnings
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pybullet  # pinned in requirements.txt, with yourdfpy and trimesh: not skipped when missing
import pybullet_data
import pytest

from solver import Driving, Settings, simulate
from solver.scene import SceneError
from solver.scene_validation import validate_scene
from solver.scene_io import load_scene
from solver.__main__ import main as solver_main
from solver.urdf import DEFAULT_LIMIT_STRENGTH, UrdfError, UrdfWarning, import_urdf, scene_from_urdf

DATA = Path(pybullet_data.getDataPath())
CARTPOLE = DATA / "cartpole.urdf"
PENDULUM5 = DATA / "pendulum5.urdf"
KUKA = DATA / "kuka_iiwa" / "model.urdf"
PANDA = DATA / "franka_panda" / "panda.urdf"
G = 9.81


def quiet_import(path, **kwargs):
    """import_urdf with its UrdfWarnings silenced (tests that check warnings use pytest.warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UrdfWarning)
        return import_urdf(path, **kwargs)


def quiet_scene(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UrdfWarning)
        return scene_from_urdf(path, **kwargs)


# ---------------------------------------------------------------------------------------------
# The file, read independently (ElementTree), and PyBullet
# ---------------------------------------------------------------------------------------------


class UrdfFile:
    """Links, masses and joints of a URDF as written in the file (no yourdfpy involved)."""

    def __init__(self, path: Path):
        root = ElementTree.parse(path).getroot()
        self.mass = {}
        self.com = {}
        for link in root.findall("link"):
            mass = link.find("inertial/mass")
            self.mass[link.get("name")] = float(mass.get("value")) if mass is not None else 0.0
            origin = link.find("inertial/origin")
            xyz = origin.get("xyz", "0 0 0") if origin is not None else "0 0 0"
            self.com[link.get("name")] = np.array([float(v) for v in xyz.split()])
        self.joints = {}
        for joint in root.findall("joint"):
            limit = joint.find("limit")
            axis = joint.find("axis")
            self.joints[joint.get("name")] = dict(
                type=joint.get("type"), parent=joint.find("parent").get("link"), child=joint.find("child").get("link"),
                axis=np.array([float(v) for v in (axis.get("xyz") if axis is not None else "1 0 0").split()]),
                lower=float(limit.get("lower", 0.0)) if limit is not None else None,
                upper=float(limit.get("upper", 0.0)) if limit is not None else None,
                mimic=joint.find("mimic") is not None,
            )
        self.parent = {j["child"]: name for name, j in self.joints.items()}

    def group_top(self, link: str) -> str:
        """The link at the top of the fixed-joint group containing ``link``."""
        while link in self.parent and self.joints[self.parent[link]]["type"] == "fixed":
            link = self.joints[self.parent[link]]["parent"]
        return link

    def groups(self) -> dict:
        groups: dict = {}
        for link in self.mass:
            groups.setdefault(self.group_top(link), []).append(link)
        return groups


class Bullet:
    """A PyBullet DIRECT world with one robot: motors off, no damping, no collisions."""

    def __init__(self, path: Path, *, fixed_base: bool, dt: float = 1.0 / 240.0, q0=None, qd0=None):
        self.client = pybullet.connect(pybullet.DIRECT)
        p, c = pybullet, self.client
        self.robot = p.loadURDF(str(path), useFixedBase=fixed_base, flags=p.URDF_USE_INERTIA_FROM_FILE,
                                physicsClientId=c)
        self.count = p.getNumJoints(self.robot, physicsClientId=c)
        self.info = [p.getJointInfo(self.robot, k, physicsClientId=c) for k in range(self.count)]
        self.names = [info[1].decode() for info in self.info]
        self.links = [info[12].decode() for info in self.info]
        p.setGravity(0.0, 0.0, -G, physicsClientId=c)
        p.setTimeStep(dt, physicsClientId=c)
        p.changeDynamics(self.robot, -1, linearDamping=0.0, angularDamping=0.0, physicsClientId=c)
        for k in range(self.count):
            p.changeDynamics(self.robot, k, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0, physicsClientId=c)
            p.setCollisionFilterGroupMask(self.robot, k, 0, 0, physicsClientId=c)
        p.setCollisionFilterGroupMask(self.robot, -1, 0, 0, physicsClientId=c)
        q0, qd0 = q0 or {}, qd0 or {}
        for k, name in enumerate(self.names):
            p.resetJointState(self.robot, k, q0.get(name, 0.0), qd0.get(name, 0.0), physicsClientId=c)
        # PyBullet's default velocity motors (target 0) would act as joint brakes.
        p.setJointMotorControlArray(self.robot, list(range(self.count)), p.VELOCITY_CONTROL,
                                    forces=[0.0] * self.count, physicsClientId=c)

    def close(self):
        pybullet.disconnect(self.client)

    def joint_positions(self) -> np.ndarray:
        states = pybullet.getJointStates(self.robot, list(range(self.count)), physicsClientId=self.client)
        return np.array([s[0] for s in states])

    def run(self, steps: int, every: int) -> np.ndarray:
        """Joint positions at step 0, every, 2 every, ... steps: (steps // every + 1, joints)."""
        out = [self.joint_positions()]
        for step in range(1, steps + 1):
            pybullet.stepSimulation(physicsClientId=self.client)
            if step % every == 0:
                out.append(self.joint_positions())
        return np.array(out)

    def link_frame(self, link: str) -> np.ndarray:
        """World 4x4 pose of a URDF link frame (not the inertial frame)."""
        k = self.links.index(link)
        state = pybullet.getLinkState(self.robot, k, computeForwardKinematics=True, physicsClientId=self.client)
        return pose(state[4], state[5])

    def link_velocity(self, link: str) -> tuple:
        """(linear velocity of the centre of mass, angular velocity), world axes."""
        k = self.links.index(link)
        state = pybullet.getLinkState(self.robot, k, computeLinkVelocity=True, computeForwardKinematics=True,
                                      physicsClientId=self.client)
        return np.array(state[6]), np.array(state[7])


def pose(position, quaternion) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3] = np.array(pybullet.getMatrixFromQuaternion(quaternion)).reshape(3, 3)
    transform[:3, 3] = position
    return transform


def joint_series(scene, trajectory) -> dict:
    """Joint name -> reported coordinate per frame (angle for revolute, distance for prismatic)."""
    return {
        joint.name: trajectory.angle[:, k] if joint.type == "revolute" else trajectory.distance[:, k]
        for k, joint in enumerate(scene.joints)
    }


# ---------------------------------------------------------------------------------------------
# Import of the pybullet_data robots, checked against the file and PyBullet's kinematics
# ---------------------------------------------------------------------------------------------

ROBOTS = [
    pytest.param(CARTPOLE, False, id="cartpole"),
    pytest.param(PENDULUM5, False, id="pendulum5"),
    pytest.param(KUKA, False, id="kuka_iiwa"),
    pytest.param(PANDA, True, id="panda"),
]


@pytest.mark.parametrize("path,fixed_base", ROBOTS)
def test_robot_bodies_masses_joints_axes_and_limits_match_the_file(path, fixed_base):
    urdf = UrdfFile(path)
    result = quiet_import(path, fixed_base=fixed_base)
    scene = result.scene
    validate_scene(scene)

    # One body per fixed-joint group, named after its top link, with the group's total mass.
    groups = urdf.groups()
    root = next(link for link in urdf.mass if link not in urdf.parent)
    assert scene.bodies[0].name == root  # breadth-first from the root
    assert sorted(b.name for b in scene.bodies) == sorted(groups)
    for info in result.bodies:
        assert sorted(info.links) == sorted(groups[info.name])
    for body in scene.bodies:
        mass = sum(urdf.mass[link] for link in groups[body.name])
        if mass == 0.0:
            # Massless root: fixed (its mass only scales the base joint's stiffness).
            assert body.motion == "fixed" and body.name not in urdf.parent
        else:
            assert body.mass.mass == pytest.approx(mass, rel=1e-12)
            if len(groups[body.name]) == 1:
                np.testing.assert_allclose(body.mass.mass_center, urdf.com[body.name], atol=1e-12)
        if body.name in urdf.parent:
            assert body.motion == "dynamic"
        else:
            assert body.motion == "fixed"  # massless roots, and panda with fixed_base

    # Movable joints become #18 / #20, with the file's limits (initial positions are 0 here).
    movable = {n: j for n, j in urdf.joints.items() if j["type"] in ("revolute", "continuous", "prismatic")}
    assert [j.name for j in scene.joints] == list(movable)
    for joint in scene.joints:
        expected = movable[joint.name]
        assert joint.type == ("prismatic" if expected["type"] == "prismatic" else "revolute")
        assert joint.l_body == urdf.group_top(expected["parent"])
        assert joint.r_body == urdf.group_top(expected["child"])
        if expected["type"] == "continuous":
            assert joint.limit is None
        else:
            assert joint.limit.lower == pytest.approx(expected["lower"], abs=1e-12)
            assert joint.limit.upper == pytest.approx(expected["upper"], abs=1e-12)
            width = expected["upper"] - expected["lower"]
            assert joint.limit.strength == pytest.approx(DEFAULT_LIMIT_STRENGTH * max(1.0, width) ** 3)
        assert joint.init_angle == 0.0 and joint.init_distance == 0.0
        axis = joint.position1 - joint.position0
        assert np.linalg.norm(axis) == pytest.approx(1.0, abs=1e-12)

    # Body poses, joint anchors and world axes against PyBullet's forward kinematics.
    bullet = Bullet(path, fixed_base=True)
    try:
        for body in scene.bodies:
            if body.name in bullet.links:
                np.testing.assert_allclose(body.transform, bullet.link_frame(body.name), atol=1e-6)
        for joint in scene.joints:
            k = bullet.names.index(joint.name)
            child = bullet.link_frame(bullet.links[k])
            axis = np.asarray(bullet.info[k][13])  # joint axis in the child link frame
            np.testing.assert_allclose(joint.position0, child[:3, 3], atol=1e-6)
            np.testing.assert_allclose(joint.position1 - joint.position0, child[:3, :3] @ axis, atol=1e-6)
            if bullet.info[k][2] in (pybullet.JOINT_REVOLUTE, pybullet.JOINT_PRISMATIC) and joint.limit is not None:
                assert (bullet.info[k][8], bullet.info[k][9]) == pytest.approx((joint.limit.lower, joint.limit.upper))
    finally:
        bullet.close()


def test_robot_specific_details():
    # Cartpole: the massless slide bar has only a visual box -> it is the (fixed) shape.
    cartpole = quiet_import(CARTPOLE)
    bar = cartpole.scene.bodies[0]
    assert bar.name == "slideBar" and bar.motion == "fixed" and cartpole.bodies[0].shape == "visual"
    assert np.ptp(bar.mesh.vertices, axis=0) == pytest.approx([30.0, 0.05, 0.05])
    assert cartpole.scene.joints[0].limit.strength == pytest.approx(DEFAULT_LIMIT_STRENGTH * 30.0**3)
    # Its mass scales the joint stiffness only: it is set to the robot's dynamic mass (1.1 kg).
    from solver.model import body_mass
    assert body_mass(validate_scene(cartpole.scene).bodies[0]).mass == pytest.approx(1.1)
    # The pole's inertia about its centre of mass is the file's (1 kg m^2 on the diagonal).
    pole = cartpole.scene.bodies[2]
    np.testing.assert_allclose(pole.mass.inertia, np.eye(3))
    np.testing.assert_allclose(pole.mass.mass_center, [0.0, 0.0, 0.5])

    # Pendulum5: the empty "world" link becomes a fixed placeholder cube.
    pendulum = quiet_import(PENDULUM5)
    assert pendulum.bodies[0].shape == "placeholder" and pendulum.scene.bodies[0].motion == "fixed"

    # Kuka: the STL collision meshes are open; they are replaced by their convex hulls, with a warning.
    kuka = quiet_import(KUKA, load_visuals=False)
    assert len(kuka.warnings) == 8
    assert all(f"link 'lbr_iiwa_link_{k}'" in kuka.warnings[k] and f"link_{k}.stl" in kuka.warnings[k]
               and "convex hull" in kuka.warnings[k] for k in range(8))
    assert len(kuka.scene.bodies) == 8 and kuka.scene.bodies[0].motion == "fixed"

    # Panda: the hand (link8 + panda_hand + grasptarget, fixed joints) merges into link7;
    # the mimic finger joint is imported as an independent prismatic joint, with a warning.
    panda = quiet_import(PANDA)
    assert any("joint 'panda_finger_joint2'" in m and "mimic" in m for m in panda.warnings)
    body = {b.name: b for b in panda.scene.bodies}
    assert body["panda_link7"].mass.mass == pytest.approx(0.2 + 0.81)
    # Combined centre of mass: link7's (0 0 0.08) and the hand's (0 0 0.107 + 0.04 in link7 axes).
    np.testing.assert_allclose(body["panda_link7"].mass.mass_center, [0.0, 0.0, (0.2 * 0.08 + 0.81 * 0.147) / 1.01],
                               atol=1e-12)
    assert body["panda_link0"].motion == "dynamic"  # the base has mass: floating unless fixed_base
    info = {b.name: b for b in panda.bodies}["panda_link7"]
    assert info.links == ["panda_link7", "panda_link8", "panda_hand", "panda_grasptarget"]
    assert {part.link for part in info.visuals} == {"panda_link7", "panda_hand"}
    finger = {j.name: j for j in panda.scene.joints}["panda_finger_joint2"]
    assert finger.type == "prismatic" and (finger.limit.lower, finger.limit.upper) == (0.0, 0.04)


def test_visual_meshes_for_display_are_in_body_coordinates_with_colours():
    result = import_urdf(CARTPOLE)
    pole = result.bodies[2]
    assert pole.name == "pole" and len(pole.visuals) == 1
    part = pole.visuals[0]
    assert part.link == "pole" and part.material == "white"
    np.testing.assert_allclose(part.rgba, [1.0, 1.0, 1.0, 1.0])
    # The 0.05 x 0.05 x 1 box with <origin xyz="0 0 0.5">, in the pole's (link) frame.
    np.testing.assert_allclose(part.vertices.min(axis=0), [-0.025, -0.025, 0.0])
    np.testing.assert_allclose(part.vertices.max(axis=0), [0.025, 0.025, 1.0])
    # Robot-level materials are looked up by name (pendulum5's "Blue" is defined at the top).
    pendulum = import_urdf(PENDULUM5)
    np.testing.assert_allclose(pendulum.bodies[1].visuals[0].rgba, [0.28, 0.52, 0.92, 1.0])
    assert scene_from_urdf(CARTPOLE) is not None  # scene_from_urdf skips the visuals


def test_initial_configuration_and_velocities_match_pybullet_kinematics():
    """Forward kinematics with nonzero joint positions, and body velocities from joint velocities."""
    names = [f"lbr_iiwa_joint_{k}" for k in range(1, 8)]
    q0 = dict(zip(names, [0.3, -0.7, 1.1, -1.4, 0.5, 0.9, -2.0]))
    qd0 = dict(zip(names, [0.5, -1.0, 0.8, 1.5, -2.0, 0.7, 3.0]))
    scene = quiet_scene(KUKA, joint_positions=q0, joint_velocities=qd0)
    bullet = Bullet(KUKA, fixed_base=True, q0=q0, qd0=qd0)
    try:
        from solver.model import body_mass
        for body in validate_scene(scene).bodies[1:]:
            # PyBullet reports poses through float32-accurate quaternions: ~1e-7.
            np.testing.assert_allclose(body.transform, bullet.link_frame(body.name), atol=1e-6)
            linear, angular = bullet.link_velocity(body.name)
            np.testing.assert_allclose(body.angular_velocity, angular, atol=1e-6)
            np.testing.assert_allclose(body.linear_velocity, linear, atol=1e-6)
            assert body_mass(body).mass_center == pytest.approx(body.mass.mass_center)
    finally:
        bullet.close()
    for joint in scene.joints:
        assert joint.init_angle == q0[joint.name]
    # The reported angles start at the URDF coordinates.
    trajectory = simulate(_short(scene))
    np.testing.assert_allclose(trajectory.angle[0], [q0[n] for n in names], atol=1e-12)


def _short(scene, frames=1):
    scene.settings = Settings(frame_rate=240.0, substeps=1, frame_count=frames)
    return scene


# ---------------------------------------------------------------------------------------------
# Side by side with PyBullet
# ---------------------------------------------------------------------------------------------
#
# Both engines are first-order in time but differ in kind: ours is implicit (backward) Euler on
# penalty joints, which loses energy (numerical damping ~ omega^2 dt per step); PyBullet is
# semi-implicit (symplectic) Euler in reduced coordinates with exact joints. Their difference is
# therefore O(dt); test_pendulum_difference_is_first_order_in_dt checks that it halves when dt
# halves, i.e. that it is only time discretisation and not a modelling difference (masses,
# inertias, axes, signs, anchors: any of those would give an O(1) error that does not shrink).
# The joint penalties (K = 100 (m_i + m_j), acting as K/dt^2) open by ~ g dt^2 / 100 ~ 4e-7 m,
# far below these tolerances. Newton tolerances are tightened to 1e-3 so that the solve is not
# the limiting error. The tolerances below are about 3x the errors measured at dt = 1/480 s
# (docs/performance.md, "URDF robots against PyBullet"): tight enough that a wrong inertia, centre
# of mass or sign fails them by far.

FRAME_RATE = 48.0


def side_by_side(path, seconds, substeps, q0=None, qd0=None):
    frames = int(round(seconds * FRAME_RATE))
    settings = Settings(frame_rate=FRAME_RATE, substeps=substeps, frame_count=frames,
                        velocity_tol=1e-3, transrate_tol=1e-3)
    scene = quiet_scene(path, joint_positions=q0, joint_velocities=qd0, settings=settings)
    for joint in scene.joints:  # the reference runs without joint damping (pendulum5's <dynamics damping="1.0">)
        joint.damping = 0.0
    trajectory = simulate(scene)
    assert trajectory.all_converged
    ours = joint_series(scene, trajectory)
    bullet = Bullet(path, fixed_base=True, dt=settings.dt, q0=q0, qd0=qd0)
    try:
        reference = bullet.run(frames * substeps, substeps)
        names = bullet.names
    finally:
        bullet.close()
    return {name: (ours[name], reference[:, k]) for k, name in enumerate(names) if name in ours}


def test_cartpole_agrees_with_pybullet_over_two_seconds():
    q0 = {"cart_to_pole": 0.3}
    qd0 = {"cart_to_pole": 1.0, "slider_to_cart": 0.5}
    series = side_by_side(CARTPOLE, 2.0, 10, q0, qd0)
    cart, cart_reference = series["slider_to_cart"]
    pole, pole_reference = series["cart_to_pole"]
    # Something happens: the pole falls over (it is an inverted pendulum) and the cart moves.
    assert np.ptp(pole_reference) > 2.0 and np.ptp(cart_reference) > 0.8
    assert pole[0] == pytest.approx(0.3) and cart[0] == pytest.approx(0.0)
    assert np.abs(cart - cart_reference).max() < 1e-3  # m
    assert np.abs(pole - pole_reference).max() < 2e-2  # rad


def test_pendulum5_agrees_with_pybullet_over_half_a_second():
    series = side_by_side(PENDULUM5, 0.5, 10)
    assert np.ptp(series["joint0"][1]) > 0.9  # the chain falls from horizontal
    errors = {name: np.abs(ours - reference).max() for name, (ours, reference) in series.items()}
    assert max(errors.values()) < 3e-2, errors  # rad


def test_pendulum_difference_is_first_order_in_dt():
    coarse = side_by_side(PENDULUM5, 0.25, 5)
    fine = side_by_side(PENDULUM5, 0.25, 10)
    for name in coarse:
        error_coarse = np.abs(coarse[name][0] - coarse[name][1]).max()
        error_fine = np.abs(fine[name][0] - fine[name][1]).max()
        assert 0.35 < error_fine / error_coarse < 0.65, (name, error_coarse, error_fine)


# ---------------------------------------------------------------------------------------------
# Conventions: limits with a nonzero initial position, prismatic coordinates, merging
# ---------------------------------------------------------------------------------------------

ARM = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0.5 0 0"/><mass value="1"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>
    <collision><origin xyz="0.5 0 0"/><geometry><box size="1 0.05 0.05"/></geometry></collision>
  </link>
  <joint name="hinge" type="revolute">
    <parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
    <limit lower="{lower}" upper="{upper}" effort="10" velocity="10"/>
  </joint>
</robot>
"""


def write(tmp_path: Path, text: str, name="robot.urdf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("q0,expected", [(0.3, 0.5), (-0.1, 0.5), (0.45, 0.5)])
def test_revolute_limit_holds_the_urdf_range_with_a_nonzero_initial_angle(tmp_path, q0, expected):
    """The +x arm about +y falls towards positive q and must rest on the URDF upper bound 0.5.

    The solver compares the raw angle with limit + init_angle
    (docs/constitutions/670_revolute_joint_limit.md), so the importer writes limit = [lo - 2 q0,
    hi - 2 q0]; without that the arm would stop at 0.5 + 2 q0 instead.
    """
    path = write(tmp_path, ARM.format(lower=-0.2, upper=0.5))
    scene = scene_from_urdf(path, joint_positions={"hinge": q0},
                            settings=Settings(frame_rate=24.0, substeps=10, frame_count=36))
    joint = scene.joints[0]
    assert joint.init_angle == q0
    assert (joint.limit.lower, joint.limit.upper) == pytest.approx((-0.2 - 2 * q0, 0.5 - 2 * q0))
    angle = simulate(scene).angle[:, 0]
    assert angle[0] == pytest.approx(q0)
    assert angle[-1] == pytest.approx(expected, abs=0.01)
    assert angle.max() < expected + 0.02  # a crisp stop with strength 1e4 J


def test_revolute_limit_lower_bound_with_a_nonzero_initial_angle(tmp_path):
    # Swing the arm upwards fast from q0 = 0.2: it must stop on the lower bound -0.2.
    path = write(tmp_path, ARM.format(lower=-0.2, upper=0.5))
    scene = scene_from_urdf(path, joint_positions={"hinge": 0.2}, joint_velocities={"hinge": -6.0},
                            settings=Settings(frame_rate=24.0, substeps=10, frame_count=6, gravity=np.zeros(3)))
    angle = simulate(scene).angle[:, 0]
    assert angle.min() == pytest.approx(-0.2, abs=0.02)
    assert angle.min() > -0.22


def test_a_wide_limit_window_stops_as_crisply_as_a_narrow_one():
    """The cart hits the end of the 30 m rail at 2 m/s; the width-scaled strength stops it within 5 mm."""
    scene = quiet_scene(CARTPOLE, joint_positions={"slider_to_cart": 14.5}, joint_velocities={"slider_to_cart": 2.0},
                        settings=Settings(frame_rate=24.0, substeps=10, frame_count=12, gravity=np.zeros(3)))
    distance = simulate(scene).distance[:, 0]
    assert distance.max() == pytest.approx(15.0, abs=5e-3)


WIDE = """<?xml version="1.0"?>
<robot name="wide">
  <link name="base"/>
  <link name="slider">
    <inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision>
  </link>
  <link name="wheel">
    <inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <collision><geometry><sphere radius="0.1"/></geometry></collision>
  </link>
  <joint name="rail" type="prismatic">
    <parent link="base"/><child link="slider"/><axis xyz="1 0 0"/>
    <limit lower="-{bound}" upper="{bound}" effort="100" velocity="10"/>
  </joint>
  <joint name="spin" type="revolute">
    <parent link="slider"/><child link="wheel"/><origin xyz="0 0 -0.3"/><axis xyz="0 1 0"/>
    <limit lower="-{bound}" upper="{bound}" effort="100" velocity="10"/>
  </joint>
</robot>
"""


def test_limits_meaning_no_limit_and_very_wide_windows_import_with_warnings(tmp_path):
    """Gazebo's +-1e16 ("no limit"; PX4's rotors, Neobotix's wheels) imports without a limit, and a
    window too wide for the width-scaled strength (+-10000 m rails) gets the scene format's cap
    on the strength; both with a warning naming the joint. Before, both refused the whole file:
    a bound or a strength above 1e12."""
    from solver.scene_validation import MAX_MAGNITUDE

    with pytest.warns(UrdfWarning) as caught:
        result = import_urdf(write(tmp_path, WIDE.format(bound="1e16"), "unlimited.urdf"))
    assert [(j.name, j.limit) for j in result.scene.joints] == [("rail", None), ("spin", None)]
    assert [(j.lower, j.upper) for j in result.joints] == [(None, None), (None, None)]
    for name in ("rail", "spin"):
        assert any(f"joint {name!r}: <limit> [-1e+16, 1e+16]" in str(w.message) and "without a limit" in str(w.message)
                   for w in caught)
    with pytest.warns(UrdfWarning) as caught:
        result = import_urdf(write(tmp_path, WIDE.format(bound="10000"), "wide.urdf"))
    assert [float(j.limit.strength) for j in result.scene.joints] == [MAX_MAGNITUDE, MAX_MAGNITUDE]
    assert [(j.limit.lower, j.limit.upper) for j in result.scene.joints] == [(-1e4, 1e4), (-1e4, 1e4)]
    for name in ("rail", "spin"):
        assert any(f"joint {name!r}: <limit> window [-10000, 10000] is 20000 wide" in str(w.message)
                   and "capped" in str(w.message) for w in caught)
    simulate(_short(result.scene, frames=2))
    # A window the cap does not reach keeps the width-cubed strength, without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UrdfWarning)
        result = import_urdf(write(tmp_path, WIDE.format(bound="230"), "narrow.urdf"))
    assert float(result.scene.joints[0].limit.strength) == pytest.approx(DEFAULT_LIMIT_STRENGTH * 460.0**3)


SLIDER = """<?xml version="1.0"?>
<robot name="slider">
  <link name="rail"/>
  <link name="carriage">
    <inertial><mass value="2"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual>
  </link>
  <joint name="lift" type="prismatic">
    <parent link="rail"/><child link="carriage"/><origin xyz="0 0 1" rpy="0 0 0"/><axis xyz="0 0 2"/>
    <limit lower="-0.05" upper="0.2" effort="10" velocity="1"/>
  </joint>
</robot>
"""


def test_prismatic_joint_distance_and_limit_with_a_nonzero_initial_position(tmp_path):
    path = write(tmp_path, SLIDER)
    scene = scene_from_urdf(path, joint_positions={"lift": 0.1},
                            settings=Settings(frame_rate=24.0, substeps=10, frame_count=24))
    body = scene.bodies[1]
    # The axis is normalised; the carriage starts at 1 + 0.1 along +z.
    np.testing.assert_allclose(body.transform[:3, 3], [0.0, 0.0, 1.1])
    np.testing.assert_allclose(scene.joints[0].position1 - scene.joints[0].position0, [0.0, 0.0, 1.0])
    assert scene.joints[0].init_distance == 0.1
    assert (scene.joints[0].limit.lower, scene.joints[0].limit.upper) == pytest.approx((-0.15, 0.1))
    distance = simulate(scene).distance[:, 0]
    assert distance[0] == pytest.approx(0.1)
    assert distance[-1] == pytest.approx(-0.05, abs=0.005)  # falls onto the URDF lower bound
    # Moving up at 1 m/s from 0.1 (no gravity) it stops at the upper bound 0.2.
    scene = scene_from_urdf(path, joint_positions={"lift": 0.1}, joint_velocities={"lift": 1.0},
                            settings=Settings(frame_rate=24.0, substeps=10, frame_count=12, gravity=np.zeros(3)))
    distance = simulate(scene).distance[:, 0]
    assert distance.max() == pytest.approx(0.2, abs=0.01)


MERGED = """<?xml version="1.0"?>
<robot name="merged">
  <link name="a">
    <inertial><origin xyz="0 0 0" rpy="0 0 1.5707963267948966"/><mass value="1"/>
      <inertia ixx="1" ixy="0" ixz="0" iyy="2" iyz="0" izz="2.5"/></inertial>
    <collision><geometry><box size="0.2 0.2 0.2"/></geometry></collision>
  </link>
  <link name="b">
    <inertial><origin xyz="0 0 0"/><mass value="3"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
    <collision><geometry><sphere radius="0.1"/></geometry></collision>
  </link>
  <link name="tip"/>
  <joint name="weld" type="fixed"><parent link="a"/><child link="b"/><origin xyz="1 0 0" rpy="0 0 0.7"/></joint>
  <joint name="tip_weld" type="fixed"><parent link="b"/><child link="tip"/><origin xyz="0 0 1"/></joint>
</robot>
"""


def test_fixed_joints_merge_masses_inertias_and_meshes(tmp_path):
    result = import_urdf(write(tmp_path, MERGED))
    assert len(result.scene.bodies) == 1 and result.scene.joints == []
    body = result.scene.bodies[0]
    assert body.name == "a" and result.bodies[0].links == ["a", "b", "tip"]
    assert body.motion == "dynamic"  # the root has mass and fixed_base is off
    mass = body.mass
    assert mass.mass == 4.0
    np.testing.assert_allclose(mass.mass_center, [0.75, 0.0, 0.0])
    # a's inertia rotated by 90 deg about z: diag(2, 1, 2.5); b's diag(0.1) (rotation-invariant);
    # parallel axis: a at -0.75 (m 1), b at +0.25 (m 3) along x -> + (0.5625 + 0.1875) on yy, zz.
    np.testing.assert_allclose(mass.inertia, np.diag([2.1, 1.1 + 0.75, 2.6 + 0.75]), atol=1e-12)
    # Both collision shapes, closed, in a's frame: the sphere around (1, 0, 0).
    vertices = body.mesh.vertices
    in_box = np.all(np.abs(vertices) <= 0.1 + 1e-12, axis=1)
    on_sphere = np.abs(np.linalg.norm(vertices - [1.0, 0.0, 0.0], axis=1) - 0.1) < 1e-9
    assert np.all(in_box | on_sphere) and in_box.sum() == 8
    validate_scene(result.scene)


# ---------------------------------------------------------------------------------------------
# Approximations that warn
# ---------------------------------------------------------------------------------------------

OPEN_MESH_OBJ = """v 0 0 0
v 1 0 0
v 0 1 0
v 1 1 0
v 0 0 1
v 1 0 1
v 0 1 1
v 1 1 1
f 1 3 2
f 2 3 4
f 5 6 7
f 6 8 7
f 1 2 5
f 2 6 5
f 3 7 4
f 4 7 8
"""


MASS_WITHOUT_INERTIA = """<?xml version="1.0"?>
<robot name="r">
<link name="a"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
  <collision><geometry><box size="2 2 2"/></geometry></collision></link>
<link name="b"><inertial><mass value="1"/></inertial>
  <collision><geometry><sphere radius="0.01"/></geometry></collision></link>
<joint name="f" type="fixed"><parent link="a"/><child link="b"/><origin xyz="3 0 0"/></joint>
</robot>
"""


def test_merged_link_without_inertia_takes_its_own_shape_not_the_bodys(tmp_path):
    """Link b (1 kg, no <inertia>, a 1 cm sphere) welded 3 m from a (1 kg, I = 0.1 1, a 2 m box):
    b's inertia is its sphere's, 2/5 m r^2 = 4e-5, so about the common centre (1.5 m from each)
    Ixx = 0.1 + 4e-5 and Iyy = Izz = 0.1 + 4e-5 + 2 (1 kg x 1.5^2) (it took the 2 m box's 0.667)."""
    body = quiet_scene(write(tmp_path, MASS_WITHOUT_INERTIA)).bodies[0]
    sphere = 0.4 * 0.01**2
    expected = np.diag([0.1 + sphere, 0.1 + sphere + 4.5, 0.1 + sphere + 4.5])
    np.testing.assert_allclose(body.mass.inertia, expected, rtol=2e-3, atol=1e-6)


def _cube_obj(size: float) -> str:
    """A closed cube of edge ``size`` (m) as Wavefront OBJ text, faces facing outwards."""
    corners = [(x, y, z) for x in (0.0, size) for y in (0.0, size) for z in (0.0, size)]
    faces = [(1, 2, 4, 3), (5, 7, 8, 6), (1, 5, 6, 2), (3, 4, 8, 7), (1, 3, 7, 5), (2, 6, 8, 4)]
    return "".join(f"v {x} {y} {z}\n" for x, y, z in corners) + "".join(f"f {a} {b} {c} {d}\n" for a, b, c, d in faces)


def test_mesh_uris_resolve_to_their_own_package_and_file_uris_are_decoded(tmp_path):
    """``package://gripper/meshes/base.obj`` loads the gripper package's mesh even where the
    robot's own package, nearer the URDF, has a file of the same name (it once won, with no
    warning); a ``file://`` URI is percent-decoded (``my%20box.obj`` is ``my box.obj``)."""
    workspace = tmp_path / "ws"
    for package, size in (("robot_description", 1.0), ("gripper_description", 0.1)):
        (workspace / package / "meshes").mkdir(parents=True)
        (workspace / package / "meshes" / "base.obj").write_text(_cube_obj(size))
    (workspace / "robot_description" / "urdf").mkdir()
    (tmp_path / "my box.obj").write_text(_cube_obj(0.3))
    inertial = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
    path = write(workspace / "robot_description" / "urdf", f"""<?xml version="1.0"?>
<robot name="ws">
  <link name="base">{inertial}
    <collision><geometry><mesh filename="package://robot_description/meshes/base.obj"/></geometry></collision></link>
  <link name="gripper">{inertial}
    <collision><geometry><mesh filename="package://gripper_description/meshes/base.obj"/></geometry></collision></link>
  <link name="tool">{inertial}
    <collision><geometry><mesh filename="{(tmp_path / 'my box.obj').as_uri()}"/></geometry></collision></link>
  <joint name="wrist" type="continuous"><parent link="base"/><child link="gripper"/><origin xyz="0 0 1"/></joint>
  <joint name="tip" type="continuous"><parent link="gripper"/><child link="tool"/><origin xyz="0 0 1"/></joint>
</robot>
""")
    assert "my%20box.obj" in path.read_text()
    bodies = {body.name: body for body in quiet_scene(path, fixed_base=True).bodies}
    extents = {name: np.ptp(body.mesh.vertices, axis=0) for name, body in bodies.items()}
    np.testing.assert_allclose(extents["base"], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(extents["gripper"], [0.1, 0.1, 0.1])
    np.testing.assert_allclose(extents["tool"], [0.3, 0.3, 0.3])


def test_open_mesh_massless_link_and_bad_inertia_are_approximated_with_warnings(tmp_path):
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "open_box.obj").write_text(OPEN_MESH_OBJ)  # a unit cube without x = 0, 1 faces
    path = write(tmp_path, """<?xml version="1.0"?>
<robot name="approx">
  <link name="base">
    <inertial><mass value="1"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial>
    <collision>
      <geometry><mesh filename="package://approx/meshes/open_box.obj" scale="0.5 0.5 0.5"/></geometry>
    </collision>
  </link>
  <link name="dummy"/>
  <link name="hand">
    <inertial><mass value="0.5"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
  </link>
  <joint name="j1" type="continuous"><parent link="base"/><child link="dummy"/><origin xyz="0 0 1"/></joint>
  <joint name="j2" type="continuous"><parent link="dummy"/><child link="hand"/><axis xyz="0 1 0"/></joint>
</robot>
""")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = import_urdf(path, fixed_base=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, UrdfWarning)]
    assert messages == result.warnings
    assert any("link 'base'" in m and "open_box.obj" in m and "convex hull" in m for m in messages)
    assert any("link 'base'" in m and "<inertia>" in m for m in messages)
    assert any("link 'dummy'" in m and "no mass" in m for m in messages)
    bodies = {b.name: b for b in result.scene.bodies}
    # The hull of the half-size open cube is the closed half-size cube.
    assert np.ptp(bodies["base"].mesh.vertices, axis=0) == pytest.approx([0.5, 0.5, 0.5])
    # Zero inertia is replaced by the shape's: a uniform 0.5 m cube of 1 kg has I = m a^2 / 6.
    np.testing.assert_allclose(bodies["base"].mass.inertia, np.eye(3) / 24.0, atol=1e-12)
    # The massless intermediate link gets 1e-3 of the lightest mass, spread over a placeholder cube.
    assert bodies["dummy"].mass is None and result.bodies[1].shape == "placeholder"
    from solver.model import body_mass
    assert body_mass(validate_scene(result.scene).bodies[1]).mass == pytest.approx(0.5e-3)
    # A link with mass but no geometry gets the box of its inertia (0.01 kg m^2, 0.5 kg -> 0.346 m).
    assert result.bodies[2].shape == "inertia box"
    assert np.ptp(bodies["hand"].mesh.vertices, axis=0) == pytest.approx([math.sqrt(0.12)] * 3)
    simulate(_short(result.scene, frames=2))


def _obj(meshes) -> str:
    """Wavefront OBJ text of ``(vertices, triangles)`` pairs, one after the other (1-based faces)."""
    lines, offset = [], 1
    for vertices, triangles in meshes:
        lines += [f"v {x:.17g} {y:.17g} {z:.17g}" for x, y, z in vertices]
        lines += [f"f {a + offset} {b + offset} {c + offset}" for a, b, c in triangles]
        offset += len(vertices)
    return "\n".join(lines) + "\n"


def test_mesh_with_an_inside_out_part_is_replaced_by_its_hull_and_a_cavity_is_kept(tmp_path):
    """Validation refuses an inside-out part outside the others; the importer falls back to the hull."""
    from solver.mass import mesh_volume
    from solver.primitives import box_mesh

    big, small = box_mesh([1.0, 1.0, 1.0]), box_mesh([0.2, 0.2, 0.2], center=(1.0, 0.0, 0.0))
    inner = box_mesh([0.5, 0.5, 0.5])
    outside = (big.vertices, big.triangles)
    (tmp_path / "stray.obj").write_text(_obj([outside, (small.vertices, small.triangles[:, ::-1])]))
    (tmp_path / "hollow.obj").write_text(_obj([outside, (inner.vertices, inner.triangles[:, ::-1])]))
    link = ('<link name="{0}"><inertial><mass value="1"/>'
            '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>'
            '<collision><geometry><mesh filename="{0}.obj"/></geometry></collision></link>')
    path = write(tmp_path, '<?xml version="1.0"?><robot name="parts">' + link.format("stray") + link.format("hollow")
                 + '<joint name="j" type="continuous"><parent link="stray"/><child link="hollow"/></joint></robot>')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = import_urdf(path)
    messages = [str(w.message) for w in caught if issubclass(w.category, UrdfWarning)]
    (hull,) = [m for m in messages if "convex hull" in m]
    assert "link 'stray'" in hull and "stray.obj" in hull and "inside-out part" in hull
    stray, hollow = validate_scene(result.scene).bodies
    np.testing.assert_allclose(stray.mesh.vertices.min(axis=0), [-0.5, -0.5, -0.5])
    np.testing.assert_allclose(stray.mesh.vertices.max(axis=0), [1.1, 0.5, 0.5])
    assert mesh_volume(hollow.mesh.vertices, hollow.mesh.triangles) == pytest.approx(1.0 - 0.125)


def test_collada_unit_is_converted_to_metres_before_the_mesh_scale(tmp_path):
    """A COLLADA file's ``<asset><unit meter="0.001">`` (millimetres; COLLADA 1.4.1 specification,
    <unit>: metres per file unit) is applied before ``<mesh scale>``, as PyBullet does; before, a
    millimetre part came in 1000 times too large."""
    import trimesh

    text = trimesh.creation.box(extents=(100.0, 200.0, 300.0)).export(file_type="dae").decode()
    assert "<unit" not in text  # trimesh writes none: metres
    millimetre = text.replace("<up_axis>", '<unit meter="0.001" name="millimeter"/><up_axis>', 1)
    (tmp_path / "box_mm.dae").write_text(millimetre)
    (tmp_path / "box_m.dae").write_text(text)
    link = ('<link name="{0}"><inertial><mass value="1"/>'
            '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>'
            '<collision><geometry><mesh filename="{1}" scale="2 1 1"/></geometry></collision>'
            '<visual><geometry><mesh filename="{1}"/></geometry></visual></link>')
    path = write(tmp_path, '<?xml version="1.0"?><robot name="units">' + link.format("mm", "box_mm.dae")
                 + link.format("m", "box_m.dae")
                 + '<joint name="j" type="continuous"><parent link="mm"/><child link="m"/></joint></robot>')
    result = quiet_import(path)
    millimetres, metres = result.scene.bodies
    np.testing.assert_allclose(np.ptp(millimetres.mesh.vertices, axis=0), [0.2, 0.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose(np.ptp(result.bodies[0].visuals[0].vertices, axis=0), [0.1, 0.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose(np.ptp(metres.mesh.vertices, axis=0), [200.0, 200.0, 300.0], rtol=1e-6)


def test_a_visual_without_volume_is_skipped_and_a_collision_one_is_an_error(tmp_path):
    """pybullet_data's laikago_toes*.urdf mark the toes with ``<visual><sphere radius="0">``:
    PyBullet loads them; visuals are shown (and make the shape only of a link without
    ``<collision>``), so such a visual is skipped with a warning. Before, the import with visuals
    (Blender's) failed."""
    zero = '<visual><geometry><sphere radius="0"/></geometry></visual>'
    text = TWO_LINKS.format(joints=hinge(), geometry=zero + '<visual><geometry><box size="1 2 3"/></geometry>'
                            '<material name="red"><color rgba="1 0 0 1"/></material></visual>')
    with pytest.warns(UrdfWarning) as caught:
        result = import_urdf(write(tmp_path, text))
    (message,) = [str(w.message) for w in caught if "skipped" in str(w.message)]  # once, though read twice
    assert message == ("robot.urdf: link 'arm': <visual> #1: <sphere radius> must be > 0, got 0.0; "
                       "this <visual> is skipped")
    arm = result.bodies[1]
    assert arm.shape == "visual" and len(arm.visuals) == 1 and arm.visuals[0].material == "red"
    np.testing.assert_allclose(np.ptp(result.scene.bodies[1].mesh.vertices, axis=0), [1.0, 2.0, 3.0])
    # A link whose only visual is skipped gets the box of its inertia.
    only = quiet_import(write(tmp_path, TWO_LINKS.format(joints=hinge(), geometry=zero), "only.urdf"))
    assert only.bodies[1].shape == "inertia box" and only.bodies[1].visuals == []
    with pytest.raises(UrdfError, match=r"link 'arm': <collision> #1: <sphere radius> must be > 0, got 0.0$"):
        quiet_import(write(tmp_path, TWO_LINKS.format(joints=hinge(), geometry=zero.replace("visual", "collision"))))
    toes = quiet_import(DATA / "laikago" / "laikago_toes_zup.urdf")
    assert sum("toe" in w and "skipped" in w for w in toes.warnings) == 4


def test_massless_root_link_fixes_a_welded_base(tmp_path):
    """ROS idiom: an empty "world" link welded to a massive base fixes the base (PyBullet's rule)."""
    text = ARM.format(lower=-1, upper=1).replace(
        '<link name="base"/>',
        '<link name="world"/><joint name="weld" type="fixed"><parent link="world"/><child link="base"/></joint>'
        '<link name="base"><inertial><mass value="5"/>'
        '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>')
    scene = quiet_scene(write(tmp_path, text))
    assert [(b.name, b.motion) for b in scene.bodies] == [("world", "fixed"), ("arm", "dynamic")]
    assert scene.bodies[0].mass.mass == 5.0
    # A root with mass floats unless fixed_base is given.
    path = write(tmp_path, MERGED.replace('<link name="tip"/>', "").replace(
        '<joint name="tip_weld" type="fixed"><parent link="b"/><child link="tip"/><origin xyz="0 0 1"/></joint>', "")
        .replace('type="fixed"', 'type="continuous"'), "float.urdf")
    assert [b.motion for b in scene_from_urdf(path).bodies] == ["dynamic", "dynamic"]
    assert [b.motion for b in scene_from_urdf(path, fixed_base=True).bodies] == ["fixed", "dynamic"]


def test_floating_joint_gives_a_free_body_and_a_warning(tmp_path):
    path = write(tmp_path, ARM.format(lower=-1, upper=1).replace('type="revolute"', 'type="floating"'))
    with pytest.warns(UrdfWarning, match=r"joint 'hinge'.*floating.*free body"):
        scene = scene_from_urdf(path)
    assert [b.motion for b in scene.bodies] == ["fixed", "dynamic"] and scene.joints == []


# ---------------------------------------------------------------------------------------------
# Malformed files: clear errors naming the element
# ---------------------------------------------------------------------------------------------

TWO_LINKS = """<?xml version="1.0"?>
<robot name="bad">
  <link name="base"/>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
    {geometry}
  </link>
  {joints}
</robot>
"""
HINGE = '<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>{extra}</joint>'


def hinge(name="hinge", type="continuous", parent="base", child="arm", extra=""):
    return HINGE.format(name=name, type=type, parent=parent, child=child, extra=extra)


MALFORMED = [
    pytest.param(dict(joints=hinge(child="forearm")),
                 r"joint 'hinge': child link 'forearm' is not defined", id="missing-child-link"),
    pytest.param(dict(joints=hinge(parent="torso")),
                 r"joint 'hinge': parent link 'torso' is not defined", id="missing-parent-link"),
    pytest.param(dict(joints=hinge() + hinge(name="back", parent="arm", child="base")),
                 r"joints form a cycle: ('hinge' \(base -> arm\), 'back' \(arm -> base\)|"
                 r"'back' \(arm -> base\), 'hinge' \(base -> arm\))", id="cycle"),
    pytest.param(dict(joints=hinge() + hinge(name="again")),
                 r"link 'arm' has two parent joints, 'hinge' and 'again'", id="two-parents"),
    pytest.param(dict(joints=""), r"2 root links \('base', 'arm'\)", id="two-roots"),
    pytest.param(dict(joints=hinge(type="planar")), r"joint 'hinge': planar joints are not supported", id="planar"),
    pytest.param(dict(joints=hinge(type="ball")), r"joint 'hinge': unknown joint type 'ball'", id="unknown-type"),
    pytest.param(dict(joints=hinge(extra='<axis xyz="0 0 0"/>')), r"joint 'hinge': <axis xyz> must be a non-zero",
                 id="zero-axis"),
    pytest.param(dict(joints=hinge(),
                      geometry='<visual><geometry><mesh filename="meshes/missing.stl"/></geometry></visual>'),
                 r"link 'arm': <visual> #1: mesh 'meshes/missing.stl': file not found", id="missing-mesh"),
    pytest.param(dict(joints=hinge(),
                      geometry='<collision><geometry><mesh filename="package://pkg/arm.dae"/></geometry></collision>'),
                 r"link 'arm': <collision> #1: mesh 'package://pkg/arm.dae': file not found",
                 id="missing-package-mesh"),
    pytest.param(dict(joints=hinge(), geometry="<collision><origin xyz='0 0 0'/></collision>"),
                 r"link 'arm': <collision> at line \d+ has no <geometry>", id="no-geometry"),
    pytest.param(dict(joints='<joint name="hinge" type="continuous"><parent link="base"/></joint>'),
                 r"joint 'hinge': missing <child link", id="no-child-element"),
    pytest.param(dict(joints=hinge(extra='<origin xyz="0.07, 0, 1"/>')),
                 r"joint 'hinge': <origin xyz=\"0.07, 0, 1\"> at line \d+: expected 3 numbers", id="bad-number"),
    pytest.param(dict(joints=hinge(type="planar")), r"joint 'hinge': planar joints are not supported",
                 id="planar"),
    pytest.param(dict(joints=hinge(type="revolute", extra='<limit lower="-1" upper="1" effort="1O" velocity="1"/>')),
                 r"joint 'hinge': <limit effort=\"1O\"> at line \d+: expected a number", id="bad-effort"),
    pytest.param(dict(joints=hinge(),
                      geometry='<visual><geometry><mesh filename="m.stl" scale="1 2"/></geometry></visual>'),
                 r"link 'arm': <mesh scale=\"1 2\"> at line \d+: expected a number or 3 numbers", id="bad-scale"),
]


@pytest.mark.parametrize("parts,message", MALFORMED)
def test_malformed_urdf_gives_a_clear_error_naming_the_element(tmp_path, parts, message):
    values = dict(geometry="", joints="")
    values.update(parts)
    path = write(tmp_path, TWO_LINKS.format(**values))
    with pytest.raises(UrdfError, match=r"^robot\.urdf: .*(" + message + ")"):
        scene_from_urdf(path)


def test_pybullet_leniencies_are_accepted(tmp_path):
    """PyBullet's own files use <?xml version="0.0"?> and its <plane> geometry; both import."""
    text = ARM.format(lower=-1, upper=1).replace('<?xml version="1.0"?>', '<?xml version="0.0" ?>').replace(
        '<link name="base"/>',
        '<link name="base"><collision><geometry><plane normal="0 0 1"/></geometry></collision></link>')
    with pytest.warns(UrdfWarning, match=r"link 'base': <collision> at line 3: geometry <plane> is not supported"):
        scene = scene_from_urdf(write(tmp_path, text))
    assert [b.name for b in scene.bodies] == ["base", "arm"]


def test_humanoid_spherical_joints_become_ball_joints_and_hold_it_together():
    """pybullet_data's humanoid.urdf: its ten spherical joints are ball joints (#26) at the child
    link's origin; dropped for a few frames, every ball joint keeps its two bodies together."""
    path = Path(pybullet_data.getDataPath()) / "humanoid" / "humanoid.urdf"
    scene = quiet_scene(path)
    types = [joint.type for joint in scene.joints]
    assert types.count("spherical") == 8 and types.count("revolute") == 4
    scene.settings.frame_count, scene.settings.substeps = 6, 4
    trajectory = simulate(scene)
    assert trajectory.all_converged
    names = [body.name for body in scene.bodies]
    for joint in scene.joints:
        if joint.type != "spherical":
            continue
        i, j = names.index(joint.l_body), names.index(joint.r_body)
        local = [np.linalg.solve(body.transform, np.append(joint.position, 1.0)) for body in
                 (scene.bodies[i], scene.bodies[j])]
        gap = trajectory.transforms[-1, i] @ local[0] - trajectory.transforms[-1, j] @ local[1]
        assert np.linalg.norm(gap[:3]) < 1e-3


def test_joint_dynamics_and_effort_limits_are_imported(tmp_path):
    """<dynamics damping> is the joint's damping; <limit effort velocity> the effort and speed
    limits of a drive that is off until enabled; <dynamics friction> is named as unsupported."""
    text = TWO_LINKS.format(geometry="", joints=hinge(
        type="revolute", extra='<limit lower="-1" upper="1" effort="7.5" velocity="2"/>'
                               '<dynamics damping="0.3" friction="0.1"/>'))
    with pytest.warns(UrdfWarning, match=r"joint 'hinge': <dynamics friction=0.1> .* not supported"):
        scene = scene_from_urdf(write(tmp_path, text))
    joint = scene.joints[0]
    assert joint.damping == 0.3
    assert (joint.driving.max_torque, joint.driving.max_speed, joint.driving.is_constrained) == (7.5, 2.0, 0)
    kuka = quiet_scene(Path(pybullet_data.getDataPath()) / "kuka_iiwa" / "model.urdf")
    assert all(j.damping == 0.5 and j.driving.max_torque == 300.0 for j in kuka.joints)


def test_nul_bytes_after_the_robot_element_are_ignored(tmp_path):
    """PyBullet's parser stops at </robot>; pybullet_data's humanoid.urdf ends with a NUL byte
    (before: "not well-formed XML: Extra content at the end of the document")."""
    path = tmp_path / "cartpole.urdf"
    path.write_bytes(CARTPOLE.read_bytes() + b"\0\0\n")
    assert [b.name for b in quiet_scene(path).bodies] == ["slideBar", "cart", "pole"]


def test_a_mesh_scale_with_more_than_three_numbers_uses_the_first_three(tmp_path):
    """pybullet_data's racecar_differential.urdf has <mesh scale="1 1 1 1">: PyBullet uses the first
    3 numbers (before: refused by the attribute check)."""
    from solver.primitives import box_mesh

    box = box_mesh([1.0, 1.0, 1.0])
    (tmp_path / "box.obj").write_text(_obj([(box.vertices, box.triangles)]))
    text = TWO_LINKS.format(joints=hinge(), geometry='<collision><geometry><mesh filename="box.obj" scale="2 3 4 5"/>'
                            '</geometry></collision>')
    with pytest.warns(UrdfWarning, match=r"link 'arm': <collision> #1: mesh 'box.obj': <mesh scale> has 4 numbers; "
                                         r"using the first 3"):
        scene = scene_from_urdf(write(tmp_path, text))
    np.testing.assert_allclose(np.ptp(scene.bodies[1].mesh.vertices, axis=0), [2.0, 3.0, 4.0])


def test_unreadable_files_and_bad_arguments(tmp_path):
    with pytest.raises(UrdfError, match=r"no such file"):
        scene_from_urdf(tmp_path / "nothing.urdf")
    broken = write(tmp_path, "<robot name='x'><link name='a'></robot>", "broken.urdf")
    with pytest.raises(UrdfError, match=r"broken\.urdf: not well-formed XML: .*line 1"):
        scene_from_urdf(broken)
    other = write(tmp_path, "<sdf version='1.6'/>", "model.sdf")
    with pytest.raises(UrdfError, match=r"root element is <sdf>, not <robot>"):
        scene_from_urdf(other)
    path = write(tmp_path, ARM.format(lower=-1, upper=1))
    with pytest.raises(UrdfError, match=r"joint_positions: there is no joint named 'elbow' \(movable joints: hinge\)"):
        scene_from_urdf(path, joint_positions={"elbow": 1.0})
    with pytest.raises(UrdfError, match=r"joint_velocities: joint 'hinge': value must be a finite number"):
        scene_from_urdf(path, joint_velocities={"hinge": float("nan")})
    negative = write(tmp_path, ARM.format(lower=-1, upper=1).replace('value="1"', 'value="-1"'), "negative.urdf")
    with pytest.raises(UrdfError, match=r"link 'arm': <inertial><mass value> must be a finite number >= 0"):
        scene_from_urdf(negative)
    assert issubclass(UrdfError, SceneError)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def test_command_line_writes_a_loadable_scene(tmp_path, capsys):
    out = tmp_path / "cartpole.json"
    status = solver_main(["import-urdf", str(CARTPOLE), "--out", str(out), "--q", "cart_to_pole=0.25",
                          "--qd", "slider_to_cart=0.5", "--frame-count", "12"])
    assert status == 0, capsys.readouterr().err
    scene = load_scene(out)
    assert [b.name for b in scene.bodies] == ["slideBar", "cart", "pole"]
    assert scene.settings.frame_count == 12
    pole = {j.name: j for j in scene.joints}["cart_to_pole"]
    assert pole.init_angle == 0.25
    np.testing.assert_allclose(scene.bodies[1].linear_velocity, [0.5, 0.0, 0.0])
    assert "wrote" in capsys.readouterr().err

    assert solver_main(["import-urdf", str(CARTPOLE), "--out", str(out), "--q", "cart_to_pole"]) == 2
    assert "expected JOINT=VALUE" in capsys.readouterr().err
    assert solver_main(["import-urdf", str(tmp_path / "none.urdf"), "--out", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert solver_main(["import-urdf", str(KUKA), "--out", str(tmp_path / "kuka.json"), "--quiet"]) == 0
    assert capsys.readouterr().err.count("warning: model.urdf: link") == 8


def test_command_line_fixed_base_and_time_settings(tmp_path, capsys):
    """``import-urdf`` with --fixed-base, --q and the time-stepping options."""
    out = tmp_path / "pendulum5.json"
    assert solver_main(["import-urdf", str(PENDULUM5), "--out", str(out), "--fixed-base", "--q", "joint0=-0.5",
                        "--frame-rate", "48", "--substeps", "5", "--frame-count", "3"]) == 0
    scene = load_scene(out)
    assert scene.settings.frame_rate == 48.0 and scene.settings.substeps == 5
    assert scene.joints[0].init_angle == -0.5


def test_import_urdf_refuses_to_write_over_the_urdf(tmp_path, capsys):
    """--out naming the URDF file itself is refused before anything is written."""
    urdf = tmp_path / "pendulum5.urdf"
    urdf.write_bytes(PENDULUM5.read_bytes())
    before = urdf.read_bytes()
    assert solver_main(["import-urdf", str(urdf), "--out", str(urdf), "--quiet"]) == 2
    assert "is the URDF file itself" in capsys.readouterr().err
    assert urdf.read_bytes() == before


def test_panda_falling_limp_stays_near_a_tightly_converged_run():
    """The Panda (fixed base) falls limp from its zero pose, panda_joint4 resting against its
    upper limit: over 12 frames (120 steps) its joint angles stay within 3e-4 rad of a run at
    tolerances 1e-7 (starting each step's Newton solve from the explicit prediction would carry the
    resting joint across the cubic penalty, where Newton closes an overshoot only linearly;
    docs/performance.md, "URDF robots against PyBullet", gives the errors)."""
    def panda(tolerance=None):
        scene = quiet_import(PANDA, fixed_base=True).scene
        scene.settings.frame_count = 12
        if tolerance is not None:
            scene.settings.velocity_tol = scene.settings.transrate_tol = tolerance
            scene.settings.max_iterations = 200
        return scene

    trajectory = simulate(panda())
    reference = simulate(panda(1e-7))
    assert trajectory.all_converged and reference.all_converged
    revolute = [k for k, joint in enumerate(trajectory.joint_names) if not np.isnan(trajectory.angle[0, k])]
    assert len(revolute) == 7
    assert np.abs(trajectory.angle[:, revolute] - reference.angle[:, revolute]).max() < 3e-4


def test_a_robot_at_rest_takes_one_newton_iteration_per_step():
    """The cartpole standing still: each step's first Newton direction is far inside the strict
    chord test and is accepted alone (confirming it by a chord step would make every step cost
    two iterations), and the robot stays put."""
    scene = quiet_scene(CARTPOLE, fixed_base=True)
    scene.settings.frame_count = 24
    trajectory = simulate(scene)
    assert trajectory.all_converged
    assert trajectory.newton_iterations.mean() < 1.1, np.bincount(trajectory.newton_iterations)
    assert np.abs(trajectory.transforms[-1, :, :3, 3] - trajectory.transforms[0, :, :3, 3]).max() < 1e-6


def test_panda_fingers_driven_closed_onto_their_limit_stay_near_a_tightly_converged_run():
    """The Panda's fingers, open (0.04 m), driven closed onto their lower limit by an aim keyed per
    frame, which moves over each frame's substeps (the arm falls limp meanwhile, resting on its
    limits): over 24 frames every body stays within 1e-4 m of a run at tolerances 1e-7. Newton
    converges only linearly against the cubic limit penalties there: a last direction accepted
    up to the tolerance would leave an error about its size in the same direction step after
    step, so each accepted direction is confirmed by chord steps."""
    fingers = ("panda_finger_joint1", "panda_finger_joint2")

    def panda(tolerance=None):
        scene = quiet_scene(PANDA, fixed_base=True, joint_positions={name: 0.04 for name in fingers})
        settings = scene.settings
        settings.frame_count = 24
        if tolerance is not None:
            settings.velocity_tol = settings.transrate_tol = tolerance
            settings.max_iterations = 200
        aim = np.interp(np.arange(25), [0, 24], [0.04, 0.0])
        for joint in scene.joints:
            if joint.name in fingers:
                joint.driving = Driving(aim_distance=aim)
        return scene

    trajectory = simulate(panda())
    reference = simulate(panda(1e-7))
    assert trajectory.all_converged and reference.all_converged
    finger = [k for k, name in enumerate(trajectory.joint_names) if name in fingers]
    assert trajectory.distance[-1, finger] == pytest.approx(0.0, abs=2e-3)  # closed
    deviation = np.linalg.norm(trajectory.transforms[:, :, :3, 3] - reference.transforms[:, :, :3, 3], axis=-1)
    assert deviation.max() < 1e-4
