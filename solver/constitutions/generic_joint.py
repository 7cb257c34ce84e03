"""Generic joint (ours): six joint coordinates, each free, locked, sprung, damped or limited.

Source: docs/constitutions/generic_joint.md. The coordinates are those of Bullet's generic
six-degree-of-freedom constraints (``btGeneric6DofSpring2Constraint``, Blender's Generic and
Generic Spring): the position of body j's anchor in body i's joint axes, and the XYZ Euler angles
of body j's joint axes relative to body i's.

With c_k = J(c̄_k) q_k the anchor on body k, e_k,a = A_k ē_k,a its joint axes (a = x, y, z),
d = c_j − c_i and R_ab = e_i,a · e_j,b:

    x_a = e_i,a · d                       (a = x, y, z; m)
    x_3 = atan2(−R_yz, R_zz)              (rad)
    x_4 = atan2(R_xz, √(R_yz² + R_zz²))
    x_5 = atan2(−R_xy, R_xx)

and per coordinate k (r_k its rest value, x_k^t its value at the step start, all per element):

    E_k = ½ (λ_k K + dt² k_k) (x_k − r_k)² + ½ dt c_k (x_k − x_k^t)² + P(x_k, l_k, u_k, s),

λ_k = 1 where the coordinate is locked, K = γ (m_i + m_j) the joint's strength (not dt²-scaled,
as the other joints), k_k the spring's stiffness (N/m, N·m/rad), c_k its damping (N·s/m,
N·m·s/rad: the dissipation c ẋ²/2 of implicit Euler, ẋ = (x − x^t)/dt, times dt²) and P the
cubic limit penalty of #669/#670 on limited coordinates (:mod:`.joint_limit_penalty`). Angle
differences are taken to the nearest turn. An element whose ``active`` input is 0 (a broken joint)
has no energy.

F = [c_i; c_j; e_i,x; e_i,y; e_i,z; e_j,x; e_j,y; e_j,z] (24) is linear in q; with f_k the sum
above as a function of x_k, ∇_F E = Σ f'_k ∇x_k and H_F = Σ f''_k ∇x_k ∇x_kᵀ + Σ f'_k ∇²x_k, whose
second sum is made PSD (symmetric eigendecomposition, negative eigenvalues clamped) when projecting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..affine_body import direction_jacobians, point_jacobians
from . import base
from ._kernels import BoundTerm, as_bodies, as_float_array, as_float_view, check_limits, check_state, state_rows
from .base import BuildContext, Constitution

#: The coordinates that are angles (rad); the first three are lengths (m).
ANGULAR = np.array([False, False, False, True, True, True])
#: Slices of F: the two anchors and the six axes.
_C_I, _C_J = slice(0, 3), slice(3, 6)
_E_I = [slice(6 + 3 * a, 9 + 3 * a) for a in range(3)]
_E_J = [slice(15 + 3 * a, 18 + 3 * a) for a in range(3)]


@dataclass
class GenericJointInput:
    """A :class:`GenericJoint` term's per-step input.

    Attributes:
        x_t: (n, 6) the joint coordinates at the step start, m and rad (for the damping).
        active: (n,) 1 while the joint holds, 0 once it has broken (no energy).
    """

    x_t: np.ndarray
    active: np.ndarray

    @classmethod
    def default(cls, n: int) -> GenericJointInput:
        """For ``n`` elements: starting at the rest frame, every joint holding."""
        return cls(np.zeros((n, 6)), np.ones(n))


def _bilinear(F, a: slice, b: slice):
    """s = F[a] · F[b] (n,), its gradient (n, 24) and constant Hessian (24, 24) in F."""
    value = np.einsum("ek,ek->e", F[:, a], F[:, b])
    gradient = np.zeros_like(F)
    gradient[:, a] += F[:, b]
    gradient[:, b] += F[:, a]
    hessian = np.zeros((24, 24))
    hessian[a, b] += np.eye(3)
    hessian[b, a] += np.eye(3)
    return value, gradient, np.broadcast_to(hessian, (F.shape[0], 24, 24))


def _atan2(y, x):
    """θ = atan2(y, x) of (value, gradient (n, 24), Hessian (n, 24, 24)) triples y and x."""
    (yv, yg, yh), (xv, xg, xh) = y, x
    rho2 = xv * xv + yv * yv
    d_y, d_x = xv / rho2, -yv / rho2
    d_yy, d_xx, d_xy = -2.0 * xv * yv / rho2**2, 2.0 * xv * yv / rho2**2, (yv * yv - xv * xv) / rho2**2
    gradient = d_y[:, None] * yg + d_x[:, None] * xg
    outer_xy = np.einsum("ea,eb->eab", xg, yg)
    hessian = (d_y[:, None, None] * yh + d_x[:, None, None] * xh
               + d_yy[:, None, None] * np.einsum("ea,eb->eab", yg, yg)
               + d_xx[:, None, None] * np.einsum("ea,eb->eab", xg, xg)
               + d_xy[:, None, None] * (outer_xy + outer_xy.transpose(0, 2, 1)))
    return np.arctan2(yv, xv), gradient, hessian


def _norm2(a, b):
    """r = √(a² + b²) of two (value, gradient, Hessian) triples."""
    (av, ag, ah), (bv, bg, bh) = a, b
    r = np.sqrt(av * av + bv * bv)
    gradient = (av[:, None] * ag + bv[:, None] * bg) / r[:, None]
    hessian = ((np.einsum("ea,eb->eab", ag, ag) + np.einsum("ea,eb->eab", bg, bg)
                + av[:, None, None] * ah + bv[:, None, None] * bh) / r[:, None, None]
               - np.einsum("ea,eb->eab", gradient, gradient) / r[:, None, None])
    return r, gradient, hessian


def _combined(F, centre, a: int, b: int):
    """m_ab = w_a · e_j,b with w_a = Σ_c centre[:, c, a] e_i,c (n,), its gradient (n, 24) and Hessian
    (n, 24, 24) in F: the relative rotation's entry (a, b) in the axes ``centre`` (n, 3, 3) of body i."""
    n = F.shape[0]
    axis_j = F[:, _E_J[b]]
    w = sum(centre[:, c, a, None] * F[:, _E_I[c]] for c in range(3))
    gradient = np.zeros((n, 24))
    hessian = np.zeros((n, 24, 24))
    for c in range(3):
        gradient[:, _E_I[c]] = centre[:, c, a, None] * axis_j
        hessian[:, _E_I[c], _E_J[b]] = centre[:, c, a, None, None] * np.eye(3)
        hessian[:, _E_J[b], _E_I[c]] = centre[:, c, a, None, None] * np.eye(3)
    gradient[:, _E_J[b]] = w
    return np.einsum("ek,ek->e", w, axis_j), gradient, hessian


def _sum(first, second, sign: float = 1.0):
    """first + sign · second of two (value, gradient, Hessian) triples."""
    return tuple(x + sign * y for x, y in zip(first, second))


def _scaled_square(term, scale):
    """(term / scale)² of a (value, gradient, Hessian) triple, ``scale`` (n,)."""
    value, gradient, hessian = term
    s2 = scale * scale
    return (value * value / s2, 2.0 * value[:, None] * gradient / s2[:, None],
            2.0 * (np.einsum("ea,eb->eab", gradient, gradient) + value[:, None, None] * hessian) / s2[:, None, None])


def cone_F(F: np.ndarray, centre: np.ndarray, swing: np.ndarray):
    """The swing measure g and the twist ψ (each a (value (n,), gradient (n, 24), Hessian
    (n, 24, 24)) triple) of F (n, 24) about the cone's axes ``centre`` (n, 3, 3, columns in body i's
    joint axes) with half-angles ``swing`` (n, 2) about y and z: with M = centreᵀ X_iᵀ X_j,
    g = (M_zx / sin Y)² + (M_yx / sin Z)² (1 on the elliptical cone's edge) and
    ψ = atan2(M_zy − M_yz, M_yy + M_zz) (the twist about x, 2 atan2(q_x, q_w) of M's quaternion)."""
    m = {(a, b): _combined(F, centre, a, b) for a, b in ((2, 0), (1, 0), (2, 1), (1, 2), (1, 1), (2, 2))}
    g = _sum(_scaled_square(m[2, 0], np.sin(swing[:, 0])), _scaled_square(m[1, 0], np.sin(swing[:, 1])))
    twist = _atan2(_sum(m[2, 1], m[1, 2], -1.0), _sum(m[1, 1], m[2, 2]))
    return g, twist


def _negated(term):
    value, gradient, hessian = term
    return -value, -gradient, -hessian


def coordinates_F(F: np.ndarray, derivatives: bool = True):
    """The six joint coordinates x (n, 6) of F (n, 24) (module docstring) and, with
    ``derivatives``, their gradients (n, 6, 24) and Hessians (n, 6, 24, 24) in F."""
    n = F.shape[0]
    values, gradients, hessians = np.empty((n, 6)), np.zeros((n, 6, 24)), np.zeros((n, 6, 24, 24))
    d = F[:, _C_J] - F[:, _C_I]
    for a in range(3):  # x_a = e_i,a · (c_j − c_i)
        axis = F[:, _E_I[a]]
        values[:, a] = np.einsum("ek,ek->e", axis, d)
        gradients[:, a, _E_I[a]] = d
        gradients[:, a, _C_J] = axis
        gradients[:, a, _C_I] = -axis
        for block, sign in ((_C_J, 1.0), (_C_I, -1.0)):
            hessians[:, a, _E_I[a], block] += sign * np.eye(3)
            hessians[:, a, block, _E_I[a]] += sign * np.eye(3)
    if not derivatives:
        R = np.einsum("eak,ebk->eab", F[:, 6:15].reshape(n, 3, 3), F[:, 15:24].reshape(n, 3, 3))
        values[:, 3] = np.arctan2(-R[:, 1, 2], R[:, 2, 2])
        values[:, 4] = np.arctan2(R[:, 0, 2], np.hypot(R[:, 1, 2], R[:, 2, 2]))
        values[:, 5] = np.arctan2(-R[:, 0, 1], R[:, 0, 0])
        return values, None, None
    r_yz, r_zz = _bilinear(F, _E_I[1], _E_J[2]), _bilinear(F, _E_I[2], _E_J[2])
    r_xz, r_xy, r_xx = _bilinear(F, _E_I[0], _E_J[2]), _bilinear(F, _E_I[0], _E_J[1]), _bilinear(F, _E_I[0], _E_J[0])
    angles = (_atan2(_negated(r_yz), r_zz), _atan2(r_xz, _norm2(r_yz, r_zz)), _atan2(_negated(r_xy), r_xx))
    for k, (value, gradient, hessian) in enumerate(angles):
        values[:, 3 + k], gradients[:, 3 + k], hessians[:, 3 + k] = value, gradient, hessian
    return values, gradients, hessians


def _nearest_turn(difference: np.ndarray) -> np.ndarray:
    """(n, 6) differences of coordinates, the angular ones taken to (−π, π]."""
    wrapped = difference - 2.0 * np.pi * np.round(difference / (2.0 * np.pi))
    return np.where(ANGULAR, wrapped, difference)


def _penalty(x, lower, upper, strength):
    """The cubic limit penalty of :mod:`.joint_limit_penalty` elementwise: (E, E', E'') arrays."""
    width = upper - lower
    scale = np.where(width > 0.0, width, 1.0)
    above, below = np.maximum(x - upper, 0.0) / scale, np.maximum(lower - x, 0.0) / scale
    energy = strength * (above**3 + below**3)
    first = 3.0 * strength * (above**2 - below**2) / scale
    second = 6.0 * strength * (above + below) / scale**2
    return energy, first, second


class GenericJoint(Constitution):
    """Generic joint between body i (parent, ``bodies[:, 0]``) and body j (child, ``bodies[:, 1]``).

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        anchor_i, anchor_j: (n, 3) body-local images c̄_i, c̄_j of the joint's world origin, m.
        frame_i, frame_j: (n, 3, 3) body-local images ē_k,a of the joint's world x, y, z axes (rows).
        dt: the time step, s (the springs are dt²-scaled, the damping dt-scaled); the attribute
            ``dt`` may change between steps (a step split in pieces), read at each ``bind``.
        stiffness: (n,) K = γ (m_i + m_j) of the locked coordinates, kg.
        locked: (n, 6) bool, the coordinates held at their rest value by K.
        rest: (n, 6) rest values r, m and rad.
        spring_stiffness: (n, 6) k, N/m and N·m/rad (0: no spring).
        damping: (n, 6) c, N·s/m and N·m·s/rad.
        limited: (n, 6) bool, the coordinates kept in [lower, upper] by the cubic penalty.
        lower, upper: (n, 6) the limits, m and rad (lower <= upper where limited).
        limit_strength: (n,) s of the penalty, J (of the cone's too).
        cone: (n,) bool, the elements with a swing cone and twist limit.
        cone_axes: (n, 3, 3) the cone's axes (columns) in body i's joint axes: its x the cone's
            centre and the twist axis (the identity where not given).
        swing: (n, 2) the cone's half-angles about its y and z, rad, in (0, π/2).
        twist: (n,) the twist limit's half-angle about the cone's x, rad, > 0.
        break_force: (n,) the force past which a locked linear coordinate breaks the joint, N
            (+inf: unbreakable).
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Every per-coordinate argument left out leaves the coordinates free (no lock, spring, damping
    or limit), and ``break_force`` unbreakable.

    Raises:
        ValueError: on wrong shapes, negative body indices, non-finite values, or lower > upper on
            a limited coordinate.
    """

    uid = 0
    Input = GenericJointInput

    @classmethod
    def build(cls, context: BuildContext) -> GenericJoint:
        """One element per generic joint of the scene, its axes those of ``generic.axes``."""
        frames = context.joints(lambda joint: joint.type == "generic")
        generics = [context.scene.joints[index].generic for index in frames.indices]
        axes = np.array([g.axes for g in generics], dtype=np.float64).reshape(-1, 3, 3)
        # The body-local image of joint axis a = Σ_b axes[b, a] (image of world axis b).
        frame_i, frame_j = (np.einsum("eba,ebc->eac", axes, frame) for frame in (frames.frame_i, frames.frame_j))

        def field(name, dtype=np.float64):
            return np.array([getattr(g, name) for g in generics], dtype=dtype).reshape(-1, 6)

        cone = np.array([g.swing_limit is not None for g in generics], dtype=bool)
        swing = np.array([(np.pi / 4, np.pi / 4) if g.swing_limit is None else g.swing_limit for g in generics],
                         dtype=np.float64).reshape(-1, 2)
        twist = np.array([np.pi if g.twist_limit is None else g.twist_limit for g in generics], dtype=np.float64)
        cone_axes = np.array([g.cone_axes for g in generics], dtype=np.float64).reshape(-1, 3, 3)
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frame_i, frame_j, context.dt,
                   cone=cone, cone_axes=cone_axes, swing=swing, twist=twist,
                   stiffness=frames.stiffness, locked=field("locked", bool), rest=field("rest"),
                   spring_stiffness=field("stiffness"), damping=field("damping"), limited=field("limited", bool),
                   lower=field("lower"), upper=field("upper"),
                   limit_strength=np.array([g.limit_strength for g in generics], dtype=np.float64),
                   break_force=np.array([np.inf if g.break_force is None else g.break_force for g in generics],
                                        dtype=np.float64),
                   joint_indices=frames.indices)

    def __init__(self, bodies, anchor_i, anchor_j, frame_i, frame_j, dt: float, stiffness=None, locked=None,
                 rest=None, spring_stiffness=None, damping=None, limited=None, lower=None, upper=None,
                 limit_strength=None, cone=None, cone_axes=None, swing=None, twist=None, break_force=None,
                 joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        anchor_i, anchor_j = as_float_array(anchor_i, (n, 3), "anchor_i"), as_float_array(anchor_j, (n, 3), "anchor_j")
        frame_i, frame_j = as_float_array(frame_i, (n, 3, 3), "frame_i"), as_float_array(frame_j, (n, 3, 3), "frame_j")
        jacobian = np.zeros((n, 24, 24))
        jacobian[:, _C_I, 0:12] = point_jacobians(anchor_i)
        jacobian[:, _C_J, 12:24] = point_jacobians(anchor_j)
        for a in range(3):
            jacobian[:, _E_I[a], 0:12] = direction_jacobians(frame_i[:, a])
            jacobian[:, _E_J[a], 12:24] = direction_jacobians(frame_j[:, a])
        jacobian.flags.writeable = False
        self._jacobian = jacobian
        self._jacobian_transpose = np.ascontiguousarray(jacobian.transpose(0, 2, 1))
        self.dt = float(dt)

        def given(value, shape, name, default=0.0):
            if value is None:
                return np.full(shape, default)
            return as_float_array(value, shape, name)

        self.stiffness = given(stiffness, (n,), "stiffness")
        self.locked = given(locked, (n, 6), "locked") != 0.0
        self.rest = given(rest, (n, 6), "rest")
        self.spring_stiffness = given(spring_stiffness, (n, 6), "spring_stiffness")
        self.damping = given(damping, (n, 6), "damping")
        self.limited = given(limited, (n, 6), "limited") != 0.0
        self.lower = given(lower, (n, 6), "lower")
        self.upper = given(upper, (n, 6), "upper")
        self.limit_strength = given(limit_strength, (n,), "limit_strength")
        self.cone = given(cone, (n,), "cone") != 0.0
        self.cone_axes = np.tile(np.eye(3), (n, 1, 1)) if cone_axes is None else as_float_array(cone_axes, (n, 3, 3),
                                                                                                 "cone_axes")
        self.swing = given(swing, (n, 2), "swing", np.pi / 4)
        self.twist = given(twist, (n,), "twist", np.pi / 4)
        if np.any(self.cone & ((self.swing <= 0.0) | (self.swing >= np.pi / 2)).any(axis=1)):
            raise ValueError("swing: a cone's half-angles must lie in (0, π/2)")
        if np.any(self.cone & (self.twist <= 0.0)):
            raise ValueError("twist: a twist limit's half-angle must be > 0")
        self.break_force = np.full(n, np.inf) if break_force is None else np.array(break_force, dtype=np.float64)
        if self.break_force.shape != (n,) or np.any(np.isnan(self.break_force)):
            raise ValueError(f"break_force: expected shape ({n},) without NaN, got {self.break_force.shape}")
        check_limits(np.where(self.limited, self.lower, 0.0), np.where(self.limited, self.upper, 0.0))
        for array in (self.stiffness, self.locked, self.rest, self.spring_stiffness, self.damping, self.limited,
                      self.lower, self.upper, self.limit_strength, self.cone, self.cone_axes, self.swing, self.twist,
                      self.break_force):
            array.flags.writeable = False

    def _F(self, q: np.ndarray) -> np.ndarray:
        q_elements = q[self.bodies].reshape(-1, 24)
        return np.einsum("eab,eb->ea", self._jacobian, q_elements)

    def coordinates(self, q: np.ndarray) -> np.ndarray:
        """The joint coordinates x (n, 6) at q (n_bodies, 12): m along, rad about body i's joint axes."""
        return coordinates_F(self._F(check_state(q, self.state_rows)), derivatives=False)[0]

    def cone_coordinates(self, q: np.ndarray) -> np.ndarray:
        """(n, 2) the swing measure g (1 on the cone's edge) and the twist ψ (rad) at q (:func:`cone_F`)."""
        g, twist = cone_F(self._F(check_state(q, self.state_rows)), self.cone_axes, self.swing)
        return np.stack([g[0], twist[0]], axis=1)

    def bind(self, inputs: GenericJointInput, project: bool = True) -> BoundTerm:
        """The term with the step-start coordinates and the break state (``inputs``) checked and
        bound, for one time step (:class:`BoundTerm`, no gradient-only kernel); ``project``:
        Σ f'' ∇x∇xᵀ + PSD(Σ f' ∇²x) (True) or the exact Hessian.

        Raises:
            ValueError: on wrong shapes.
        """
        n = self.bodies.shape[0]
        x_t = as_float_view(inputs.x_t, (n, 6), "x_t")
        active = as_float_view(inputs.active, (n,), "active")
        weight = active[:, None] * (self.locked * self.stiffness[:, None] + self.dt**2 * self.spring_stiffness)
        damping = active[:, None] * self.dt * self.damping
        strength = active[:, None] * self.limited * self.limit_strength[:, None]
        lower, upper = np.where(self.limited, self.lower, -np.inf), np.where(self.limited, self.upper, np.inf)

        def scalar(x):
            """(E, E', E'') (n, 6) of each coordinate's energy."""
            offset, motion = _nearest_turn(x - self.rest), _nearest_turn(x - x_t)
            energy, first, second = _penalty(x, lower, upper, strength)
            energy = energy + 0.5 * weight * offset**2 + 0.5 * damping * motion**2
            return energy, first + weight * offset + damping * motion, second + weight + damping

        cone = self.cone.any()
        cone_strength = active * self.cone * self.limit_strength
        cone_lower = np.stack([np.full(n, -1.0), -self.twist], axis=1)
        cone_upper = np.stack([np.ones(n), self.twist], axis=1)

        def cone_terms(F):
            """(values (n, 2), gradients (n, 2, 24), Hessians (n, 2, 24, 24)) of g and ψ."""
            terms = cone_F(F, self.cone_axes, self.swing)
            return tuple(np.stack([term[k] for term in terms], axis=1) for k in range(3))

        def energy(q):
            if n == 0:
                return 0.0
            F = self._F(q)
            total = float(np.sum(scalar(coordinates_F(F, derivatives=False)[0])[0]))
            if cone:
                total += float(np.sum(_penalty(cone_terms(F)[0], cone_lower, cone_upper, cone_strength[:, None])[0]))
            return total

        def gradient_hessian(q, gradient, hessian):
            if n == 0:
                return
            F = self._F(q)
            values, gradients, hessians = coordinates_F(F)
            _, first, second = scalar(values)
            if cone:
                cone_values, cone_gradients, cone_hessians = cone_terms(F)
                _, cone_first, cone_second = _penalty(cone_values, cone_lower, cone_upper, cone_strength[:, None])
                first, second = np.concatenate([first, cone_first], 1), np.concatenate([second, cone_second], 1)
                gradients = np.concatenate([gradients, cone_gradients], 1)
                hessians = np.concatenate([hessians, cone_hessians], 1)
            gradient_F = np.einsum("ek,eka->ea", first, gradients)
            curvature = np.einsum("eka,ekb->eab", second[:, :, None] * gradients, gradients)
            geometric = np.einsum("ek,ekab->eab", first, hessians)
            if project:
                geometric = 0.5 * (geometric + geometric.transpose(0, 2, 1))
                eigenvalues, eigenvectors = np.linalg.eigh(geometric)
                geometric = np.einsum("eak,ek,ebk->eab", eigenvectors, np.maximum(eigenvalues, 0.0), eigenvectors)
            jacobian = self._jacobian
            gradient[:] = np.einsum("eab,ea->eb", jacobian, gradient_F)
            np.matmul(self._jacobian_transpose, (curvature + geometric) @ jacobian, out=hessian)

        return BoundTerm(energy, None, gradient_hessian)

    def constraint_force(self, q: np.ndarray) -> np.ndarray:
        """(n,) the largest force a locked linear coordinate carries at q, N: K |x_a − r_a| / dt²
        (the joint's strength K acts as a spring of K / dt² N/m)."""
        offset = np.abs(self.coordinates(q)[:, :3] - self.rest[:, :3]) * self.locked[:, :3]
        return np.max(offset, axis=1, initial=0.0) * self.stiffness / self.dt**2
