"""The Newton system's direct solve on a GPU through CuPy: the optional ``device = "cupy"`` path.

A scene whose ``Settings.device`` is ``"cupy"`` is solved by the same Newton loop
(:mod:`solver.newton`) with the same energy terms; only the linear solver differs
(:func:`linear_solver_for`). The terms' element derivatives are evaluated on the CPU by their
Numba kernels and assembled into BSR block values (blocks, 12, 12) as on the CPU path; at each
factorisation those go to the device, are written into a dense symmetric matrix and factorised
there by Cholesky (cuSOLVER ``potrf`` through ``cupy.linalg.cholesky``); every solve with that
factor (the Newton direction, the chord steps, the next time steps' lagged-Hessian steps) is two
triangular solves on the device (``cupyx.scipy.linalg.solve_triangular``), the right-hand side
(size,) crossing to the device and the solution back.

Why dense: CuPy has no sparse Cholesky whose factor stays on the device.
``cupyx.scipy.sparse.linalg.splu`` and ``factorized`` factorise on the CPU with SciPy's SuperLU
(only their triangular solves run on the GPU), and ``spsolve`` factorises (sparse QR) at every
call, which would lose the Newton loop's reuse of one factorisation over several solves. A dense
factorisation costs size^3 / 3 flops and 2 size^2 x 8 bytes of device memory (the matrix and its
factor; size = 12 x dynamic bodies), checked against the device's free memory before anything is
allocated: at 1000 bodies 5.8e11 flops and 2.3 GB, where the CPU's banded Cholesky of a chain
costs about size x 24^2 = 7e6 flops. So on chains and trees the CPU path stays faster whatever the
GPU; the dense path's place is scenes whose sparse factorisation fills in (bodies coupled in loops
or grids). Its figures on a GPU: docs/performance.md, "The GPU path".

The same code runs with NumPy and SciPy in place of CuPy (:func:`numpy_backend`), which is how
the tests check it on machines without a GPU; with CuPy it is tested where a GPU exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Optional

import numpy as np
import scipy.linalg
import scipy.sparse

from .linear_solver import LinearSolver, SingularSystem, failing_block
from .scene import DEVICES

#: How to get CuPy, in the errors raised where it is missing or broken.
CUPY_HINT = ("install the CuPy wheel for the machine's CUDA into the Python that runs the solver, for example "
             "`pip install \"cupy-cuda12x<14\"` beside NumPy 1 (Blender 4.5's; CuPy 14 needs NumPy 2) or "
             "`pip install cupy-cuda12x` beside NumPy 2, or set the device to 'cpu'")

class DeviceUnavailable(RuntimeError):
    """The device a scene asks for cannot be used: CuPy is not installed, no CUDA device is
    present, or the dense Newton system does not fit in the device's free memory."""


@dataclass(frozen=True)
class ArrayBackend:
    """The array library a :class:`DeviceLinearSolver` runs on.

    Attributes:
        name: ``"cupy"`` or ``"numpy"``.
        xp: the array module (``cupy`` or ``numpy``).
        cholesky: (n, n) symmetric positive definite -> its lower Cholesky factor L (n, n), on
            the device; raises ``numpy.linalg.LinAlgError`` where the matrix is not positive definite.
        solve_triangular: ``scipy.linalg.solve_triangular``'s signature, on device arrays.
        to_device: a NumPy array -> the same values on the device.
        to_host: a device array -> a NumPy array.
        free_memory: () -> free device memory in bytes, or None where it is not limited (host).
    """

    name: str
    xp: ModuleType
    cholesky: Callable
    solve_triangular: Callable
    to_device: Callable
    to_host: Callable
    free_memory: Callable[[], Optional[int]]


def cupy_backend() -> ArrayBackend:
    """The CuPy backend on the current CUDA device.

    Raises:
        DeviceUnavailable: CuPy is missing or cannot be imported, finds no usable CUDA device, or
            cannot load CUDA's linear algebra libraries; the message says which, and how to install it.
    """
    try:
        import cupy
    except ModuleNotFoundError as error:
        if error.name != "cupy":
            raise DeviceUnavailable(f"device 'cupy': CuPy cannot be imported ({error}): {CUPY_HINT}") from error
        raise DeviceUnavailable(f"device 'cupy' needs CuPy, which is not installed: {CUPY_HINT}") from error
    except Exception as error:  # installed but broken: built for another NumPy, or a library missing
        raise DeviceUnavailable(f"device 'cupy': CuPy cannot be imported ({type(error).__name__}: "
                                f"{_one_line(error)}): {CUPY_HINT}") from error
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no driver (cudaErrorInsufficientDriver), no device, a broken runtime
        raise DeviceUnavailable(f"device 'cupy': CuPy finds no usable CUDA device ({error}); "
                                "set the device to 'cpu'") from error
    if count < 1:
        raise DeviceUnavailable("device 'cupy': CuPy finds no CUDA device; set the device to 'cpu'")
    try:
        import cupyx
        import cupyx.scipy.linalg
    except Exception as error:  # cuBLAS or cuSOLVER not found
        raise DeviceUnavailable(f"device 'cupy': CuPy's linear algebra cannot be loaded ({error}): install the "
                                "CUDA libraries it needs (cuBLAS, cuSOLVER) or set the device to 'cpu'") from error

    def cholesky(matrix):
        # cuSOLVER reports a non-positive-definite matrix through an info flag that CuPy checks
        # only under errstate(linalg="raise"); it then raises numpy.linalg.LinAlgError.
        with cupyx.errstate(linalg="raise"):
            return cupy.linalg.cholesky(matrix)

    def free_memory() -> int:
        # The device's free memory and what CuPy's pool holds free for reuse (an earlier run's arrays).
        return int(cupy.cuda.Device().mem_info[0]) + int(cupy.get_default_memory_pool().free_bytes())

    return ArrayBackend(
        name="cupy", xp=cupy, cholesky=cholesky, solve_triangular=cupyx.scipy.linalg.solve_triangular,
        to_device=cupy.asarray, to_host=cupy.asnumpy, free_memory=free_memory,
    )


def _one_line(error: BaseException, limit: int = 400) -> str:
    """An exception's message on one line, at most ``limit`` characters; of CuPy's import error (a
    framed paragraph of advice) only its "Original error", which names the cause."""
    text = str(error).rpartition("Original error:")[2]
    text = " ".join(text.replace("=", " ").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def numpy_backend() -> ArrayBackend:
    """NumPy and SciPy in CuPy's place, on the CPU: the device path's code on any machine (tests)."""
    return ArrayBackend(
        name="numpy", xp=np, cholesky=np.linalg.cholesky, solve_triangular=scipy.linalg.solve_triangular,
        to_device=np.asarray, to_host=np.asarray, free_memory=lambda: None,
    )


class DeviceLinearSolver:
    """Dense Cholesky of the Newton system on an :class:`ArrayBackend`'s device, with the
    interface of :class:`solver.linear_solver.LinearSolver` (``method``, ``size``, ``detects_indefinite``,
    :meth:`factorize`, :meth:`solve_factorized`, :meth:`solve`).

    Args:
        indptr: (block_rows + 1,) and indices: (blocks,) the BSR pattern of H (12x12 blocks),
            both triangles, as :class:`solver.assembly.Assembly` builds it.
        backend: where to run.

    Raises:
        DeviceUnavailable: the matrix and its factor (2 size^2 x 8 bytes) exceed the device's
            free memory, or the device runs out of memory allocating the matrix.
    """

    method = "dense"
    #: Its Cholesky factorisation raises :class:`SingularSystem` on a matrix that is not positive
    #: definite (as :attr:`LinearSolver.detects_indefinite`).
    detects_indefinite = True

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, backend: ArrayBackend):
        self.backend = backend
        block_count = len(indptr) - 1
        self.size = size = 12 * block_count
        needed, free = 2 * size * size * 8, backend.free_memory()
        if free is not None and needed > free:
            raise DeviceUnavailable(
                f"device '{backend.name}': the dense Newton system of {size} unknowns and its factor need "
                f"{needed / 2**30:.2f} GiB, the device has {free / 2**30:.2f} GiB free; set the device to 'cpu'"
            )
        rows = np.repeat(np.arange(block_count), np.diff(indptr)).astype(np.int64)
        columns = np.asarray(indices, dtype=np.int64)
        self._indptr, self._columns = np.asarray(indptr, dtype=np.int64), columns  # for failing_block
        # Flat position in the dense (size, size) matrix of entry (r, c) of each BSR block.
        entry = np.arange(12)
        positions = ((12 * rows[:, None, None] + entry[None, :, None]) * size
                     + 12 * columns[:, None, None] + entry[None, None, :])
        self._upper = None
        try:
            self._positions = backend.to_device(positions.reshape(-1))
            # Entries outside the pattern are never written, so they stay zero.
            self._matrix = backend.xp.zeros((size, size))
        except MemoryError as error:  # CuPy's OutOfMemoryError is one
            raise self._out_of_memory(error) from error

    def factorize(self, blocks: np.ndarray) -> None:
        """Factorise H, given by its BSR block values (blocks, 12, 12), for :meth:`solve_factorized`.

        The last factor is released first, so the device holds at most the matrix and one factor
        (the 2 size^2 x 8 bytes checked when the solver was made; CuPy's pool reuses the block).

        Raises:
            SingularSystem: H is not positive definite; its ``block`` is the failed pivot's
                (:func:`solver.linear_solver.failing_block` on the host).
            DeviceUnavailable: the device ran out of memory (another program took some since the
                check, say); the message says so.
        """
        if self.size == 0:
            return
        self._upper = None
        host_values = np.ascontiguousarray(blocks, dtype=np.float64).reshape(-1)
        try:
            self._matrix.reshape(-1)[self._positions] = self.backend.to_device(host_values)
            # Kept as U = L^T, a view that is column-major (L is row-major), as cuBLAS's and
            # LAPACK's triangular solves take a matrix: L itself would be copied at every solve.
            self._upper = self.backend.cholesky(self._matrix).T
        except np.linalg.LinAlgError as error:
            # The dense Cholesky does not say where it failed: a diagnostic one on the host does.
            hessian = scipy.sparse.bsr_matrix((host_values.reshape(-1, 12, 12), self._columns, self._indptr),
                                              shape=(self.size, self.size))
            raise SingularSystem(
                f"the Newton system is not positive definite (dense Cholesky on {self.backend.name}: {error})",
                block=failing_block(hessian),
            ) from error
        except MemoryError as error:  # CuPy's OutOfMemoryError is one
            raise self._out_of_memory(error) from error

    def _out_of_memory(self, error: MemoryError) -> DeviceUnavailable:
        """The error to raise where the device ran out of memory despite the check (another
        program took some since)."""
        return DeviceUnavailable(
            f"device '{self.backend.name}': out of memory for the dense Newton system of {self.size} unknowns "
            f"({error}); close other programs that use the GPU or set the device to 'cpu'"
        )

    def solve_factorized(self, right_hand_side: np.ndarray) -> np.ndarray:
        """x (size,) with H x = b (size,), H = U^T U from the last :meth:`factorize`: U^T y = b, U x = y.

        Raises:
            DeviceUnavailable: the device ran out of memory, as :meth:`factorize`.
        """
        if self.size == 0:
            return np.array(right_hand_side, dtype=np.float64)
        solve = self.backend.solve_triangular
        host = np.asarray(right_hand_side, dtype=np.float64)
        try:
            b = self.backend.to_device(host)
            # check_finite=False: a non-finite right-hand side gives a non-finite direction, which
            # the Newton loop reports (as on the CPU path).
            y = solve(self._upper, b, lower=False, trans="T", check_finite=False)
            x = self.backend.to_host(solve(self._upper, y, lower=False, check_finite=False))
        except MemoryError as error:  # CuPy's OutOfMemoryError is one
            raise self._out_of_memory(error) from error
        return np.array(x, dtype=np.float64)

    def solve(self, blocks: np.ndarray, right_hand_side: np.ndarray) -> np.ndarray:
        """Solve H x = b for H given by its BSR block values (blocks, 12, 12); b (size,).

        Raises:
            SingularSystem: as :meth:`factorize`.
        """
        self.factorize(blocks)
        return self.solve_factorized(right_hand_side)


def linear_solver_for(device: str, indptr: np.ndarray, indices: np.ndarray):
    """The linear solver of ``device`` (one of :data:`DEVICES`) for the BSR pattern (indptr, indices):
    :class:`solver.linear_solver.LinearSolver` on ``"cpu"``, a :class:`DeviceLinearSolver` on CuPy
    for ``"cupy"``.

    Raises:
        DeviceUnavailable: as :func:`cupy_backend` and :class:`DeviceLinearSolver`.
        ValueError: an unknown device.
    """
    if device == "cpu":
        return LinearSolver(indptr, indices)
    if device == "cupy":
        return DeviceLinearSolver(indptr, indices, cupy_backend())
    raise ValueError(f"device: expected one of {list(DEVICES)}, got {device!r}")
