"""Cubic joint-limit penalty shared by the prismatic (UID 669) and revolute (UID 670) joint limits.

Source: libuipc's prismatic and revolute joint limit specifications,
docs/constitutions/669_prismatic_joint_limit.md and 670_revolute_joint_limit.md.

With window [l, u], width w = u − l and strength s (used raw: no mass or dt² scaling):

- l <= x <= u (boundaries included): E = 0;
- w > 0:  E = s ((x − u)/w)³ for x > u,  E = s ((l − x)/w)³ for x < l;
- w = 0:  E = s |x − l|³ (un-normalised fallback).

E is C² in x except at the bounds of the degenerate window, where it is still C² (|d|³).
"""

from __future__ import annotations

from ..jit import helper, kernel


@helper
def penalty(x, lower, upper, strength):
    """Limit penalty E(x) and its first two derivatives.

    Args:
        x: joint coordinate (m for prismatic, rad for revolute).
        lower: effective lower bound l, same unit as x.
        upper: effective upper bound u >= l, same unit as x (not checked here: the classes check).
        strength: s, energy unit J (the normalised gap is dimensionless when u > l; for u == l,
            s has units J / [x]³).

    Returns:
        (E, dE/dx, d²E/dx²) as floats.
    """
    width = upper - lower
    if x > upper:
        if width > 0.0:
            gap = (x - upper) / width
            return strength * gap**3, 3.0 * strength * gap * gap / width, 6.0 * strength * gap / (width * width)
        gap = x - upper
        return strength * gap**3, 3.0 * strength * gap * gap, 6.0 * strength * gap
    if x < lower:
        if width > 0.0:
            gap = (lower - x) / width
            return strength * gap**3, -3.0 * strength * gap * gap / width, 6.0 * strength * gap / (width * width)
        gap = lower - x
        return strength * gap**3, -3.0 * strength * gap * gap, 6.0 * strength * gap
    return 0.0, 0.0, 0.0


@kernel
def any_active(x, lower, upper):
    """Whether the penalty is active (E > 0) for some joint: some x[k] outside [lower[k],
    upper[k]] (x, lower, upper (n,)). One compiled loop: the stepper asks it twice a step."""
    for k in range(x.shape[0]):
        if x[k] < lower[k] or x[k] > upper[k]:
            return True
    return False

