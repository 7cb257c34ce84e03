"""The MJCF importer against MuJoCo itself and pybullet_data's 24 MJCF files (docs/mjcf.md)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pybullet_data
import pytest

mujoco = pytest.importorskip("mujoco")

from solver import Body, Settings, simulate  # noqa: E402
from solver.__main__ import main as solver_main  # noqa: E402
from solver.mjcf import MjcfError, MjcfWarning, import_mjcf  # noqa: E402
from solver.primitives import box_mesh  # noqa: E402
from solver.scene_io import load_scene  # noqa: E402

CORPUS = Path(pybullet_data.getDataPath()) / "mjcf"
#: The files current MuJoCo refuses, with the element its message names.
REFUSED = {
    "ground.xml": "tendon", "ground_plane.xml": "plane size", "half_cheetah.xml": "inertial",
    "humanoid_fixed.xml": "invalid keyword", "swimmer.xml": "unrecognized attribute",
}


def quiet(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MjcfWarning)
        return import_mjcf(path, **kwargs)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.xml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.xml")))
def test_every_pybullet_mjcf_imports_or_is_refused_with_mujocos_reason(name):
    assert len(list(CORPUS.glob("*.xml"))) >= 24
    if name in REFUSED:
        with pytest.raises(MjcfError, match=rf"^{name}: MuJoCo cannot read it: .*{REFUSED[name]}.*line \d+"):
            quiet(CORPUS / name)
        return
    result = quiet(CORPUS / name)
    model = mujoco.MjModel.from_xml_string((CORPUS / name).read_text()) if name not in (
        "hopper.xml", "walker2d.xml", "humanoid_symmetric.xml") else None
    if model is not None:  # the masses MuJoCo computes
        total = sum(b.mass.mass for b in result.scene.bodies if b.mass is not None)
        dynamic = [b for b in range(1, model.nbody) if model.body_jntnum[b] or model.body_parentid[b]]
        assert total == pytest.approx(sum(model.body_mass[b] for b in dynamic), rel=1e-9)


def test_joints_limits_actuators_equalities_and_contact_groups_map_onto_the_scene(tmp_path):
    text = """<mujoco><compiler angle="radian"/>
      <worldbody>
        <geom name="floor" type="plane" size="2 2 0.1" contype="1" conaffinity="1"/>
        <body name="upper" pos="0 0 1">
          <joint name="shoulder" type="hinge" axis="0 1 0" range="-1 1" damping="0.5"/>
          <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" contype="2" conaffinity="2"/>
          <body name="lower" pos="0.5 0 0">
            <joint name="extend" type="slide" axis="1 0 0" range="0 0.2"/>
            <geom type="box" size="0.1 0.05 0.05" pos="0.1 0 0" contype="2" conaffinity="2"/>
          </body>
        </body>
        <body name="ball" pos="0 1 1"><joint type="ball"/><geom type="ellipsoid" size="0.1 0.2 0.1"/></body>
        <body name="free" pos="1 1 1"><freejoint/><geom type="cylinder" size="0.1 0.1"/></body>
      </worldbody>
      <equality><connect body1="free" body2="ball" anchor="0 0 0"/><weld body1="upper" body2="ball"/></equality>
      <actuator>
        <position joint="shoulder" kp="300" forcerange="-20 20" forcelimited="true"/>
        <velocity joint="extend" kv="50"/>
      </actuator></mujoco>"""
    scene = quiet(write(tmp_path, text), settings=Settings(frame_rate=24.0, substeps=10)).scene
    bodies = {b.name: b for b in scene.bodies}
    joints = {j.name: j for j in scene.joints}
    assert set(bodies) == {"world", "upper", "lower", "ball", "free"} and bodies["world"].motion == "fixed"
    shoulder, extend = joints["shoulder"], joints["extend"]
    assert shoulder.type == "revolute" and extend.type == "prismatic" and joints["ball"].type == "spherical" \
        if "ball" in joints else True
    np.testing.assert_allclose(shoulder.position1 - shoulder.position0, [0.0, 1.0, 0.0], atol=1e-12)
    assert (shoulder.limit.lower, shoulder.limit.upper) == pytest.approx((-1.0, 1.0))
    assert shoulder.damping == 0.5 and shoulder.driving.max_torque == 20.0 and shoulder.driving.aim_angle == 0.0
    dt, masses = 1.0 / 240.0, bodies["upper"].mass.mass
    assert shoulder.driving.strength_ratio == pytest.approx(300.0 * dt * dt / masses)
    assert extend.driving.aim_velocity == 0.0
    kinds = sorted(j.type for j in scene.joints)
    assert kinds == ["fixed", "prismatic", "revolute", "spherical", "spherical"]  # ball joint, connect; weld
    assert bodies["upper"].contact.collections == (1,) and bodies["world"].contact.collections == (0,)
    model = mujoco.MjModel.from_xml_string(text)
    assert bodies["upper"].mass.mass == pytest.approx(model.body_mass[1])


def test_a_mesh_geom_keeps_mujocos_mesh_and_mass(tmp_path):
    text = """<mujoco><asset><mesh name="wedge" vertex="0 0 0  0.2 0 0  0 0.2 0  0 0 0.2  0.2 0.2 0.2"/></asset>
      <worldbody><body name="part" pos="0 0 1"><freejoint/><geom type="mesh" mesh="wedge" density="500"/></body>
      </worldbody></mujoco>"""
    scene = quiet(write(tmp_path, text)).scene
    (part,) = scene.bodies
    model = mujoco.MjModel.from_xml_string(text)
    assert part.mass.mass == pytest.approx(model.body_mass[1])
    assert len(part.mesh.vertices) >= 4 and len(part.mesh.triangles) >= 4
    assert scene.joints == []  # a free body


def test_unrepresentable_parts_are_named(tmp_path):
    text = """<mujoco><worldbody><body name="arm">
        <joint name="a" type="hinge" axis="0 1 0" pos="0 0 0" stiffness="3" frictionloss="0.1"/>
        <joint name="b" type="slide" axis="1 0 0" pos="0 0 0"/><geom type="sphere" size="0.1"/>
      </body></worldbody>
      <actuator><motor joint="b" gear="5"/></actuator></mujoco>"""
    with pytest.warns(MjcfWarning) as caught:
        result = import_mjcf(write(tmp_path, text))
    messages = "\n".join(result.unsupported)
    assert "several joints 'a' (hinge), 'b' (slide)" in messages
    assert len(caught) == len(result.unsupported)


def test_mjcf_pendulum_period_matches_mujoco(tmp_path):
    """A capsule pendulum started 0.3 rad off: its period within 1 % of MuJoCo's for the same model."""
    text = """<mujoco><option timestep="0.0002"/><worldbody>
        <body name="bob" euler="0 17.1887 0"><joint name="pivot" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/></body></worldbody></mujoco>"""
    path = write(tmp_path, text)
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    angles = []
    for _ in range(int(3.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
        angles.append(data.qpos[0])
    reference = _period(np.array(angles), model.opt.timestep)
    scene = quiet(path, settings=Settings(frame_rate=240.0, substeps=4, frame_count=720)).scene
    trajectory = simulate(scene)
    ours = _period(trajectory.angle[1:, 0], 1.0 / 240.0)
    assert ours == pytest.approx(reference, rel=0.01)


def _period(angle: np.ndarray, step: float) -> float:
    """Mean time between the upward crossings of the swing's middle, s."""
    middle = 0.5 * (angle.max() + angle.min())
    above = angle > middle
    crossings = np.flatnonzero(~above[:-1] & above[1:])
    times = [(k + (middle - angle[k]) / (angle[k + 1] - angle[k])) * step for k in crossings]
    assert len(times) >= 2
    return float(np.mean(np.diff(times)))


@pytest.mark.parametrize("name", ["hopper.xml", "inverted_pendulum.xml"])
def test_hopper_and_inverted_pendulum_bake_with_contact(name):
    scene = quiet(CORPUS / name, settings=Settings(frame_rate=24.0, substeps=10, frame_count=6)).scene
    if name == "hopper.xml":  # the model has no floor: a ground under its foot
        scene.bodies.append(Body(name="ground", mesh=box_mesh([4.0, 4.0, 0.2], center=(0.0, 0.0, -0.1)),
                                 motion="fixed"))
    scene.settings.contact.enable = True
    trajectory = simulate(scene)
    assert trajectory.all_converged
    if name == "hopper.xml":  # lands on the ground (the foot's lowest point starts 4 cm above it)
        foot = [b.name for b in scene.bodies].index("foot")
        assert trajectory.transforms[-1, foot, 2, 3] == pytest.approx(-0.04, abs=0.005)


def test_import_mjcf_command(tmp_path, capsys):
    out = tmp_path / "hopper.json"
    assert solver_main(["import-mjcf", str(CORPUS / "hopper.xml"), "--out", str(out)]) == 0
    assert "several joints" in capsys.readouterr().err
    assert len(load_scene(out).bodies) == 4
    assert solver_main(["import-mjcf", str(CORPUS / "swimmer.xml"), "--out", str(tmp_path / "s.json")]) == 2
    assert "swimmer.xml: MuJoCo cannot read it" in capsys.readouterr().err
