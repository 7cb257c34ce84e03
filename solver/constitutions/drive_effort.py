"""The effort-limited, damped drive energy of one joint coordinate (#19, #21): a Huber-like
potential whose slope is capped at the drive's effort, plus the joint's damping.

Source: docs/constitutions/drive_effort.md (derivation); Huber, "Robust Estimation of a Location
Parameter", Ann. Math. Statist. 35 (1964), for the shape of the capped potential.

With r = x − x̃ (coordinate minus the step's target), K the drive's stiffness (J per unit²), c the
cap of its slope (J per unit: the effort times dt², so the generalised force K r / dt² never
exceeds the effort), s = x − xᵗ (the coordinate's change since the step start) and D the damping
stiffness (J per unit², the damping coefficient times dt):

    ρ(r) = K/2 r²                 for K |r| ≤ c,
    ρ(r) = c |r| − c²/(2K)        otherwise,
    E(x) = ρ(r) + D/2 s²,

C¹ and convex in x; c = ∞ gives the plain quadratic drive. With a cap, K is at most
c / :data:`SATURATION_RESIDUAL` (the kink at least that far from the target, a distance Newton's
steps resolve). Beyond the cap ρ'' = 0 while ρ'' = K
within it: Newton's method on the exact curvature jumps between the two and converges slowly
where a drive stalls. The Newton loop's (projected) curvature is therefore the secant
ρ'(r)/r = min(K, c/|r|) instead (Huber's iteratively reweighted least squares; the quadratic of
that curvature through ρ(r) majorises ρ), which equals ρ'' within the cap.
"""

from __future__ import annotations

from ..jit import helper


#: The smallest residual (rad or m) at which a drive reaches its effort limit: a drive stiffer
#: than cap / SATURATION_RESIDUAL is softened to it where it has a limit.
SATURATION_RESIDUAL = 1.0e-3


@helper
def _capped_stiffness(stiffness, cap):
    """K, or cap / SATURATION_RESIDUAL where that is smaller."""
    return min(stiffness, cap / SATURATION_RESIDUAL)


@helper
def drive_energy(residual, stiffness, cap, damping, change):
    """E (J) of the effort-capped drive at residual r = x − x̃ with the damping term at s = ``change``."""
    damped = 0.5 * damping * change * change
    stiffness = _capped_stiffness(stiffness, cap)
    if stiffness * abs(residual) <= cap:
        return 0.5 * stiffness * residual * residual + damped
    return cap * abs(residual) - 0.5 * cap * cap / stiffness + damped


@helper
def drive_first_second(residual, stiffness, cap, damping, change, secant):
    """(dE/dx, curvature) of :func:`drive_energy`: (K r + D s, K + D) below the cap; above it
    (c sign r + D s, D) exactly, or with the secant curvature c/|r| + D when ``secant`` is 1 (a
    weight in [0, 1] blends the two)."""
    stiffness = _capped_stiffness(stiffness, cap)
    if stiffness * abs(residual) <= cap:
        return stiffness * residual + damping * change, stiffness + damping
    return (cap if residual > 0.0 else -cap) + damping * change, damping + secant * cap / abs(residual)
