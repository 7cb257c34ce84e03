"""The first Numba compilation of a run's kernels, spread over the CPU's cores.

:func:`solver.simulation.simulate` calls :func:`compile_in_parallel` on :func:`compile_tasks`
before its first step: the kernels the run needs that are neither loaded nor in the on-disk
cache (:func:`solver.numba_cache.choose_folder`) are compiled in several processes at once. Numba
compiles one function at a time per process (a global lock), so the parent forks children that
compile their share of the kernels into the on-disk cache, from which the parent then loads them.
Only on Linux, from the main thread of a process with no other Python thread (forking a
multi-threaded process, such as Blender's interface, is unsafe), with two or more usable cores,
and unless ``ABD_JOINTS_PARALLEL_COMPILE=0``. How long it takes: docs/performance.md, "First
compilation and warm-up".
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import affine_body, assembly, joint_state, linear_solver, newton
from .constitutions import joint_limit_penalty, prismatic_joint, revolute_joint
from .control import drive_targets


#: Environment variable that turns :func:`compile_in_parallel` off when set to ``0``.
PARALLEL_ENVIRONMENT = "ABD_JOINTS_PARALLEL_COMPILE"
#: Most processes (the parent included) that share a first compilation: beyond three the largest
#: kernel (the prismatic group's Hessian) bounds the wall time anyway.
MAX_PROCESSES = 3
#: Relative first-compilation cost of the kernels, in seconds of a 2-core machine (nested helpers
#: included, the first kernel to use a helper paying for it), for splitting the kernels between
#: processes; only their ratios matter (docs/performance.md, "First compilation and warm-up").
#: The largest weigh the same so that a rig with several puts them in different processes (the
#: revolute drive's Hessian uses the revolute limit's helpers: whichever compiles first pays most).
#: Kernels not listed weigh :data:`DEFAULT_WEIGHT`.
COMPILE_WEIGHTS = {
    "prismatic_group._gradient_hessian_kernel": 3.2,
    "revolute_joint_limit._gradient_hessian_kernel": 3.2,
    "driving_revolute_joint._gradient_hessian_kernel": 3.2,
    "ortho_potential._gradient_hessian_kernel": 1.1,
    "prismatic_group._energy_kernel": 0.65,
    "prismatic_group._gradient_kernel": 0.39,
    "prismatic_joint.distance_kernel": 0.2,
    "assembly._scatter": 0.17,
}
DEFAULT_WEIGHT = 0.14


@dataclass
class CompileTask:
    """One kernel to compile: ``run()`` calls it (through its term's method) with a run's real
    argument types, so that the compiled specialisation is the one the run uses."""

    kernel: Any  # the numba Dispatcher
    run: Callable[[], object]

    @property
    def weight(self) -> float:
        """Estimated first-compilation seconds (:data:`COMPILE_WEIGHTS`)."""
        name = f"{self.kernel.py_func.__module__.rsplit('.', 1)[-1]}.{self.kernel.py_func.__name__}"
        return COMPILE_WEIGHTS.get(name, DEFAULT_WEIGHT)

    def pending(self) -> bool:
        """True unless the kernel is already compiled in this process or has an on-disk cache index."""
        if self.kernel.signatures:
            return False
        try:
            return not os.path.exists(self.kernel._cache._cache_file._index_path)  # Numba internals
        except AttributeError:  # another Numba version, or no cache: compile
            return True


def compile_tasks(model, potential, q: np.ndarray, control) -> list[CompileTask]:
    """The kernels a run of ``model`` calls, each with a call that compiles it.

    Args:
        model: the run's :class:`solver.model.Model`.
        potential: its :class:`solver.potential.IncrementalPotential`.
        q: (bodies, 12) a valid state (q0).
        control: a :class:`solver.control.Control` sized for the model (the run's).

    Per non-empty energy term its energy, gradient and gradient-Hessian kernels (the
    ``_energy_kernel``, ``_gradient_kernel`` and ``_gradient_hessian_kernel`` of the module that
    defines its ``bind``, where it has them, called through the term's methods; the terms with a
    constant Hessian form it in NumPy); then the scatter of the assembly, the banded scatter and
    transpose of the linear solver, Newton's starting point, the convergence measure and the
    joint readouts. The calls have no effect on the run: they read the control's inputs as they
    are when called and write only scratch arrays.
    """
    tasks: list[CompileTask] = []
    for term, inputs in zip(potential.terms, potential.term_inputs(control)):
        if not len(term.bodies):
            continue
        module = sys.modules[type(term).bind.__module__]  # the fixed and spherical joints share one
        if not hasattr(module, "_energy_kernel"):  # a term written in NumPy (the generic joint)
            continue
        tasks.append(CompileTask(module._energy_kernel, functools.partial(term.energy, q, *inputs)))
        if hasattr(module, "_gradient_hessian_kernel"):  # the constant Hessians are formed in NumPy
            tasks.append(CompileTask(module._gradient_hessian_kernel,
                                     functools.partial(term.gradient_hessian, q, *inputs)))
        if hasattr(module, "_gradient_kernel") and hasattr(term, "gradient"):
            tasks.append(CompileTask(module._gradient_kernel, functools.partial(term.gradient, q, *inputs)))

    def zero_derivatives():  # per term, zero element gradients and Hessians (built only when needed)
        return [(np.zeros((len(b), 12 * b.shape[1])), np.zeros((len(b), 12 * b.shape[1], 12 * b.shape[1])))
                for b in potential.element_bodies]

    tasks.append(CompileTask(assembly._scatter,
                             lambda: potential.assembly.assemble(zero_derivatives(), potential.element_bodies)))
    solver = potential.linear_solver
    banded = solver.method == "banded"
    if not banded or model.contact is not None:  # gradient_hessian's assembly (SuperLU, device, contact)
        tasks.append(CompileTask(assembly._scatter_gradient, lambda: potential.assembly.assemble(
            [(gradient, None) for gradient, _ in zero_derivatives()], potential.element_bodies)))
    if not banded:  # the chord steps' gradient (the banded path's solve kernel sums it itself)
        tasks.append(CompileTask(assembly._scatter_flat_gradient, lambda: potential.assembly.sum_gradients(
            np.zeros(len(potential._gradient_rows)), potential._gradient_rows)))
    if banded and solver.size:
        def identity_blocks():  # the BSR block values of the identity matrix
            blocks = np.zeros((len(solver.block_rows), 12, 12))
            blocks[solver.block_rows == solver.block_columns] = np.eye(12)
            return blocks
        tasks.append(CompileTask(linear_solver._scatter_banded, lambda: solver.factorize(identity_blocks())))
        tasks.append(CompileTask(linear_solver._sum_into_band, lambda: linear_solver._sum_into_band(
            solver.constant_band(identity_blocks()), np.zeros(1), *(np.zeros(0, dtype=np.int64),) * 3,
            np.zeros(0, dtype=bool), np.zeros_like(solver.constant_band(identity_blocks())))))
        tasks.append(CompileTask(linear_solver._solve_band_sum, lambda: linear_solver._solve_band_sum(
            linear_solver.DPBTRS, solver.constant_band(identity_blocks()), True,
            np.zeros(len(potential._gradient_rows)), potential._gradient_rows, solver.order)))
        tasks.append(CompileTask(linear_solver._transpose_band, lambda: linear_solver._transpose_band(
            np.zeros((2, 2), order="F"), np.zeros((2, 2), order="F"))))  # scratch bands of the run's types
    if len(potential.dynamic_indices):
        dynamic_q = np.ascontiguousarray(q[potential.dynamic_rows])  # scratch of the stepper's types
        tasks.append(CompileTask(affine_body.repeated_motion, lambda: affine_body.repeated_motion(
            dynamic_q, np.zeros_like(dynamic_q), 0.01, np.empty_like(dynamic_q))))
    tasks.append(CompileTask(newton._direction_size,  # the corners selected as solve_step selects them
                             lambda: newton._direction_size(np.zeros((len(potential.dynamic_indices), 12)),
                                                            model.corners[potential.dynamic_rows])))
    if len(model.prismatic.joint_indices):
        tasks.append(CompileTask(prismatic_joint.distance_kernel, lambda: model.prismatic.distance(q)))
    if len(model.driving.joint_indices) or len(model.revolute_driving.joint_indices):
        tasks.append(CompileTask(drive_targets, lambda: drive_targets(  # the stepper's drive targets
            *(np.zeros(1),) * 5, np.zeros(1, dtype=bool), np.zeros(1, dtype=bool), 0.01)))
    if len(model.prismatic_limit.joint_indices) or len(model.revolute_limit.joint_indices):
        tasks.append(CompileTask(joint_limit_penalty.any_active, lambda: joint_limit_penalty.any_active(
            np.zeros(1), np.zeros(1), np.zeros(1))))  # the stepper's limit check
    if len(model.revolute.joint_indices):
        tasks.append(CompileTask(revolute_joint.sin_cos_kernel, lambda: model.revolute.sin_cos(q)))
        joints = int(model.revolute.joint_indices.max()) + 1  # scratch readouts of JointState's types
        tasks.append(CompileTask(joint_state.accumulate_angles, lambda: joint_state.accumulate_angles(
            *model.revolute.sin_cos(q), model.revolute.joint_indices, np.zeros(joints), np.zeros(joints),
            np.zeros(joints))))
    return tasks


def parallel_processes() -> int:
    """How many processes :func:`compile_in_parallel` may use here: 1 where forking is not safe or useful."""
    if os.environ.get(PARALLEL_ENVIRONMENT, "1") == "0" or not sys.platform.startswith("linux"):
        return 1
    if threading.current_thread() is not threading.main_thread() or threading.active_count() != 1:
        return 1
    return max(1, min(MAX_PROCESSES, len(os.sched_getaffinity(0))))


def compile_in_parallel(tasks: list[CompileTask], timeout: float = 600.0) -> int:
    """Compile the pending ``tasks`` (:meth:`CompileTask.pending`) over up to :func:`parallel_processes` processes.

    The tasks are split by weight, largest first, each to the least loaded process; the parent
    runs its share while forked children run theirs and write them to Numba's on-disk cache, and
    then waits for the children (killing any still running after ``timeout`` s); Numba's own
    start-up is paid once, before the fork (:func:`_start_numba`). A child that
    fails costs nothing but time: the parent compiles what is missing when the run first calls
    it. Returns the number of children forked (0 when it compiled nothing in parallel).

    Raises:
        whatever a parent task raises (a bug: the calls are made with valid arguments).
    """
    pending = [task for task in tasks if task.pending()]
    processes = min(parallel_processes(), len(pending))
    if processes < 2:
        return 0
    _start_numba()
    shares: list[list[CompileTask]] = [[] for _ in range(processes)]
    loads = [0.0] * processes
    for task in sorted(pending, key=lambda task: task.weight, reverse=True):
        least = loads.index(min(loads))
        shares[least].append(task)
        loads[least] += task.weight
    children = []
    for share in shares[1:]:
        try:
            pid = os.fork()
        except OSError:  # no process to spare (limits, memory): this process compiles the share
            shares[0].extend(share)
            continue
        if pid == 0:  # the child: compile its share, write the cache, leave without cleanup
            status = 1
            try:
                for task in share:
                    task.run()
                status = 0
            finally:
                os._exit(status)
        children.append(pid)
    try:
        for task in shares[0]:
            task.run()
    finally:
        deadline = time.monotonic() + timeout
        for pid in children:
            _wait_or_kill(pid, deadline)
    return len(children)


def _identity(value):
    return value


def _start_numba() -> None:
    """Compile a trivial function, so that Numba's one-time start-up in a process (its typing and
    target contexts, LLVM's initialisation) is paid before forking and inherited by the children
    instead of paid in each."""
    import numba

    numba.njit(_identity)(0.0)


def _wait_or_kill(pid: int, deadline: float) -> None:
    """Reap child ``pid``, killing it if it is still running at ``deadline`` (time.monotonic)."""
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
