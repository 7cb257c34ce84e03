"""Contact Hessians in 12x12 body blocks, and the Newton matrix with them.

A surface vertex v of body b moves as x_v = [1, x̄_vᵀ] Q_b (Lan et al. 2022, "Affine Body
Dynamics", §4): in q = [p, rows of A] order, coordinate a of x_v is q_a + sum_c q_{3 + 3a + c}
x̄_c, so the entry H[(v, a), (w, c')] of a vertex-space Hessian (ipctk's barrier Hessian over
the surface vertices, 3 rows per vertex) adds h w_v[i] w_w[j] to the entry
(row_i(a), row_j(c')) of the 12x12 block of the bodies of v and w, with w = [1, x̄] and
row_0(a) = a, row_{1 + c}(a) = 3 + 3a + c: the chain rule Jᵀ H J of the sparse products,
computed into the body blocks in one compiled pass instead of two sparse matrix products and
their index bookkeeping, the weights w_v first summed over the entries of one column whose rows
belong to one body (4 products an entry), then w_w applied once per such run (48 products).
Every contact couples at most two bodies, so the blocks are few: the body pairs in contact. A
Hessian H (3, 3) in a contact's relative position r = sum_s Q_s^T omega_s (the lagged friction,
:mod:`solver.contact_friction`) adds omega_s[i] omega_t[j] H[a, c'] to the entry
(row_i(a), row_j(c')) of the block of bodies (s, t) in the same way.

:class:`ContactBlocks` holds the blocks of one evaluation, keyed by body pair (slots of the
Newton system's unknowns, :meth:`solver.contact.ContactSurface.set_unknowns`); its
:meth:`ContactBlocks.newton_matrix` adds them to the terms' block-sparse Hessian
(:class:`solver.assembly.Assembly`'s pattern) and writes the sum as the CSC matrix SuperLU takes.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from .jit import helper, kernel

#: Multiplier of the body-pair hash (Knuth's multiplicative hashing, the golden ratio times 2^32).
_HASH = 2654435761


@helper
def _slot_of(table_keys, table_index, key, mask):
    """Index of ``key`` in the open-addressing table, -1 where it is absent."""
    h = (key * _HASH) & mask
    while table_keys[h] != -1:
        if table_keys[h] == key:
            return table_index[h]
        h = (h + 1) & mask
    return -1


@helper
def _insert(table_keys, table_index, key, mask, pair_keys, count):
    """Add ``key`` to the open-addressing table and to ``pair_keys`` at ``count`` where it is
    new; returns the new count."""
    h = (key * _HASH) & mask
    while table_keys[h] != -1 and table_keys[h] != key:
        h = (h + 1) & mask
    if table_keys[h] == -1:
        table_keys[h] = key
        table_index[h] = count
        pair_keys[count] = key
        count += 1
    return count


@kernel
def _collect_pairs(indptr, indices, vertex_slot, slot_count, table_keys, table_index, pair_keys, count):
    """Add the body pairs (row slot * slot_count + column slot) of a vertex-space CSC matrix's
    entries to the table and to ``pair_keys`` from ``count`` on; returns the new count."""
    mask = len(table_keys) - 1
    for column in range(len(indptr) - 1):
        column_slot = vertex_slot[column // 3]
        if column_slot < 0:
            continue
        last = -1
        for entry in range(indptr[column], indptr[column + 1]):
            row_slot = vertex_slot[indices[entry] // 3]
            if row_slot < 0 or row_slot == last:
                continue
            last = row_slot
            count = _insert(table_keys, table_index, row_slot * slot_count + column_slot, mask, pair_keys, count)
    return count


@kernel
def _collect_relative_pairs(slots, slot_count, table_keys, table_index, pair_keys, count):
    """Add the body pairs of relative-position Hessians (contacts' ``slots`` (K, 2)) to the table
    and to ``pair_keys`` from ``count`` on; returns the new count."""
    mask = len(table_keys) - 1
    for k in range(len(slots)):
        for s in range(2):
            row_slot = slots[k, s]
            if row_slot < 0:
                continue
            for t in range(2):
                column_slot = slots[k, t]
                if column_slot >= 0:
                    count = _insert(table_keys, table_index, row_slot * slot_count + column_slot, mask, pair_keys,
                                    count)
    return count


@kernel
def _accumulate_relative(slots, omega, hessians, slot_count, table_keys, table_index, blocks):
    """Add each contact's Hessian (K, 3, 3) in its relative position r = sum_s Q_s^T omega_s
    (``omega`` (K, 2, 4)) to the 12x12 blocks of its body pairs: entry (row_i(a), row_j(c)) of
    the block (s, t) gains omega_s[i] omega_t[j] H[a, c]."""
    mask = len(table_keys) - 1
    for k in range(len(slots)):
        for s in range(2):
            row_slot = slots[k, s]
            if row_slot < 0:
                continue
            for t in range(2):
                column_slot = slots[k, t]
                if column_slot < 0:
                    continue
                pair = _slot_of(table_keys, table_index, row_slot * slot_count + column_slot, mask)
                for i in range(4):
                    for j in range(4):
                        weight = omega[k, s, i] * omega[k, t, j]
                        for a in range(3):
                            row = a if i == 0 else 3 + 3 * a + i - 1
                            for c in range(3):
                                column = c if j == 0 else 3 + 3 * c + j - 1
                                blocks[pair, row, column] += weight * hessians[k, a, c]


@kernel
def _accumulate(indptr, indices, data, vertex_slot, weights, slot_count, table_keys, table_index, blocks):
    """Add a vertex-space CSC matrix's entries, mapped through [1, x̄] (``weights`` (V, 4)), to
    the 12x12 blocks (pairs, 12, 12) of their body pairs (indices from the table): per column
    and run of entries whose rows belong to one body, first the sums (4, 3) of w_v[i] h over the
    run's entries of row (v, a), then each sum times w_w[j] into its block."""
    mask = len(table_keys) - 1
    sums = np.empty((4, 3))
    for column in range(len(indptr) - 1):
        w = column // 3
        column_slot = vertex_slot[w]
        if column_slot < 0:
            continue
        c = column % 3
        entry, end = indptr[column], indptr[column + 1]
        while entry < end:
            row_slot = vertex_slot[indices[entry] // 3]
            if row_slot < 0:
                entry += 1
                continue
            sums[:, :] = 0.0
            while entry < end and vertex_slot[indices[entry] // 3] == row_slot:
                v = indices[entry] // 3
                a = indices[entry] % 3
                for i in range(4):
                    sums[i, a] += data[entry] * weights[v, i]
                entry += 1
            pair = _slot_of(table_keys, table_index, row_slot * slot_count + column_slot, mask)
            for i in range(4):
                for a in range(3):
                    row = a if i == 0 else 3 + 3 * a + i - 1
                    blocks[pair, row, c] += sums[i, a] * weights[w, 0]
                    for k in range(3):
                        blocks[pair, row, 3 + 3 * c + k] += sums[i, a] * weights[w, 1 + k]


@kernel
def _merge_pattern(indptr, indices, pair_rows, pair_columns, slot_count):
    """The union (merged indptr (n + 1,), indices (M,)) of a BSR pattern and the sorted body
    pairs (pair_rows, pair_columns), with the position of each BSR block (B,) and each pair
    (P,) in it."""
    merged_indptr = np.zeros(slot_count + 1, np.int64)
    merged = np.empty(len(indices) + len(pair_rows), np.int64)
    block_position = np.empty(len(indices), np.int64)
    pair_position = np.empty(len(pair_rows), np.int64)
    count = 0
    p = 0
    for row in range(slot_count):
        b = indptr[row]
        end = indptr[row + 1]
        while True:
            has_block = b < end
            has_pair = p < len(pair_rows) and pair_rows[p] == row
            if not has_block and not has_pair:
                break
            if has_block and (not has_pair or indices[b] < pair_columns[p]):
                merged[count] = indices[b]
                block_position[b] = count
                b += 1
            elif has_pair and (not has_block or pair_columns[p] < indices[b]):
                merged[count] = pair_columns[p]
                pair_position[p] = count
                p += 1
            else:  # the same block in both
                merged[count] = indices[b]
                block_position[b] = count
                pair_position[p] = count
                b += 1
                p += 1
            count += 1
        merged_indptr[row + 1] = count
    return merged_indptr, merged[:count].copy(), block_position, pair_position


@kernel
def _bsr_to_csc(indptr, indices, blocks):
    """CSC arrays (indptr, indices, data) of the matrix of a structurally symmetric BSR pattern
    (indptr, indices) with values ``blocks`` (M, 12, 12): column 12 j + c holds the rows 12 i + a
    of the blocks (i, j), found as the partners of row j's blocks (j, i)."""
    slot_count = len(indptr) - 1
    csc_indptr = np.zeros(12 * slot_count + 1, np.int64)
    for j in range(slot_count):
        degree = indptr[j + 1] - indptr[j]
        for c in range(12):
            csc_indptr[12 * j + c + 1] = csc_indptr[12 * j + c] + 12 * degree
    total = csc_indptr[-1]
    csc_indices = np.empty(total, np.int32)
    data = np.empty(total)
    for j in range(slot_count):
        for m in range(indptr[j], indptr[j + 1]):
            i = indices[m]
            # the block (i, j): j in row i's sorted columns
            low, high = indptr[i], indptr[i + 1]
            while low < high:
                middle = (low + high) // 2
                if indices[middle] < j:
                    low = middle + 1
                else:
                    high = middle
            partner = low
            offset = 12 * (m - indptr[j])
            for c in range(12):
                start = csc_indptr[12 * j + c] + offset
                for a in range(12):
                    csc_indices[start + a] = 12 * i + a
                    data[start + a] = blocks[partner, a, c]
    return csc_indptr, csc_indices, data


class ContactBlocks:
    """The contact's Hessian at one state as 12x12 blocks of body pairs (slots of the Newton
    system's unknowns).

    Args:
        matrices: vertex-space Hessians (3V, 3V), SciPy CSC (ipctk's barrier Hessian), or an
            empty list.
        vertex_slot: (V,) the slot of each surface vertex's body among the unknowns, -1 for none.
        weights: (V, 4) [1, x̄] of each surface vertex (x̄ body-local, m).
        slot_count: the number of unknown bodies (the Newton system has 12 slot_count rows).
        relative: Hessians in contacts' relative positions (the lagged friction,
            :mod:`solver.contact_friction`), each (slots (K, 2) int64 of the contacts' two
            bodies, -1 for none; omega (K, 2, 4); Hessians (K, 3, 3)): contact k's relative
            position is r_k = sum_s Q_s^T omega_ks, Q_s = [p; A^T] of body s.

    Attributes:
        rows, columns: (P,) the slots of each body pair, sorted by row, then column; every pair
            in both orders (the Hessians are symmetric).
        values: (terms, P, 12, 12) the blocks of each matrix, then of each relative term.
    """

    def __init__(self, matrices: list, vertex_slot: np.ndarray, weights: np.ndarray, slot_count: int,
                 relative: tuple = ()):
        self.slot_count = int(slot_count)
        capacity = sum(int(m.nnz) for m in matrices) + sum(4 * len(term[0]) for term in relative)
        size = 1 << max(4, int(2 * min(capacity, self.slot_count**2) + 1).bit_length())
        table_keys = np.full(size, -1, np.int64)
        table_index = np.empty(size, np.int64)
        keys = np.empty(min(capacity, self.slot_count**2), np.int64)
        count = 0
        csc = [scipy.sparse.csc_matrix(m) for m in matrices]
        for m in csc:
            count = _collect_pairs(m.indptr.astype(np.int64), m.indices.astype(np.int64), vertex_slot,
                                   self.slot_count, table_keys, table_index, keys, count)
        for slots, _, _ in relative:
            count = _collect_relative_pairs(slots, self.slot_count, table_keys, table_index, keys, count)
        values = np.zeros((len(csc) + len(relative), count, 12, 12))
        for k, m in enumerate(csc):
            _accumulate(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data, vertex_slot, weights,
                        self.slot_count, table_keys, table_index, values[k])
        for k, (slots, omega, hessians) in enumerate(relative):
            _accumulate_relative(slots, omega, hessians, self.slot_count, table_keys, table_index,
                                 values[len(csc) + k])
        order = np.argsort(keys[:count], kind="stable")
        self.rows, self.columns = np.divmod(keys[:count][order], self.slot_count)
        self.values = values[:, order]

    def total(self) -> np.ndarray:
        """(P, 12, 12) the blocks of the matrices' sum."""
        return self.values.sum(axis=0)

    def diagonal(self, matrix: int = 0) -> np.ndarray:
        """(slot_count, 12, 12) the diagonal blocks of matrix ``matrix`` (zeros where a body has none)."""
        blocks = np.zeros((self.slot_count, 12, 12))
        on_diagonal = self.rows == self.columns
        blocks[self.rows[on_diagonal]] = self.values[matrix, on_diagonal]
        return blocks

    def newton_matrix(self, indptr: np.ndarray | None = None, indices: np.ndarray | None = None,
                      blocks: np.ndarray | None = None) -> scipy.sparse.csc_matrix:
        """The CSC matrix (12 slot_count, 12 slot_count) of the contact blocks plus those of a
        structurally symmetric BSR matrix (``indptr`` (slot_count + 1,), ``indices``, ``blocks``
        (B, 12, 12): :class:`solver.assembly.Assembly`'s pattern and values; none: the contact's
        alone)."""
        if indptr is None or indices is None or blocks is None:
            indptr, indices, blocks = np.zeros(self.slot_count + 1, np.int64), np.zeros(0, np.int64), np.zeros(
                (0, 12, 12))
        merged_indptr, merged_indices, block_position, pair_position = _merge_pattern(
            np.asarray(indptr, np.int64), np.asarray(indices, np.int64), self.rows, self.columns, self.slot_count)
        merged = np.zeros((len(merged_indices), 12, 12))
        merged[block_position] = blocks
        merged[pair_position] += self.total()  # each pair has its own position
        csc_indptr, csc_indices, data = _bsr_to_csc(merged_indptr, merged_indices, merged)
        size = 12 * self.slot_count
        return scipy.sparse.csc_matrix((data, csc_indices, csc_indptr), shape=(size, size))
