"""What every energy term declares about itself, and the public calls all of them share.

A constitution (one module each) declares:

- ``uid``: its libuipc constitution number (0 for a term that is not one of libuipc's);
- ``Input``: the dataclass of its per-step inputs, the part of :class:`solver.control.Control`
  it takes after q (None for a term that takes none);
- ``build(context)``: the term of a scene, from the model's :class:`BuildContext` (which joints it
  applies to, their frame-0 geometry, stiffness and indices, or the bodies' masses), everything
  it holds for the whole run passed to its constructor;
- ``bind(*inputs, project=True)``: its kernels with the inputs checked once, for the calls of one
  time step (:class:`._kernels.BoundTerm`).

The public ``energy``, ``gradient_hessian`` and ``gradient`` are this class's, through ``bind``.
A :class:`Registration` line in :data:`solver.constitutions.REGISTRY` names the term (the
:class:`solver.model.Model` attribute and the Control part) and places it in the order the
Newton loop sums the terms; docs/architecture.md, "Adding a constitution", walks through one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Protocol

import numpy as np

from ._kernels import BoundTerm, bound_gradient_hessian, check_state


@dataclass
class JointFrames:
    """The frame-0 geometry of the n joints of a scene that a constitution applies to, each in its
    two bodies' local frames (body i = the joint's ``l_body``, j = its ``r_body``), in scene order.

    Attributes:
        indices: (n,) int, the joints' indices in ``scene.joints``.
        bodies: (n, 2) int, the global body indices (i, j).
        masses: (n,) m_i + m_j, kg.
        stiffness: (n,) K = strength_ratio (m_i + m_j), kg.
        anchor_i, anchor_j: (n, 3) the anchor (an axis joint's first point, ``position0``; an
            anchored joint's ``position``), m.
        points_i, points_j: (n, 2, 3) an axis joint's two points, m.
        basis_i, basis_j: (n, 2, 3) an axis joint's [n̄, b̄], unit, ⟂ the axis (n = normalize(t ×
            helper), b = normalize(t × n), t̂ from point 0 to point 1).
        frame_i, frame_j: (n, 3, 3) rows: an axis joint's t̄, n̄, b̄; an anchored joint's images
            of the world x, y, z axes.

    The fields that a joint's type lacks (the points and basis of an anchored joint) are NaN,
    which every constructor refuses.
    """

    indices: np.ndarray
    bodies: np.ndarray
    masses: np.ndarray
    stiffness: np.ndarray
    anchor_i: np.ndarray
    anchor_j: np.ndarray
    points_i: np.ndarray
    points_j: np.ndarray
    basis_i: np.ndarray
    basis_j: np.ndarray
    frame_i: np.ndarray
    frame_j: np.ndarray


class BuildContext(Protocol):
    """What :meth:`Constitution.build` reads of the scene being modelled (:class:`solver.model.Model`
    fills it)."""

    #: The validated :class:`solver.scene.Scene`.
    scene: Any
    #: Time step, s.
    dt: float
    #: (dynamic bodies,) int, the dynamic bodies' indices in ``scene.bodies``.
    dynamic_indices: np.ndarray
    #: The terms built so far, by registration name.
    terms: dict[str, Constitution]

    def dyadic_masses(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m (n,) kg, m x̄ (n, 3) kg m, S (n, 3, 3) kg m²) of the bodies ``indices`` (n,)."""

    def volumes(self, indices: np.ndarray) -> np.ndarray:
        """(n,) the volumes of the bodies ``indices`` (n,), m³."""

    def joints(self, select: Callable[[Any], bool]) -> JointFrames:
        """The joints of the scene for which ``select(joint)`` is true (:class:`JointFrames`)."""


class Constitution:
    """Base of every energy term: the shared public calls, through the subclass's ``bind``.

    Attributes:
        bodies: (n, k) int, the global body indices of each element (set by the subclass).
        state_rows: how many bodies a state q must hold (:func:`._kernels.state_rows`).
    """

    #: libuipc's constitution UID (0: not a libuipc constitution).
    uid: ClassVar[int] = 0
    #: The per-step input dataclass (a ``default(n)`` class method gives n elements' defaults),
    #: or None for a term without per-step inputs.
    Input: ClassVar[Optional[type]] = None
    #: Whether the Hessian does not depend on q (the Newton loop then assembles it once per frame).
    constant_hessian: ClassVar[bool] = False

    bodies: np.ndarray
    state_rows: int
    #: ``bind(*inputs, project=True)``: the kernels with the term's parameters and ``inputs``
    #: checked and bound (each subclass's own).
    bind: Callable[..., BoundTerm]

    @classmethod
    def build(cls, context: BuildContext) -> Constitution:
        """The term of the scene of ``context`` (n elements, possibly 0)."""
        raise NotImplementedError(f"{cls.__name__} is not built from a scene")

    @property
    def element_size(self) -> int:
        """12 k, the DOFs of one element of k bodies."""
        return 12 * self.bodies.shape[1]

    def energy(self, q: np.ndarray, *inputs: Any) -> float:
        """Sum of the element energies, J. q: (n_bodies, 12); ``inputs``: the term's per-step inputs.

        Raises:
            ValueError: on a wrong q or inputs.
        """
        return self.bind(*inputs).energy(check_state(q, self.state_rows))

    def gradient_hessian(self, q: np.ndarray, *inputs: Any, project: bool = True,
                         out=None) -> tuple[np.ndarray, np.ndarray]:
        """Per-element gradient (n, 12 k) and Hessian (n, 12 k, 12 k), the first body's DOFs first;
        ``project``: the Newton loop's PSD Hessian (see the term's ``bind``) or the exact one.
        ``out``: optional (gradient, hessian) arrays of these shapes, filled and returned.

        Raises:
            ValueError: on a wrong q, inputs or ``out``.
        """
        return bound_gradient_hessian(self, q, inputs, project, out, self.element_size)

    def gradient(self, q: np.ndarray, *inputs: Any) -> np.ndarray:
        """Per-element gradient (n, 12 k) alone (from :meth:`gradient_hessian` where the term has
        no gradient-only kernel).

        Raises:
            ValueError: on a wrong q or inputs.
        """
        gradient = self.bind(*inputs).gradient
        if gradient is None:
            return self.gradient_hessian(q, *inputs)[0]
        return gradient(check_state(q, self.state_rows))


@dataclass(frozen=True)
class Registration:
    """One registered energy term: its name (the :class:`solver.model.Model` attribute, and the
    :class:`solver.control.Control` part of its inputs), its class, whether the Newton loop sums it
    on its own (False for a term summed inside another, as the prismatic extras are in the
    prismatic group), and the Control parts its ``bind`` takes (default: its own, where its class
    has an ``Input``)."""

    name: str
    constitution: type[Constitution]
    summed: bool = True
    inputs: Optional[tuple[str, ...]] = None

    @property
    def control_parts(self) -> tuple[str, ...]:
        """The names of the Control parts the term's methods take after q, in order."""
        if self.inputs is not None:
            return self.inputs
        return (self.name,) if self.constitution.Input is not None else ()


def joint_indices(value, n: int) -> np.ndarray:
    """A term's ``joint_indices`` (n,) int64, read-only: ``value`` or, where None, 0 .. n − 1.

    Raises:
        ValueError: on a wrong shape.
    """
    array = np.arange(n, dtype=np.int64) if value is None else np.array(value, dtype=np.int64).reshape(-1)
    if array.shape != (n,):
        raise ValueError(f"joint_indices: expected shape ({n},), got {array.shape}")
    array.flags.writeable = False
    return array
