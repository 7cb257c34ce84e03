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

C¹ and convex in x; c = ∞ gives the plain quadratic drive.
"""

from __future__ import annotations

from ..jit import helper


@helper
def drive_energy(residual, stiffness, cap, damping, change):
    """E (J) of the effort-capped drive at residual r = x − x̃ with the damping term at s = ``change``."""
    damped = 0.5 * damping * change * change
    if stiffness * abs(residual) <= cap:
        return 0.5 * stiffness * residual * residual + damped
    return cap * abs(residual) - 0.5 * cap * cap / stiffness + damped


@helper
def drive_first_second(residual, stiffness, cap, damping, change):
    """(dE/dx, d²E/dx²) of :func:`drive_energy`: (K r + D s, K + D) below the cap, (c sign r + D s, D) above."""
    if stiffness * abs(residual) <= cap:
        return stiffness * residual + damping * change, stiffness + damping
    return (cap if residual > 0.0 else -cap) + damping * change, damping
