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
failing back off (:class:`solver.potential.BackOff`). The potential itself (the terms' sum, its
assembly and factorisation) is :class:`solver.potential.IncrementalPotential`. Why each
departure from libuipc, and what it costs or saves: docs/architecture.md ("The Newton loop") and
docs/performance.md ("Accuracy of the shortcuts").

Raises :class:`NewtonFailure` (the caller's ``SolverError``) where the Newton system is singular
or a quantity is not finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from .jit import kernel
from .linear_solver import SingularSystem, failing_block
from .potential import IncrementalPotential

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


#: Largest turn of a body per time step (``turning`` of :func:`solve_step`: the largest affine
#: entry of dq/dt dt, about radians) at which chord steps are taken (after a full Newton
#: iteration, to confirm a direction, or from the previous step's factorisation). The
#: OrthoPotential's Hessian turns with the body, and the factorisation of the step's first
#: iterate can hold the rotation mode of a fast-turning body far stiffer than it is at the
#: answer: chord steps then hardly move along it, and their contraction, read from the other
#: modes, says they have converged when they have not.
CHORD_TURN_MAX = 0.02
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
        if not math.isfinite(size[0]):
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
        if not math.isfinite(energy0):
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

    def direction(self, gradient: np.ndarray, solution: np.ndarray) -> tuple[np.ndarray, float]:
        """The direction (dynamic, 12) of the ``solution`` -H^-1 g for ``gradient`` g
        (:meth:`IncrementalPotential.factorize` or :meth:`IncrementalPotential.chord`), and its
        size relative to the tolerance (:meth:`NewtonStep.relative`)."""
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
        gradient, solution = self.potential.chord(self.q)
        first, first_size = self.direction(gradient, solution)
        self.q[self.dynamic] += first
        following, solution = self.potential.chord(self.q)
        chord, size = self.direction(following, solution)
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
        chord, size = self.direction(*self.potential.chord(self.q))
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
            following, current = self.direction(*self.potential.chord(self.q))
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
    """Minimise the incremental potential with contact from an intersection-free start q
    (bodies, 12), updating q in place (:class:`ContactNewtonStep`).

    libuipc's IPC pipeline (docs/contact.md): Newton from an intersection-free start (q^t, or the
    last step's motion repeated where the way there is collision-free), each
    direction from the terms' PSD-modified Hessians plus the contact Hessian (:mod:`solver.contact`:
    barrier and lagged friction, J^T H J), the step capped by CCD at the largest collision-free
    fraction, then halved until the incremental potential (with the barrier and friction)
    decreases. A direction passing the convergence test of :func:`solve_step` ends the step where
    the gradient there passes it too, measured as the motion it would give each body alone
    against its mass and its barrier block, (M_b + H_b)^-1 g_b (a residual test,
    :meth:`ContactNewtonStep.force_size`), except that where the state moved by more than the
    tolerance since the friction was lagged, the friction is re-lagged there, at most
    :data:`FRICTION_RELAGS_MAX` times, and Newton goes on from there.

    Args:
        potential: the step's :class:`IncrementalPotential`, bound to q and the step's inputs
            (:meth:`IncrementalPotential.bind`).
        contact: the :class:`solver.contact.ContactSurface`, its step begun at q^t and its
            friction lagged at the start.
        q: (bodies, 12) the start on entry (intersection-free, reached from q^t along a
            collision-free way), the minimiser on return (non-dynamic rows untouched).
        corners: (bodies, 8, 3) body-local bounding-box corners, m (the convergence test's points).
        dt: the time step, s.
        settings: the scene's :class:`solver.scene.Settings` (tolerances, iteration caps).
        mass_inverse: (dynamic, 12, 12) the inverse 12x12 mass matrices of the dynamic bodies.

    Raises:
        NewtonFailure: a non-finite energy, gradient or direction, or a singular system.
    """
    return ContactNewtonStep(potential, contact, q, corners, dt, settings, mass_inverse).solve()
