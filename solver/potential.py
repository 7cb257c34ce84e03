"""The incremental potential of a time step: the sum of the energy terms over the unknowns.

:class:`IncrementalPotential` binds the terms to a step's inputs (:class:`solver.control.Control`),
evaluates their energy, gradient and Hessian, assembles them into the block-sparse Newton system
(:mod:`solver.assembly`) and factorises it (:mod:`solver.linear_solver`, or the GPU's
:mod:`solver.device_solver`), trying the terms' exact Hessians before their PSD modifications.
The Newton loop that minimises it is :mod:`solver.newton`. Also here: :class:`BackOff`, with
which the potential and the loop skip shortcuts that keep failing.
"""

from __future__ import annotations

import numpy as np

from .assembly import Assembly
from .constitutions._kernels import check_state
from .device_solver import linear_solver_for
from .linear_solver import SingularSystem

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
        # The terms' element gradients lie one after the other in one flat buffer, and so do the
        # Hessians of the terms whose Hessian is not constant: one compiled call sums each into
        # the Newton system for all terms (Assembly.sum_gradients, LinearSolver.factorize_sum).
        self._active = [index for index, term in enumerate(terms) if len(term.bodies)]
        sizes = [(len(terms[index].bodies), 12 * terms[index].bodies.shape[1]) for index in self._active]
        hessian_offsets = np.cumsum([0] + [n * size * size for (n, size), index in zip(sizes, self._active)
                                           if not self.constant[index]])
        self._gradient_elements = np.empty(sum(n * size for n, size in sizes))
        self._hessian_elements = np.empty(int(hessian_offsets[-1]))
        self._outputs: list = [None] * len(terms)
        gradient_offset, hessian_index = 0, 0
        for index, (n, size) in zip(self._active, sizes):
            gradient = self._gradient_elements[gradient_offset:gradient_offset + n * size].reshape(n, size)
            gradient_offset += n * size
            hessian = None
            if not self.constant[index]:
                start = int(hessian_offsets[hessian_index])
                hessian = self._hessian_elements[start:start + n * size * size].reshape(n, size, size)
                hessian_index += 1
            self._outputs[index] = (gradient, hessian)
        self._bindings = [(terms[index], self.inputs[index], self._outputs[index]) for index in self._active]
        self._gradient_rows = self.assembly.gradient_rows([self.element_bodies[index] for index in self._active])
        self._band_map = None if self.linear_solver.method != "banded" else self.linear_solver.element_band_map(
            [self.assembly.block_indices[index] for index in self._active if not self.constant[index]],
            list(hessian_offsets[:-1]))
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
        return [tuple([getattr(control, name) for name in names]) for names in self.inputs]

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
        energies, gradient_fills, fills = [], [], []
        for term, names, (gradient, hessian) in self._bindings:
            try:
                bound = term.bind(*[getattr(control, name) for name in names]) if names else term.bind()
            except ValueError as error:
                if not names:
                    raise
                raise ValueError(f"control.{' or control.'.join(names)}: {error}") from error
            # A call and its outputs: the gradient kernel, or the gradient and Hessian where the
            # term has no gradient kernel (those with a constant Hessian all have one).
            gradient_fill = (bound.gradient, (gradient,)) if bound.gradient is not None else (
                bound.gradient_hessian, (gradient, hessian))
            gradient_fills.append(gradient_fill)
            fills.append(gradient_fill if hessian is None else (bound.gradient_hessian, (gradient, hessian)))
            energies.append(bound.energy)
        self._control = control
        self._energies = energies
        # Per term with elements, in the terms' order: (call, outputs), call(q, *outputs) writing
        # its element gradients (and Hessians where they are not constant) into its part of the
        # flat buffers; the gradient alone where the term has a gradient kernel.
        self._fills = fills
        self._gradient_fills = gradient_fills

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
        for call, outputs in self._gradient_fills:
            call(q, *outputs)
        return self.assembly.sum_gradients(self._gradient_elements, self._gradient_rows)

    def chord(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gradient g (12 x dynamic,) at q (bodies, 12) and the chord step -H^-1 g (12 x
        dynamic,) with the last factorised Newton matrix H (no new factorisation); terms as bound
        by :meth:`bind`. On the banded path the gradient's sum and the solve are one compiled call
        (:meth:`LinearSolver.solve_sum`).

        Raises:
            ValueError: no factorisation is held.
        """
        self._require_bound()
        for call, outputs in self._gradient_fills:
            call(q, *outputs)
        if self.linear_solver.method == "banded":
            return self.linear_solver.solve_sum(self._gradient_elements, self._gradient_rows)
        gradient = self.assembly.sum_gradients(self._gradient_elements, self._gradient_rows)
        return gradient, self.linear_solver.solve_factorized(-gradient)

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
        first time), or None for a term without elements: views of the flat buffers, filled."""
        self._require_bound()
        if self.constant_blocks is None:
            self.refresh_constant_hessian(q, self._control)
        for call, outputs in self._fills:
            call(q, *outputs)
        return self._outputs

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
                gradient, solution = self._factorize(q)
            except SingularSystem:
                pass
            else:
                if self.linear_solver.detects_indefinite or positive_curvature(gradient, solution):
                    self.exact_backoff.record(True)
                    return gradient, solution
            self.exact_backoff.record(False)
            self._set_projection(1.0)
        return self._factorize(q)

    def _set_projection(self, weight: float) -> None:
        """Set the curvature_projection of the terms that have one (0 exact, 1 modified)."""
        for term in self._weighted:
            term.curvature_projection = weight

    def _factorize(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`factorize` with the terms' curvature projections as they are set."""
        if self.linear_solver.method != "banded":
            gradient, blocks = self.gradient_hessian(q)
            self.linear_solver.factorize(blocks)
            return gradient, self.linear_solver.solve_factorized(-gradient)
        self._element_derivatives(q)
        self.linear_solver.factorize_sum(self._constant_band, self._hessian_elements, self._band_map)
        return self.linear_solver.solve_sum(self._gradient_elements, self._gradient_rows)
