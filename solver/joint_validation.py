"""Validation of a scene's joints: type and bodies, axis, limits, drives and the generic joint's
locks and stiffness (docs/scene_format.md, "Validation").
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .scene import AIM_KEYS, AXIS_JOINT_TYPES, JOINT_TYPES, Driving, Generic, Joint, Limit, SceneError
from .validation_fields import (
    RIGID_TOLERANCE, check_name, check_non_negative, field_error, fixed_array, flag_value, flag_values, frame_series,
    number_value, positive_value, type_name,
)


#: A joint axis shorter than this times max(1, |position0|, |position1|) (m) has zero length.
ZERO_AXIS = 1e-9


def _validate_limit(limit, frames: int, where: str) -> Optional[Limit]:
    if limit is None:
        return None
    if not isinstance(limit, Limit):
        raise field_error(where, "limit", f"must be a Limit or None, got {type_name(limit)}")
    lower = frame_series(limit.lower, (), frames, where, "limit.lower")
    upper = frame_series(limit.upper, (), frames, where, "limit.upper")
    strength = frame_series(limit.strength, (), frames, where, "limit.strength")
    crossed = np.nonzero(lower > upper)[0]
    if crossed.size:
        frame = int(crossed[0])
        at = "" if np.ndim(limit.lower) == 0 and np.ndim(limit.upper) == 0 else f" at frame {frame}"
        raise field_error(where, "limit.lower", f"lower {lower[frame]} > upper {upper[frame]}{at}")
    check_non_negative(strength, where, "limit.strength")
    return Limit(lower=lower, upper=upper, strength=strength)


def _validate_driving(driving, kind: str, frames: int, where: str) -> Optional[Driving]:
    """A validated drive of a joint of type ``kind`` (prismatic or revolute): its position aim
    (:data:`AIM_KEYS`) a series (0 when not given) unless ``aim_velocity`` is given, then None."""
    if driving is None:
        return None
    if not isinstance(driving, Driving):
        raise field_error(where, "driving", f"must be a Driving or None, got {type_name(driving)}")
    aim_key = AIM_KEYS[kind]
    for key in AIM_KEYS.values():
        if key != aim_key and getattr(driving, key) is not None:
            raise field_error(where, f"driving.{key}", f"is for {'revolute' if key == 'aim_angle' else 'prismatic'} "
                        f"joints; a {kind} joint's drive aims with {aim_key} or aim_velocity")
    if getattr(driving, aim_key) is not None and driving.aim_velocity is not None:
        raise field_error(where, "driving.aim_velocity", f"give either {aim_key} (position mode) or aim_velocity "
                    "(velocity mode), not both")
    strength = frame_series(driving.strength_ratio, (), frames, where, "driving.strength_ratio")
    check_non_negative(strength, where, "driving.strength_ratio")
    constrained = frame_series(driving.is_constrained, (), frames, where, "driving.is_constrained", flag=True)
    passive = frame_series(driving.is_passive, (), frames, where, "driving.is_passive", flag=True)
    aims = {}
    if driving.aim_velocity is not None:
        aims["aim_velocity"] = frame_series(driving.aim_velocity, (), frames, where, "driving.aim_velocity")
    else:
        aim = getattr(driving, aim_key)
        aims[aim_key] = frame_series(0.0 if aim is None else aim, (), frames, where, f"driving.{aim_key}")
    effort_key = "max_force" if kind == "prismatic" else "max_torque"
    other_key = "max_torque" if kind == "prismatic" else "max_force"
    if getattr(driving, other_key) is not None:
        raise field_error(where, f"driving.{other_key}", f"is for {'revolute' if kind == 'prismatic' else 'prismatic'} "
                    f"joints; a {kind} joint's drive is limited with {effort_key}")
    caps = {}
    for key in (effort_key, "max_speed"):
        value = getattr(driving, key)
        if value is not None:
            value = number_value(value, where, f"driving.{key}")
            if not value > 0.0:
                raise field_error(where, f"driving.{key}", f"must be > 0 (or null for no limit), got {value}")
            caps[key] = value
    validated = Driving(strength_ratio=strength, is_constrained=constrained, is_passive=passive)
    for key, value in {**aims, **caps}.items():
        setattr(validated, key, value)
    return validated


def _validate_generic(generic, where: str) -> Generic:
    """A generic joint's validated coordinates (:class:`Generic`), every array float64 (6,) or (3, 3)."""
    if generic is None:
        return Generic()
    if not isinstance(generic, Generic):
        raise field_error(where, "generic", f"must be a Generic or None, got {type_name(generic)}")
    rotations = {}
    for name in ("axes", "cone_axes"):
        matrix = fixed_array(getattr(generic, name), (3, 3), where, f"generic.{name}")
        if not (np.allclose(matrix.T @ matrix, np.eye(3), atol=RIGID_TOLERANCE) and np.linalg.det(matrix) > 0.0):
            raise field_error(where, f"generic.{name}", "must be a rotation (orthonormal columns, determinant +1)")
        rotations[name] = matrix
    swing: Optional[tuple] = None
    twist = None
    if generic.swing_limit is not None:
        half_angles = fixed_array(generic.swing_limit, (2,), where, "generic.swing_limit")
        if not np.all((half_angles > 0.0) & (half_angles < np.pi / 2)):
            raise field_error(where, "generic.swing_limit",
                        f"half-angles must lie in (0, π/2) rad, got {half_angles.tolist()}")
        swing = (float(half_angles[0]), float(half_angles[1]))
    if generic.twist_limit is not None:
        if swing is None:
            raise field_error(where, "generic.twist_limit", "is the twist of a swing cone: give swing_limit too")
        twist = positive_value(number_value(generic.twist_limit, where, "generic.twist_limit"), where,
                               "generic.twist_limit",
                          " rad")
    values = {name: fixed_array(getattr(generic, name), (6,), where, f"generic.{name}")
              for name in ("rest", "stiffness", "damping", "lower", "upper")}
    for name in ("stiffness", "damping"):
        if np.any(values[name] < 0.0):
            raise field_error(where, f"generic.{name}", f"must be >= 0, got {values[name].tolist()}")
    limited = flag_values(generic.limited, where, "generic.limited")
    for k in range(6):
        if limited[k] and values["lower"][k] > values["upper"][k]:
            raise field_error(where, f"generic.lower[{k}]", f"lower {values['lower'][k]} > upper {values['upper'][k]}")
    strength = number_value(generic.limit_strength, where, "generic.limit_strength")
    if strength < 0.0:
        raise field_error(where, "generic.limit_strength", f"must be >= 0, got {strength}")
    break_force = None
    if generic.break_force is not None:
        break_force = positive_value(number_value(generic.break_force, where, "generic.break_force"), where,
                                "generic.break_force", " N")
    return Generic(locked=flag_values(generic.locked, where, "generic.locked"), limited=limited,
                   limit_strength=strength,
                   swing_limit=swing, twist_limit=twist, break_force=break_force, **rotations, **values)


def validate_joint(joint, index: int, frames: int, bodies: dict) -> Joint:
    """The normalised copy of ``joint`` (``#index``); ``bodies`` maps the validated bodies' names to their motion."""
    if not isinstance(joint, Joint):
        raise SceneError(f"joint #{index}: must be a Joint, got {type_name(joint)}")
    check_name(joint.name, f"joint #{index}")
    where = f"joint {joint.name!r}"
    if not isinstance(joint.type, str) or joint.type not in JOINT_TYPES:
        raise field_error(where, "type", f"must be one of {', '.join(map(repr, JOINT_TYPES))}, got {joint.type!r:.60}")
    for side in ("l_body", "r_body"):
        name = getattr(joint, side)
        if not isinstance(name, str):
            raise field_error(where, side, f"must be a body name (string), got {type_name(name)}")
        if name not in bodies:
            raise field_error(where, side, f"no body named {name!r:.80}")
    if joint.l_body == joint.r_body:
        raise field_error(where, "r_body", f"a joint needs two different bodies, but both are {joint.l_body!r}")
    position0 = position1 = position = None
    if joint.type in AXIS_JOINT_TYPES:
        if joint.position is not None:
            raise field_error(where, "position", f"a {joint.type} joint has an axis: give position0 and position1")
        position0 = fixed_array(joint.position0, (3,), where, "position0")
        position1 = fixed_array(joint.position1, (3,), where, "position1")
        with np.errstate(all="ignore"):
            length = float(np.linalg.norm(position1 - position0))
        if not np.isfinite(length):
            raise field_error(where, "position1", "axis length overflows (coordinates too large)")
        if not length > ZERO_AXIS * max(1.0, float(np.abs(position0).max()), float(np.abs(position1).max())):
            raise field_error(where, "position1",
                        f"zero-length axis: position1 must differ from position0 (|axis| = {length:.3g} m)")
    else:
        for key in ("position0", "position1"):
            if getattr(joint, key) is not None:
                raise field_error(where, key,
                                  f"a {joint.type} joint has one anchor: give position, not position0/position1")
        position = fixed_array(joint.position, (3,), where, "position")
    strength = number_value(joint.strength_ratio, where, "strength_ratio")
    if strength < 0.0:
        raise field_error(where, "strength_ratio", f"must be >= 0, got {strength}")
    init_distance = number_value(joint.init_distance, where, "init_distance")
    init_angle = number_value(joint.init_angle, where, "init_angle")
    if joint.type == "prismatic" and init_angle != 0.0:
        raise field_error(where, "init_angle", "is for revolute joints; a prismatic joint uses init_distance")
    if joint.type == "revolute" and init_distance != 0.0:
        raise field_error(where, "init_distance", "is for prismatic joints; a revolute joint uses init_angle")
    if joint.type not in AXIS_JOINT_TYPES:
        given = {"init_angle": init_angle != 0.0, "init_distance": init_distance != 0.0,
                 "limit": joint.limit is not None, "driving": joint.driving is not None}
        for key, present in given.items():
            if present:
                raise field_error(where, key, f"is for prismatic and revolute joints, not for a {joint.type} joint")
    damping = number_value(joint.damping, where, "damping")
    if damping < 0.0:
        raise field_error(where, "damping", f"must be >= 0, got {damping}")
    if damping and joint.type not in AXIS_JOINT_TYPES:
        raise field_error(where, "damping", f"is for prismatic and revolute joints, not for a {joint.type} joint")
    if joint.generic is not None and joint.type != "generic":
        raise field_error(where, "generic", f"is for generic joints, not for a {joint.type} joint")
    generic = _validate_generic(joint.generic, where) if joint.type == "generic" else None
    limit = _validate_limit(joint.limit, frames, where)
    driving = None if joint.driving is None else _validate_driving(joint.driving, joint.type, frames, where)
    return Joint(
        name=joint.name, type=joint.type, l_body=joint.l_body, r_body=joint.r_body,
        position0=position0, position1=position1, strength_ratio=strength,
        init_distance=init_distance, init_angle=init_angle, limit=limit, driving=driving, position=position,
        collide_connected=flag_value(joint.collide_connected, where, "collide_connected"), damping=damping,
        generic=generic,
    )
