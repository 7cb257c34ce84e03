"""Direct solves of the Newton system H dq = -g (H symmetric positive definite, 12x12 blocks).

Two library paths, chosen once per scene from the block sparsity pattern:

- **banded Cholesky** (LAPACK ``dpbtrf``/``dpbtrs`` through ``scipy.linalg.lapack``) after a reverse
  Cuthill-McKee ordering of the body graph (``scipy.sparse.csgraph``), or in the bodies' own
  order where that is as narrow (no permutation per solve), when the ordered matrix is narrow:
  chains and trees of bodies give a bandwidth of one or two blocks, and the banded factorisation
  then costs O(n b^2) with no fill-in analysis;
- **sparse LU** (SciPy SuperLU in symmetric mode with a minimum-degree ordering of A^T + A)
  otherwise.

H is positive definite because every unknown belongs to a dynamic body whose kinetic term
contributes its (positive definite) mass matrix, and every other term is PSD-projected.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.linalg.lapack
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from llvmlite import ir
from numba import types
from numba.extending import get_cython_function_address, intrinsic

from .assembly import _scatter_flat_gradient
from .jit import helper, kernel

class SingularSystem(RuntimeError):
    """The Newton system could not be factorised (not positive definite or singular).

    ``block`` is the 12x12 block (a dynamic body's slot, :class:`solver.assembly.Assembly`) of
    the first pivot that failed: the banded Cholesky's own, else that of the diagnostic Cholesky
    :func:`failing_block` (SuperLU, the device's dense Cholesky); None where neither tells.
    """

    def __init__(self, message: str, block: Optional[int] = None):
        super().__init__(message)
        self.block = block


#: The address of LAPACK's banded Cholesky solve in SciPy's LAPACK (``scipy.linalg.cython_lapack``,
#: 32-bit integers), which compiled code calls through :func:`_lapack_call`.
DPBTRS = get_cython_function_address("scipy.linalg.cython_lapack", "dpbtrs")


@intrinsic
def _lapack_call(typingctx, address, arrays):
    """Call the LAPACK routine at ``address`` (int, from ``scipy.linalg.cython_lapack``) from
    compiled code, with the data pointers of ``arrays`` (a tuple of arrays, one per argument, in
    the routine's order: LAPACK takes every argument by reference, a character as uint8 and an
    integer as int32). The address is an argument, not a constant of the compiled code, so that
    Numba's on-disk cache holds no address of this process."""
    if not isinstance(address, types.Integer) or not isinstance(arrays, types.BaseTuple):
        return None
    if not all(isinstance(array, types.Array) for array in arrays):
        return None

    def codegen(context, builder, signature, arguments):
        pointer = ir.IntType(8).as_pointer()
        data = [builder.bitcast(context.make_array(array)(context, builder,
                                                          builder.extract_value(arguments[1], index)).data, pointer)
                for index, array in enumerate(signature.args[1])]
        routine = builder.inttoptr(arguments[0], ir.FunctionType(ir.VoidType(), [pointer] * len(data)).as_pointer())
        builder.call(routine, data)
        return context.get_dummy_value()

    return types.void(address, arrays), codegen


@helper
def _banded_solve(dpbtrs, factor, lower, right_hand_side, sign, order):
    """(x (size,), LAPACK's info) with H x = ``sign`` b for b = ``right_hand_side`` (size,), H's
    Cholesky factor in LAPACK band storage ``factor`` ((bandwidth + 1, size), Fortran order; L in
    lower storage where ``lower``, else U = L^T in upper storage), its 12-row blocks stored in the
    order ``order`` (blocks,) (block k of the band is block order[k] of the matrix): sign b
    permuted into the band's order, LAPACK ``dpbtrs`` at the address ``dpbtrs`` (:data:`DPBTRS`),
    and the solution permuted back."""
    size = factor.shape[1]
    permuted = np.empty(size)
    for k in range(order.shape[0]):
        for r in range(12):
            permuted[12 * k + r] = sign * right_hand_side[12 * order[k] + r]
    # n, kd, nrhs, ldab, ldb, info
    integers = np.array([size, factor.shape[0] - 1, 1, factor.shape[0], size, 0], dtype=np.int32)
    uplo = np.array([76 if lower else 85], dtype=np.uint8)  # "L" or "U"
    _lapack_call(dpbtrs, (uplo, integers[0:1], integers[1:2], integers[2:3], factor, integers[3:4], permuted,
                          integers[4:5], integers[5:6]))
    solution = np.empty(size)
    for k in range(order.shape[0]):
        for r in range(12):
            solution[12 * order[k] + r] = permuted[12 * k + r]
    return solution, integers[5]


@kernel
def _solve_band(dpbtrs, factor, lower, right_hand_side, order):
    """(x, info) with H x = b, b = ``right_hand_side`` (size,), in one compiled call
    (:func:`_banded_solve`, arguments as there)."""
    return _banded_solve(dpbtrs, factor, lower, right_hand_side, 1.0, order)


@kernel
def _solve_band_sum(dpbtrs, factor, lower, gradient_elements, rows, order):
    """(g (size,), x (size,), info) with g the element gradients summed
    (:func:`solver.assembly._scatter_flat_gradient`, ``gradient_elements`` and their ``rows``) and
    H x = -g, in one compiled call (:func:`_banded_solve`, the other arguments as there)."""
    gradient = np.zeros(factor.shape[1])
    _scatter_flat_gradient(gradient_elements, rows, gradient)
    solution, info = _banded_solve(dpbtrs, factor, lower, gradient, -1.0, order)
    return gradient, solution, info


@kernel
def _scatter_banded(hessian_elements, block_index, block_offset, block_diagonal, banded):
    """banded += the element Hessians (n, 12k, 12k), each element block (a, b) going to BSR block
    ``block_index[e, a, b]`` (-1: none), whose lower triangle in the permuted order the band holds.

    ``banded`` is LAPACK lower band storage, (bandwidth + 1, size) in Fortran order, so entry
    (row, column) of the matrix lives at flat position (row - column) + (bandwidth + 1) column of
    its memory: BSR block k starts at ``block_offset[k]`` (-1 for a block above the diagonal after
    the ordering, which the band stores as its transpose's), and its column c at
    ``block_offset[k] + bandwidth c``, contiguous in the row r (from r = c on in a diagonal block).
    BSR block values (blocks, 12, 12) are the elements of one block each (``block_index`` k for
    element k), as :meth:`LinearSolver.factorize` and :meth:`LinearSolver.constant_band` pass them.
    """
    flat = banded.T.reshape(-1)  # the same memory, in order
    step = banded.shape[0] - 1
    for e in range(block_index.shape[0]):
        for a in range(block_index.shape[1]):
            for b in range(block_index.shape[2]):
                index = block_index[e, a, b]
                if index < 0 or block_offset[index] < 0:
                    continue
                for c in range(12):
                    start = block_offset[index] + step * c
                    for r in range(c if block_diagonal[index] else 0, 12):
                        flat[start + r] += hessian_elements[e, 12 * a + r, 12 * b + c]


@kernel
def _sum_into_band(constant_band, hessians, source, stride, target, diagonal, banded):
    """banded = constant_band + element blocks taken from the flat buffer ``hessians`` (all terms'
    element Hessians, one after the other), in one call for all terms.

    Block k of the map (:meth:`LinearSolver.element_band_map`) is the 12x12 block whose entry
    (r, c) is ``hessians[source[k] + stride[k] r + c]`` (stride: its element Hessian's row
    length), added at ``target[k] + bandwidth c + r`` of the band's memory as
    :func:`_scatter_banded` adds it (only r >= c where ``diagonal[k]``). The blocks are added in
    the map's order, that of the terms, elements and element blocks: the same sums, in the same
    order, as :func:`_scatter_banded` term by term."""
    flat = banded.T.reshape(-1)  # the same memory, in order
    constant = constant_band.T.reshape(-1)
    for i in range(flat.shape[0]):
        flat[i] = constant[i]
    step = banded.shape[0] - 1
    for k in range(source.shape[0]):
        first, row_length = source[k], stride[k]
        for c in range(12):
            start = target[k] + step * c
            for r in range(c if diagonal[k] else 0, 12):
                flat[start + r] += hessians[first + row_length * r + c]


@kernel
def _transpose_band(lower, upper):
    """upper = the transpose of the lower triangular band matrix in ``lower``, in LAPACK upper band
    storage: both (bandwidth + 1, size) in Fortran order, entry (d, j) of ``lower`` being L[j + d, j]
    and entry (bandwidth - d, j) of ``upper`` being U[j - d, j] = L[j, j - d]. Entries outside the
    matrix (the first columns' tops) are left as they are; LAPACK does not read them.

    A data move only (no arithmetic): it lets the solves use the upper variant of ``dpbtrs``,
    whose triangular solves are faster than the lower one's in SciPy's OpenBLAS (see
    :meth:`LinearSolver._factorize_band`)."""
    bandwidth = lower.shape[0] - 1
    size = lower.shape[1]
    width = bandwidth + 1
    source = lower.T.reshape(-1)  # the same memory, in order: L[j + d, j] at d + width j
    target = upper.T.reshape(-1)
    for j in range(bandwidth, size):
        # U[j - d, j] for d = bandwidth - m, m = 0 .. bandwidth, is L[j, j - d] at
        # d + width (j - d) = width j - bandwidth^2 + bandwidth m
        for m in range(width):
            target[width * j + m] = source[width * j - bandwidth * bandwidth + bandwidth * m]
    for j in range(min(bandwidth, size)):
        for d in range(j + 1):
            upper[bandwidth - d, j] = lower[d, j - d]


def band_order(block_count: int, block_rows: np.ndarray,
               block_columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The order of the bodies in which the banded path stores the Newton matrix, and its band.

    Args:
        block_count: bodies (block rows) of the matrix.
        block_rows: (blocks,) block row of each block of the pattern, both triangles (every
            coupled pair of bodies both ways, and each body with itself).
        block_columns: (blocks,) its block column.

    Returns:
        (order (block_count,): the bodies in band order; position (block_count,): each body's
        place in it; block_band: the largest distance in bodies between two coupled bodies).
        Reverse Cuthill-McKee's order, or the bodies' own where it is as narrow (a chain built
        end to end: the solves then permute nothing).
    """
    block_rows, block_columns = np.asarray(block_rows, dtype=np.int64), np.asarray(block_columns, dtype=np.int64)
    own_band = int(np.max(np.abs(block_rows - block_columns), initial=0))
    if not block_count:  # no dynamic body: nothing to order
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    graph = scipy.sparse.csr_matrix((np.ones(len(block_rows)), (block_rows, block_columns)),
                                    shape=(block_count, block_count))
    order = scipy.sparse.csgraph.reverse_cuthill_mckee(graph, symmetric_mode=True).astype(np.int64)
    position = np.empty(block_count, dtype=np.int64)
    position[order] = np.arange(block_count)
    block_band = int(np.max(np.abs(position[block_rows] - position[block_columns]), initial=0))
    if own_band <= block_band:
        return np.arange(block_count), np.arange(block_count), own_band
    return order, position, block_band


#: The most entries (8 bytes each) the band of :func:`failing_block` may take (512 MiB).
DIAGNOSTIC_BAND_LIMIT = 2**26
#: A Cholesky pivot L_ii^2 at most this part of its diagonal entry A_ii has lost more than half of
#: its digits to cancellation (sqrt of the double precision epsilon): :func:`failing_block`.
CANCELLED_PIVOT = float(np.sqrt(np.finfo(np.float64).eps))


def failing_block(matrix) -> Optional[int]:
    """The 12x12 block on which a Cholesky factorisation of a symmetric matrix fails first: the
    body of a singular Newton system where the factorisation that failed does not tell (SuperLU's
    LU, the device's dense Cholesky). Run only after a failure: it factorises the matrix again.

    The bodies are ordered as the banded path orders them (:func:`band_order`) and the band is
    factorised with LAPACK ``dpbtrf``, whose ``info`` is the first failed pivot's row. Where it
    passes (rounding spared it the LU's exact zero), the pivot L_ii^2 that kept the smallest part
    of its diagonal entry A_ii names the block, where that part is at most :data:`CANCELLED_PIVOT`.

    Args:
        matrix: (size, size) SciPy sparse matrix or array, size a multiple of 12; its lower
            triangle is read.

    Returns:
        The block (row // 12 in the matrix's own numbering), or None where the Cholesky passes
        with no pivot cancelled or its band would take more than :data:`DIAGNOSTIC_BAND_LIMIT`
        entries.
    """
    entries = scipy.sparse.coo_matrix(matrix)
    size = entries.shape[0]
    if not size:
        return None
    block_count = size // 12
    coupled = scipy.sparse.coo_matrix((np.ones(entries.nnz), (entries.row // 12, entries.col // 12)),
                                      shape=(block_count, block_count))
    coupled = (coupled + coupled.T + scipy.sparse.identity(block_count)).tocoo()
    order, position, block_band = band_order(block_count, coupled.row, coupled.col)
    bandwidth = 12 * block_band + 11
    if (bandwidth + 1) * size > DIAGNOSTIC_BAND_LIMIT:
        return None
    scalar_position = (12 * position[:, None] + np.arange(12)).reshape(-1)
    rows, columns = scalar_position[entries.row], scalar_position[entries.col]
    lower = rows >= columns
    band = np.zeros((bandwidth + 1, size), order="F")
    np.add.at(band, (rows[lower] - columns[lower], columns[lower]), entries.data[lower])
    diagonal = band[0].copy()
    factor, info = scipy.linalg.lapack.dpbtrf(band, lower=1, overwrite_ab=1)
    if info > 0:
        return int(order[(info - 1) // 12])
    if info < 0:
        return None
    # The Cholesky passed: the pivot that kept the smallest part of its diagonal entry, where
    # rounding cancelled more than half of its digits (the LU's exact zero).
    kept = factor[0] ** 2 / diagonal
    row = int(np.argmin(kept))
    return int(order[row // 12]) if kept[row] <= CANCELLED_PIVOT else None


class LinearSolver:
    """Chooses and runs the direct solver for a fixed block sparsity pattern.

    Args:
        indptr: (block_rows + 1,) and indices: (blocks,) the BSR pattern of H (12x12 blocks).

    Attributes:
        method: ``"banded"`` or ``"superlu"``.
        bandwidth: lower bandwidth in scalar rows of the reordered matrix (banded path).
        detects_indefinite: whether :meth:`factorize` raises :class:`SingularSystem` on a matrix
            that is not positive definite: the banded path's Cholesky does; SuperLU's LU does not
            (its U's diagonal would tell, at 4 to 24% of a factorisation's time to read it out on
            a 1024-body net, so it is not read: the Newton loop checks the curvature of the
            Newton step instead, :func:`solver.potential.positive_curvature`).
    """

    #: Use the banded path while its dense band costs at most this many times the sparse storage.
    BAND_FILL_LIMIT = 8.0

    def __init__(self, indptr: np.ndarray, indices: np.ndarray):
        block_count = len(indptr) - 1
        self.size = 12 * block_count
        self.block_rows = np.repeat(np.arange(block_count), np.diff(indptr)).astype(np.int64)
        self.block_columns = np.asarray(indices, dtype=np.int64)
        order, position, block_band = band_order(block_count, self.block_rows, self.block_columns)
        self.order, self.position = order, position
        self.bandwidth = 12 * block_band + 11
        band_storage = (self.bandwidth + 1) * self.size
        sparse_storage = 144 * max(len(indices), 1)
        self.method = "banded" if band_storage <= self.BAND_FILL_LIMIT * sparse_storage else "superlu"
        self.detects_indefinite = self.method == "banded"
        self._banded = np.zeros((self.bandwidth + 1, self.size), order="F") if self.method == "banded" else None
        # The factor's transpose in upper band storage, which the solves use from a factor's second
        # solve on, or from its first where the last factor served more than one (_factorize_band).
        self._upper_factor = np.zeros_like(self._banded) if self.method == "banded" else None
        # Where each BSR block goes in the band storage (-1 for the blocks above the diagonal
        # after the ordering: the band holds their transposes), for the fill and for element
        # Hessians scattered straight into the band (:meth:`factorize_sum`).
        row_position, column_position = self.position[self.block_rows], self.position[self.block_columns]
        self._block_offset = np.where(
            row_position >= column_position,
            12 * (row_position - column_position) + (self.bandwidth + 1) * 12 * column_position, -1,
        ).astype(np.int64)
        self._block_diagonal = row_position == column_position
        self._block_identity = np.arange(len(self.block_rows), dtype=np.int64).reshape(-1, 1, 1)  # block k as element k
        self._lu = None  # SuperLU path: the last factorisation (scipy.sparse.linalg.SuperLU)
        # Banded path: the last factor L in lower storage (the band), whether it has been moved
        # into upper storage as U = L^T (_upper_factor), and the solves it has served so far.
        self._lower_factor = None
        self._moved = False
        self._solves = 0

    def factorize(self, blocks: np.ndarray) -> None:
        """Factorise H, given by its BSR block values (blocks, 12, 12), for :meth:`solve_factorized`.

        Raises:
            SingularSystem: when H is not positive definite (banded) or singular (SuperLU), with
                the block of the failed pivot (:func:`failing_block` on the SuperLU path).
        """
        if self.size == 0:
            return
        # No stale factor: the band is the lower factor's storage, and a failed splu leaves none.
        self._lu = self._lower_factor = None
        if self.method == "banded":
            assert self._banded is not None  # made with the banded method
            self._banded.fill(0.0)
            self._scatter_blocks(blocks, self._banded)
            self._factorize_band()
            return
        hessian = scipy.sparse.bsr_matrix((blocks, self.block_columns, self._indptr()), shape=(self.size, self.size))
        try:
            self._lu = scipy.sparse.linalg.splu(
                hessian.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
            )
        except RuntimeError as error:  # SuperLU: "Factor is exactly singular"
            raise SingularSystem(f"the Newton system is singular ({error})", block=failing_block(hessian)) from error

    def constant_band(self, blocks: np.ndarray) -> np.ndarray:
        """The band (bandwidth + 1, size) of the matrix given by BSR block values (blocks, 12, 12),
        a new array, for :meth:`factorize_sum` (banded path only)."""
        band = np.zeros_like(self._banded)
        self._scatter_blocks(blocks, band)
        return band

    def _scatter_blocks(self, blocks: np.ndarray, band: np.ndarray) -> None:
        """band += the matrix of BSR block values (blocks, 12, 12): each block an element of its own
        for :func:`_scatter_banded` (one kernel, and one compilation, for blocks and elements)."""
        _scatter_banded(blocks, self._block_identity, self._block_offset, self._block_diagonal, band)

    def element_band_map(self, block_indices: list, offsets: list) -> tuple[np.ndarray, ...]:
        """Where the element blocks of terms' element Hessians, held one after the other in one
        flat buffer, go in the band, for :meth:`factorize_sum` (banded path only).

        Args:
            block_indices: per term, (n, k, k) the BSR block of each element block as
                :class:`solver.assembly.Assembly` numbers them (-1: none).
            offsets: per term, where its element Hessians (n, 12k, 12k), C order, start in the buffer.

        Returns:
            (source, stride, target, diagonal), one entry per element block that reaches the band
            (terms, elements and element blocks in order): its first entry in the buffer, its
            element Hessian's row length 12k, its place in the band's memory and whether it is on
            the diagonal (:func:`_sum_into_band`).
        """
        pieces: list[tuple[np.ndarray, ...]] = []
        for block_index, offset in zip(block_indices, offsets):
            n, k, _ = block_index.shape
            size = 12 * k
            element, a, b = (axis.reshape(-1) for axis in np.indices((n, k, k)))
            index = block_index.reshape(-1)
            kept = index >= 0
            kept[kept] = self._block_offset[index[kept]] >= 0
            source = offset + element * size * size + 12 * a * size + 12 * b
            pieces.append((source[kept], np.full(int(kept.sum()), size), self._block_offset[index[kept]],
                           self._block_diagonal[index[kept]]))
        if not pieces:
            return (np.zeros(0, dtype=np.int64),) * 3 + (np.zeros(0, dtype=bool),)
        return tuple(np.ascontiguousarray(np.concatenate(column)) for column in zip(*pieces))

    def factorize_sum(self, constant_band: np.ndarray, hessians: np.ndarray, band_map: tuple) -> None:
        """Factorise H = the matrix of ``constant_band`` (:meth:`constant_band`) + element
        Hessians, for :meth:`solve_factorized` (banded path only; the SuperLU path takes the
        assembled blocks, :meth:`factorize`).

        Args:
            constant_band: (bandwidth + 1, size), not modified.
            hessians: (entries,) the terms' element Hessians one after the other, flat.
            band_map: where their blocks go, :meth:`element_band_map`.

        The element Hessians go straight into a copy of the constant band, all terms in one
        compiled call: no BSR block values are written, copied or read (at 1000 bodies those
        were 3.5 MB, three times per factorisation).

        Raises:
            SingularSystem: as :meth:`factorize`; ValueError on the SuperLU path.
        """
        if self.method != "banded":
            raise ValueError("factorize_sum is for the banded path; the SuperLU path takes assembled blocks")
        if self.size == 0:
            return
        self._lower_factor = None  # the band is the lower factor's storage
        assert self._banded is not None  # made with the banded method
        _sum_into_band(constant_band, hessians, *band_map, self._banded)
        self._factorize_band()

    def _factorize_band(self) -> None:
        # LAPACK pbtrf (banded Cholesky) directly: scipy.linalg.cholesky_banded's checks cost
        # more than the factorisation itself on small systems. The band is in Fortran order,
        # so LAPACK works on it in place. SciPy's OpenBLAS factorises faster in the lower variant
        # and solves faster in the upper one (docs/benchmark_runs.md, "Where a small chain's
        # step goes"), and a factorisation serves about ten solves: the factor L is kept as
        # U = L^T in upper storage for the solves.
        # The move costs as much as the upper solves save over two solves or so; where the last
        # factor served a single solve (one step per frame: every Newton iteration factorises
        # afresh and solves once) the next one is solved in lower storage first and moved only
        # at its second solve (a factor that then serves more solves pays its one lower solve
        # extra).
        factor, info = scipy.linalg.lapack.dpbtrf(self._banded, lower=1, overwrite_ab=1)
        if info != 0:
            self._solves = 0
            raise SingularSystem(f"the Newton system is not positive definite (LAPACK dpbtrf info {info})",
                                 block=int(self.order[(info - 1) // 12]) if info > 0 else None)
        self._lower_factor, self._moved = factor, False
        if self._solves != 1:
            self._move_factor()
        self._solves = 0

    def _move_factor(self) -> None:
        """Keep the last factor L as U = L^T in upper storage, for the faster upper solves."""
        _transpose_band(self._lower_factor, self._upper_factor)
        self._moved = True

    def solve_factorized(self, right_hand_side: np.ndarray) -> np.ndarray:
        """x (size,) with H x = b (size,), H from the last :meth:`factorize` (a triangular solve each).

        Raises:
            ValueError: when the last factorisation failed or none was made.
        """
        if self.size == 0:
            return right_hand_side.copy()
        if self.method == "banded":
            factor, lower = self._next_factor()
            solution, info = _solve_band(DPBTRS, factor, lower, np.ascontiguousarray(right_hand_side, dtype=np.float64),
                                         self.order)
            if info != 0:
                raise SingularSystem(f"the banded triangular solve failed (LAPACK dpbtrs info {info})")
            return solution
        if self._lu is None:
            raise ValueError("solve_factorized: no factorisation to solve with (none made, or the last one failed)")
        return self._lu.solve(right_hand_side)

    def solve_sum(self, gradient_elements: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(g (size,), x (size,)) with g the sum of element gradients, held one after the other in
        the flat ``gradient_elements``, each entry added to the row ``rows`` gives (-1: none;
        :meth:`solver.assembly.Assembly.gradient_rows`, summed as
        :meth:`solver.assembly.Assembly.sum_gradients` sums), and H x = -g, H from the last
        :meth:`factorize` or :meth:`factorize_sum` (a triangular solve): the gradient and the
        Newton (or chord) step in one compiled call (banded path only).

        Raises:
            ValueError: on the SuperLU path, or when the last factorisation failed or none was made.
            SingularSystem: LAPACK's solve reports an argument error.
        """
        if self.method != "banded":
            raise ValueError("solve_sum is for the banded path; the SuperLU path solves with solve_factorized")
        factor, lower = self._next_factor()
        gradient, solution, info = _solve_band_sum(DPBTRS, factor, lower, gradient_elements, rows, self.order)
        if info != 0:
            raise SingularSystem(f"the banded triangular solve failed (LAPACK dpbtrs info {info})")
        return gradient, solution

    def _next_factor(self) -> tuple[np.ndarray, bool]:
        """The band storage of the last factor that the next banded solve uses, and whether it is in
        lower storage: the factor's first solve in lower storage, not yet moved, later ones in
        upper storage (:meth:`_factorize_band`); counts the solve.

        Raises:
            ValueError: when the last factorisation failed or none was made.
        """
        if self._lower_factor is None:
            raise ValueError("solve_factorized: no factorisation to solve with (none made, or the last one failed)")
        self._solves += 1
        if not self._moved and self._solves > 1:
            self._move_factor()
        return (self._upper_factor, False) if self._moved else (self._lower_factor, True)

    def solve(self, blocks: np.ndarray, right_hand_side: np.ndarray) -> np.ndarray:
        """Solve H x = b for H given by its BSR block values (blocks, 12, 12); b (size,).

        Raises:
            SingularSystem: as :meth:`factorize`.
        """
        self.factorize(blocks)
        return self.solve_factorized(right_hand_side)

    def _indptr(self) -> np.ndarray:
        return np.searchsorted(self.block_rows, np.arange(self.size // 12 + 1)).astype(np.int64)
