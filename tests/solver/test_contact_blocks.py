"""Contact Hessians in body blocks (solver.contact_blocks) against the chain rule J^T H J written
out densely, and the Newton matrix they make with a block-sparse pattern against the dense sum."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from solver.contact_blocks import ContactBlocks


def vertex_jacobian(weights: np.ndarray, vertex_slot: np.ndarray, slot_count: int) -> np.ndarray:
    """Dense J (3V, 12 slots): coordinate a of vertex v is q_a + sum_c q_{3 + 3a + c} x̄_c of its body."""
    jacobian = np.zeros((3 * len(weights), 12 * slot_count))
    for v, slot in enumerate(vertex_slot):
        if slot < 0:
            continue
        for a in range(3):
            jacobian[3 * v + a, 12 * slot + a] = 1.0
            jacobian[3 * v + a, 12 * slot + 3 + 3 * a: 12 * slot + 6 + 3 * a] = weights[v, 1:]
    return jacobian


def random_vertex_hessian(rng, vertex_count: int, pairs: list[tuple[int, int]]) -> scipy.sparse.csc_matrix:
    """A symmetric (3V, 3V) matrix with a random 6x6 block on each vertex pair (v, w) and its transpose."""
    dense = np.zeros((3 * vertex_count, 3 * vertex_count))
    for v, w in pairs:
        block = rng.normal(size=(6, 6))
        block = block + block.T
        index = np.r_[3 * v: 3 * v + 3, 3 * w: 3 * w + 3]
        dense[np.ix_(index, index)] += block
    return scipy.sparse.csc_matrix(dense)


@pytest.mark.parametrize("pattern", ["diagonal", "coupled"])
def test_body_blocks_and_newton_matrix_match_the_dense_chain_rule(pattern):
    rng = np.random.default_rng(1)
    # 4 bodies of 3 vertices each; body 2 is fixed (no slot): its rows and columns drop out.
    vertex_body = np.repeat(np.arange(4), 3)
    body_slot = np.array([0, 1, -1, 2])
    vertex_slot = body_slot[vertex_body]
    weights = np.concatenate([np.ones((12, 1)), rng.normal(scale=0.3, size=(12, 3))], axis=1)
    barrier = random_vertex_hessian(rng, 12, [(0, 4), (1, 7), (5, 10), (2, 11), (3, 3), (8, 6)])
    friction = random_vertex_hessian(rng, 12, [(0, 4), (9, 1)])
    blocks = ContactBlocks([barrier, friction], vertex_slot, weights, 3)

    jacobian = vertex_jacobian(weights, vertex_slot, 3)
    expected_contact = jacobian.T @ (barrier + friction).toarray() @ jacobian
    assert np.allclose(blocks.newton_matrix().toarray(), expected_contact, rtol=1e-12, atol=1e-12)
    expected_barrier = jacobian.T @ barrier.toarray() @ jacobian
    for slot in range(3):
        rows = slice(12 * slot, 12 * slot + 12)
        assert np.allclose(blocks.diagonal(0)[slot], expected_barrier[rows, rows], rtol=1e-12, atol=1e-12)

    # the terms' block-sparse pattern: every diagonal block, and (0, 2)/(2, 0) where coupled
    pairs = [(0, 0), (1, 1), (2, 2)] + ([(0, 2), (2, 0)] if pattern == "coupled" else [])
    pairs.sort()
    indptr = np.searchsorted([p[0] for p in pairs], np.arange(4)).astype(np.int64)
    indices = np.array([p[1] for p in pairs], dtype=np.int64)
    values = rng.normal(size=(len(pairs), 12, 12))
    for k, (i, j) in enumerate(pairs):  # symmetric: block (j, i) is block (i, j) transposed
        values[k] = values[pairs.index((j, i))].T if (j, i) < (i, j) else values[k]
        if i == j:
            values[k] = values[k] + values[k].T
    terms = scipy.sparse.bsr_matrix((values, indices, indptr), shape=(36, 36)).toarray()
    matrix = blocks.newton_matrix(indptr, indices, values)
    assert isinstance(matrix, scipy.sparse.csc_matrix)
    assert np.allclose(matrix.toarray(), terms + expected_contact, rtol=1e-12, atol=1e-12)


def test_no_contact_gives_the_terms_matrix_alone():
    blocks = ContactBlocks([], np.zeros(0, dtype=np.int64), np.zeros((0, 4)), 2)
    indptr, indices = np.array([0, 1, 2], dtype=np.int64), np.array([0, 1], dtype=np.int64)
    values = np.stack([np.eye(12), 2.0 * np.eye(12)])
    assert np.array_equal(blocks.newton_matrix(indptr, indices, values).toarray(),
                          np.diag(np.r_[np.ones(12), 2.0 * np.ones(12)]))
