"""Joint limits from a URDF ``<limit>``: #669 and #670 bounds for the reported coordinate, and their strength."""

from __future__ import annotations

import math
from typing import Callable

from ..scene import Limit
from ..validation_fields import MAX_MAGNITUDE


#: Base strength (J) of every #669/#670 limit unless given (scaled by :func:`scaled_limit_strength`).
DEFAULT_LIMIT_STRENGTH = 1.0e4
#: A URDF limit bound beyond +-this (m or rad) means "no limit" (Gazebo and SDFormat write +-1e16 for
#: an unlimited joint): the joint is imported without a limit, with a warning. Far inside the scene
#: format's cap on any number (:data:`solver.validation_fields.MAX_MAGNITUDE`, 1e12), so that the bounds
#: written, offset by the initial position, stay valid.
UNLIMITED_BOUND = 1.0e9


def scaled_limit_strength(strength: float, lower: float, upper: float) -> float:
    """Strength s (J) written to a limit with window [lower, upper]: ``strength * max(1, upper - lower)^3``,
    at most :data:`solver.validation_fields.MAX_MAGNITUDE` (1e12 J, the scene format's cap) unless ``strength``
    itself is more.

    The solver's cubic penalty s ((x - u) / (u - l))^3 divides the overshoot by the window width,
    so with a constant s a wide window (the cartpole's 30 m rail) would stop a joint far more
    softly than a narrow one. Scaling s by the width cubed for windows wider than one unit (m or
    rad) makes the stop as crisp as that of a 1-unit window: s' (x - u)^3 with s' = ``strength``.
    A window wider than (1e12 J / ``strength``)^(1/3) (464 units with the default 1e4 J) gets the
    cap, and so a softer stop.
    """
    return max(strength, min(strength * max(1.0, upper - lower) ** 3, MAX_MAGNITUDE))


def revolute_limit(lower: float, upper: float, init_angle: float, strength: float) -> Limit:
    """#670 limit keeping the reported angle q = raw + init_angle in [lower, upper] (rad).

    The solver bounds the raw angle by ``limit.lower + init_angle`` and ``limit.upper +
    init_angle`` (docs/constitutions/670_revolute_joint_limit.md), so q in [lower, upper] needs
    ``limit = [lower - 2 init, upper - 2 init]``.
    """
    return Limit(lower=lower - 2.0 * init_angle, upper=upper - 2.0 * init_angle, strength=strength)


def prismatic_limit(lower: float, upper: float, init_distance: float, strength: float) -> Limit:
    """#669 limit keeping the reported distance q = raw + init_distance in [lower, upper] (m).

    The solver bounds the raw distance by ``limit.lower``/``limit.upper`` directly
    (docs/constitutions/669_prismatic_joint_limit.md).
    """
    return Limit(lower=lower - init_distance, upper=upper - init_distance, strength=strength)


def limit_bounds(joint, limit_strength: float, error: Callable[[str], Exception],
                 warn: Callable[[str], None]) -> tuple:
    """(lower, upper) of a yourdfpy revolute/prismatic ``joint``'s ``<limit>``, or (None, None) when
    unlimited (``warn`` says why); ``error`` makes the error that names the file."""
    limit = joint.limit
    if limit is None:
        warn(f"joint {joint.name!r}: {joint.type} joint without <limit>; imported without a limit")
        return None, None
    # URDF: lower and upper default to 0.
    lower = 0.0 if limit.lower is None else float(limit.lower)
    upper = 0.0 if limit.upper is None else float(limit.upper)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise error(f"joint {joint.name!r}: <limit> lower/upper must be finite, got {lower}, {upper}")
    if lower > upper:
        warn(f"joint {joint.name!r}: <limit> lower {lower:g} > upper {upper:g}; imported without a limit "
                  "(as PyBullet does)")
        return None, None
    if max(abs(lower), abs(upper)) > UNLIMITED_BOUND:
        warn(f"joint {joint.name!r}: <limit> [{lower:g}, {upper:g}] reaches beyond +-{UNLIMITED_BOUND:g}, "
                  "which means no limit (Gazebo writes +-1e16); imported without a limit")
        return None, None
    width = upper - lower
    if scaled_limit_strength(limit_strength, lower, upper) < limit_strength * width**3:
        warn(f"joint {joint.name!r}: <limit> window [{lower:g}, {upper:g}] is {width:g} wide: its strength "
                  f"is capped at {MAX_MAGNITUDE:g} J, so the joint stops more softly at its bounds than in a "
                  f"window narrower than {(MAX_MAGNITUDE / limit_strength) ** (1.0 / 3.0):.3g}")
    return lower, upper
