"""The example rigs (``examples/*.py``) build, bake headless and move as their docstrings say.

Each example runs as a user would run it: ``python examples/NAME.py --out rig.blend --frames N``
in a subprocess, then ``python -m abd_addon.batch rig.blend --out baked.blend`` (the batch entry
point) in another, both under ``timeout``. The baked file is then opened here and read back
(``examples/_blender.py``'s ``read_bake``: the ``abd_distance`` / ``abd_angle`` F-curves of the
joint Empties and the world locations of the bodies, frame by frame).
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys

import bpy
import numpy as np
import pytest
from conftest import ROOT

#: s per subprocess; the first bake in a fresh checkout compiles the solver's Numba kernels.
TIMEOUT = 420


def _load_helper():
    """``examples/_blender.py`` as a module (not via sys.path: it is a script folder)."""
    spec = importlib.util.spec_from_file_location("abd_examples_blender", ROOT / "examples" / "_blender.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helper = _load_helper()


def _run(command, env):
    full = ["timeout", "-k", "10", str(TIMEOUT), *map(str, command)]
    return subprocess.run(full, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT + 30)


def bake_example(name: str, frames: int, tmp_path_factory) -> dict:
    """Build ``examples/NAME.py`` with ``--frames``, bake it with the batch CLI, read it back here."""
    folder = tmp_path_factory.mktemp(name)
    rig, baked = folder / f"{name}.blend", folder / f"{name}_baked.blend"
    env = dict(os.environ)
    env["BLENDER_USER_RESOURCES"] = str(folder / "blender_user")

    built = _run([sys.executable, ROOT / "examples" / f"{name}.py", "--out", rig, "--frames", frames], env)
    assert built.returncode == 0, f"building {name} failed:\n{built.stdout}\n{built.stderr}"
    assert rig.is_file()

    result = _run([sys.executable, "-m", "abd_addon.batch", rig, "--out", baked], env)
    assert result.returncode == 0, f"baking {name} failed:\n{result.stdout}\n{result.stderr}"
    summary = dict(re.findall(r"(\w+)=(\S+)", result.stdout.strip().splitlines()[-1]))
    assert summary["all_converged"] == "True", result.stdout

    bpy.ops.wm.open_mainfile(filepath=str(baked), load_ui=False)
    data = helper.read_bake()
    assert len(data["frames"]) == frames
    data["summary"] = summary
    bpy.ops.wm.read_homefile(app_template="")
    return data


def readout(data: dict, joint: str) -> np.ndarray:
    values = data["joints"][joint]["values"]
    assert values is not None, f"joint {joint} has no readout F-curve"
    return np.asarray(values)


@pytest.fixture(scope="module")
def drawer(tmp_path_factory):
    return bake_example("drawer", 40, tmp_path_factory)


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    return bake_example("door", 36, tmp_path_factory)


@pytest.fixture(scope="module")
def piston(tmp_path_factory):
    return bake_example("piston", 36, tmp_path_factory)


@pytest.fixture(scope="module")
def puppet(tmp_path_factory):
    # The full default length: the target's sweep is tuned to 4 s; squeezed into fewer frames it
    # whips the chain up towards horizontal.
    return bake_example("puppet", 96, tmp_path_factory)


@pytest.fixture(scope="module")
def hanging_lamp(tmp_path_factory):
    return bake_example("hanging_lamp", 36, tmp_path_factory)


@pytest.fixture(scope="module")
def panda(tmp_path_factory):
    # The whole pick and place (7 s): reach, grip at frame 80, lift to frame 108, put down by
    # frame 132, release by 152, withdraw.
    return bake_example("panda", 168, tmp_path_factory)


def test_drawer_opens_towards_the_aim_and_closes(drawer):
    distance = readout(drawer, "DrawerSlide")
    aim = np.asarray(drawer["joints"]["DrawerSlide"]["aim"])
    assert drawer["summary"]["bodies"] == "2" and drawer["summary"]["joints"] == "1"
    assert abs(distance[0]) < 1e-6
    assert aim.max() == pytest.approx(0.35)
    # Rises toward the open aim (the drive is stiff: K = 100 (m_l + m_r); it tracks within mm) ...
    peak = int(np.argmax(distance))
    assert distance[peak] == pytest.approx(0.35, abs=0.01)
    hold = np.flatnonzero(aim > 0.35 - 1e-6)
    np.testing.assert_allclose(distance[hold], aim[hold], atol=0.01)
    # ... stays inside the limit [0, 0.40] (the aim never asks for more) ...
    assert distance.min() > -0.01 and distance.max() < 0.40 + 0.005
    # ... and comes back: closed again at the end, after the aim went back to 0.
    assert peak < len(distance) - 5
    assert abs(distance[-1]) < 0.01


def test_door_falls_and_stops_at_its_limit(door):
    angle = readout(door, "DoorHinge")
    upper = door["joints"]["DoorHinge"]["limit"]["upper"]
    assert upper == pytest.approx(math.radians(80.0))
    assert abs(angle[0]) < 1e-6
    # It falls under gravity (angle grows about +Y) ...
    first = angle[: len(angle) // 3]
    assert np.all(np.diff(first) > 0.0)
    # ... and stops at the limit. Tolerances: the limit is a cubic penalty s ((x - u)/w)^3 with
    # s = 1000 J at the incremental-potential level (not scaled by dt^2), w = 90 deg. Resting on
    # it, gravity's torque tau = m g h/2 ~ 190 N m (32 kg, 1.2 m door, level) gives a static
    # overshoot delta = w^1.5 sqrt(tau dt^2 / (3 s)) ~ 2e-3 rad (0.12 deg) at dt = 1/240 s: we
    # allow 1 deg at rest. The impact overshoots a little more before the stop pushes back
    # (measured ~0.1 deg): we allow 2 deg for the largest angle over the bake.
    assert angle.max() < upper + math.radians(2.0)
    settled = angle[-5:]
    np.testing.assert_allclose(settled, upper, atol=math.radians(1.0))
    # The door lies level (its long axis horizontal) when it has stopped.
    assert abs(door["z_axes"]["Door"][-1][2]) < math.sin(math.radians(1.5))


def test_piston_slides_back_and_forth_as_the_crank_turns(piston):
    slide = readout(piston, "PistonSlide")
    crank = readout(piston, "CrankBearing")
    assert piston["summary"]["bodies"] == "4" and piston["summary"]["joints"] == "4"
    # The crank makes its two turns (the bearing's motor turns it at two turns per animation).
    assert crank[-1] == pytest.approx(2 * 2 * math.pi, abs=0.05)
    # The slider distance oscillates: an interior local maximum and an interior local minimum.
    inner = slide[1:-1]
    maxima = np.flatnonzero((inner > slide[:-2]) & (inner >= slide[2:]))
    minima = np.flatnonzero((inner < slide[:-2]) & (inner <= slide[2:]))
    assert maxima.size >= 1 and minima.size >= 1
    # Its extremes are those of the slider-crank (r = 0.25, l = 0.8, starting with the crank up):
    # l + r - sqrt(l^2 - r^2) = +0.290 and l - r - sqrt(l^2 - r^2) = -0.210 (sampled per frame).
    assert slide.max() == pytest.approx(0.290, abs=0.02)
    assert slide.min() == pytest.approx(-0.210, abs=0.02)
    # The piston stays on its axis (world X at z = 0.8).
    piston_path = np.asarray(piston["locations"]["Piston"])
    assert np.abs(piston_path[:, 2] - 0.8).max() < 0.01


def test_puppet_follows_its_target_and_the_chain_hangs(puppet):
    body = np.asarray(puppet["locations"]["Puppet"])
    target = np.asarray(puppet["locations"]["Target"])
    assert puppet["bodies"]["Puppet"]["soft_target"] == "Target"
    # The target really moves (so following it means something) ...
    assert np.ptp(target[:, 0]) > 0.9
    # ... and the puppet follows: a soft spring of strength eta = 0.003 per time step (stiffness
    # eta m / dt^2, omega ~ 13 rad/s) sags ~7 cm under the weight of puppet and chain and lags
    # while the target accelerates (measured up to 0.13 m): we bound the error by 0.25 m.
    error = np.linalg.norm(body - target, axis=1)
    assert error.max() < 0.25
    assert np.corrcoef(body[:, 0], target[:, 0])[0, 1] > 0.95
    # The chain hangs below it: each link's centre below its parent's, at every frame.
    above = body
    for link in ("Link1", "Link2", "Link3"):
        path = np.asarray(puppet["locations"][link])
        assert np.all(path[:, 2] < above[:, 2]), f"{link} rose above its parent"
        above = path
    assert np.all(body[:, 2] - above[:, 2] > 0.3)


def test_panda_picks_up_the_box_and_puts_it_down(panda):
    arm = [f"panda_joint{k}" for k in range(1, 8)]
    fingers = ["panda_finger_joint1", "panda_finger_joint2"]
    assert panda["summary"]["bodies"] == "12" and panda["summary"]["joints"] == "9"
    np.testing.assert_allclose(panda["locations"]["panda_link0"], 0.0, atol=1e-9)

    # Every arm joint follows its servo's aim: within 0.01 rad while the servos move the arm up
    # from the zero configuration at their speed limits (2.175 rad/s), within 1e-3 rad from
    # frame 40 on, holding the arm and the box against gravity (torque limits 87 and 12 N m).
    for name in arm:
        angle, aim = readout(panda, name), np.asarray(panda["joints"][name]["aim"])
        assert np.abs(angle - aim).max() < 0.01, name
        assert np.abs(angle - aim)[39:].max() < 1e-3, name

    # The fingers close on the 5 cm box (their aim is closed: they squeeze with their 20 N limit)
    # and stop at its faces, 25 mm (plus the contact gap) from closed; they open again after.
    for name in fingers:
        distance = readout(panda, name)
        assert distance[0] == pytest.approx(0.04, abs=1e-6)
        np.testing.assert_allclose(distance[84:140], 0.025, atol=0.002)
        assert distance[-1] == pytest.approx(0.04, abs=1e-3)

    # The box rests on the table (its centre 25 mm up), rises 20 cm in the grip, comes back down
    # onto the table and stays there once released.
    box = np.asarray(panda["locations"]["Box"])
    assert box[0, 2] == pytest.approx(0.025, abs=1e-3)
    assert box[107, 2] == pytest.approx(0.225, abs=0.01)
    assert box[-1, 2] == pytest.approx(0.025, abs=2e-3)
    assert box[:, 2].min() > 0.025 - 1e-3  # never into the table
    assert np.abs(box[-1, :2] - box[0, :2]).max() < 0.02


def test_hanging_lamp_converted_from_rigid_bodies_swings_and_its_sign_stops_at_its_limit(hanging_lamp):
    """Built as a Blender rigid-body rig and converted: three ball joints, a weld and a hinge."""
    joints = hanging_lamp["joints"]
    assert sorted(record["type"] for record in joints.values()) == ["BALL", "BALL", "BALL", "FIXED", "REVOLUTE"]
    assert hanging_lamp["bodies"]["Ceiling"]["motion"] == "FIXED"
    assert all(hanging_lamp["bodies"][name]["motion"] == "DYNAMIC"
               for name in ("Link1", "Link2", "Link3", "Shade", "Sign"))
    # The chain swings down from level: its last link ends far below the ceiling; the links' centres,
    # 0.2 m either side of the ball joint between them, never come more than 0.4 m apart (they
    # would if the joint let go), and bend (come closer) as it swings.
    last, before = (np.asarray(hanging_lamp["locations"][name]) for name in ("Link3", "Link2"))
    assert last[0, 2] == pytest.approx(2.0) and last[:, 2].min() < 1.2
    apart = np.linalg.norm(last - before, axis=1)
    assert apart.max() < 0.4 + 1e-3 and apart.min() < 0.39
    # The shade stays welded 0.2 m from the last link's centre.
    shade = np.asarray(hanging_lamp["locations"]["Shade"])
    np.testing.assert_allclose(np.linalg.norm(shade - last, axis=1), 0.2, atol=1e-3)
    # The sign tips down and its hinge's limit (converted from the HINGE's -30..30 degrees) stops it.
    (hinge,) = [record for record in joints.values() if record["type"] == "REVOLUTE"]
    angle = np.asarray(hinge["values"])
    assert hinge["limit"]["use"] and hinge["limit"]["upper"] == pytest.approx(math.radians(30.0))
    np.testing.assert_allclose(angle[-10:], math.radians(30.0), atol=math.radians(1.0))
    assert angle.max() < math.radians(31.0)


@pytest.fixture(scope="module")
def chain_drop(tmp_path_factory):
    pytest.importorskip("ipctk")
    return bake_example("chain_drop", 36, tmp_path_factory)


def test_chain_drop_lands_on_the_floor_without_passing_through(chain_drop):
    """The links (0.08 m thick) and crates (0.2 m) never sink into the floor (top at z = 0) and
    end lying on it; the top crate ends on the middle one."""
    z = {name: np.asarray(values)[:, 2] for name, values in chain_drop["locations"].items()}
    links = [name for name in z if name.startswith("Link")]
    assert len(links) == 5
    for name in links:  # a link's centre is at least its half thickness above the floor
        assert z[name].min() > 0.04 - 1e-3 * 0.5
    for name in ("Crate0", "Crate1", "Crate2"):
        assert z[name].min() > 0.1 - 1e-3 * 0.5
    assert z["Crate0"][-1] == pytest.approx(0.1, abs=2e-3) and z["Crate1"][-1] == pytest.approx(0.1, abs=2e-3)
    assert z["Crate2"][-1] == pytest.approx(0.3, abs=4e-3)  # stacked on Crate1
    assert z[links[-1]][-1] < 0.05  # the chain's free end lies on the floor
