"""Newton's method with backtracking line search on the incremental potential of one time step.

Implicit (backward) Euler minimises over q the incremental potential
(docs/constitutions/affine_body.md)

    E(q) = 1/2 (q - q_tilde)^T M (q - q_tilde) + kappa v_bar dt^2 ||A A^T - I||^2 + sum of joint,
           driving, limit and soft-transform energies (not dt^2-scaled),

with q_tilde = q^t + dt dq/dt + dt^2 [g, 0] for dynamic bodies; q is (bodies, 12), in m and
dimensionless affine entries. :func:`solve_step` runs one time step as the phases of
:class:`ChordNewtonStep`:

1. lagged step: where the previous step ended through chord steps, chord steps H_old^-1 g(q) from
   its factorisation (modified Newton), accepted where they converge; else the step starts again;
2. iterate: the gradient and a positive definite Hessian at q (the terms' exact Hessians where
   their sum is positive definite, else their modifications, :meth:`IncrementalPotential.factorize`),
   factorised, and the direction dq from H dq = -g (:mod:`solver.linear_solver`);
3. convergence test on the raw direction: max |J(x_bar) dq| over each body's bounding-box corners
   <= velocity_tol dt and max |dq[3:12]| <= transrate_tol dt; a later direction passes only where
   the error it leaves (:func:`newton_error_estimate`) is within TIGHT_ACCEPTANCE of that;
4. confirmation: a first direction that passes (every one where a limit penalty is active), and a
   full step after the line search, is followed by chord steps from the same factorisation, which
   end the step where the error they leave is at most CHORD_ERROR_FRACTION of the tolerance
   (:func:`chord_error`); none on a body turning more than CHORD_TURN_MAX a step;
5. line search: a direction that does not pass is halved until E does not rise, at most
   ``line_search_max_iterations`` times (the smallest step stays applied, as in libuipc).

:func:`solve_contact_step` (:class:`ContactNewtonStep`) shares the convergence test and the line
search, adds the contact's barrier and friction, starts the line search where CCD allows, tests
the residual too and re-lags the friction; it takes no chord steps.

A step that runs out of ``max_iterations`` is reported as not converged. Shortcuts that keep
failing back off (:class:`BackOff`). Why each departure from libuipc, and what it costs or saves:
docs/architecture.md ("The Newton loop") and docs/performance.md ("Accuracy of the shortcuts").

Raises :class:`NewtonFailure` (the caller's ``SolverError``) where the Newton system is singular
or a quantity is not finite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from .assembly import Assembly
from .constitutions._kernels import BoundTerm, check_state
from .device_solver import linear_solver_for
from .jit import kernel
from .linear_solver import SingularSystem, failing_block

if TYPE_CHECKING:
    from .contact import ContactSurface
    from .contact_blocks import ContactBlocks
    from .scene import Settings


@kernel
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


def chord_error(size: float, theta: float, theta_before: float) -> float:
    """Error left after a chord step of ``size``, estimated from the contraction of the last two
    chord steps: theta = this step's size over the previous one's, theta_before = the previous
    one's over the one before (sizes in any one measure, the result in the same).

    Chord steps converge linearly, each about a fixed factor of the one before, so the error left
    is the tail of that series. Where the factor is one theta, the tail is theta / (1 - theta)
    |c|. On a swinging body the factors alternate between a slow and a fast one (the period-two
    pattern of a stale Hessian coupling stiff and soft modes, see the module docstring), and the
    tail is r1 (1 + r2) / (1 - r1 r2) |c| with r1, r2 the next two factors; with the larger of
    theta and theta_before for both, as here, it is bounded either way:
    rate (1 + rate) / (1 - theta theta_before) |c| (theta / (1 - theta) |c| for one factor).
    Valid for theta theta_before < 1 (contracting over two steps)."""
    rate = max(theta, theta_before)
    return size * rate * (1.0 + rate) / (1.0 - theta * theta_before)


#: A step that ends with chord steps is accepted when the error they leave, estimated by
#: :func:`chord_error` on the convergence test's measure relative to the tolerance, is at most
#: this fraction of the tolerance. Strict because chord steps converge linearly and their error
#: is a fixed linear image of the error they start from: it has the same sign step after step and
#: accumulates like a drag (docs/performance.md, "Accuracy of the shortcuts").
CHORD_ERROR_FRACTION = 1e-5
#: Slowest contraction per chord step, over the last two, with which chord steps go on.
CHORD_RATE_MAX = 0.5
#: Chord steps taken at most after the first one of a step (the second direction of a step that
#: starts from the previous step's factorisation, or the chord step after a full iteration).
CHORD_STEPS_MAX = 4
#: Most triangular solves a step started from the previous step's factorisation may take for the
#: next step to start from it again; a step that needed more factorises afresh next (see
#: :func:`solve_step`).
REUSED_SOLVES_MAX = 4
#: A direction after a step's first is accepted only when the error it leaves
#: (:func:`newton_error_estimate`: its size, or more where Newton contracts slowly) is at most
#: this fraction of the tolerance (libuipc's test accepts it at the tolerance). Its size bounds
#: the error it leaves only where Newton converges quadratically; where the OrthoPotential's
#: stiffness kappa v dt^2 outweighs a body's inertia (small or light parts, large dt) it may not
#: (docs/performance.md, "Accuracy of the shortcuts").
TIGHT_ACCEPTANCE = 1e-2


def newton_error_estimate(size: float, size_before: float) -> float:
    """Error left by a Newton direction of relative ``size`` that followed one of ``size_before``
    (both relative to the tolerance): at least the size itself, and where the two show slow
    (linear) contraction theta = size / size_before, the tail of that series, size theta /
    (1 - theta) (infinite for theta >= 1). With PSD-projected Hessians (a drive, the
    OrthoPotential of a small part) Newton can converge linearly, and a last direction then
    leaves several times its size.
    Where Newton converges quadratically theta is small and the estimate is the size."""
    theta = size / size_before if size_before > 0.0 else np.inf
    if theta >= 1.0:
        return np.inf
    return max(size, size * theta / (1.0 - theta))


def positive_curvature(gradient: np.ndarray, solution: np.ndarray) -> bool:
    """Whether the Newton step ``solution`` = -H^-1 g (n,) for ``gradient`` g (n,) shows H positive
    along it: its curvature d^T H d = -g . d is positive (or g is zero: nothing to go by).

    The inertia-free test of Chiang and Zavala ("An inertia-free filter line-search algorithm for
    large-scale nonlinear programming", Comput. Optim. Appl. 64, 2016, §3), for factorisations
    that do not report the matrix's inertia (SuperLU's LU): every positive definite matrix passes,
    and a step with negative curvature along it, the harmful case (its components along negative
    eigenvectors are amplified by 1 / |eigenvalue| and dominate d^T H d), fails. An indefinite
    matrix whose step passes still gives a descent direction, which the line search safeguards
    (or one within the tolerance, which chord steps confirm as any other). A step that is not
    finite fails."""
    return bool(-(gradient @ solution) > 0.0 or not np.any(gradient))


#: Largest turn of a body per time step (``turning`` of :func:`solve_step`: the largest affine
#: entry of dq/dt dt, about radians) at which chord steps are taken (after a full Newton
#: iteration, to confirm a direction, or from the previous step's factorisation). The
#: OrthoPotential's Hessian turns with the body, and the factorisation of the step's first
#: iterate can hold the rotation mode of a fast-turning body far stiffer than it is at the
#: answer: chord steps then hardly move along it, and their contraction, read from the other
#: modes, says they have converged when they have not.
CHORD_TURN_MAX = 0.02
#: Longest run of chances skipped after failed tries of a shortcut (starting a step from the
#: previous step's factorisation, or chord steps), see :class:`BackOff`.
BACKOFF_MAX = 16


class BackOff:
    """Exponential back-off of a speculative shortcut of the Newton loop: after a failed try the
    next 1, 2, 4 ... (at most :data:`BACKOFF_MAX`) chances are skipped; a success resets it. Where
    the shortcut keeps failing (chord steps at dt = 1/24 on a swinging chain, whose Hessian
    changes too much within a step) it then costs almost nothing."""

    def __init__(self) -> None:
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


def row_selector(indices: np.ndarray) -> slice | np.ndarray:
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
        converged: whether the tolerances were met within ``max_iterations``: libuipc's test,
            and for a direction after the step's first the strict acceptance
            (:data:`TIGHT_ACCEPTANCE`, :func:`newton_error_estimate`).
        residual: the size of the step's last Newton (or chord) direction relative to the
            tolerance, max(corner displacement / (velocity_tol dt), affine change /
            (transrate_tol dt)) (dimensionless, the convergence test of docs/constitutions/affine_body.md): at most
            1 on a converged step, how far from converged an unconverged one ended (under 1
            where only the strict acceptance was missed); 0 where no body is dynamic.
    """

    iterations: int
    line_search_iterations: int
    converged: bool
    residual: float


class IncrementalPotential:
    """Sum of energy terms over the global state, restricted to the dynamic bodies' DOFs.

    Args:
        terms: constitution objects with ``bodies``, ``state_rows``, ``gradient_hessian(q, *inputs)``
            (for the constant Hessians) and ``bind(*inputs)``
            (:class:`solver.constitutions._kernels.BoundTerm`, with a gradient kernel where
            ``constant_hessian`` is true).
        slot: (bodies,) index of each dynamic body among the unknowns, -1 otherwise.
        device: where the Newton system is solved (``Settings.device``,
            :func:`solver.device_solver.linear_solver_for`).
        inputs: per term, the names of the :class:`solver.control.Control` parts it takes, in
            order (:attr:`solver.model.Model.term_inputs`); default none for every term.

    Raises:
        solver.device_solver.DeviceUnavailable: the device cannot be used.
    """

    def __init__(self, terms: list, slot: np.ndarray, device: str = "cpu", inputs: list | None = None):
        self.terms = terms
        self.inputs = [tuple(names) for names in inputs] if inputs is not None else [()] * len(terms)
        if len(self.inputs) != len(terms):
            raise ValueError(f"inputs: expected one tuple of Control parts per term ({len(terms)}), "
                             f"got {len(self.inputs)}")
        self.slot = slot
        self.dynamic_indices = np.flatnonzero(slot >= 0)
        self.dynamic_rows = row_selector(self.dynamic_indices)  # the same rows, as a slice when they can be
        self.element_bodies = [term.bodies for term in terms]
        self.assembly = Assembly(slot, self.element_bodies)
        self.linear_solver = linear_solver_for(device, self.assembly.indptr, self.assembly.indices)
        self.constant = [getattr(term, "constant_hessian", False) for term in terms]
        self.constant_blocks: np.ndarray | None = None
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
        self._blocks: np.ndarray | None = None  # the assembled block values, allocated at the first gradient_hessian
        self.state_rows = max([term.state_rows for term in terms], default=0)
        self._energies: list | None = None  # what each evaluation calls, set by bind
        self._control = None  # the Control bound by bind
        # Factorisation reuse across time steps and chord steps (see solve_step): whether the
        # linear solver holds a factorisation that the next step may start from, and the
        # back-offs after failed tries.
        self.factorization_reusable = False
        self.reuse_backoff = BackOff()
        self.chord_backoff = BackOff()
        # The terms whose Hessian holds a weighted PSD modification (curvature_projection: the
        # OrthoPotential's shift, the prismatic joints' and drives' projections), tried exact
        # first (see factorize), and the back-off after failed tries.
        self._weighted = [term for term in terms if hasattr(term, "curvature_projection") and len(term.bodies)]
        self.exact_backoff = BackOff()

    def term_inputs(self, control) -> list[tuple]:
        """Per term, its parts of ``control`` (a :class:`solver.control.Control`), in the order its
        methods take them after q."""
        return [tuple(getattr(control, name) for name in names) for names in self.inputs]

    def refresh_constant_hessian(self, q: np.ndarray, control) -> None:
        """Assemble the Hessians of the terms whose Hessian does not depend on q (kinetic,
        revolute joint, soft transform), once per frame with that frame's ``control``
        (:class:`solver.control.Control`). The factorisation of an earlier Hessian is not reused
        after this."""
        derivatives = [
            term.gradient_hessian(q, *inputs) if constant and len(term.bodies) else None
            for term, constant, inputs in zip(self.terms, self.constant, self.term_inputs(control))
        ]
        self.constant_blocks = self.assembly.assemble(derivatives, self.element_bodies)[1]
        if self.linear_solver.method == "banded":
            self._constant_band = self.linear_solver.constant_band(self.constant_blocks)
        self.factorization_reusable = False

    def try_reuse(self) -> bool:
        """Whether the next time step starts from the last step's factorisation (one is held and
        no failed try is being backed off from, :attr:`reuse_backoff`)."""
        return self.factorization_reusable and self.reuse_backoff.ready()

    def bind(self, q: np.ndarray, control) -> None:
        """Check q (bodies, 12) and the step's inputs ``control`` (:class:`solver.control.Control`),
        and bind the terms' kernels to them (:class:`solver.constitutions._kernels.BoundTerm`) for
        :meth:`energy`, :meth:`gradient`, :meth:`gradient_hessian` and :meth:`factorize`: once per
        time step, before solving it, so that the many evaluations of a step check nothing. Those
        then take q as this array, updated in place, or any array of the same shape, dtype and
        layout; the inputs are those at binding (bind again after changing one).

        Raises:
            ValueError: on a wrong q, or inputs a term rejects (naming the Control part).
        """
        check_state(q, self.state_rows)
        bound = []
        for term, names, inputs in zip(self.terms, self.inputs, self.term_inputs(control)):
            try:
                bound.append(term.bind(*inputs) if len(term.bodies) else None)
            except ValueError as error:
                if not names:
                    raise
                raise ValueError(f"control.{' or control.'.join(names)}: {error}") from error
        self._control = control
        self._energies = [term.energy for term in bound if term is not None]
        # Per term: its gradient alone, and its derivatives for the assembly (the gradient alone
        # where the Hessian is constant: that comes from refresh_constant_hessian), None if empty.
        self._gradients = [None if term is None else _gradient_call(term, out)
                           for term, out in zip(bound, self._outputs)]
        self._derivatives = [
            None if term is None else _derivatives_call(term, gradient, constant, out)
            for term, gradient, constant, out in zip(bound, self._gradients, self.constant, self._outputs)
        ]

    def _require_bound(self) -> list:
        """The bound terms' energy calls.

        Raises:
            RuntimeError: :meth:`bind` was not called.
        """
        if self._energies is None:
            raise RuntimeError("IncrementalPotential: call bind(q, control) before evaluating it")
        return self._energies

    def energy(self, q: np.ndarray) -> float:
        """E(q) in J (incremental-potential units) for q (bodies, 12), as bound by :meth:`bind`."""
        return float(sum([energy(q) for energy in self._require_bound()]))

    def gradient(self, q: np.ndarray) -> np.ndarray:
        """Gradient (12 x dynamic,) at q (bodies, 12), without Hessians where a term has a gradient
        kernel; terms as bound by :meth:`bind`."""
        self._require_bound()
        derivatives = [None if gradient is None else (gradient(q), None) for gradient in self._gradients]
        return self.assembly.assemble_gradient(derivatives, self.element_bodies)

    def gradient_hessian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient (12 x dynamic,) and Hessian block values (blocks, 12, 12) at q (bodies, 12),
        terms as bound by :meth:`bind`: their PSD-projected or shifted Hessians, the
        modifications weighted as :meth:`factorize` last set them (``curvature_projection``).

        The block values live in a buffer of this object, overwritten by the next call.

        Terms with a constant Hessian contribute their gradient only; their Hessian comes from
        :meth:`refresh_constant_hessian` (which must have been called since their parameters changed).
        """
        derivatives = self._element_derivatives(q)
        assert self.constant_blocks is not None  # assembled by _element_derivatives
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
            self.refresh_constant_hessian(q, self._control)
        return [None if call is None else call(q) for call in self._derivatives]

    def factorize(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Factorise the Newton matrix H at q (bodies, 12) in the linear solver and solve for the
        Newton step; returns the gradient g (12 x dynamic,) at q and -H^-1 g (12 x dynamic,).

        The terms with a ``curvature_projection`` (the OrthoPotential, the prismatic joints and
        drives) are first tried with their exact Hessians (weight 0). Where that matrix is not
        positive definite, it is factorised again with their PSD modifications (1: the
        OrthoPotential's shift, the joints' term-wise projections), and the next 1, 2, 4 ... 16
        factorisations skip the try (:class:`BackOff`). The bodies' inertia
        and the terms' own Gauss-Newton parts mostly outweigh the negative curvature, and the
        joints' projection, which holds a strained joint's axis as stiff as K |C| (K the joint's
        stiffness, C its cross-product residual) against rotations that only the bodies' inertia
        resists, made Newton converge only linearly (docs/performance.md, "Accuracy of the
        shortcuts"). This is Newton's method with a Hessian modification only where
        needed (Nocedal and Wright, Numerical Optimization, 2nd ed., §3.4), the terms' own
        modifications as the modification.

        Whether the exact matrix is positive definite: a Cholesky factorisation tells by
        failing (``detects_indefinite``: the banded and GPU paths); SuperLU's LU factorises an
        indefinite matrix without a word, so there the step's curvature tells
        (:func:`positive_curvature`).

        On the banded path the terms' element Hessians go straight into a copy of the constant
        terms' band (:meth:`LinearSolver.factorize_sum`); otherwise the assembled block values
        (:meth:`gradient_hessian`) are factorised.

        Raises:
            SingularSystem: the Hessian with the terms' modifications is not positive definite
                or is singular.
        """
        exact = bool(self._weighted) and self.exact_backoff.ready()
        self._set_projection(0.0 if exact else 1.0)
        if exact:
            try:
                gradient = self._factorize(q)
                solution = self.linear_solver.solve_factorized(-gradient)
            except SingularSystem:
                pass
            else:
                if self.linear_solver.detects_indefinite or positive_curvature(gradient, solution):
                    self.exact_backoff.record(True)
                    return gradient, solution
            self.exact_backoff.record(False)
            self._set_projection(1.0)
        gradient = self._factorize(q)
        return gradient, self.linear_solver.solve_factorized(-gradient)

    def _set_projection(self, weight: float) -> None:
        """Set the curvature_projection of the terms that have one (0 exact, 1 modified)."""
        for term in self._weighted:
            term.curvature_projection = weight

    def _factorize(self, q: np.ndarray) -> np.ndarray:
        """:meth:`factorize` with the terms' curvature projections as they are set."""
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


Outputs = tuple[np.ndarray, np.ndarray]  # a term's element gradients (n, 12 k) and Hessians (n, 12 k, 12 k)
GradientCall = Callable[[np.ndarray], np.ndarray]


def _gradient_call(term: BoundTerm, out: Outputs | None) -> GradientCall:
    """q -> element gradients of a bound term: its gradient kernel, or its gradient_hessian
    into ``out`` (gradient, Hessian) where it has none (``out`` is None only for the terms with
    a constant Hessian, which have a gradient kernel)."""
    if term.gradient is not None:
        return term.gradient
    assert out is not None

    def gradient(q: np.ndarray) -> np.ndarray:
        term.gradient_hessian(q, *out)
        return out[0]
    return gradient


def _derivatives_call(term: BoundTerm, gradient: GradientCall | None, constant: bool,
                      out: Outputs | None) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]]:
    """q -> (element gradients, element Hessians) of a bound term for the assembly: (gradient,
    None) where the Hessian is ``constant`` (assembled per frame instead), else both from its
    gradient_hessian into ``out`` (``gradient`` and ``out`` are None only where unused)."""
    if constant:
        assert gradient is not None
        return lambda q: (gradient(q), None)
    assert out is not None

    def derivatives(q: np.ndarray) -> Outputs:
        term.gradient_hessian(q, *out)
        return out
    return derivatives


Size = tuple[float, float]  # (max |J(x_bar) dq| over the corners in m, max |dq[3:12]|), :func:`_direction_size`


class NewtonStep:
    """The state of one time step's Newton solve that both :func:`solve_step` and
    :func:`solve_contact_step` use: q (updated in place) and its dynamic rows, the convergence
    test's corners and tolerances, the line search and the step's result.

    Args:
        potential: the step's :class:`IncrementalPotential`, bound to q.
        q: (bodies, 12) the state, updated in place (non-dynamic rows untouched).
        corners: (bodies, 8, 3) body-local bounding-box corners, m.
        dt: the time step, s.
        settings: :class:`solver.scene.Settings` (tolerances and iteration caps).
    """

    def __init__(self, potential: IncrementalPotential, q: np.ndarray, corners: np.ndarray, dt: float,
                 settings: Settings):
        self.potential = potential
        self.q = q
        self.settings = settings
        self.dynamic = potential.dynamic_rows
        self.corners = corners[self.dynamic]
        self.tolerances = (settings.velocity_tol * dt, settings.transrate_tol * dt)
        self.line_search_iterations = 0
        self.residual = np.inf  # the latest direction's size relative to the tolerance (NewtonResult.residual)

    def measure(self, direction: np.ndarray, gradient: np.ndarray) -> Size:
        """The convergence test's measures of a ``direction`` (dynamic, 12) found for ``gradient``.

        Raises:
            NewtonFailure: the direction (or the gradient it came from) is not finite.
        """
        size = _direction_size(direction, self.corners)
        if not np.isfinite(size[0]):
            if not np.all(np.isfinite(gradient)):
                raise NewtonFailure("the gradient is not finite")
            raise NewtonFailure("the Newton direction is not finite")
        return size

    def relative(self, size: Size) -> float:
        """A size relative to the tolerance (1: just converged), the convergence test as one number."""
        return max(size[0] / self.tolerances[0], size[1] / self.tolerances[1])

    def energy(self) -> float:
        """The incremental potential at q, J."""
        return self.potential.energy(self.q)

    def may_end_after(self, iterations: int) -> bool:
        """Whether the step may end after this many iterations (``min_iterations``, ``max_iterations``)."""
        return self.settings.min_iterations <= iterations <= self.settings.max_iterations

    def line_search(self, start: np.ndarray, direction: np.ndarray, alpha: float = 1.0) -> bool:
        """Apply start + alpha direction ((dynamic, 12) each), halving alpha until the energy does
        not rise above the energy at q (= start on entry), at most ``line_search_max_iterations``
        times: the smallest step stays applied, as in libuipc. Returns whether the step given was
        taken in full.

        Raises:
            NewtonFailure: the energy at the start is not finite.
        """
        energy0 = self.energy()
        if not np.isfinite(energy0):
            raise NewtonFailure("the incremental potential is not finite")
        for halvings in range(self.settings.line_search_max_iterations + 1):
            if halvings:
                alpha *= 0.5
                self.line_search_iterations += 1
            self.q[self.dynamic] = start + alpha * direction
            if self.energy() <= energy0:
                return halvings == 0
        return False

    def result(self, iterations: int, converged: bool, reusable: bool = False) -> NewtonResult:
        """The step's :class:`NewtonResult`, and whether the linear solver's factorisation may
        start the next step (``reusable``, :meth:`IncrementalPotential.try_reuse`): only where this
        step ended through chord steps (where they do not contract within a step, a lagged Hessian
        would not either)."""
        self.potential.factorization_reusable = reusable
        return NewtonResult(iterations, self.line_search_iterations, converged, float(self.residual))

    def nothing_to_solve(self) -> NewtonResult:
        """The result of a step without dynamic bodies (only fixed and animated ones)."""
        self.residual = 0.0
        return self.result(0, True)


class ChordNewtonStep(NewtonStep):
    """:func:`solve_step`: Newton's method that ends its steps with chord steps where it can, and
    may start a step from the previous step's factorisation; the phases are its methods.

    Args:
        confirm_every_direction, turning: as :func:`solve_step` takes them.
        Others: as :class:`NewtonStep`.
    """

    def __init__(self, potential: IncrementalPotential, q: np.ndarray, corners: np.ndarray, dt: float,
                 settings: Settings, confirm_every_direction: bool, turning: float):
        super().__init__(potential, q, corners, dt, settings)
        self.confirm_every_direction = confirm_every_direction
        self.chords_trusted = turning <= CHORD_TURN_MAX  # chord steps of any kind (CHORD_TURN_MAX)
        self.solves = 0  # triangular solves (directions) so far in this step

    def solve(self) -> NewtonResult:
        """Run the step: the lagged step where it may, else Newton iterations, each ended by the
        convergence test (with its confirmation) or the line search (and chord steps after it)."""
        if not len(self.potential.dynamic_indices):
            return self.nothing_to_solve()
        if self.chords_trusted and self.potential.try_reuse() and self.may_end_after(2) and self.lagged_step():
            # The chord steps on a lagged Hessian contract more slowly as it ages (a swinging
            # chain's OrthoPotential Hessian turns with the bodies): a step that needed more than
            # REUSED_SOLVES_MAX solves is followed by one that needs more still or fails and
            # factorises anyway, so the next step factorises at once.
            return self.result(2, True, reusable=self.solves <= REUSED_SOLVES_MAX)
        size_before = 0.0  # the relative size of the iteration before's Newton direction (none: no estimate)
        for iteration in range(1, self.settings.max_iterations + 1):
            direction, size = self.iterate()
            error = newton_error_estimate(size, size_before)
            # A step's first direction carries the step's motion from the start, not a contraction
            # of Newton's error: the second direction's error is not estimated from it, so a second
            # direction is accepted only within CHORD_ERROR_FRACTION, else a third follows.
            size_before = size if iteration > 1 else 0.0
            start = self.q[self.dynamic].copy()
            if size <= 1.0:
                self.q[self.dynamic] = start + direction
                result = self.convergence_test(iteration, size, error)
            else:
                result = self.descend(iteration, start, direction, size)
            if result is not None:
                return result
        return self.result(self.settings.max_iterations, False)

    def direction(self, gradient: np.ndarray, solution: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """The direction (dynamic, 12) for ``gradient`` with the current factorisation (its
        ``solution`` -H^-1 g where :meth:`IncrementalPotential.factorize` already solved), and its
        size relative to the tolerance (:meth:`NewtonStep.relative`)."""
        if solution is None:
            solution = self.potential.linear_solver.solve_factorized(-gradient)
        direction = solution.reshape(-1, 12)
        self.solves += 1
        self.residual = self.relative(self.measure(direction, gradient))
        return direction, self.residual

    def lagged_step(self) -> bool:
        """Phase 1: chord steps H_old^-1 g(q) from the previous step's factorisation (a lagged
        Hessian, as stiff ODE solvers reuse their Jacobians), each applied in full. True where they
        converge (:meth:`chords_converge`); otherwise q goes back to the step's start and the next
        steps back off from reusing (potential.reuse_backoff)."""
        start = self.q[self.dynamic].copy()
        try:
            if self._lagged_chords_converge():
                self.potential.reuse_backoff.record(True)
                return True
        except NewtonFailure:
            pass  # solved afresh, which names what is not finite if it is the state itself
        # Afresh from the step's start, not from where the failed chord steps left q: where they
        # diverged, that can be far off, and on a small or light body (the OrthoPotential's
        # stiffness dwarfing its inertia, its Hessian indefinite away from the rotations) fresh
        # Newton iterations from there settled in a wrong state (a small spinning box turned
        # backwards, every step converged).
        self.q[self.dynamic] = start
        self.potential.reuse_backoff.record(False)
        return False

    def _lagged_chords_converge(self) -> bool:
        """The chord steps of :meth:`lagged_step`. Their convergence bounds the error whatever
        positive definite matrix produced them (chord steps cannot settle on a saddle or a
        maximum, where they diverge). Instead of a line search (two energies), the energy change
        over the first direction d is estimated by the trapezoidal rule from the two gradients the
        chord steps need anyway, (g(q) + g(q + d)) . d / 2 (exact for a quadratic): where it is
        positive the attempt is given up. The first direction is itself a chord step from the
        start, so the contraction of the second one counts in the error estimate."""
        gradient = self.potential.gradient(self.q)
        first, first_size = self.direction(gradient)
        self.q[self.dynamic] += first
        following = self.potential.gradient(self.q)
        chord, size = self.direction(following)
        if (gradient + following) @ first.reshape(-1) > 0.0:
            return False  # the energy rose along the first direction
        if size > 1.0:
            return False
        self.q[self.dynamic] += chord
        return self.chords_converge(size, size / first_size if first_size > 0.0 else 0.0)

    def iterate(self) -> tuple[np.ndarray, float]:
        """Phase 2: factorise the gradient and a positive definite Hessian at q
        (:meth:`IncrementalPotential.factorize`); the Newton direction (dynamic, 12) and its
        relative size (:meth:`direction`).

        Raises:
            NewtonFailure: the Hessian is singular, or the gradient or direction not finite.
        """
        try:
            gradient, solution = self.potential.factorize(self.q)
        except SingularSystem as error:
            self.potential.factorization_reusable = False
            raise NewtonFailure(str(error)) from error
        return self.direction(gradient, solution)

    def convergence_test(self, iteration: int, size: float, error: float) -> NewtonResult | None:
        """Phase 3: after a direction of relative ``size`` within the tolerance (applied in full),
        its iteration's number and :func:`newton_error_estimate`, the step's result where it is
        accepted, None where another iteration follows.

        A first direction that passes from a start near the answer (the repeated motion) leaves an
        error that the test does not bound well: it is accepted only where chord steps confirm it
        (:meth:`confirm`), else the next iteration follows. (From q^t the first direction is the
        step's whole motion: it passes only for slow bodies, and the confirmation also helps
        there, e.g. the Panda's first steps.) A direction within CHORD_ERROR_FRACTION itself (a
        body at rest: a resting robot or drawer took two iterations a step for nothing) leaves an
        error no larger than itself wherever Newton contracts at all, and is accepted as it is.
        Where a limit penalty is active (``confirm_every_direction``), every direction is
        confirmed: Newton closes on the cubic penalty only linearly (docs/performance.md). Any
        other later direction is accepted only within TIGHT_ACCEPTANCE of the tolerance; a first
        one not confirmed (a body turning fast, CHORD_TURN_MAX) only within CHORD_ERROR_FRACTION.
        """
        to_confirm = iteration == 1 or self.confirm_every_direction
        if to_confirm and self.chords_trusted and size > CHORD_ERROR_FRACTION and self.may_end_after(iteration + 1):
            return self.result(iteration + 1, True, reusable=True) if self.confirm(size) else None
        if error > TIGHT_ACCEPTANCE and size > CHORD_ERROR_FRACTION:
            return None  # a later direction: not yet (TIGHT_ACCEPTANCE); after the last, not converged
        if iteration >= self.settings.min_iterations:
            return self.result(iteration, True)
        return None

    def descend(self, iteration: int, start: np.ndarray, direction: np.ndarray, size: float) -> NewtonResult | None:
        """Phase 5: the line search along a ``direction`` of relative ``size`` that does not pass
        the convergence test, from q = ``start``; after a full step, chord steps with the same
        factorisation (:meth:`confirm`, skipped for a while where they keep failing,
        potential.chord_backoff): one costs a gradient and a triangular solve instead of a new
        Hessian and factorisation. The step's result where they converge, None where a full
        Newton iteration follows from the improved state."""
        if self.line_search(start, direction) and self.may_end_after(iteration + 1) and (
            self.chords_trusted and self.potential.chord_backoff.ready()
        ):
            converged = self.confirm(size)
            self.potential.chord_backoff.record(converged)
            if converged:
                return self.result(iteration + 1, True, reusable=True)
        return None

    def confirm(self, newton_size: float) -> bool:
        """Phase 4: a chord step H(q_k)^-1 g(q) with the current factorisation after a Newton
        direction of relative size ``newton_size``; where it passes the convergence test, apply it
        and go on with :meth:`chords_converge`, the ratio of the two counting in the estimate (where
        the Hessian changed much over the step, a fast-swinging body whose OrthoPotential Hessian
        turns with A, chord steps converge slowly). True where they converge: the step then counts
        one iteration more."""
        chord, size = self.direction(self.potential.gradient(self.q))
        if size > 1.0:
            return False
        self.q[self.dynamic] += chord
        return self.chords_converge(size, size / newton_size)

    def chords_converge(self, previous: float, theta_before: float) -> bool:
        """Apply up to CHORD_STEPS_MAX chord steps after one of relative size ``previous``, which
        was ``theta_before`` times the direction before it; True as soon as the error left
        (:func:`chord_error`) is at most CHORD_ERROR_FRACTION of the tolerance, False as soon as
        they contract by less than CHORD_RATE_MAX per step over the last two, or too slowly to
        get there within the steps left."""
        if previous == 0.0:
            return True  # the gradient is zero: converged
        for taken in range(1, CHORD_STEPS_MAX + 1):
            following, current = self.direction(self.potential.gradient(self.q))
            self.q[self.dynamic] += following
            if current == 0.0:
                return True
            theta = current / previous
            two_steps = theta * theta_before
            error = chord_error(current, theta, theta_before) if two_steps < 1.0 else np.inf
            if error <= CHORD_ERROR_FRACTION:
                return True
            if two_steps > CHORD_RATE_MAX**2:
                return False  # too slow
            if error * two_steps ** ((CHORD_STEPS_MAX - taken) / 2) > CHORD_ERROR_FRACTION:
                return False  # too slow to get there within the steps left, at this rate
            previous, theta_before = current, theta
        return False


#: Re-lags of the friction per step at most (:func:`solve_contact_step`).
FRICTION_RELAGS_MAX = 2


class ContactNewtonStep(NewtonStep):
    """:func:`solve_contact_step`: Newton's method with the contact's barrier and friction, no
    chord steps or factorisation reuse (the contact Hessian changes with every iteration).

    Args:
        contact: the :class:`solver.contact.ContactSurface`, its step begun at q^t.
        mass_inverse: (dynamic, 12, 12) the inverse 12x12 mass matrices of the dynamic bodies.
        Others: as :class:`NewtonStep`.
    """

    def __init__(self, potential: IncrementalPotential, contact: ContactSurface, q: np.ndarray, corners: np.ndarray,
                 dt: float, settings: Settings, mass_inverse: np.ndarray):
        super().__init__(potential, q, corners, dt, settings)
        self.contact = contact
        self.mass_inverse = mass_inverse
        self.mass: np.ndarray | None = None  # (dynamic, 12, 12), from mass_inverse at the first force_size
        self.contact_blocks: ContactBlocks | None = None  # the contact's Hessian blocks of the last iterate
        self.relags = 0
        self.lagged = q[self.dynamic].copy()  # where the friction was lagged

    def energy(self) -> float:
        """The incremental potential with the barrier and friction at q, J."""
        return self.potential.energy(self.q) + self.contact.energy(self.q)

    def solve(self) -> NewtonResult:
        """Run the step: iterate, test (direction and residual), and either end the step (after
        re-lagging the friction where the state moved), or take the line search from the
        collision-free fraction that CCD gives."""
        if not len(self.potential.dynamic_indices):
            return self.nothing_to_solve()
        self.potential.factorization_reusable = False
        self.potential._set_projection(1.0)
        self.contact.set_unknowns(self.potential.slot)
        q = self.q
        for iteration in range(1, self.settings.max_iterations + 1):
            gradient, direction = self.iterate()
            size = self.measure(direction, gradient)
            self.residual = self.relative(size)
            if self.residual <= 1.0:
                self.residual = max(self.residual, self.relative(self.force_size(gradient)))
            full = np.zeros_like(q)
            full[self.dynamic] = direction
            alpha = min(1.0, self.contact.line_search_start(q, full, size[0]))
            start = q[self.dynamic].copy()
            if self.residual <= 1.0 and iteration >= self.settings.min_iterations:
                # Converged: the direction is applied as far as CCD allows (no line search: within
                # the tolerance, round-off decides the energy comparison), as solve_step applies it.
                q[self.dynamic] = start + alpha * direction
                if self.relag_friction():
                    continue
                return self.result(iteration, True)
            self.line_search(start, direction, alpha)
        return self.result(self.settings.max_iterations, False)

    def iterate(self) -> tuple[np.ndarray, np.ndarray]:
        """The gradient (12 x dynamic,) with the contact's, and the Newton direction (dynamic, 12)
        from the terms' PSD-modified Hessians plus the contact Hessian (SuperLU).

        Raises:
            NewtonFailure: the gradient is not finite or the system is singular.
        """
        gradient, blocks = self.potential.gradient_hessian(self.q)
        contact_gradient, self.contact_blocks = self.contact.gradient_blocks(self.q)
        gradient = gradient + contact_gradient[self.potential.dynamic_indices].reshape(-1)
        if not np.all(np.isfinite(gradient)):
            raise NewtonFailure("the gradient is not finite")
        assembly = self.potential.assembly
        hessian = self.contact_blocks.newton_matrix(assembly.indptr, assembly.indices, blocks)
        try:
            direction = scipy.sparse.linalg.splu(hessian).solve(-gradient)
        except RuntimeError as error:  # SuperLU: exactly singular
            singular = SingularSystem(f"the Newton system is singular ({error})", block=failing_block(hessian))
            singular.__cause__ = error
            raise NewtonFailure(str(singular)) from singular
        return gradient, direction.reshape(-1, 12)

    def force_size(self, gradient: np.ndarray) -> Size:
        """The residual test's measure: the motion (M_b + H_b)^-1 g_b that the gradient (12 x
        dynamic,) would give each body b alone, M_b its mass matrix and H_b its diagonal block of
        the barrier's Hessian (at the state of the last :meth:`iterate`), in the convergence
        test's measures. Inside static friction the friction's stiff Hessian makes the first
        directions tiny while the forces are still far from balanced (a box on a ramp crept where
        it should slide away): the friction's Hessian is left out. The barrier's is kept: against
        the bare mass M^-1 g, a force imbalance that a resting contact's stiffness turns into a
        motion far within the tolerance reads as thousands of times the tolerance, and piles of
        boxes took twice the iterations for it."""
        assert self.contact_blocks is not None  # set by iterate, which comes first
        if self.mass is None:
            self.mass = np.linalg.inv(self.mass_inverse)
        stiffness = self.mass + self.contact_blocks.diagonal(0)
        motion = np.linalg.solve(stiffness, gradient.reshape(-1, 12, 1))[..., 0]
        return _direction_size(motion, self.corners)

    def relag_friction(self) -> bool:
        """Where the state moved by more than the tolerance since the friction was lagged, re-lag it
        at q (normal forces and tangents, Li et al. 2020 §5), at most FRICTION_RELAGS_MAX times a
        step; whether it did (Newton then goes on)."""
        moved = _direction_size(self.q[self.dynamic] - self.lagged, self.corners)
        if (self.relags < FRICTION_RELAGS_MAX and self.contact.has_friction()
                and self.relative(moved) > 1.0):
            self.relags += 1
            self.contact.relag(self.q)
            self.lagged = self.q[self.dynamic].copy()
            return True
        return False


def solve_step(
    potential: IncrementalPotential,
    q: np.ndarray,
    corners: np.ndarray,
    dt: float,
    settings: Settings,
    confirm_every_direction: bool = False,
    turning: float = 0.0,
) -> NewtonResult:
    """Minimise the incremental potential from q (bodies, 12), updating q in place
    (:class:`ChordNewtonStep`).

    Args:
        potential: the step's :class:`IncrementalPotential`, bound to q and the step's inputs
            (:meth:`IncrementalPotential.bind`).
        q: (bodies, 12) Newton's starting point on entry (the last step's motion repeated, or
            q^t, :meth:`solver.simulation._Stepper.start_newton`); the minimiser on return.
            Rows of non-dynamic bodies are not touched.
        corners: (bodies, 8, 3) body-local bounding-box corners.
        dt: time step, s.
        settings: :class:`solver.scene.Settings` (tolerances and iteration caps).
        confirm_every_direction: confirm every direction that passes the convergence test by
            chord steps under the strict test, not only a first one: for steps where a joint-limit
            penalty is active (:meth:`solver.simulation._Stepper.start_newton`), against whose
            cubic Newton converges only linearly, so that a last direction under the tolerance
            leaves an error about its own size, the same way step after step.
        turning: the largest turn of a dynamic body in this step at its velocity, max |dq/dt[3:12]|
            dt (about radians); above :data:`CHORD_TURN_MAX` no chord steps are taken (neither
            from the previous step's factorisation, nor to confirm a direction, nor after a full
            iteration): full iterations confirm instead.

    Raises:
        NewtonFailure: on a non-finite energy, gradient or Newton direction.
    """
    return ChordNewtonStep(potential, q, corners, dt, settings, confirm_every_direction, turning).solve()


def solve_contact_step(potential: IncrementalPotential, contact: ContactSurface, q: np.ndarray, corners: np.ndarray,
                       dt: float, settings: Settings, mass_inverse: np.ndarray) -> NewtonResult:
    """Minimise the incremental potential with contact from q^t (bodies, 12), updating q in place
    (:class:`ContactNewtonStep`).

    libuipc's IPC pipeline (docs/contact.md): Newton from q^t (an intersection-free start), each
    direction from the terms' PSD-modified Hessians plus the contact Hessian (:mod:`solver.contact`:
    barrier and lagged friction, J^T H J), the step capped by CCD at the largest collision-free
    fraction, then halved until the incremental potential (with the barrier and friction)
    decreases. A direction passing the convergence test of :func:`solve_step` ends the step where
    the gradient there passes it too, measured as the motion it would give the free bodies,
    M^-1 g (a residual test), except that where the state moved by more than the tolerance since
    the friction was lagged, the friction is re-lagged there, at most
    :data:`FRICTION_RELAGS_MAX` times, and Newton goes on from there.

    Args:
        potential: the step's :class:`IncrementalPotential`, bound to q and the step's inputs
            (:meth:`IncrementalPotential.bind`).
        contact: the :class:`solver.contact.ContactSurface`, its step begun at q^t.
        q: (bodies, 12) q^t on entry, the minimiser on return (non-dynamic rows untouched).
        corners: (bodies, 8, 3) body-local bounding-box corners, m (the convergence test's points).
        dt: the time step, s.
        settings: the scene's :class:`solver.scene.Settings` (tolerances, iteration caps).
        mass_inverse: (dynamic, 12, 12) the inverse 12x12 mass matrices of the dynamic bodies.

    Raises:
        NewtonFailure: a non-finite energy, gradient or direction, or a singular system.
    """
    return ContactNewtonStep(potential, contact, q, corners, dt, settings, mass_inverse).solve()
