"""The Newton system's direct solver (solver/linear_solver.py) against SciPy's sparse solve.

Each test builds a symmetric positive definite block matrix of 12x12 blocks on a body graph,
solves it with :class:`LinearSolver` and compares with ``scipy.sparse.linalg.spsolve`` of the
same matrix.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

from solver.assembly import Assembly
from solver.linear_solver import LinearSolver, SingularSystem, failing_block
import benchmark_modules

_benchmark = benchmark_modules.load("linear_solvers")


def block_pattern_system(edges: list[tuple[int, int]], count: int, seed: int, definite: bool = True):
    """(indptr, indices: the BSR pattern; block values (blocks, 12, 12); the matrix as SciPy
    CSR) of a random SPD matrix (or an indefinite one) on ``count`` bodies coupled along
    ``edges`` (each pair an element of two bodies): ``benchmarks/linear_solvers.py``'s."""
    indptr, indices, blocks = _benchmark.newton_system(edges, count, seed, 1.0 if definite else -50.0)
    matrix = scipy.sparse.bsr_matrix((blocks, indices, indptr), shape=(12 * count, 12 * count)).tocsr()
    return indptr, indices, blocks, matrix


def block_system(edges: list[tuple[int, int]], count: int, seed: int, definite: bool = True):
    """(LinearSolver, block values (blocks, 12, 12), the matrix as SciPy CSR) of
    :func:`block_pattern_system`."""
    indptr, indices, blocks, matrix = block_pattern_system(edges, count, seed, definite)
    return LinearSolver(indptr, indices), blocks, matrix


def chain(count: int) -> list[tuple[int, int]]:
    return [(k, k + 1) for k in range(count - 1)]


def test_chain_in_its_own_order_is_solved_banded_without_permutation():
    solver, blocks, matrix = block_system(chain(30), 30, seed=1)
    assert solver.method == "banded" and solver.bandwidth == 23
    assert np.array_equal(solver.order, np.arange(30))
    right_hand_side = np.random.default_rng(2).normal(size=solver.size)
    kept = right_hand_side.copy()
    solution = solver.solve(blocks, right_hand_side)
    assert np.array_equal(right_hand_side, kept)  # the input is not overwritten
    np.testing.assert_allclose(solution, scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side),
                               rtol=1e-9, atol=1e-12)


def test_shuffled_chain_is_reordered_to_a_narrow_band():
    """A chain whose bodies are numbered at random: its own order is wide, reverse Cuthill-McKee
    finds the one-block band again, and the solves permute to it and back."""
    labels = np.random.default_rng(3).permutation(40)
    edges = [(int(labels[k]), int(labels[k + 1])) for k in range(39)]
    solver, blocks, matrix = block_system(edges, 40, seed=4)
    assert solver.method == "banded" and solver.bandwidth == 23
    assert not np.array_equal(solver.order, np.arange(40))
    right_hand_side = np.random.default_rng(5).normal(size=solver.size)
    solver.factorize(blocks)
    for _ in range(2):  # the same factorisation serves several solves
        np.testing.assert_allclose(solver.solve_factorized(right_hand_side),
                                   scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side), rtol=1e-9, atol=1e-12)


def test_wide_graph_goes_to_superlu():
    """A star of 80 bodies around a hub: any order leaves half the leaves far from the hub, so
    the band would be mostly zeros; SuperLU solves it."""
    edges = [(0, leaf) for leaf in range(1, 81)]
    solver, blocks, matrix = block_system(edges, 81, seed=6)
    assert solver.method == "superlu"
    right_hand_side = np.random.default_rng(7).normal(size=solver.size)
    np.testing.assert_allclose(solver.solve(blocks, right_hand_side),
                               scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side), rtol=1e-8, atol=1e-11)


def test_indefinite_matrix_is_refused():
    solver, blocks, _ = block_system(chain(5), 5, seed=8, definite=False)
    with pytest.raises(SingularSystem, match="not positive definite"):
        solver.factorize(blocks)


def test_scipy_matrix_of_the_blocks_is_symmetric():
    """The block values fill the lower and the upper triangle (the banded path reads the lower one)."""
    _, _, matrix = block_system(chain(6), 6, seed=9)
    assert scipy.sparse.linalg.norm(matrix - matrix.T) < 1e-12 * scipy.sparse.linalg.norm(matrix)


@pytest.mark.parametrize("shuffled", [False, True])
def test_constant_band_plus_element_hessians_is_the_assembled_matrix(shuffled):
    """factorize_sum (the Newton loop's banded path: element Hessians from a flat buffer scattered
    straight into a copy of the constant terms' band) solves as the assembled block values do, in the bodies' own
    order and after a reordering (where element blocks above the diagonal become ones below)."""
    rng = np.random.default_rng(6)
    labels = rng.permutation(25) if shuffled else np.arange(25)
    element_bodies = [np.arange(25).reshape(-1, 1),
                      np.array([(labels[k], labels[k + 1]) for k in range(24)], dtype=np.int64)]
    assembly = Assembly(np.arange(25), element_bodies)
    solver = LinearSolver(assembly.indptr, assembly.indices)
    assert solver.method == "banded" and np.array_equal(solver.order, np.arange(25)) != shuffled
    constant = [(np.zeros((25, 12)), np.eye(12) * rng.uniform(1.0, 2.0, (25, 1, 1))), None]
    factor = rng.normal(size=(24, 24, 24))
    pairs = factor @ factor.transpose(0, 2, 1) / 24
    constant_blocks = assembly.assemble(constant, element_bodies)[1]
    _, blocks = assembly.assemble([None, (np.zeros((24, 24)), pairs)], element_bodies, constant_blocks.copy())
    right_hand_side = rng.normal(size=solver.size)
    band = solver.constant_band(constant_blocks)
    kept = band.copy()
    solver.factorize_sum(band, pairs.reshape(-1), solver.element_band_map([assembly.block_indices[1]], [0]))
    summed = solver.solve_factorized(right_hand_side)
    assert np.array_equal(band, kept)  # the constant band is reused, not consumed
    solver.factorize(blocks)
    np.testing.assert_allclose(summed, solver.solve_factorized(right_hand_side), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(summed, scipy.sparse.linalg.spsolve(assembly.matrix(blocks).tocsc(), right_hand_side),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shuffled", [False, True])
def test_solve_sum_gives_the_summed_gradient_and_its_newton_step(shuffled):
    """solve_sum (the banded path's chord and Newton steps: flat element gradients summed and
    -H^-1 g solved by LAPACK's dpbtrs from compiled code) gives the gradient that the assembly
    sums, bit for bit, and the step of a dense solve, on a factor's first solve (lower storage) and
    its later ones (upper storage), in the bodies' own order and after a reordering."""
    rng = np.random.default_rng(8)
    labels = rng.permutation(25) if shuffled else np.arange(25)
    element_bodies = [np.arange(25).reshape(-1, 1),
                      np.array([(labels[k], labels[k + 1]) for k in range(24)], dtype=np.int64)]
    assembly = Assembly(np.arange(25), element_bodies)
    solver = LinearSolver(assembly.indptr, assembly.indices)
    assert solver.method == "banded" and np.array_equal(solver.order, np.arange(25)) != shuffled
    constant = [(np.zeros((25, 12)), np.eye(12) * rng.uniform(1.0, 2.0, (25, 1, 1))), None]
    factor = rng.normal(size=(24, 24, 24))
    pairs = factor @ factor.transpose(0, 2, 1) / 24
    constant_blocks = assembly.assemble(constant, element_bodies)[1]
    _, blocks = assembly.assemble([None, (np.zeros((24, 24)), pairs)], element_bodies, constant_blocks.copy())
    gradients = [rng.normal(size=(25, 12)), rng.normal(size=(24, 24))]
    flat, rows = np.concatenate([g.reshape(-1) for g in gradients]), assembly.gradient_rows(element_bodies)
    expected = assembly.assemble([(g, None) for g in gradients], element_bodies, blocks.copy())[0]
    dense = assembly.matrix(blocks).toarray()
    solver.factorize(blocks)
    solver.solve_sum(flat, rows)
    solver.factorize(blocks)  # after a factor that served one solve, the next is solved in lower storage first
    for _ in range(3):
        gradient, step = solver.solve_sum(flat, rows)
        assert np.array_equal(gradient, expected)
        np.testing.assert_allclose(step, np.linalg.solve(dense, -gradient), rtol=1e-9, atol=1e-12)
    assert np.array_equal(solver.solve_factorized(-gradient), step)


def test_factorize_sum_is_refused_on_the_superlu_path():
    solver, _, _ = block_system([(0, k) for k in range(1, 40)], 40, seed=7)
    assert solver.method == "superlu"
    with pytest.raises(ValueError, match="banded path"):
        solver.factorize_sum(None, np.zeros(0), ())
    with pytest.raises(ValueError, match="banded path"):
        solver.solve_sum(np.zeros(0), np.zeros(0, dtype=np.int64))


@pytest.mark.parametrize("size, bandwidth", [(12, 11), (36, 23), (120, 23), (60, 47)])
def test_band_transpose_moves_the_factor_into_upper_storage(size, bandwidth):
    """_transpose_band: LAPACK lower band storage of L in, upper band storage of L^T out, every
    entry of the matrix in place (compared through dense matrices), for bands as wide as the
    matrix allows and narrower."""
    from solver.linear_solver import _transpose_band

    rng = np.random.default_rng(size + bandwidth)
    lower = np.asfortranarray(rng.normal(size=(bandwidth + 1, size)))
    dense = np.zeros((size, size))
    for d in range(bandwidth + 1):
        dense[np.arange(d, size), np.arange(size - d)] = lower[d, : size - d]  # L[j + d, j]
    upper = np.zeros((bandwidth + 1, size), order="F")
    _transpose_band(lower, upper)
    transposed = np.zeros((size, size))
    for d in range(bandwidth + 1):
        transposed[np.arange(size - d), np.arange(d, size)] = upper[bandwidth - d, d:]  # U[j - d, j]
    np.testing.assert_array_equal(transposed, dense.T)


@pytest.mark.parametrize("solves_per_factor", [[1, 1, 3, 1, 2], [4, 1, 1, 1]])
def test_factors_solved_in_either_storage_give_the_same_solutions(monkeypatch, solves_per_factor):
    """After a factor that served a single solve the next one is solved in lower storage and
    moved into upper storage only at its second solve; after one that served more it is moved at
    once. Every solve matches SciPy's, whichever storage served it."""
    from solver import linear_solver

    moves = []
    transpose = linear_solver._transpose_band
    monkeypatch.setattr(linear_solver, "_transpose_band", lambda *bands: (moves.append(1), transpose(*bands)))
    solver, _, _ = block_system(chain(20), 20, seed=20)
    rng = np.random.default_rng(21)
    expected_moves = 0
    previous = 0
    for factor, solves in enumerate(solves_per_factor):
        _, blocks, matrix = block_system(chain(20), 20, seed=30 + factor)
        solver.factorize(blocks)
        expected_moves += previous != 1 or solves > 1
        for _ in range(solves):
            right_hand_side = rng.normal(size=solver.size)
            np.testing.assert_allclose(solver.solve_factorized(right_hand_side),
                                       scipy.sparse.linalg.spsolve(matrix.tocsc(), right_hand_side),
                                       rtol=1e-9, atol=1e-12)
        previous = solves
    assert len(moves) == expected_moves


def test_a_failed_factorisation_leaves_no_factor_to_solve_with():
    solver, blocks, _ = block_system(chain(5), 5, seed=22)
    solver.factorize(blocks)
    solver.solve_factorized(np.ones(solver.size))  # a factor that served one solve: the next stays in lower storage
    _, indefinite, _ = block_system(chain(5), 5, seed=23, definite=False)
    with pytest.raises(SingularSystem):
        solver.factorize(indefinite)
    with pytest.raises(ValueError, match="no factorisation to solve with"):
        solver.solve_factorized(np.ones(solver.size))


def block_rows_and_columns(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(blocks,) block row and block column of each block of the BSR pattern."""
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)), np.asarray(indices)


def test_failing_block_is_the_body_whose_pivot_fails_in_any_numbering():
    """A shuffled chain (the diagnostic reorders it) and a star (no narrow band) whose body 17's
    diagonal block is made indefinite: the Cholesky fails there whatever the order of the others,
    for a sparse matrix and the same as an array; the SPD matrix names none."""
    labels = np.random.default_rng(30).permutation(40)
    shuffled = [(int(labels[k]), int(labels[k + 1])) for k in range(39)]
    star = [(0, leaf) for leaf in range(1, 40)]
    for edges in (shuffled, star):
        indptr, indices, blocks, matrix = block_pattern_system(edges, 40, seed=31)
        assert failing_block(matrix) is None
        rows, columns = block_rows_and_columns(indptr, indices)
        blocks[(rows == 17) & (columns == 17)] -= 1e3 * np.eye(12)
        indefinite = scipy.sparse.bsr_matrix((blocks, indices, indptr), shape=matrix.shape)
        assert failing_block(indefinite) == 17
        assert failing_block(indefinite.toarray()) == 17


def test_exactly_singular_superlu_system_names_its_block():
    """SuperLU tells no failing row: the SingularSystem it raises carries the block of the
    diagnostic Cholesky (:func:`failing_block`), here the leaf whose rows are all zero."""
    edges = [(0, leaf) for leaf in range(1, 81)]
    indptr, indices, blocks, _ = block_pattern_system(edges, 81, seed=32)
    solver = LinearSolver(indptr, indices)
    assert solver.method == "superlu"
    rows, columns = block_rows_and_columns(indptr, indices)
    blocks[(rows == 44) | (columns == 44)] = 0.0
    with pytest.raises(SingularSystem, match="singular") as caught:
        solver.factorize(blocks)
    assert caught.value.block == 44
