"""The Newton system's direct solvers on chains and on grids of bodies: time per factorisation and per solve.

The CPU path (:class:`solver.linear_solver.LinearSolver`: banded Cholesky where the ordered
matrix is narrow, SciPy's SuperLU otherwise) against the dense Cholesky of the GPU path
(:class:`solver.device_solver.DeviceLinearSolver`), run on NumPy (the CPU, as a reference of its
flop count) and on CuPy where CuPy and a CUDA device are present, CHOLMOD's sparse Cholesky
where scikit-sparse is installed (:class:`CholmodSolver`: built from source, for comparison), and
the same banded Cholesky in Intel MKL's LAPACK where the ``mkl`` wheel is installed on Linux
(:class:`MklBandSolver`, for comparison). The matrices have the block
pattern of two kinds of scene, 12x12 blocks per dynamic body:

- ``chain``: N bodies each jointed to the next (``benchmarks/chains.py``'s chains);
- ``grid``: W x W bodies each jointed to its right and lower neighbours (a net of plates pinned
  at their edges: every cell a closed loop of four joints), whose sparse factorisation fills in.

A solver's time depends on the pattern and the size, not on the values: each element (a body, a
joint) gets a random positive semidefinite Hessian and each body a positive definite one, as
the Newton loop's are. Prints one row per pattern, size and solver (median of the repetitions);
no assertions.

    python benchmarks/linear_solvers.py [--sizes 100 400 1024] [--dense-cpu-max 400]
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.assembly import Assembly  # noqa: E402
from solver.device_solver import DeviceLinearSolver, DeviceUnavailable, cupy_backend, numpy_backend  # noqa: E402
from solver.linear_solver import LinearSolver  # noqa: E402


def chain_edges(count: int) -> np.ndarray:
    """(count - 1, 2) body pairs of a chain."""
    return np.stack([np.arange(count - 1), np.arange(1, count)], axis=1)


def grid_edges(width: int) -> np.ndarray:
    """Body pairs of a width x width grid, bodies numbered row by row, each jointed to its right
    and lower neighbours."""
    index = np.arange(width * width).reshape(width, width)
    right = np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], axis=1)
    down = np.stack([index[:-1, :].ravel(), index[1:, :].ravel()], axis=1)
    return np.concatenate([right, down])


def newton_system(edges, count: int, seed: int = 0, shift: float = 1.0):
    """(indptr, indices, block values (blocks, 12, 12)) of a random symmetric matrix with the
    pattern of ``count`` bodies and the two-body elements ``edges`` ((k, 2) body pairs): each
    element a random PSD Hessian, each body's plus ``shift`` I (positive definite for shift > 0;
    a large negative shift gives an indefinite matrix)."""
    rng = np.random.default_rng(seed)
    element_bodies = [np.arange(count).reshape(-1, 1), np.asarray(edges, dtype=np.int64).reshape(-1, 2)]
    assembly = Assembly(np.arange(count), element_bodies)
    derivatives = []
    for bodies in element_bodies:
        size = 12 * bodies.shape[1]
        factor = rng.normal(size=(len(bodies), size, size))
        hessian = factor @ factor.transpose(0, 2, 1) / size  # PSD per element
        if bodies.shape[1] == 1:
            hessian += shift * np.eye(12)
        derivatives.append((np.zeros((len(bodies), size)), hessian))
    _, blocks = assembly.assemble(derivatives, element_bodies)
    return assembly.indptr, assembly.indices, blocks


class CholmodSolver:
    """CHOLMOD's sparse Cholesky (scikit-sparse) behind :class:`LinearSolver`'s interface, for
    comparison only: scikit-sparse has no wheel on PyPI, so it needs SuiteSparse's headers and a
    build from source (Debian: ``apt-get install libsuitesparse-dev``, then ``pip install
    scikit-sparse --no-build-isolation`` with Cython, setuptools and wheel installed), and the
    extension could not ship it. The symbolic analysis (AMD ordering) is made once, as
    LinearSolver chooses its ordering once.

    Args:
        indptr, indices: the BSR pattern (12x12 blocks). mode: ``"simplicial"`` or ``"supernodal"``.
    """

    def __init__(self, indptr, indices, mode: str, cholmod):
        self.indptr, self.indices, self.size = indptr, indices, 12 * (len(indptr) - 1)
        self._cholmod, self._mode, self._factor = cholmod, mode, None

    def _matrix(self, blocks):
        return scipy.sparse.bsr_matrix((blocks, self.indices, self.indptr), shape=(self.size, self.size)).tocsc()

    def factorize(self, blocks) -> None:
        """Factorise the matrix of BSR block values (blocks, 12, 12)."""
        matrix = self._matrix(blocks)
        if self._factor is None:
            self._factor = self._cholmod.analyze(matrix, mode=self._mode, ordering_method="amd")
        self._factor.cholesky_inplace(matrix)

    def solve_factorized(self, right_hand_side):
        """x (size,) with H x = b (size,)."""
        return self._factor(right_hand_side)


def load_mkl():
    """Intel MKL's runtime library (``ctypes.CDLL`` of ``libmkl_rt``, limited to one thread as the
    solver limits OpenBLAS) where the ``mkl`` wheel is installed in this Python's prefix (Linux), else None."""
    for path in sorted((Path(sys.prefix) / "lib").glob("libmkl_rt.so*")):
        try:
            mkl = ctypes.CDLL(str(path))
        except OSError:
            continue
        mkl.MKL_Set_Num_Threads(1)
        return mkl
    return None


class MklBandSolver(LinearSolver):
    """:class:`LinearSolver`'s banded path (the same ordering, band and scatter) with MKL's
    ``dpbtrf``/``dpbtrs`` (through ctypes, Fortran interface) in place of SciPy's OpenBLAS LAPACK,
    for comparison only: the ``mkl`` wheel and its dependencies take about 1 GB, and there is none
    for macOS on arm64. Unpermuted bands only (the chains).

    Args:
        indptr, indices: the BSR pattern (12x12 blocks). mkl: :func:`load_mkl`'s library.

    Raises:
        ValueError: the pattern does not take the banded path, or takes it permuted.
    """

    def __init__(self, indptr, indices, mkl):
        super().__init__(indptr, indices)
        if self.method != "banded" or self._permuted:
            raise ValueError("MklBandSolver: only for patterns that take the unpermuted banded path")
        self._mkl = mkl
        self._arguments = [ctypes.byref(ctypes.c_int(value))
                           for value in (self.size, self.bandwidth, 1, self.bandwidth + 1)]

    def _factorize_band(self) -> None:
        size, bandwidth, _, leading = self._arguments
        info = ctypes.c_int(0)
        self._mkl.dpbtrf(b"L", size, bandwidth, self._banded.ctypes.data_as(ctypes.c_void_p), leading,
                         ctypes.byref(info))
        if info.value != 0:
            raise RuntimeError(f"MKL dpbtrf info {info.value}")
        self._factor = self._banded

    def solve_factorized(self, right_hand_side):
        """x (size,) with H x = b (size,)."""
        solution = np.array(right_hand_side, dtype=np.float64)
        size, bandwidth, columns, leading = self._arguments
        info = ctypes.c_int(0)
        self._mkl.dpbtrs(b"L", size, bandwidth, columns, self._factor.ctypes.data_as(ctypes.c_void_p), leading,
                         solution.ctypes.data_as(ctypes.c_void_p), size, ctypes.byref(info))
        return solution


def median_seconds(function, repetitions: int) -> float:
    """Median wall time of ``function()`` over ``repetitions`` calls, after one untimed call."""
    function()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    """Time each solver on each pattern and size; print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 1024],
                        help="bodies (a grid takes the nearest square)")
    parser.add_argument("--patterns", nargs="+", default=["chain", "grid"], choices=["chain", "grid"])
    parser.add_argument("--dense-cpu-max", type=int, default=400,
                        help="largest body count for the dense solver on NumPy (its cost grows as N^3)")
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()

    try:
        from sksparse import cholmod
    except ImportError:
        cholmod = None
    mkl = load_mkl()
    backends = [("dense, NumPy (CPU)", numpy_backend())]
    try:
        backends.append(("dense, CuPy (GPU)", cupy_backend()))
    except DeviceUnavailable as error:
        print(f"# no GPU row: {error}", flush=True)
    print(f"{'pattern':<7} {'bodies':>6} {'unknowns':>8} {'solver':<22} {'factorise ms':>12} {'solve ms':>9} "
          f"{'dense GFLOP':>11}")
    for pattern in args.patterns:
        for size in args.sizes:
            width = max(2, round(math.sqrt(size)))
            count = size if pattern == "chain" else width * width
            edges = chain_edges(count) if pattern == "chain" else grid_edges(width)
            indptr, indices, blocks = newton_system(edges, count)
            right_hand_side = np.random.default_rng(1).normal(size=12 * count)
            solvers = [(None, LinearSolver(indptr, indices))]
            for name, backend in backends:
                if backend.name == "numpy" and count > args.dense_cpu_max:
                    continue
                try:
                    solvers.append((name, DeviceLinearSolver(indptr, indices, backend)))
                except DeviceUnavailable as error:
                    print(f"# {name}: {error}", flush=True)
            if cholmod is not None:
                solvers += [(f"CHOLMOD {mode}", CholmodSolver(indptr, indices, mode, cholmod))
                            for mode in ("simplicial", "supernodal")]
            if mkl is not None:
                try:
                    solvers.append(("MKL banded", MklBandSolver(indptr, indices, mkl)))
                except ValueError:  # not a band this path takes as it is
                    pass
            for name, solver in solvers:
                name = name or f"CPU ({solver.method})"
                factorise = median_seconds(functools.partial(solver.factorize, blocks), args.repetitions)
                solve = median_seconds(functools.partial(solver.solve_factorized, right_hand_side),
                                       4 * args.repetitions)
                print(f"{pattern:<7} {count:>6} {12 * count:>8} {name:<22} {1e3 * factorise:>12.2f} "
                      f"{1e3 * solve:>9.3f} {(12 * count) ** 3 / 3e9:>11.1f}", flush=True)


if __name__ == "__main__":
    main()
