"""A URDF joint's ``<dynamics>`` and ``<limit effort velocity>`` on its scene joint: damping, and
the effort and speed limits of a drive that is off until a user enables it.
"""

from __future__ import annotations

import math
from typing import Callable

from ..scene import DEFAULT_STRENGTH_RATIO, Driving, Joint


def add_drive(joint, scene_joint: Joint, warn: Callable[[str], None]) -> None:
    """``<dynamics damping>`` of a yourdfpy ``joint`` as ``scene_joint``'s damping; ``<limit effort
    velocity>`` as the effort and speed limits of a drive that is off (is_constrained 0) until a user enables it. Dry
    ``<dynamics friction>`` has no counterpart (warned)."""
    dynamics = joint.dynamics
    if dynamics is not None:
        if dynamics.damping is not None and float(dynamics.damping) > 0.0:
            scene_joint.damping = float(dynamics.damping)
        if dynamics.friction is not None and float(dynamics.friction) > 0.0:
            warn(f"joint {joint.name!r}: <dynamics friction={float(dynamics.friction):g}> (dry joint "
                      "friction) is not supported; imported without it")
    limit = joint.limit
    effort = None if limit is None or limit.effort is None else float(limit.effort)
    speed = None if limit is None or limit.velocity is None else float(limit.velocity)
    effort = effort if effort is not None and math.isfinite(effort) and effort > 0.0 else None
    speed = speed if speed is not None and math.isfinite(speed) and speed > 0.0 else None
    if effort is not None or speed is not None:
        key = "max_force" if joint.type == "prismatic" else "max_torque"
        scene_joint.driving = Driving(strength_ratio=DEFAULT_STRENGTH_RATIO, is_constrained=0,
                                      max_speed=speed)
        setattr(scene_joint.driving, key, effort)
