"""Newton's method with backtracking line search on the incremental potential of one time step.

Implicit (backward) Euler is the minimisation over q of the incremental potential
(reference §2.1-2.2):

    E(q) = 1/2 (q - q_tilde)^T M (q - q_tilde) + kappa v_bar dt^2 ||A A^T - I||^2 + sum of joint,
           driving, limit and soft-transform energies (not dt^2-scaled),

with q_tilde = q^t + dt dq/dt + dt^2 [g, 0] for dynamic bodies. Each iteration assembles the
gradient and the PSD-projected Hessian (:mod:`solver.assembly`), solves H dq = -g with a direct
solver (:mod:`solver.linear_solver`: banded Cholesky or SciPy SuperLU), tests convergence on the raw Newton
direction before the line search (reference §2.5, pitfall 6):

- largest displacement of a body's bounding-box corner, max |J(x_bar) dq| <= velocity_tol dt
  (the box corners bound every mesh vertex, so this never declares convergence early), and
- largest affine entry, max |dq[3:12]| <= transrate_tol dt,

then halves the step until E(q + alpha dq) <= E(q), at most ``line_search_max_iterations`` times
(reference §2.1 e; after the last halving the smallest step stays applied, as in libuipc).

One departure from libuipc, for speed: after a full iteration that did not converge, the next
direction is first tried as a chord (simplified Newton) step H(q_k)^-1 g(q_k+1), reusing the
factorisation; it is tested like a Newton direction and, when it passes, applied followed by a
second chord step c2, and the step is accepted if the error left, estimated from the contraction
theta = |c2| / |c1| as theta / (1 - theta) |c2| (chord steps converge linearly, and slowly where
the Hessian changed much), is at most half the tolerance; otherwise the next iteration
assembles and factorises a new Hessian. A step that libuipc solves in two iterations (the second
one only confirming) thus usually costs one factorisation, two gradients and three triangular
solves, with the same accuracy or better (tests/solver/test_physics.py compares with a run at a
1e-7 tolerance; the cartpole of tests/solver/test_urdf.py deviates from PyBullet by 2.70e-4 m,
as with full iterations).

A second departure, the lagged Hessian of stiff ODE solvers (modified Newton, as CVODE reuses its
Jacobian over many steps): when the previous time step ended through the chord test, the next
step's first direction also comes from that step's factorisation, with no Hessian assembled or
factorised and no energy evaluated (the energy change over that direction is estimated by the
trapezoidal rule from the gradients the chord steps need anyway). Such a step is accepted only
through chord steps until their error estimate theta / (1 - theta) |c| is 1% of the tolerance; if
they stop contracting, the step goes on with fresh factorisations and the following steps back
off from reusing (1, 2, 4 ... 16 steps). On the 1000-body chains at dt = 1/240 s this leaves 0.5 (revolute) and 0.1
(prismatic) factorisations per step instead of 1 (docs/performance.md). Chord steps after a fresh
factorisation back off the same way where they keep failing (a swinging chain at dt = 1/24,
whose Hessian changes too much within a step): they then cost nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .assembly import Assembly
from .constitutions._kernels import check_state
from .device_solver import linear_solver_for
from .linear_solver import SingularSystem


@numba.njit(cache=True)
def _direction_size(direction, corners):
    """(max |J(x̄) dq| over the bounding-box corners x̄, max |dq[3:12]|) of a direction (bodies, 12);
    (nan, nan) when an entry of the direction is not finite."""
    displacement = 0.0
    affine = 0.0
    total = 0.0  # not finite if an entry is not (or the entries are beyond any physical size)
    for b in range(direction.shape[0]):
        for k in range(12):
            total += direction[b, k]
        if not np.isfinite(total):
            return np.nan, np.nan
        for k in range(3, 12):
            affine = max(affine, abs(direction[b, k]))
        for c in range(corners.shape[1]):
            for i in range(3):
                value = direction[b, i]
                for j in range(3):
                    value += direction[b, 3 + 3 * i + j] * corners[b, c, j]
                displacement = max(displacement, abs(value))
    return displacement, affine


#: A step that ends with chord steps is accepted when their error estimate theta / (1 - theta) |c|
#: (theta = |c_k| / |c_k-1|, the contraction of successive chord steps, on the convergence
#: test's measure) is at most this fraction of the convergence tolerance; see :func:`solve_step`.
CHORD_ERROR_FRACTION = 0.5
#: Slowest contraction with which a step started from the previous step's factorisation goes on
#: with further chord steps.
CHORD_RATE_MAX = 0.5
#: A step that starts from the previous step's factorisation (see :func:`solve_step`) takes
#: chord steps until their error estimate theta / (1 - theta) |c| is below this fraction of the
#: convergence tolerance, at most REUSED_CHORDS_MAX after the first; measured on
#: tests/solver/test_physics.py's chains against tightly converged runs.
REUSED_ERROR_FRACTION = 0.01
REUSED_CHORDS_MAX = 4
#: Longest run of chances skipped after failed tries of a shortcut (starting a step from the
#: previous step's factorisation, or chord steps), see :class:`BackOff`.
BACKOFF_MAX = 16


class BackOff:
    """Exponential back-off of a speculative shortcut of the Newton loop: after a failed try the
    next 1, 2, 4 ... (at most :data:`BACKOFF_MAX`) chances are skipped; a success resets it. Where
    the shortcut keeps failing (chord steps at dt = 1/24 on a swinging chain, whose Hessian
    changes too much within a step) it then costs almost nothing."""

    def __init__(self):
        self._wait = 0
        self._length = 1

    def ready(self) -> bool:
        """Whether to try the shortcut at this chance (a skipped chance counts down the wait)."""
        if self._wait > 0:
            self._wait -= 1
            return False
        return True

    def record(self, success: bool) -> None:
        """The outcome of a try."""
        if success:
            self._length = 1
        else:
            self._wait = self._length
            self._length = min(2 * self._length, BACKOFF_MAX)


def row_selector(indices: np.ndarray):
    """``slice(first, last + 1)`` when the sorted row ``indices`` (k,) are consecutive, else the
    indices themselves: both select the same rows, but a slice reads and writes them in place
    (views) where an index array copies them at every use."""
    indices = np.asarray(indices)
    if len(indices) and indices[-1] - indices[0] == len(indices) - 1:
        return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices


class NewtonFailure(RuntimeError):
    """A Newton step produced a non-finite energy, gradient or direction."""


@dataclass
class NewtonResult:
    """Statistics of one time step's solve.

    Attributes:
        iterations: Newton iterations taken; the chord steps that end a step count as one more.
        line_search_iterations: halvings summed over the iterations.
        converged: whether the tolerances were met within ``max_iterations``.
        residual: the size of the step's last Newton (or chord) direction relative to the
            tolerance, max(corner displacement / (velocity_tol dt), affine change /
            (transrate_tol dt)) (dimensionless, the convergence test of reference §2.5): at most
            1 on a converged step, how far from converged an unconverged one ended; 0 where no
            body is dynamic.
    """

    iterations: int
    line_search_iterations: int
    converged: bool
    residual: float


class IncrementalPotential:
    """Sum of energy terms over the global state, restricted to the dynamic bodies' DOFs.

    Args:
        terms: constitution objects with ``bodies``, ``state_rows``, ``gradient_hessian(q)`` (for
            the constant Hessians) and ``bind()`` (:class:`solver.constitutions._kernels.BoundTerm`,
            with a gradient kernel where ``constant_hessian`` is true).
        slot: (bodies,) index of each dynamic body among the unknowns, -1 otherwise.
        device: where the Newton system is solved (``Settings.device``,
            :func:`solver.device_solver.linear_solver_for`).

    Raises:
        solver.device_solver.DeviceUnavailable: the device cannot be used.
    """

    def __init__(self, terms: list, slot: np.ndarray, device: str = "cpu"):
        self.terms = terms
        self.slot = slot
        self.dynamic_indices = np.flatnonzero(slot >= 0)
        self.dynamic_rows = row_selector(self.dynamic_indices)  # the same rows, as a slice when they can be
        self.element_bodies = [term.bodies for term in terms]
        self.assembly = Assembly(slot, self.element_bodies)
        self.linear_solver = linear_solver_for(device, self.assembly.indptr, self.assembly.indices)
        self.constant = [getattr(term, "constant_hessian", False) for term in terms]
        self.constant_blocks = None
        self._constant_band = None  # the constant blocks' band (banded path)
        # Per-term element outputs and the global blocks, allocated once and refilled every
        # iteration: fresh multi-megabyte arrays would cost a page fault per 4 KiB page each time
        # (the blocks only where they are used: the SuperLU path and callers of gradient_hessian).
        self._outputs = [
            None if constant or not len(term.bodies)
            else (np.empty((len(term.bodies), 12 * term.bodies.shape[1])),
                  np.empty((len(term.bodies), 12 * term.bodies.shape[1], 12 * term.bodies.shape[1])))
            for term, constant in zip(terms, self.constant)
        ]
        self._blocks = None  # the assembled block values, allocated at the first gradient_hessian
        self.state_rows = max([term.state_rows for term in terms], default=0)
        self._energies = None  # what each evaluation calls, set by bind
        # Factorisation reuse across time steps and chord steps (see solve_step): whether the
        # linear solver holds a factorisation that the next step may start from, and the
        # back-offs after failed tries.
        self.factorization_reusable = False
        self.reuse_backoff = BackOff()
        self.chord_backoff = BackOff()

    def refresh_constant_hessian(self, q: np.ndarray) -> None:
        """Assemble the Hessians of the terms whose Hessian does not depend on q (kinetic,
        revolute joint, soft transform), once per frame after their parameters were set.
        The factorisation of an earlier Hessian is not reused after this."""
        derivatives = [
            term.gradient_hessian(q) if constant and len(term.bodies) else None
            for term, constant in zip(self.terms, self.constant)
        ]
        self.constant_blocks = self.assembly.assemble(derivatives, self.element_bodies)[1]
        if self.linear_solver.method == "banded":
            self._constant_band = self.linear_solver.constant_band(self.constant_blocks)
        self.factorization_reusable = False

    def try_reuse(self) -> bool:
        """Whether the next time step starts from the last step's factorisation (one is held and
        no failed try is being backed off from, :attr:`reuse_backoff`)."""
        return self.factorization_reusable and self.reuse_backoff.ready()

    def bind(self, q: np.ndarray) -> None:
        """Check q (bodies, 12) and every term's current parameters, and bind the terms' kernels
        (:class:`solver.constitutions._kernels.BoundTerm`) for :meth:`energy`, :meth:`gradient`,
        :meth:`gradient_hessian` and :meth:`factorize`: once per time step, after its parameters
        were set (``solve_step`` does it), so that the many evaluations of a step check nothing.
        Those then take q as this array, updated in place, or any array of the same shape, dtype
        and layout.

        Raises:
            ValueError: on a wrong q or parameters a term rejects.
        """
        check_state(q, self.state_rows)
        bound = [term.bind() if len(term.bodies) else None for term in self.terms]
        self._energies = [term.energy for term in bound if term is not None]
        # Per term: its gradient alone, and its derivatives for the assembly (the gradient alone
        # where the Hessian is constant: that comes from refresh_constant_hessian), None if empty.
        self._gradients = [None if term is None else _gradient_call(term, out) for term, out in zip(bound, self._outputs)]
        self._derivatives = [
            None if term is None else _derivatives_call(term, gradient, constant, out)
            for term, gradient, constant, out in zip(bound, self._gradients, self.constant, self._outputs)
        ]

    def _require_bound(self) -> None:
        if self._energies is None:
            raise RuntimeError("IncrementalPotential: call bind(q) before evaluating it")

    def energy(self, q: np.ndarray) -> float:
        """E(q) in J (incremental-potential units) for q (bodies, 12), as bound by :meth:`bind`."""
        self._require_bound()
        return float(sum([energy(q) for energy in self._energies]))

    def gradient(self, q: np.ndarray) -> np.ndarray:
        """Gradient (12 x dynamic,) at q (bodies, 12), without Hessians where a term has a gradient
        kernel; terms as bound by :meth:`bind`."""
        self._require_bound()
        derivatives = [None if gradient is None else (gradient(q), None) for gradient in self._gradients]
        return self.assembly.assemble_gradient(derivatives, self.element_bodies)

    def gradient_hessian(self, q: np.ndarray):
        """Gradient (12 x dynamic,) and PSD Hessian block values (blocks, 12, 12) at q (bodies, 12),
        terms as bound by :meth:`bind`.

        The block values live in a buffer of this object, overwritten by the next call.

        Terms with a constant Hessian contribute their gradient only; their Hessian comes from
        :meth:`refresh_constant_hessian` (which must have been called since their parameters changed).
        """
        derivatives = self._element_derivatives(q)
        if self._blocks is None:
            self._blocks = np.empty_like(self.constant_blocks)
        np.copyto(self._blocks, self.constant_blocks)
        return self.assembly.assemble(derivatives, self.element_bodies, self._blocks)

    def _element_derivatives(self, q: np.ndarray) -> list:
        """Per term, (element gradients, element Hessians) at q, the Hessians None for the terms
        whose Hessian is constant (those come from :meth:`refresh_constant_hessian`, run here the
        first time), or None for a term without elements."""
        self._require_bound()
        if self.constant_blocks is None:
            self.refresh_constant_hessian(q)
        return [None if call is None else call(q) for call in self._derivatives]

    def factorize(self, q: np.ndarray) -> np.ndarray:
        """Factorise the PSD Hessian at q (bodies, 12) in the linear solver; returns the gradient
        (12 x dynamic,) at q.

        On the banded path the terms' element Hessians go straight into a copy of the constant
        terms' band (:meth:`LinearSolver.factorize_sum`); otherwise the assembled block values
        (:meth:`gradient_hessian`) are factorised.

        Raises:
            SingularSystem: the Hessian is not positive definite or singular.
        """
        if self.linear_solver.method != "banded":
            gradient, blocks = self.gradient_hessian(q)
            self.linear_solver.factorize(blocks)
            return gradient
        derivatives = self._element_derivatives(q)
        gradient = self.assembly.assemble_gradient(derivatives, self.element_bodies)
        self.linear_solver.factorize_sum(self._constant_band, [
            (derivative[1], block_index)
            for derivative, block_index in zip(derivatives, self.assembly.block_indices)
            if derivative is not None and derivative[1] is not None
        ])
        return gradient


def _gradient_call(term, out):
    """q -> element gradients of a bound term: its gradient kernel, or its gradient_hessian
    into ``out`` (gradient, Hessian) where it has none."""
    if term.gradient is not None:
        return term.gradient

    def gradient(q):
        term.gradient_hessian(q, *out)
        return out[0]
    return gradient


def _derivatives_call(term, gradient, constant: bool, out):
    """q -> (element gradients, element Hessians) of a bound term for the assembly: (gradient,
    None) where the Hessian is ``constant`` (assembled per frame instead), else both from its
    gradient_hessian into ``out``."""
    if constant:
        return lambda q: (gradient(q), None)

    def derivatives(q):
        term.gradient_hessian(q, *out)
        return out
    return derivatives


def solve_step(
    potential: IncrementalPotential,
    q: np.ndarray,
    corners: np.ndarray,
    dt: float,
    settings,
) -> NewtonResult:
    """Minimise the incremental potential from q (bodies, 12), updating q in place.

    Args:
        potential: the step's :class:`IncrementalPotential` (its per-step parameters set).
        q: (bodies, 12) start state q^t on entry (libuipc starts Newton at q^t, pitfall 3); the
            minimiser on return. Rows of non-dynamic bodies are not touched.
        corners: (bodies, 8, 3) body-local bounding-box corners.
        dt: time step, s.
        settings: :class:`solver.scene.Settings` (tolerances and iteration caps).

    Raises:
        NewtonFailure: on a non-finite energy, gradient or Newton direction.
        ValueError: on a wrong q or a term's invalid parameters (:meth:`IncrementalPotential.bind`).
    """
    potential.bind(q)
    if not len(potential.dynamic_indices):  # only fixed and animated bodies: nothing to solve
        return _result(potential, 0, 0, True, chord=False, residual=0.0)
    dynamic = potential.dynamic_rows
    line_search_total = 0
    corners_dynamic = corners[dynamic]
    solver = potential.linear_solver
    tolerances = (settings.velocity_tol * dt, settings.transrate_tol * dt)
    last_size = [(np.inf, np.inf)]  # the latest direction's size, for the step's residual

    def newton_direction(gradient: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
        """The direction (dynamic, 12) for ``gradient`` with the current factorisation, and its
        size (:func:`_direction_size`), which also tells whether it is finite."""
        direction = solver.solve_factorized(-gradient).reshape(-1, 12)
        size = _direction_size(direction, corners_dynamic)
        if not np.isfinite(size[0]):
            if not np.all(np.isfinite(gradient)):
                raise NewtonFailure("the gradient is not finite")
            raise NewtonFailure("the Newton direction is not finite")
        last_size[0] = size
        return direction, size

    def result(iterations: int, converged: bool, chord: bool) -> NewtonResult:
        size = last_size[0]
        return _result(potential, iterations, line_search_total, converged, chord,
                       max(size[0] / tolerances[0], size[1] / tolerances[1]))

    def small(size: tuple[float, float], fraction: float = 1.0) -> bool:
        displacement, affine = size
        return displacement <= fraction * settings.velocity_tol * dt and affine <= fraction * settings.transrate_tol * dt

    def chords_converge(previous: float, fraction: float, count: int) -> bool:
        """Apply up to ``count`` chord steps after one of size ``previous``; True as soon as the
        error left, estimated as theta / (1 - theta) |c| from the contraction theta of successive
        steps, is at most ``fraction`` of the tolerance; False when they stop contracting to at
        most CHORD_RATE_MAX (or ``count`` runs out)."""
        for _ in range(count):
            following, size = newton_direction(potential.gradient(q))
            q[dynamic] += following
            current = max(size)
            if current == 0.0 or (current < previous and small(size, fraction * (previous - current) / current)):
                return True
            if current > CHORD_RATE_MAX * previous:
                return False
            previous = current
        return False

    # A step may first try the previous step's factorisation (a lagged Hessian, as stiff ODE
    # solvers reuse their Jacobians): every direction is then a chord step H_old^-1 g(q), applied
    # in full, and the step is accepted only when they converge to REUSED_ERROR_FRACTION of the
    # tolerance (a bound on the error whatever positive definite matrix produced them; chord
    # steps cannot settle on a saddle or a maximum, where they diverge). Instead of a line search
    # (two energies), the energy change over the first direction d is estimated by the
    # trapezoidal rule from the two gradients the chord steps need anyway, (g(q) + g(q + d)) . d / 2
    # (exact for a quadratic): where it is positive the attempt is given up and q goes back to the
    # step's start. Where the chord steps do not converge, the step goes on with fresh
    # factorisations from where they left it, and the next steps back off from reusing.
    if potential.try_reuse() and settings.min_iterations <= 2 <= settings.max_iterations:
        start = q[dynamic].copy()
        try:
            gradient = potential.gradient(q)
            first, size = newton_direction(gradient)
            q[dynamic] += first
            following = potential.gradient(q)
            chord, size = newton_direction(following)
            if (gradient + following) @ first.reshape(-1) > 0.0:
                q[dynamic] = start  # the energy rose along the first direction
            elif small(size):
                q[dynamic] += chord
                if chords_converge(max(size), REUSED_ERROR_FRACTION, REUSED_CHORDS_MAX):
                    potential.reuse_backoff.record(True)
                    return result(2, True, chord=True)
        except NewtonFailure:
            q[dynamic] = start  # solved afresh below, which names what is not finite if it is the state itself
        potential.reuse_backoff.record(False)

    for iteration in range(1, settings.max_iterations + 1):
        try:
            gradient = potential.factorize(q)
        except SingularSystem as error:
            potential.factorization_reusable = False
            raise NewtonFailure(str(error)) from error
        direction, size = newton_direction(gradient)
        start = q[dynamic].copy()
        if small(size):
            q[dynamic] = start + direction
            if iteration >= settings.min_iterations:
                return result(iteration, True, chord=False)
            continue
        energy0 = potential.energy(q)
        if not np.isfinite(energy0):
            raise NewtonFailure("the incremental potential is not finite")
        alpha = 1.0
        for _ in range(settings.line_search_max_iterations + 1):
            q[dynamic] = start + alpha * direction
            if potential.energy(q) <= energy0:
                break
            alpha *= 0.5
            line_search_total += 1
        # Chord (simplified Newton) step after a full step: the next direction with this
        # iteration's factorisation, H(q_k)^-1 g(q_k+1), costs a gradient and a triangular solve
        # instead of a new Hessian and factorisation. When it passes the same test (and the
        # contraction test below) it counts as the next iteration; otherwise the loop goes on
        # with a full Newton iteration. Where chord steps keep failing they are skipped for a
        # while (potential.chord_backoff).
        if alpha == 1.0 and settings.min_iterations <= iteration + 1 <= settings.max_iterations and (
            potential.chord_backoff.ready()
        ):
            chord, size = newton_direction(potential.gradient(q))
            # Chord steps converge only linearly, at the rate theta = |c2| / |c1|, which is poor
            # where the Hessian changed much over the full step (a fast-spinning body: the
            # OrthoPotential's Hessian turns with A). So a second chord step follows, and the
            # step is accepted when the error left after it, about theta / (1 - theta) |c2| (a
            # geometric series), is at most CHORD_ERROR_FRACTION of the tolerance (for
            # theta <= 1/2 the estimate is at most |c2| <= |c1| / 2; slower contraction passes
            # when |c2| is small enough). Otherwise a full Newton iteration follows from the
            # improved state.
            converged = False
            if small(size):
                q[dynamic] += chord
                converged = chords_converge(max(size), CHORD_ERROR_FRACTION, 1)
            potential.chord_backoff.record(converged)
            if converged:
                return result(iteration + 1, True, chord=True)
    return result(settings.max_iterations, False, chord=False)


def _result(potential: IncrementalPotential, iterations: int, line_search: int, converged: bool,
            chord: bool, residual: float) -> NewtonResult:
    """The step's :class:`NewtonResult`. The step's last factorisation may start the next step
    only if this one ended through the chord test (``chord``): where chord steps do not
    contract within a step, a lagged Hessian would not either."""
    potential.factorization_reusable = chord
    return NewtonResult(iterations, line_search, converged, float(residual))
