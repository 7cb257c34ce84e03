"""The optional GPU path (solver/device_solver.py): dense Cholesky of the Newton system through CuPy.

Machines without a GPU run the path's code with NumPy and SciPy in CuPy's place
(``numpy_backend``, and ``strict_backend``, which also fails where a host array would reach
CuPy): its solves against SciPy's, and whole runs with ``device = "cupy"`` against the CPU
path's trajectories. The tests marked ``gpu`` run it on CuPy and skip where CuPy or a
CUDA device is missing.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg

from solver import Limit, SceneError, simulate
from solver.scene_validation import validate_scene
from solver import device_solver
from solver.__main__ import main
from solver.device_solver import DeviceLinearSolver, DeviceUnavailable, numpy_backend
from solver.linear_solver import SingularSystem
from solver.scene_io import save_scene, scene_from_dict, scene_to_dict
from solver.simulation import SolverError
from scenes import every_feature_example
import benchmark_modules
from test_linear_solver import block_pattern_system, chain
from test_physics import count_factorisations, prismatic_chain_scene, revolute_chain_scene


def cupy_device_present() -> bool:
    try:
        device_solver.cupy_backend()
    except DeviceUnavailable:
        return False
    return True


gpu = pytest.mark.skipif(not cupy_device_present(), reason="needs CuPy and a CUDA device")


def net_scene():
    """``benchmarks/chains.py``'s hanging net, 3 x 3 cubes over 0.1 s at dt = 1/240: hinges in
    closed loops, the pattern whose sparse factorisation fills in (the GPU path's use)."""
    return benchmark_modules.load("chains").net_scene(9, steps_per_second=240, seconds=0.1, steps_per_frame=10)


@pytest.mark.parametrize("edges, count", [(chain(20), 20), ([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], 4)])
def test_dense_solve_matches_scipy(edges, count):
    indptr, indices, blocks, matrix = block_pattern_system(edges, count, seed=5)
    solver = DeviceLinearSolver(indptr, indices, numpy_backend())
    right_hand_side = np.random.default_rng(6).normal(size=solver.size)
    kept = right_hand_side.copy()
    expected = scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side)
    np.testing.assert_allclose(solver.solve(blocks, right_hand_side), expected, rtol=1e-9, atol=1e-12)
    assert np.array_equal(right_hand_side, kept)
    # The factor is kept: a second right-hand side needs no new factorisation.
    other = np.random.default_rng(7).normal(size=solver.size)
    np.testing.assert_allclose(solver.solve_factorized(other), scipy.sparse.linalg.spsolve(matrix.tocsc(), other),
                               rtol=1e-9, atol=1e-12)


class _OnDevice(np.ndarray):
    """An array that stands for device memory in :func:`strict_backend`."""


def strict_backend():
    """NumPy standing in for CuPy as strictly as CuPy's own checks: the linear algebra takes only
    device arrays (``cupy.linalg`` and ``cupyx.scipy.linalg`` raise on NumPy arrays), and the
    solver gets host arrays only through ``to_host``. A host array passed where CuPy needs a
    device one fails here as it would on a GPU."""
    def on_device(function):
        def checked(*arrays, **options):
            assert all(isinstance(array, _OnDevice) for array in arrays), "a host array reached the device"
            return np.asarray(function(*arrays, **options)).view(_OnDevice)
        return checked

    numpy_like = types.SimpleNamespace(zeros=lambda shape: np.zeros(shape).view(_OnDevice))
    return dataclasses.replace(
        numpy_backend(), name="strict", xp=numpy_like, cholesky=on_device(np.linalg.cholesky),
        solve_triangular=on_device(scipy.linalg.solve_triangular),
        to_device=lambda array: np.array(array).view(_OnDevice), to_host=lambda array: np.array(array),
    )


@pytest.fixture
def cupy_on_numpy(monkeypatch):
    """``device = "cupy"`` runs the device path on NumPy, as strict as CuPy about device arrays
    (:func:`strict_backend`); returns the count of its factorisations."""
    monkeypatch.setattr(device_solver, "cupy_backend", strict_backend)
    return count_factorisations(monkeypatch, DeviceLinearSolver)


def test_only_device_arrays_reach_the_device_and_only_host_arrays_come_back():
    indptr, indices, blocks, matrix = block_pattern_system(chain(8), 8, seed=12)
    solver = DeviceLinearSolver(indptr, indices, strict_backend())
    right_hand_side = np.random.default_rng(13).normal(size=solver.size)
    solution = solver.solve(blocks, right_hand_side)
    assert type(solution) is np.ndarray and solution.dtype == np.float64
    np.testing.assert_allclose(solution, scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side), rtol=1e-9)


def test_new_values_in_the_same_pattern_refactorise():
    indptr, indices, blocks, matrix = block_pattern_system(chain(6), 6, seed=8)
    solver = DeviceLinearSolver(indptr, indices, numpy_backend())
    right_hand_side = np.ones(solver.size)
    solver.solve(blocks, right_hand_side)
    _, _, blocks2, matrix2 = block_pattern_system(chain(6), 6, seed=9)
    np.testing.assert_allclose(solver.solve(blocks2, right_hand_side),
                               scipy.sparse.linalg.spsolve(matrix2.tocsc(), right_hand_side), rtol=1e-9, atol=1e-12)


def test_not_positive_definite_is_a_singular_system():
    indptr, indices, blocks, _ = block_pattern_system(chain(5), 5, seed=10, definite=False)
    solver = DeviceLinearSolver(indptr, indices, numpy_backend())
    with pytest.raises(SingularSystem, match="not positive definite"):
        solver.factorize(blocks)


def test_a_singular_system_names_the_block_of_its_failed_pivot():
    """The dense Cholesky tells no failing row: the diagnostic one on the host
    (:func:`solver.linear_solver.failing_block`) does, here body 3's indefinite diagonal block."""
    indptr, indices, blocks, _ = block_pattern_system(chain(6), 6, seed=14)
    rows = np.repeat(np.arange(6), np.diff(indptr))
    blocks[(rows == 3) & (np.asarray(indices) == 3)] -= 1e3 * np.eye(12)
    solver = DeviceLinearSolver(indptr, indices, numpy_backend())
    with pytest.raises(SingularSystem, match="not positive definite") as caught:
        solver.factorize(blocks)
    assert caught.value.block == 3


def test_too_little_device_memory_is_refused_before_allocating():
    small = dataclasses.replace(numpy_backend(), name="cupy", free_memory=lambda: 2**20)  # 1 MiB free
    indptr, indices, _, _ = block_pattern_system(chain(40), 40, seed=11)  # 480 unknowns: 3.5 MiB dense, twice
    with pytest.raises(DeviceUnavailable, match="480 unknowns .* 0.00 GiB free; set the device to 'cpu'"):
        DeviceLinearSolver(indptr, indices, small)


def test_the_last_factor_is_released_before_the_next_is_made():
    """The device holds the matrix and at most one factor, as the memory check counts: the
    previous factor is dropped before the next Cholesky allocates its own."""
    indptr, indices, blocks, _ = block_pattern_system(chain(4), 4, seed=14)
    held = []
    backend = numpy_backend()

    def cholesky(matrix):
        held.append(solver._upper)
        return backend.cholesky(matrix)

    solver = DeviceLinearSolver(indptr, indices, dataclasses.replace(backend, cholesky=cholesky))
    solver.factorize(blocks)
    solver.factorize(blocks)
    assert held == [None, None] and solver._upper is not None


@pytest.mark.parametrize("failing", ["cholesky", "solve_triangular"])
def test_running_out_of_device_memory_mid_run_names_the_step(monkeypatch, failing):
    """CuPy's OutOfMemoryError (a MemoryError) at a later factorisation or solve, when another
    program took the GPU's memory after the check: a SolverError naming the frame and step, and
    what to do."""
    calls = []

    def backend():
        real = numpy_backend()

        def failing_third_time(*arguments, **options):
            calls.append(1)
            if len(calls) == 3:
                raise MemoryError("Out of memory allocating 1,152 bytes (allocated so far: 4,608 bytes).")
            return getattr(real, failing)(*arguments, **options)
        return dataclasses.replace(real, name="cupy", **{failing: failing_third_time})

    monkeypatch.setattr(device_solver, "cupy_backend", backend)
    scene = revolute_chain_scene(2, seconds=0.25)
    scene.settings.device = "cupy"
    with pytest.raises(SolverError, match=r"frame \d+, step \d+: device 'cupy': out of memory for the dense "
                                          r"Newton system of 24 unknowns \(Out of memory allocating .*\); close other "
                                          r"programs that use the GPU or set the device to 'cpu'"):
        simulate(scene)
    assert len(calls) == 3


@pytest.mark.parametrize("builder", [
    lambda: revolute_chain_scene(6, seconds=0.25),
    lambda: prismatic_chain_scene(6, seconds=0.25),
    lambda: scene_from_dict(every_feature_example()),
    net_scene,
], ids=["revolute-chain-with-limit", "prismatic-chain-drive-limit", "every-feature-example-soft-transform",
        "net-of-loops"])
def test_device_path_gives_the_cpu_trajectory(builder, cupy_on_numpy):
    """Every constitution through the device path (revolute joints and a limit, prismatic
    joints with drives and limits, a soft transform): the CPU run's trajectory, its Newton
    iterations included, within round-off."""
    cpu_scene = builder()
    if cpu_scene.joints[0].type == "revolute":
        cpu_scene.joints[1].limit = Limit(lower=-0.3, upper=0.3, strength=1000.0)
    cpu = simulate(cpu_scene)
    assert cupy_on_numpy["factorisations"] == 0
    device_scene = dataclasses.replace(cpu_scene, settings=dataclasses.replace(cpu_scene.settings, device="cupy"))
    device = simulate(device_scene)
    assert cupy_on_numpy["factorisations"] > 0
    assert cpu.all_converged and device.all_converged
    np.testing.assert_allclose(device.transforms, cpu.transforms, atol=1e-9)
    np.testing.assert_allclose(device.angle, cpu.angle, atol=1e-9)
    np.testing.assert_allclose(device.distance, cpu.distance, atol=1e-9)
    assert np.array_equal(device.newton_iterations, cpu.newton_iterations)


def test_missing_cupy_fails_the_run_before_any_step_with_how_to_install(monkeypatch):
    def unavailable():
        raise DeviceUnavailable(f"device 'cupy' needs CuPy, which is not installed: {device_solver.CUPY_HINT}")

    monkeypatch.setattr(device_solver, "cupy_backend", unavailable)
    scene = revolute_chain_scene(2, seconds=0.1)
    scene.settings.device = "cupy"
    progress = []
    with pytest.raises(SolverError, match="needs CuPy.*pip install cupy-cuda12x"):
        simulate(scene, progress=lambda frame, count: progress.append(frame))
    assert progress == []


def _fake_cupy(device_count):
    """A stand-in ``cupy`` module whose runtime reports ``device_count`` or raises it."""
    def count():
        if isinstance(device_count, Exception):
            raise device_count
        return device_count
    runtime = types.SimpleNamespace(getDeviceCount=count)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


@pytest.mark.parametrize("cupy_module, message", [
    (None, "needs CuPy, which is not installed: install the CuPy wheel .*cupy-cuda12x<14"),
    (_fake_cupy(RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")),
     "finds no usable CUDA device \\(cudaErrorInsufficientDriver: .*\\); set the device to 'cpu'"),
    (_fake_cupy(0), "finds no CUDA device; set the device to 'cpu'"),
], ids=["not-installed", "no-driver", "no-device"])
def test_cupy_backend_names_what_is_missing(monkeypatch, cupy_module, message):
    """The three failures seen with real CuPy builds on a machine without a GPU (CuPy absent; CuPy
    13 without a driver: cudaErrorInsufficientDriver) or a machine without a device."""
    monkeypatch.setitem(sys.modules, "cupy", cupy_module)  # None: importing it fails
    with pytest.raises(DeviceUnavailable, match=message):
        device_solver.cupy_backend()


def test_cupy_import_error_is_reported_by_its_cause():
    """CuPy 14 beside NumPy 1 fails to import with a framed paragraph of advice; the message
    keeps its cause, on one line."""
    framed = ImportError("\n" + "=" * 64 + "\nFailed to import CuPy.\n\nIf you installed CuPy via wheels ...\n\n"
                         "Original error:\n  ImportError: numpy.core.multiarray failed to import\n" + "=" * 64 + "\n")
    assert device_solver._one_line(framed) == "ImportError: numpy.core.multiarray failed to import"
    assert len(device_solver._one_line(RuntimeError("x " * 1000))) == 400


@pytest.mark.skipif(cupy_device_present(), reason="CuPy and a CUDA device are present here")
def test_cupy_backend_says_what_is_missing_on_this_machine():
    with pytest.raises(DeviceUnavailable, match="set the device to 'cpu'"):
        device_solver.cupy_backend()


def test_device_setting_is_validated_and_saved():
    document = every_feature_example()
    document["settings"]["device"] = "cupy"
    scene = scene_from_dict(document)
    assert scene.settings.device == "cupy"
    assert scene_to_dict(scene)["settings"]["device"] == "cupy"
    assert scene_to_dict(scene_from_dict(every_feature_example()))["settings"]["device"] == "cpu"
    for wrong in ("gpu", "CUDA", 1, None):
        scene.settings.device = wrong
        with pytest.raises(SceneError, match=r"settings: device: must be one of \['cpu', 'cupy', 'libuipc'\]"):
            validate_scene(scene)


def test_command_line_device_overrides_the_scene(tmp_path, cupy_on_numpy, capsys):
    scene = revolute_chain_scene(2, seconds=0.1)
    save_scene(scene, tmp_path / "chain.json")
    assert json.loads((tmp_path / "chain.json").read_text())["settings"]["device"] == "cpu"
    assert main(["run", str(tmp_path / "chain.json"), "--out", str(tmp_path / "out.npz"), "--device", "cupy",
                 "-q"]) == 0
    assert cupy_on_numpy["factorisations"] > 0
    with pytest.raises(SystemExit):
        main(["run", str(tmp_path / "chain.json"), "--device", "gpu"])
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_command_line_reports_an_unavailable_device(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(device_solver, "cupy_backend", lambda: (_ for _ in ()).throw(DeviceUnavailable("no GPU here")))
    save_scene(revolute_chain_scene(2, seconds=0.1), tmp_path / "chain.json")
    assert main(["run", str(tmp_path / "chain.json"), "--device", "cupy", "-q"]) == 1
    assert "error: solver failed: no GPU here" in capsys.readouterr().err
    assert not (tmp_path / "chain.npz").exists()


@gpu
@pytest.mark.parametrize("builder", [lambda: revolute_chain_scene(6, seconds=0.25),
                                     lambda: prismatic_chain_scene(6, seconds=0.25), net_scene])
def test_cupy_on_the_gpu_gives_the_cpu_trajectory(builder):
    scene = builder()
    cpu = simulate(scene)
    device = simulate(dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, device="cupy")))
    assert device.all_converged
    np.testing.assert_allclose(device.transforms, cpu.transforms, atol=1e-8)


@gpu
def test_cupy_out_of_memory_during_a_run_is_a_solver_error_naming_the_step():
    """CuPy's own OutOfMemoryError, provoked by a memory-pool limit that admits the matrix but not
    the factor: the run stops at its first factorisation with the message of
    :meth:`DeviceLinearSolver._out_of_memory`."""
    import cupy

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    size = 12 * 6
    scene = revolute_chain_scene(6, seconds=0.1)
    scene.settings.device = "cupy"
    # The block positions (16 blocks x 144 int64), the dense matrix and one copy of the block
    # values fit; the Cholesky's copy of the matrix does not.
    pool.set_limit(size=pool.total_bytes() + 2 * 16 * 144 * 8 + size * size * 8 + 4096)
    try:
        with pytest.raises(SolverError, match=r"frame 1, step 1: device 'cupy': out of memory for the dense Newton "
                                              r"system of 72 unknowns \(Out of memory allocating"):
            simulate(scene)
    finally:
        pool.set_limit(size=0)


@gpu
def test_cupy_holds_the_matrix_and_one_factor_at_a_time():
    """Under a memory-pool limit that leaves room for half a factor beside the matrix and one
    factor, later factorisations fit only because the last factor is released first: with a
    second factor kept alive the next one runs out of memory, as does a solve with no room left
    for its right-hand side; both as the clear DeviceUnavailable."""
    import cupy

    pool = cupy.get_default_memory_pool()
    indptr, indices, blocks, matrix = block_pattern_system(chain(400), 400, seed=15)  # 4800 unknowns
    right_hand_side = np.random.default_rng(16).normal(size=matrix.shape[0])
    solver = DeviceLinearSolver(indptr, indices, device_solver.cupy_backend())
    solver.factorize(blocks)
    expected = solver.solve_factorized(right_hand_side)
    pool.free_all_blocks()
    factor_bytes = solver.size ** 2 * 8
    pool.set_limit(size=pool.used_bytes() + factor_bytes // 2)
    try:
        for _ in range(3):
            solver.factorize(blocks)
        np.testing.assert_allclose(solver.solve_factorized(right_hand_side), expected, rtol=1e-10)
        kept = solver._upper
        with pytest.raises(DeviceUnavailable, match="out of memory for the dense Newton system of 4800 unknowns"):
            solver.factorize(blocks)
        del kept
        solver.factorize(blocks)
        pool.free_all_blocks()
        pool.set_limit(size=pool.used_bytes())
        with pytest.raises(DeviceUnavailable, match="out of memory for the dense Newton system of 4800 unknowns"):
            solver.solve_factorized(right_hand_side)
    finally:
        pool.set_limit(size=0)
    np.testing.assert_allclose(solver.solve_factorized(right_hand_side), expected, rtol=1e-10)


@gpu
def test_cupy_reports_a_matrix_that_is_not_positive_definite():
    indptr, indices, blocks, _ = block_pattern_system(chain(5), 5, seed=10, definite=False)
    solver = DeviceLinearSolver(indptr, indices, device_solver.cupy_backend())
    with pytest.raises(SingularSystem, match="not positive definite"):
        solver.factorize(blocks)



def test_device_path_runs_a_scene_without_unknowns(cupy_on_numpy):
    """Only a fixed and an animated body: no unknowns, so nothing reaches the device."""
    from solver import Body, Joint, Scene, Settings
    from solver.primitives import box_mesh

    slide = 0.05 * np.arange(5)
    poses = np.repeat(np.eye(4)[None], len(slide), axis=0)
    poses[:, 0, 3] = slide
    bodies = [Body(name="base", mesh=box_mesh([0.2, 0.2, 0.2]), motion="fixed"),
              Body(name="carriage", mesh=box_mesh([0.3, 0.3, 0.3]), motion="animated", animated_transforms=poses)]
    rail = Joint(name="rail", type="prismatic", l_body="base", r_body="carriage", position0=np.zeros(3),
                 position1=np.array([1.0, 0.0, 0.0]))
    trajectory = simulate(Scene(Settings(frame_count=len(slide) - 1, device="cupy"), bodies, [rail]))
    assert trajectory.all_converged
    np.testing.assert_allclose(trajectory.distance[:, 0], slide, atol=1e-12)
    assert cupy_on_numpy["factorisations"] == 0 and not trajectory.newton_iterations.any()
