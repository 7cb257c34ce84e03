"""Block-sparse assembly of the incremental potential's gradient and Hessian.

The unknowns are the q of the dynamic bodies only (fixed and animated bodies have prescribed q,
so their rows and columns are left out of the system instead of being replaced by identity
blocks as in libuipc: the result is the same Newton direction).
The Hessian is a block-sparse (BSR, 12x12 blocks) matrix whose sparsity pattern (indptr, indices)
is built once per scene from the element-to-body lists of all energy terms; each Newton
iteration only refills the block values with a Numba scatter kernel.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from .jit import kernel


@kernel
def _scatter(gradient_elements, hessian_elements, bodies, slot, block_index, gradient, blocks):
    count, k = bodies.shape
    for e in range(count):
        for a in range(k):
            row = slot[bodies[e, a]]
            if row < 0:
                continue
            for r in range(12):
                gradient[row, r] += gradient_elements[e, 12 * a + r]
            for b in range(k):
                index = block_index[e, a, b]
                if index < 0:
                    continue
                for r in range(12):
                    for c in range(12):
                        blocks[index, r, c] += hessian_elements[e, 12 * a + r, 12 * b + c]


@kernel
def _scatter_gradient(gradient_elements, bodies, slot, gradient):
    count, k = bodies.shape
    for e in range(count):
        for a in range(k):
            row = slot[bodies[e, a]]
            if row >= 0:
                for r in range(12):
                    gradient[row, r] += gradient_elements[e, 12 * a + r]


@kernel
def _scatter_flat_gradient(gradient_elements, rows, gradient):
    """gradient (dof_count,) += the element gradients held one after the other in the flat
    ``gradient_elements``, entry i going to row ``rows[i]`` (-1: a non-dynamic body's, dropped),
    in the buffer's order (:meth:`Assembly.gradient_rows`)."""
    for i in range(rows.shape[0]):
        row = rows[i]
        if row >= 0:
            gradient[row] += gradient_elements[i]


class Assembly:
    """Sparsity pattern of the Newton system and the scatter of per-element derivatives.

    Args:
        slot: (bodies,) int, the row-block of each dynamic body, -1 for fixed/animated bodies.
        element_bodies: one (n, k) int array per energy term (global body indices).

    Attributes:
        dof_count: 12 x number of dynamic bodies.
        block_indices: per term, (n, k, k) int index of each element block in the BSR data,
            -1 where a block touches a non-dynamic body.
    """

    def __init__(self, slot: np.ndarray, element_bodies: list[np.ndarray]):
        self.slot = np.ascontiguousarray(slot, dtype=np.int64)
        dynamic_count = int(self.slot.max(initial=-1)) + 1
        self.dof_count = 12 * dynamic_count
        pairs = {(s, s) for s in range(dynamic_count)}
        for bodies in element_bodies:
            slots = self.slot[bodies]
            for a in range(bodies.shape[1]):
                for b in range(bodies.shape[1]):
                    valid = (slots[:, a] >= 0) & (slots[:, b] >= 0)
                    pairs.update(zip(slots[valid, a].tolist(), slots[valid, b].tolist()))
        ordered = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        self.indices = np.ascontiguousarray(ordered[:, 1])
        self.indptr = np.searchsorted(ordered[:, 0], np.arange(dynamic_count + 1)).astype(np.int64)
        lookup = {pair: index for index, pair in enumerate(map(tuple, ordered.tolist()))}
        self.block_indices = []
        for bodies in element_bodies:
            slots = self.slot[bodies]
            n, k = bodies.shape
            index = np.full((n, k, k), -1, dtype=np.int64)
            for a in range(k):
                for b in range(k):
                    for e in range(n):
                        if slots[e, a] >= 0 and slots[e, b] >= 0:
                            index[e, a, b] = lookup[(int(slots[e, a]), int(slots[e, b]))]
            self.block_indices.append(index)
        self.block_count = len(ordered)

    def assemble(self, derivatives: list, element_bodies: list[np.ndarray], blocks: np.ndarray | None = None):
        """Sum per-element gradients and Hessians into the global system.

        Args:
            derivatives: per term, (gradient (n, 12k), Hessian (n, 12k, 12k) or None when the
                term's Hessian is already in ``blocks``), or None for a term with no elements.
            element_bodies: per term, (n, k) body indices (the same list as at construction).
            blocks: (block_count, 12, 12) values to add to (modified in place), or None for zeros.

        Returns:
            gradient (dof_count,) and the Hessian's BSR block values (block_count, 12, 12) in the
            pattern (``indptr``, ``indices``); see :meth:`matrix` for a SciPy matrix.
        """
        gradient = np.zeros((self.dof_count // 12, 12))
        if blocks is None:
            blocks = np.zeros((self.block_count, 12, 12))
        for derivative, bodies, block_index in zip(derivatives, element_bodies, self.block_indices):
            if derivative is None or not len(bodies):
                continue
            gradient_elements, hessian_elements = derivative
            if hessian_elements is None:
                _scatter_gradient(gradient_elements, bodies, self.slot, gradient)
            else:
                _scatter(gradient_elements, hessian_elements, bodies, self.slot, block_index, gradient, blocks)
        return gradient.reshape(-1), blocks

    def gradient_rows(self, element_bodies: list[np.ndarray]) -> np.ndarray:
        """For terms' element gradients held one after the other in one flat buffer (per term
        (n, 12k) in C order, terms in the order of ``element_bodies``, (n, k) each), the row of
        the gradient (dof_count,) that each entry adds to, -1 for a non-dynamic body's
        (:func:`_scatter_flat_gradient`, which then sums as :meth:`assemble` does)."""
        rows = [np.where(self.slot[bodies][:, :, None] >= 0, 12 * self.slot[bodies][:, :, None] + np.arange(12),
                         -1).reshape(-1) for bodies in element_bodies]
        return np.ascontiguousarray(np.concatenate(rows) if rows else np.zeros(0), dtype=np.int64)

    def sum_gradients(self, gradient_elements: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The gradient (dof_count,) from the flat element gradients ``gradient_elements`` and
        their :meth:`gradient_rows`, in one compiled call."""
        gradient = np.zeros(self.dof_count)
        _scatter_flat_gradient(gradient_elements, rows, gradient)
        return gradient

    def matrix(self, blocks: np.ndarray) -> scipy.sparse.bsr_matrix:
        """The Hessian (dof_count, dof_count) as a SciPy BSR matrix from its block values."""
        return scipy.sparse.bsr_matrix((blocks, self.indices, self.indptr), shape=(self.dof_count, self.dof_count))
