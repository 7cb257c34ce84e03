"""``device = "libuipc"`` (solver/uipc_backend.py) without a GPU: libuipc's ``none`` backend builds
the translated scene and runs libuipc's own checks, but moves nothing. Each concept of the
translation is checked where it lands in libuipc's scene (its constitution UIDs and attributes,
read back through pyuipc), libuipc's refusals are checked to come out in our words, and the
refusals before anything is built (pyuipc missing, no GPU, what libuipc cannot do) with the
install line. The physics on a GPU: benchmarks/uipc_check.sh."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys

import numpy as np
import pytest

from solver import Body, BodyContact, ContactSettings, Driving, Joint, Limit, Scene, Settings, SoftTransform
from solver import uipc_backend
from solver.__main__ import main as solver_main
from solver.model import Model
from solver.primitives import box_mesh
from solver.scene_io import save_scene
from solver.scene_validation import validate_scene
from solver.simulation import Simulation, SolverError, simulate

import benchmark_modules

HAVE_UIPC = importlib.util.find_spec("uipc") is not None
needs_uipc = pytest.mark.skipif(not HAVE_UIPC, reason="pyuipc is not installed")


@pytest.fixture(autouse=True)
def none_backend(monkeypatch):
    monkeypatch.setenv(uipc_backend.BACKEND_VARIABLE, "none")


def box(name, size=0.2, position=(0.0, 0.0, 0.0), motion="dynamic", **fields) -> Body:
    transform = np.eye(4)
    transform[:3, 3] = position
    size = [size] * 3 if np.isscalar(size) else list(size)
    return Body(name=name, mesh=box_mesh(size), transform=transform, motion=motion, **fields)


def scene_of(bodies, joints=(), device="libuipc", **settings) -> Scene:
    return Scene(Settings(device=device, **settings), list(bodies), list(joints))


def translate(scene: Scene) -> uipc_backend.UipcRun:
    """The scene translated and started on libuipc's none backend (its checks run)."""
    scene = validate_scene(scene)
    plain = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, contact=ContactSettings()))
    return uipc_backend.UipcRun(scene, Model(plain))


def attributes(collection) -> dict:
    """name -> values of a pyuipc attribute collection (edges, vertices, instances, meta)."""
    return {name: np.array(entry["attribute"]["values"]) for name, entry in collection.to_json().items()}


def rig() -> Scene:
    """One joint of each type, each revolute and prismatic pair of joints with one limit and one
    drive among them, and series that change from frame to frame."""
    frames = 4
    bodies = [box("base", 0.2, (0, 0, 0), "fixed"), box("arm", 0.2, (1, 0, 0)), box("door", 0.2, (2, 0, 0)),
              box("slider", 0.2, (0, 1, 0)), box("cart", 0.2, (0, 2, 0)), box("lid", 0.2, (3, 0, 0)),
              box("ball", 0.2, (4, 0, 0))]
    lower = np.linspace(-0.5, -0.1, frames + 1)
    joints = [
        Joint(name="hinge", type="revolute", l_body="base", r_body="arm", position0=np.array([0.5, 0, 0]),
              position1=np.array([0.5, 0, 1.0]), strength_ratio=50.0, init_angle=0.25,
              limit=Limit(lower=lower, upper=0.4, strength=300.0),
              driving=Driving(strength_ratio=70.0, aim_angle=np.linspace(0.0, 1.0, frames + 1),
                              is_constrained=[1, 1, 0, 0, 1])),
        Joint(name="free hinge", type="revolute", l_body="arm", r_body="door", position0=np.array([1.5, 0, 0]),
              position1=np.array([1.5, 1.0, 0])),
        Joint(name="rail", type="prismatic", l_body="base", r_body="slider", position0=np.array([0, 1, 0]),
              position1=np.array([1, 1, 0]), strength_ratio=80.0, init_distance=0.1,
              limit=Limit(lower=-0.2, upper=0.3, strength=20.0),
              driving=Driving(strength_ratio=40.0, aim_distance=0.25, is_passive=1)),
        Joint(name="free rail", type="prismatic", l_body="slider", r_body="cart", position0=np.array([0, 2, 0]),
              position1=np.array([0, 2, 1.0])),
        Joint(name="weld", type="fixed", l_body="door", r_body="lid", position=np.array([2.5, 0.1, 0]),
              strength_ratio=30.0),
        Joint(name="ball joint", type="spherical", l_body="lid", r_body="ball", position=np.array([3.5, 0, 0.1]),
              strength_ratio=20.0),
    ]
    return scene_of(bodies, joints, frame_count=frames, substeps=2)


# -- translation -----------------------------------------------------------------------------------


@needs_uipc
def test_each_joint_type_reaches_its_libuipc_constitution_with_its_bodies_and_strength():
    run = translate(rig())
    translated = run.translated
    expected = {"revolute": (18, ["hinge", "free hinge"]), "prismatic": (20, ["rail", "free rail"]),
                "fixed": (25, ["weld"]), "spherical": (26, ["ball joint"])}
    names = [joint.name for joint in rig().joints]
    bodies = [body.name for body in rig().bodies]
    for kind, (uid, joint_names) in expected.items():
        slot, indices = translated.joint_geometries[kind]
        assert [names[k] for k in indices] == joint_names
        geometry = slot.geometry()
        assert attributes(geometry.meta())["constitution_uid"].item() == uid
        simplices = geometry.edges() if kind in ("revolute", "prismatic") else geometry.vertices()
        values = attributes(simplices)
        joints = [rig().joints[k] for k in indices]
        np.testing.assert_allclose(values["strength_ratio"], [j.strength_ratio for j in joints])
        for side, key in (("l", "l_body"), ("r", "r_body")):
            slots_and_instances = [translated.body_slot[bodies.index(getattr(j, key))] for j in joints]
            np.testing.assert_array_equal(values[f"{side}_geo_id"], [s.id() for s, _ in slots_and_instances])
            np.testing.assert_array_equal(values[f"{side}_inst_id"], [i for _, i in slots_and_instances])


@needs_uipc
def test_axis_joints_carry_their_world_axis_and_init_offsets():
    translated = translate(rig()).translated
    for kind, init_key, init in (("revolute", "init_angle", [0.25, 0.0]), ("prismatic", "init_distance", [0.1, 0.0])):
        slot, indices = translated.joint_geometries[kind]
        geometry = slot.geometry()
        positions = np.array(geometry.positions().view()).reshape(-1, 3)
        edges = np.array(geometry.edges().topo().view()).reshape(-1, 2)
        joints = [rig().joints[k] for k in indices]
        np.testing.assert_allclose(positions[edges[:, 0]], [j.position0 for j in joints])
        np.testing.assert_allclose(positions[edges[:, 1]], [j.position1 for j in joints])
        np.testing.assert_allclose(attributes(geometry.edges())[init_key], init)


@needs_uipc
def test_fixed_joint_anchor_is_given_in_each_bodys_frame_and_spherical_in_the_world():
    translated = translate(rig()).translated
    weld = attributes(translated.joint_geometries["fixed"][0].geometry().vertices())
    np.testing.assert_allclose(weld["l_position"].reshape(3), [2.5 - 2.0, 0.1, 0.0])  # door at x = 2
    np.testing.assert_allclose(weld["r_position"].reshape(3), [2.5 - 3.0, 0.1, 0.0])  # lid at x = 3
    ball = translated.joint_geometries["spherical"][0].geometry()
    np.testing.assert_allclose(np.array(ball.positions().view()).reshape(3), [3.5, 0.0, 0.1])


@needs_uipc
def test_limits_and_drives_reach_libuipc_on_every_joint_of_their_type_with_neutral_values_where_not_given():
    translated = translate(rig()).translated
    hinge = translated.joint_geometries["revolute"][0].geometry()
    meta, edges = attributes(hinge.meta()), attributes(hinge.edges())
    assert 670 in meta["extra_constitution_uids"].ravel() and 19 in meta["constraint_uids"].ravel()
    # The first step's values (frame 1 at 1/2 of the way from frame 0, two substeps a frame):
    # libuipc subtracts init_angle from the bounds where this solver adds it, hence + 2 init_angle.
    lower_step = 0.5 * (-0.5) + 0.5 * (-0.4)
    np.testing.assert_allclose(edges["limit/lower"], [lower_step + 0.5, -1e6])
    np.testing.assert_allclose(edges["limit/upper"], [0.4 + 0.5, 1e6])
    np.testing.assert_allclose(edges["limit/strength"], [300.0, 0.0])
    np.testing.assert_allclose(edges["driving/strength_ratio"], [70.0, 0.0])
    np.testing.assert_array_equal(edges["driving/is_constrained"], [1, 0])
    np.testing.assert_array_equal(edges["is_passive"], [0, 0])
    np.testing.assert_allclose(edges["aim_angle"], [0.5 * 0.25, 0.0])
    rail = translated.joint_geometries["prismatic"][0].geometry()
    meta, edges = attributes(rail.meta()), attributes(rail.edges())
    assert 669 in meta["extra_constitution_uids"].ravel() and 21 in meta["constraint_uids"].ravel()
    np.testing.assert_allclose(edges["limit/lower"], [-0.2 + 0.1, -1e6])  # + init_distance
    np.testing.assert_allclose(edges["limit/upper"], [0.3 + 0.1, 1e6])
    np.testing.assert_allclose(edges["limit/strength"], [20.0, 0.0])
    np.testing.assert_allclose(edges["driving/strength_ratio"], [40.0, 0.0])
    np.testing.assert_array_equal(edges["is_passive"], [1, 0])
    np.testing.assert_allclose(edges["aim_distance"], [0.25, 0.0])


@needs_uipc
def test_the_animator_writes_each_steps_limits_and_drives_interpolated_between_frames():
    translated = translate(rig()).translated
    slot = translated.joint_geometries["revolute"][0]
    (_, setter, values), = [entry for entry in translated.animations if entry[0].name() == "revolute joints"]
    geometry = slot.geometry()
    setter(geometry, *values, 3, 0.5)  # halfway from frame 2 to frame 3
    edges = attributes(geometry.edges())
    lower = np.linspace(-0.5, -0.1, 5)
    np.testing.assert_allclose(edges["limit/lower"][0], 0.5 * (lower[2] + lower[3]) + 0.5)
    np.testing.assert_allclose(edges["aim_angle"][0], 0.5 * (0.5 + 0.75))
    np.testing.assert_array_equal(edges["driving/is_constrained"], [0, 0])  # frame 3's flag


@needs_uipc
def test_bodies_reach_libuipc_with_mass_kappa_pose_velocity_and_fixed_flag():
    moving = box("moving", 0.2, (0, 0, 1), kappa=3e8, mass_density=500.0, linear_velocity=np.array([1.0, 0, 0]),
                 angular_velocity=np.array([0, 0, 2.0]))
    heavy = box("heavy", 0.2, (1, 0, 0), mass=__import__("solver").MassOverride(
        mass=7.0, mass_center=np.zeros(3), inertia=0.1 * np.eye(3)))
    floor = box("floor", (2.0, 2.0, 0.1), (0, 0, -1), "fixed")
    translated = translate(scene_of([moving, heavy, floor])).translated
    slots = {body: slot for slot, members in translated.groups for body in members}
    meta = attributes(slots[0].geometry().meta())
    assert meta["constitution_uid"].item() == 1  # OrthoPotential
    assert meta["mass_density"].item() == 500.0
    assert meta["abd_mass"].item() == pytest.approx(500.0 * 0.008)
    instances = attributes(slots[0].geometry().instances())
    assert instances["kappa"].item() == 3e8
    np.testing.assert_allclose(instances["transform"][0][:3, 3].ravel(), [0, 0, 1])
    velocity = instances["velocity"][0]
    np.testing.assert_allclose(velocity[:3, 3].ravel(), [1.0, 0, 0])  # dp/dt at the centre
    np.testing.assert_allclose(velocity[:3, :3], [[0, -2.0, 0], [2.0, 0, 0], [0, 0, 0]])  # [w]x A
    assert attributes(slots[1].geometry().meta())["abd_mass"].item() == pytest.approx(7.0)
    assert attributes(slots[2].geometry().instances())["is_fixed"].item() == 1
    assert attributes(slots[0].geometry().instances())["is_fixed"].item() == 0


@needs_uipc
def test_alike_bodies_share_one_libuipc_geometry_one_instance_each():
    boxes = [box(f"box{k}", 0.2, (0.5 * k, 0, 0)) for k in range(5)]
    boxes[3].mesh.vertices = boxes[3].mesh.vertices + 1e-9  # round-off, as from Blender's export
    translated = translate(scene_of(boxes + [box("odd", 0.3, (0, 2, 0))])).translated
    assert [list(members) for _, members in translated.groups] == [[0, 1, 2, 3, 4], [5]]
    transforms = attributes(translated.groups[0][0].geometry().instances())["transform"]
    np.testing.assert_allclose(transforms[:, 0, 3].ravel(), [0.0, 0.5, 1.0, 1.5, 2.0])


@needs_uipc
def test_soft_transforms_and_animated_bodies_are_libuipc_soft_transform_constraints():
    frames = 2
    aims = np.repeat(np.eye(4)[None], frames + 1, axis=0)
    aims[:, 0, 3] = [0.0, 1.0, 2.0]
    animated = np.repeat(np.eye(4)[None], frames + 1, axis=0)
    animated[:, 2, 3] = [1.0, 1.5, 2.0]
    held = box("held", soft_transform=SoftTransform(strength_ratio=(60.0, 30.0), aim_transform=aims))
    paddle = box("paddle", 0.2, (0, 0, 1.0), "animated", animated_transforms=animated)
    run = translate(scene_of([held, paddle], frame_count=frames, substeps=2))
    translated = run.translated
    for body, strength, first_aim in ((0, [60.0, 30.0], [0.5, 0, 0]), (1, [100.0, 100.0], [0, 0, 1.25])):
        (slot, _), = [(s, m) for s, m in translated.groups if list(m) == [body]]
        assert 16 in attributes(slot.geometry().meta())["constraint_uids"].ravel()
        instances = attributes(slot.geometry().instances())
        np.testing.assert_allclose(instances["strength_ratio"].ravel(), strength)
        assert instances["is_constrained"].item() == 1
        np.testing.assert_allclose(instances["aim_transform"][0][:3, 3].ravel(), first_aim)
    (_, setter, values), = [entry for entry in translated.animations if entry[0].name() == "paddle"]
    (slot, _), = [(s, m) for s, m in translated.groups if list(m) == [1]]
    setter(slot.geometry(), *values, 2, 1.0)
    np.testing.assert_allclose(attributes(slot.geometry().instances())["aim_transform"][0][:3, 3].ravel(), [0, 0, 2])


@needs_uipc
def test_settings_reach_libuipcs_config():
    scene = scene_of([box("a")], frame_rate=30.0, substeps=4, gravity=np.array([0.0, -9.8, 0.0]),
                     max_iterations=17, min_iterations=2, velocity_tol=0.02, transrate_tol=0.3,
                     line_search_max_iterations=5, contact=ContactSettings(enable=True, d_hat=2e-3, eps_velocity=0.05))
    config = translate(scene).translated.config
    assert config["dt"] == pytest.approx(1.0 / 120.0)
    assert config["gravity"] == [[0.0], [-9.8], [0.0]]
    assert config["newton"]["max_iter"] == 17 and config["newton"]["min_iter"] == 2
    assert config["newton"]["velocity_tol"] == 0.02 and config["newton"]["transrate_tol"] == 0.3
    assert config["newton"]["semi_implicit"]["enable"] == 0
    assert config["line_search"]["max_iter"] == 5
    assert config["contact"]["enable"] == 1 and config["contact"]["d_hat"] == 2e-3
    assert config["contact"]["eps_velocity"] == 0.05
    assert translate(scene_of([box("a")])).translated.config["contact"]["enable"] == 0


@needs_uipc
def test_contact_elements_give_each_pair_its_friction_and_who_touches_whom():
    bodies = [box("floor", (4.0, 4.0, 0.2), (0, 0, -0.1), "fixed"),
              box("a", 0.2, (0, 0, 0.5), contact=BodyContact(friction=0.16)),
              box("b", 0.2, (1, 0, 0.5), contact=BodyContact(friction=0.16)),
              box("other layer", 0.2, (-1, 0, 0.5), contact=BodyContact(collections=(3,))),
              box("ghost", 0.2, (0, 1, 0.5), contact=BodyContact(enable=False)),
              box("hinged", 0.2, (1.0, 1.0, 0.5)), box("touching hinge", 0.2, (1.5, 1.0, 0.5))]
    joints = [Joint(name="apart", type="spherical", l_body="b", r_body="hinged", position=np.array([1.0, 0.5, 0.5])),
              Joint(name="together", type="spherical", l_body="hinged", r_body="touching hinge",
                    position=np.array([1.25, 1.0, 0.5]), collide_connected=True)]
    scene = scene_of(bodies, joints, contact=ContactSettings(enable=True, friction=0.25))
    translated = translate(scene).translated
    tabular = translated.scene.contact_tabular()
    element = dict(zip([body.name for body in bodies], translated.elements))

    def model(x, y):
        return tabular.at(int(element[x]), int(element[y]))

    assert model("a", "a").is_enabled() and model("a", "a").friction_rate() == pytest.approx(0.16)
    assert model("a", "floor").is_enabled() and model("a", "floor").friction_rate() == pytest.approx(0.2)
    assert model("a", "floor").resistance() == pytest.approx(1e9)
    assert not model("other layer", "floor").is_enabled()  # no collection in common
    assert not model("ghost", "floor").is_enabled() and not model("ghost", "a").is_enabled()
    assert not model("b", "hinged").is_enabled()  # jointed, collide_connected off
    assert model("hinged", "touching hinge").is_enabled()
    assert model("b", "floor").is_enabled()


@needs_uipc
def test_a_run_on_libuipc_gives_a_whole_trajectory_with_joint_readouts_from_the_read_back_poses():
    trajectory = simulate(rig())
    assert trajectory.transforms.shape == (5, 7, 4, 4)
    np.testing.assert_allclose(trajectory.transforms[-1], trajectory.transforms[0])  # the none backend moves nothing
    # Readouts computed from the poses as for this solver's own runs: at rest, raw 0 plus the offset.
    np.testing.assert_allclose(trajectory.angle[:, 0], 0.25)
    np.testing.assert_allclose(trajectory.distance[:, 2], 0.1, atol=1e-12)
    assert np.all(np.isfinite(trajectory.rotation[:, 4:6]))
    assert trajectory.all_converged and np.all(trajectory.newton_iterations == 0)
    preview = Simulation(rig(), compile_now=False)
    assert preview.pending_kernels() == 0
    assert preview.advance(until_frame=2) == 2 and preview.transforms(2).shape == (7, 4, 4)


# -- refusals ------------------------------------------------------------------------------------


@needs_uipc
def test_bodies_libuipc_finds_intersecting_are_named_in_our_words():
    bodies = [box("left box", 0.2, (0, 0, 0)), box("right box", 0.2, (0.1, 0, 0))]
    with pytest.raises(SolverError, match="libuipc refuses the scene: bodies 'left box' and 'right box' intersect"):
        Simulation(scene_of(bodies, contact=ContactSettings(enable=True)))


@needs_uipc
def test_bodies_touching_at_the_start_are_refused_by_libuipc_in_our_words():
    """This solver starts touching bodies apart; libuipc's check refuses them."""
    bodies = [box("floor", (2.0, 2.0, 0.2), (0, 0, -0.1), "fixed"), box("crate", 0.2, (0, 0, 0.1))]
    with pytest.raises(SolverError, match="libuipc refuses the scene: bodies 'floor' and 'crate' intersect"):
        Simulation(scene_of(bodies, contact=ContactSettings(enable=True)))
    bodies[1].transform[2, 3] += 1e-6
    assert Simulation(scene_of(bodies, contact=ContactSettings(enable=True))).frames_done == 0


@pytest.mark.parametrize("change, message", [
    (lambda scene: setattr(scene.joints[2].driving, "aim_velocity", 0.5) or setattr(
        scene.joints[2].driving, "aim_distance", None), "joint 'rail': a drive by velocity"),
    (lambda scene: setattr(scene.settings, "contact", ContactSettings(enable=True, resistance=1e10)),
     "an explicit resistance"),
    (lambda scene: setattr(scene.joints[2].driving, "max_force", 50.0), "joint 'rail': driving: max_force"),
])
def test_what_libuipc_cannot_do_is_refused_before_anything_is_built(change, message, monkeypatch):
    scene = rig()
    change(scene)
    built = []
    monkeypatch.setattr(uipc_backend, "UipcScene", lambda *a: built.append(a))
    with pytest.raises(SolverError, match=f"libuipc cannot run this scene: .*{message}.*set the device to 'cpu'"):
        Simulation(scene)
    assert not built


def test_without_pyuipc_the_device_is_refused_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "uipc", None)  # import uipc raises ImportError
    with pytest.raises(SolverError, match=r"libuipc is not available .*pip install pyuipc==0\.0\.29"):
        Simulation(rig())


def test_another_module_named_uipc_is_not_taken_for_libuipc(monkeypatch):
    monkeypatch.setitem(sys.modules, "uipc", dataclasses)  # any module without libuipc's Engine
    with pytest.raises(SolverError, match=r"the module 'uipc' found at .* is not libuipc's; .*pip install pyuipc"):
        Simulation(rig())


def test_without_a_gpu_the_cuda_backend_is_refused(monkeypatch):
    if not HAVE_UIPC:
        monkeypatch.setitem(sys.modules, "uipc", type(sys)("uipc"))  # the GPU check comes after the import
        sys.modules["uipc"].Engine = object
    monkeypatch.setenv(uipc_backend.BACKEND_VARIABLE, "cuda")
    monkeypatch.setattr(uipc_backend, "nvidia_gpu_count", lambda: 0)
    with pytest.raises(SolverError, match="libuipc needs an NVIDIA GPU and its driver, and none is found"):
        Simulation(rig())


def test_the_command_line_refuses_the_device_without_pyuipc_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uipc", None)
    path = tmp_path / "rig.json"
    save_scene(dataclasses.replace(rig(), settings=dataclasses.replace(rig().settings, device="cpu")), path)
    status = solver_main(["run", str(path), "--device", "libuipc", "--quiet"])
    assert status != 0
    assert "pip install pyuipc==0.0.29" in capsys.readouterr().err
    assert not (tmp_path / "rig.npz").exists()


def test_nvidia_gpu_count_is_zero_without_a_driver(monkeypatch):
    def no_library(name):
        raise OSError(name)

    monkeypatch.setattr(uipc_backend.ctypes, "CDLL", no_library)
    assert uipc_backend.nvidia_gpu_count() == 0


def test_libuipcs_frame_statistics_give_each_steps_figures():
    stats = {"backend": "cuda", "converged": False, "newton_iterations": 7, "line_search_trials": 9,
             "hit_newton_limit": True}
    assert uipc_backend.step_figures(stats) == (7, 9, False)
    assert uipc_backend.step_figures({}) == (0, 0, True)  # the none backend reports nothing


@needs_uipc
def test_the_gpu_check_script_runs_its_parts_on_the_none_backend(tmp_path, monkeypatch):
    """benchmarks/uipc_check.py end to end without a GPU (short scenes; nothing moves)."""
    check = benchmark_modules.load("uipc_check")
    assert check.main(["--out", str(tmp_path), "--backend", "none", "--parts", "first-use", "pile", "friction"]) == 0
    rows = __import__("json").loads((tmp_path / "results.json").read_text())["rows"]
    assert [(row["scene"], row["engine"]) for row in rows[:3]] == [
        ("one box", "libuipc"), ("pile 125", "bare pyuipc"), ("pile 125", "device=libuipc")]
    assert len([row for row in rows if row["scene"].startswith("ramp ")]) == len(check.friction_variants())
    assert sorted(path.name for path in tmp_path.iterdir()) == ["frame_stats.json", "piles.npz", "results.json"]


def test_a_scene_setting_the_translation_does_not_carry_is_refused_naming_it():
    """Every field of the scene's parts is either translated or refused when set: a setting added
    to the scene later (a joint's effort limit, say) cannot be dropped silently."""
    @dataclasses.dataclass
    class Driving(__import__("solver").Driving):  # the same part with one field more
        effort_limit: float = 0.0

    scene = rig()
    assert uipc_backend.unsupported(scene) == []
    scene.joints[0].driving = Driving(aim_angle=0.5, effort_limit=3.0)
    assert uipc_backend.unsupported(scene) == ["joint 'hinge': driving: effort_limit (not translated to libuipc)"]
    scene.joints[0].driving = Driving(aim_angle=0.5)
    assert uipc_backend.unsupported(scene) == []


@needs_uipc
def test_an_open_mesh_reaches_libuipc_with_the_mass_this_solver_gives_it():
    """A plane (open: libuipc integrates closed meshes only) as a shell of its thickness: its
    12x12 mass matrix and volume are given to libuipc."""
    plane = Body(name="sheet", mesh=__import__("solver").Mesh(
        vertices=np.array([[-0.5, -0.5, 0.0], [0.5, -0.5, 0.0], [0.5, 0.5, 0.0], [-0.5, 0.5, 0.0]]),
        triangles=np.array([[0, 1, 2], [0, 2, 3]])), thickness=0.02, mass_density=500.0)
    run = translate(scene_of([plane]))
    (slot, _), = run.translated.groups
    meta = attributes(slot.geometry().meta())
    assert meta["abd_mass"].item() == pytest.approx(500.0 * 1.0 * 0.02)
    assert meta["volume"].item() == pytest.approx(0.02)
