"""Shared helpers of the constitutions: Numba kernels for the q -> F -> E(F) pattern, and input checks.

Source: docs/constitutions/affine_body.md (J(x_bar), the direction Jacobian); libuipc's F-space
factoring of every joint energy and its ``make_spd`` (symmetric eigendecomposition, negative
eigenvalues clamped to 0).

Every energy is written as q_e -> F = J_F q_e -> E(F), where q_e is the element's stacked DOFs
(12 per body, body i first) and J_F a constant (m, 12 k) Jacobian built once per element. Then
gradient = J_Fᵀ ∇_F E and Hessian = J_Fᵀ H_F J_F, with H_F projected to PSD for nonlinear energies.

The compiled functions here are helpers (:data:`solver.jit.helper`), called only from the
per-constitution kernels; the J_F are built at construction from the batched point/direction
Jacobians of :mod:`solver.affine_body`; the plain-Python functions at the end convert and check
constructor arguments and per-step inputs, and :class:`BoundTerm` is what a term's ``bind``
returns: its kernels with those inputs checked once, for the calls of one time step.
Note: Numba's on-disk cache of a caller is not invalidated when only this module changes; clear
``$NUMBA_CACHE_DIR`` after editing it.

Threading: most per-constitution element loops are written with ``numba.prange`` (each iteration
writes only its own element's outputs; energies are a single ``+=`` reduction), but compiled
without ``parallel=True``: threads pay only on thousands of elements, while ``parallel=True``
lengthens the first compilation and adds a fork/join cost to every call (docs/performance.md,
"Known gaps"). Compiling such a kernel with ``parallel=True`` (a
decorator beside :data:`solver.jit.kernel`) is the only change needed to thread it. The energy,
gradient-only and readout kernels of the joints (called several times per time step) loop with
``range`` over scratch arrays allocated once per call (:func:`gather_dofs_into`,
:func:`apply_jacobian_into`) rather than a small allocation per element; threading those needs
a scratch array per thread.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from ..jit import helper

# ---------------------------------------------------------------------------------------------
# Small dense linear algebra
# ---------------------------------------------------------------------------------------------


@helper
def project_psd(hessian):
    """PSD projection of a symmetric matrix (m, m): eigen-decompose, clamp eigenvalues < 0 to 0.

    Returns the symmetrised input itself (a new array) when its smallest eigenvalue is already
    >= 0, so an already-PSD matrix is returned unchanged up to symmetrisation round-off.
    Source: libuipc's ``make_spd``.
    """
    m = hessian.shape[0]
    symmetric = np.empty((m, m))
    for r in range(m):
        for c in range(m):
            symmetric[r, c] = 0.5 * (hessian[r, c] + hessian[c, r])
    values, vectors = np.linalg.eigh(symmetric)
    if values[0] >= 0.0:  # eigh sorts ascending
        return symmetric
    projected = np.zeros((m, m))
    for k in range(m):
        value = values[k]
        if value > 0.0:
            for r in range(m):
                scaled = value * vectors[r, k]
                for c in range(m):
                    projected[r, c] += scaled * vectors[c, k]
    return projected


@helper
def dot3(a, b):
    """a · b of two 3-vectors."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@helper
def add_identity_block(matrix, row, column, value):
    """matrix[row:row+3, column:column+3] += value * I3 (in place)."""
    for k in range(3):
        matrix[row + k, column + k] += value


@helper
def add_outer_block(matrix, row, column, scale, a, b):
    """matrix[row:row+len(a), column:column+len(b)] += scale * a bᵀ (in place)."""
    for r in range(a.shape[0]):
        scaled = scale * a[r]
        for c in range(b.shape[0]):
            matrix[row + r, column + c] += scaled * b[c]


@helper
def add_outer(matrix, scale, a, b):
    """matrix += scale * a bᵀ (in place), a (m,), b (m,)."""
    for r in range(a.shape[0]):
        scaled = scale * a[r]
        for c in range(b.shape[0]):
            matrix[r, c] += scaled * b[c]


# ---------------------------------------------------------------------------------------------
# Affine-body Jacobians and mass matrix in structured form (docs/constitutions/affine_body.md)
# ---------------------------------------------------------------------------------------------
# J(x̄) = [I3 | e1 x̄ᵀ | e2 x̄ᵀ | e3 x̄ᵀ] and M = [[m I3, I3 ⊗ (m x̄)ᵀ], [I3 ⊗ (m x̄), I3 ⊗ S]] applied
# from their 3 or 13 defining numbers instead of stored (3, 12) or (12, 12) matrices, by the
# gradient-only, energy and readout kernels that run several times per time step (they then read
# far less memory). These helpers take whole arrays and element indices, not per-element views: a
# view costs a reference-count increment and decrement per element.


@helper
def point_separation(q, i, j, points_i, points_j, e, end, k):
    """Component k of J(x̄_i) q_i − J(x̄_j) q_j, m: the separation of a point's two copies, carried
    by body i at its local x̄_i = points_i[e, end] (3,) and by body j at x̄_j = points_j[e, end]
    (J(x̄) q = p + A x̄, A's rows a_k = q[body, 3 + 3k : 6 + 3k])."""
    value = q[i, k] - q[j, k]
    for c in range(3):
        value += q[i, 3 + 3 * k + c] * points_i[e, end, c] - q[j, 3 + 3 * k + c] * points_j[e, end, c]
    return value


@helper
def direction_into(q, body, directions, e, index, out, offset):
    """out[offset:offset + 3] = A v̄, the world image of the body-local direction v̄ = directions[e, index] (3,)."""
    for k in range(3):
        value = 0.0
        for c in range(3):
            value += q[body, 3 + 3 * k + c] * directions[e, index, c]
        out[offset + k] = value


@helper
def dyadic_product_into(mass, mass_x_bar, second_moment, e, delta, out, row):
    """out[row] (12,) = M delta for the ABD mass matrix M of element e's (m, m x̄, S) (mass (n,),
    mass_x_bar (n, 3), second_moment (n, 3, 3); :func:`solver.affine_body.mass_matrix`),
    delta (12,) = [δp, δa1, δa2, δa3]; ``out`` is 2-D so that a kernel writes its output rows
    directly (through a scratch array and a copy it took twice as long)."""
    for k in range(3):
        block = 3 + 3 * k
        value = mass[e] * delta[k]
        for j in range(3):
            value += mass_x_bar[e, j] * delta[block + j]
        out[row, k] = value
        for i in range(3):
            value = mass_x_bar[e, i] * delta[k]
            for j in range(3):
                value += second_moment[e, i, j] * delta[block + j]
            out[row, block + i] = value


# ---------------------------------------------------------------------------------------------
# Element DOFs and the F-space mapping
# ---------------------------------------------------------------------------------------------


@helper
def gather_dofs(q, body_row):
    """Stacked DOFs (12 k,) of the k bodies ``body_row`` (k,) from the global q (n_bodies, 12)."""
    q_element = np.empty(12 * body_row.shape[0])
    gather_dofs_into(q, body_row, q_element)
    return q_element


@helper
def gather_dofs_into(q, body_row, q_element):
    """:func:`gather_dofs` into an existing (12 k,) array: element loops reuse one buffer instead
    of allocating one per element (small allocations dominated the gradient-only kernels)."""
    for b in range(body_row.shape[0]):
        body = body_row[b]
        for d in range(12):
            q_element[12 * b + d] = q[body, d]


@helper
def apply_jacobian(jacobian, q_element):
    """F = J_F q_element, J_F (m, d), q_element (d,) -> (m,)."""
    F = np.empty(jacobian.shape[0])
    apply_jacobian_into(jacobian, q_element, F)
    return F


@helper
def apply_jacobian_into(jacobian, q_element, F):
    """:func:`apply_jacobian` into an existing (m,) array ``F``."""
    m, d = jacobian.shape
    for r in range(m):
        total = 0.0
        for a in range(d):
            total += jacobian[r, a] * q_element[a]
        F[r] = total


@helper
def add_derivatives(gradient, hessian, gradient_term, hessian_term):
    """gradient (m,) += gradient_term, hessian (m, m) += hessian_term, in place (explicit loops:
    the array expression ``+=`` makes Numba compile a loop of its own at every use)."""
    for r in range(gradient.shape[0]):
        gradient[r] += gradient_term[r]
        for c in range(gradient.shape[0]):
            hessian[r, c] += hessian_term[r, c]


@helper
def add_mapped_derivatives(jacobian, gradient_F, hessian_F, gradient, hessian):
    """Map F-space derivatives to q and accumulate: gradient += J_Fᵀ ∇_F E, hessian += J_Fᵀ H_F J_F.

    Args:
        jacobian: (m, d) constant F-Jacobian J_F (sparse entries are skipped).
        gradient_F: (m,) ∇_F E.
        hessian_F: (m, m) H_F (projected by the caller if needed).
        gradient: (d,) output, updated in place.
        hessian: (d, d) output, updated in place.
    """
    m, d = jacobian.shape
    add_mapped_derivatives_into(jacobian, gradient_F, hessian_F, gradient, hessian, mapping_scratch(m, d))


@helper
def mapping_scratch(m, d):
    """Work arrays of :func:`add_mapped_derivatives_into` for an (m, d) F-Jacobian: column
    indices (m, d), values (m, d), counts (m,) of each row's non-zeros, and H_F J_F (m, d)."""
    return np.empty((m, d), dtype=np.int64), np.empty((m, d)), np.empty(m, dtype=np.int64), np.empty((m, d))


@helper
def add_mapped_derivatives_into(jacobian, gradient_F, hessian_F, gradient, hessian, scratch):
    """:func:`add_mapped_derivatives` with its work arrays from :func:`mapping_scratch` (an
    element loop allocates them once)."""
    columns, values, counts, product = scratch
    m, d = jacobian.shape
    # The non-zero entries of each row of J_F (a joint's F rows each read a few of the 24 DOFs):
    # H_F J_F and J_Fᵀ (H_F J_F) then cost O(m² k + m k d) for k non-zeros per row, not O(m² d + m d²).
    for r in range(m):
        counts[r] = 0
        for a in range(d):
            j = jacobian[r, a]
            if j != 0.0:
                columns[r, counts[r]] = a
                values[r, counts[r]] = j
                counts[r] += 1
                gradient[a] += j * gradient_F[r]
    for r in range(m):
        for a in range(d):
            product[r, a] = 0.0
        for s in range(m):
            h = hessian_F[r, s]
            if h != 0.0:
                for k in range(counts[s]):
                    product[r, columns[s, k]] += h * values[s, k]
    for r in range(m):
        for k in range(counts[r]):
            a, j = columns[r, k], values[r, k]
            for b in range(d):
                hessian[a, b] += j * product[r, b]


@helper
def scalar_function_hessian_F(first, second, gradient_x, hessian_x, exact):
    """F-space Hessian of E = f(x(F)): f'' ∇x ∇xᵀ + P(f' ∇²x).

    The Gauss-Newton part f'' ∇x ∇xᵀ is PSD when f'' >= 0; unless ``exact`` the geometric part is
    projected as the *product* f' ∇²x (docs/constitutions/669_prismatic_joint_limit.md), never ∇²x alone.

    Args:
        first: f'(x).
        second: f''(x).
        gradient_x: (m,) ∇_F x.
        hessian_x: (m, m) ∇²_F x.
        exact: None (projected) or True (exact), see :func:`exact_argument`.

    Returns:
        (m, m) Hessian.
    """
    m = gradient_x.shape[0]
    geometric = np.empty((m, m))
    for r in range(m):
        for c in range(m):
            geometric[r, c] = first * hessian_x[r, c]
    if exact is None:  # resolved at compile time: the exact specialisation has no eigendecomposition
        if first != 0.0:
            geometric = project_psd(geometric)
    add_outer(geometric, second, gradient_x, gradient_x)
    return geometric


# ---------------------------------------------------------------------------------------------
# Plain-Python argument checks (constructor and per-step attributes)
# ---------------------------------------------------------------------------------------------


def as_float_array(value, shape: tuple, name: str) -> np.ndarray:
    """Copy ``value`` to a C-contiguous float64 array of exactly ``shape``.

    Raises:
        ValueError: wrong shape or non-finite entries.
    """
    array = np.array(value, dtype=np.float64, order="C", copy=True)
    if array.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: non-finite entries")
    return array


def as_float_view(value, shape: tuple, name: str) -> np.ndarray:
    """Like :func:`as_float_array` but without copying when ``value`` is already suitable (per-call use)."""
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {array.shape}")
    return array


def exact_argument(project: bool):
    """The kernels' ``exact`` argument for a public ``project`` flag: None to project, True for the exact Hessian.

    The kernels branch on ``exact is None``, which Numba resolves while compiling (dead-branch
    pruning on the argument's type), so the projected specialisation that the Newton loop uses
    is compiled without the exact Hessian code, and the other way round: a bool argument would
    compile both paths into every kernel (about 1 s more of the first compilation).
    """
    return None if project else True


def element_outputs(out, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-element output arrays: gradient (n, size) and Hessian (n, size, size), float64, C order.

    ``out`` is None (new arrays) or a (gradient, hessian) pair that is checked and reused, so that a
    caller stepping many times fills the same memory instead of fresh pages each iteration.

    Raises:
        ValueError: when ``out`` has the wrong shapes, dtype or layout.
    """
    if out is None:
        return np.empty((n, size)), np.empty((n, size, size))
    gradient, hessian = out
    for array, shape, name in ((gradient, (n, size), "gradient"), (hessian, (n, size, size), "hessian")):
        if array.shape != shape or array.dtype != np.float64 or not array.flags.c_contiguous:
            raise ValueError(f"out {name}: expected a C-contiguous float64 array of shape {shape}, got "
                             f"{array.dtype} {array.shape}")
    return gradient, hessian


class CurvatureProjection:
    """Descriptor of a term's ``curvature_projection``: the weight w in [0, 1] with which its
    Newton-loop Hessian (``bind(project=True)``) holds its PSD modification (a term-wise
    projection's correction, or a shift), 1 by default (fully modified, PSD), 0 for the exact
    Hessian. Read at every call of a bound Hessian kernel, so that
    :meth:`solver.potential.IncrementalPotential.factorize` can try the exact Hessians first and
    fall back within a step.

    Raises:
        ValueError: on setting a value outside [0, 1] or NaN.
    """

    def __set_name__(self, owner, name: str) -> None:
        self._attribute = "_" + name

    def __get__(self, term, owner=None):
        if term is None:
            return self
        return getattr(term, self._attribute, 1.0)

    def __set__(self, term, value: float) -> None:
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"curvature_projection must be in [0, 1], got {value}")
        setattr(term, self._attribute, float(value))


class BoundTerm(NamedTuple):
    """An energy term's kernels with its parameters and per-step inputs checked once and bound
    (the terms' ``bind(*inputs, project=True)``), for the many calls of one time step: the Newton
    loop checks a term's inputs once per step, not at each of its ten or so calls (at 10 bodies
    those checks cost more than the kernels).

    Each callable takes q (n_bodies, 12), a C-contiguous float64 array already checked by
    :func:`check_state` against the term's ``state_rows``:

    - ``energy(q)`` -> float, the term's energy, J;
    - ``gradient(q, out=None)`` -> (n, 12 k) per-element gradients, written into ``out`` (n, 12 k)
      where given, else into a new array, or None where the term has no gradient-only kernel
      (then take the gradient from ``gradient_hessian``);
    - ``gradient_hessian(q, gradient, hessian)`` fills the per-element gradient (n, 12 k) and
      Hessian (n, 12 k, 12 k), PSD-projected where ``bind`` was asked to project.

    The parameters and inputs are those at the moment of binding: bind again after changing one.
    """

    energy: Callable[[np.ndarray], float]
    gradient: Optional[Callable[..., np.ndarray]]
    gradient_hessian: Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def bound_kernels(energy_kernel, gradient_hessian_kernel, arguments: tuple, project: bool) -> BoundTerm:
    """The :class:`BoundTerm` of a term whose two compiled kernels take q, then ``arguments`` (its
    parameters and per-step inputs, already checked): ``energy_kernel(q, *arguments)`` and
    ``gradient_hessian_kernel(q, *arguments, exact, gradient, hessian)``, with ``exact`` from
    ``project`` (:func:`exact_argument`); no gradient-only kernel."""
    exact = exact_argument(project)

    def energy(q):
        return float(energy_kernel(q, *arguments))

    def gradient_hessian(q, gradient, hessian):
        gradient_hessian_kernel(q, *arguments, exact, gradient, hessian)

    return BoundTerm(energy, None, gradient_hessian)


def bound_gradient_hessian(term, q, inputs: tuple, project: bool, out, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A term's public ``gradient_hessian(q, *inputs, project, out)`` through its
    ``bind(*inputs, project=project)`` (``inputs``: its per-step inputs, empty for a term without
    any): q (n_bodies, 12) checked, the outputs from :func:`element_outputs` (``size`` = 12 k),
    filled and returned as (gradient (n, size), Hessian (n, size, size)).

    Raises:
        ValueError: on a wrong q or ``out``, or inputs the term's ``bind`` rejects.
    """
    q = check_state(q, term.state_rows)
    gradient, hessian = element_outputs(out, term.bodies.shape[0], size)
    term.bind(*inputs, project=project).gradient_hessian(q, gradient, hessian)
    return gradient, hessian


def as_dyadic_mass(n: int, mass, mass_x_bar, second_moment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copies of a term's dyadic masses, read-only (the mass matrices built from them once stay
    true): mass (n,) kg, mass_x_bar (n, 3) kg m, second_moment (n, 3, 3) kg m².

    Raises:
        ValueError: wrong shapes or non-finite entries.
    """
    arrays = (as_float_array(mass, (n,), "mass"), as_float_array(mass_x_bar, (n, 3), "mass_x_bar"),
              as_float_array(second_moment, (n, 3, 3), "second_moment"))
    for array in arrays:
        array.flags.writeable = False
    return arrays


def as_bodies(bodies, count: int) -> np.ndarray:
    """Copy the body-index table to a read-only C-contiguous int64 array (n, count).

    Raises:
        ValueError: wrong shape, non-integer or negative indices.
    """
    raw = np.asarray(bodies)
    if raw.ndim != 2 or raw.shape[1] != count:
        raise ValueError(f"bodies: expected shape (n, {count}), got {raw.shape}")
    if raw.size and not np.issubdtype(raw.dtype, np.integer):
        if not np.all(raw == np.round(raw)):
            raise ValueError("bodies: indices must be integers")
    array = np.array(raw, dtype=np.int64, order="C", copy=True)
    if array.size and array.min() < 0:
        raise ValueError("bodies: indices must be >= 0")
    array.flags.writeable = False  # a term's elements never change (see state_rows)
    return array


def state_rows(bodies: np.ndarray) -> int:
    """How many bodies a state q must hold for the body-index table ``bodies`` (n, k): one more
    than its largest index (0 for no elements). Computed once per term: :func:`as_bodies` makes
    the table read-only, so the count stays true for :func:`check_state` at every call."""
    return int(bodies.max(initial=-1)) + 1


def check_state(q, rows: int) -> np.ndarray:
    """The global state as a C-contiguous float64 (n_bodies, 12) array (no copy if already one).

    Args:
        q: (n_bodies, 12) state.
        rows: the least n_bodies the caller's elements need (:func:`state_rows` of its table).

    Raises:
        ValueError: wrong shape, or fewer than ``rows`` bodies.
    """
    if not (type(q) is np.ndarray and q.dtype == np.float64 and q.flags.c_contiguous):
        q = np.ascontiguousarray(q, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != 12:
        raise ValueError(f"q: expected shape (n_bodies, 12), got {q.shape}")
    if q.shape[0] < rows:
        raise ValueError(f"q: has {q.shape[0]} bodies but an element refers to body {rows - 1}")
    return q


def check_limits(lower: np.ndarray, upper: np.ndarray) -> None:
    """Raises ValueError if any lower > upper (docs/constitutions/669_prismatic_joint_limit.md)."""
    if (lower > upper).any():  # the method: np.any's Python wrapper costs twice as much per step
        raise ValueError("limit: lower must be <= upper for every element")
