"""Builders of valid scene documents (plain dicts in the JSON scene format) for tests.

Every builder returns a fresh, JSON-serialisable dict that :func:`solver.scene_io.scene_from_dict`
accepts; keyword arguments change sizes, positions, joint points and settings. Units: m, kg, s,
rad. Import as ``import scenes`` from tests in ``tests/solver``.
"""

from __future__ import annotations

import copy
import math
from typing import Optional, Sequence, Union

from solver import primitives

Vector = Sequence[float]


def _size3(size: Union[float, Vector]) -> tuple:
    if isinstance(size, (int, float)):
        return (float(size),) * 3
    return tuple(float(s) for s in size)


def box_mesh(size: Union[float, Vector] = 1.0, center: Vector = (0.0, 0.0, 0.0)) -> dict:
    """A closed box mesh with outward normals (:func:`solver.primitives.box_mesh`) as nested lists.

    Args:
        size: edge lengths (sx, sy, sz), or one length for a cube, m.
        center: body-local centre of the box, m.

    Returns:
        ``{"vertices": [[x, y, z] * 8], "triangles": [[i, j, k] * 12]}``.
    """
    mesh = primitives.box_mesh(_size3(size), center)
    return {"vertices": mesh.vertices.tolist(), "triangles": mesh.triangles.tolist()}


def translation(position: Vector = (0.0, 0.0, 0.0)) -> list:
    """The 4x4 pose (nested lists) of a pure translation to ``position`` (m)."""
    x, y, z = (float(p) for p in position)
    return [[1.0, 0.0, 0.0, x], [0.0, 1.0, 0.0, y], [0.0, 0.0, 1.0, z], [0.0, 0.0, 0.0, 1.0]]


def pose(position: Vector = (0.0, 0.0, 0.0), axis: Vector = (0.0, 0.0, 1.0), angle: float = 0.0) -> list:
    """The 4x4 pose (nested lists) of a rotation by ``angle`` (rad) about ``axis``, then a translation."""
    ax, ay, az = (float(a) for a in axis)
    norm = math.sqrt(ax * ax + ay * ay + az * az)
    x, y, z = ax / norm, ay / norm, az / norm
    c, s, t = math.cos(angle), math.sin(angle), 1.0 - math.cos(angle)
    rotation = [
        [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
        [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
        [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
    ]
    matrix = translation(position)
    for row in range(3):
        matrix[row][0:3] = rotation[row]
    return matrix


def settings(
    frame_rate: float = 24.0,
    substeps: int = 10,
    frame_count: int = 48,
    gravity: Vector = (0.0, 0.0, -9.81),
    **extra,
) -> dict:
    """A ``settings`` object; ``extra`` adds optional keys (``max_iterations``, ``velocity_tol``, ...)."""
    return {"frame_rate": frame_rate, "substeps": substeps, "frame_count": frame_count, "gravity": list(gravity),
            **extra}


def box_body(
    name: str,
    size: Union[float, Vector] = 1.0,
    position: Vector = (0.0, 0.0, 0.0),
    motion: str = "dynamic",
    transform: Optional[list] = None,
    **fields,
) -> dict:
    """A body with a box mesh centred on its origin.

    Args:
        name: body name.
        size: box edge lengths (or one for a cube), m.
        position: world position of the box centre at frame 0 (ignored when ``transform`` is given), m.
        motion: ``"dynamic"``, ``"fixed"`` or ``"animated"`` (then pass ``animated_transforms``).
        transform: 4x4 pose at frame 0; default a translation to ``position``.
        fields: any other body keys (``mass_density``, ``kappa``, ``mass``, ``soft_transform``,
            ``linear_velocity``, ``animated_transforms``, ...), copied into the dict.
    """
    body = {
        "name": name,
        "mesh": box_mesh(size),
        "transform": transform if transform is not None else translation(position),
        "mass_density": 1000.0,
        "kappa": 1e8,
        "motion": motion,
        "linear_velocity": [0.0, 0.0, 0.0],
        "angular_velocity": [0.0, 0.0, 0.0],
    }
    body.update(copy.deepcopy(fields))
    return body


def scene(bodies: list, joints: Sequence[dict] = (), settings_: Optional[dict] = None, **setting_values) -> dict:
    """A whole scene document; ``settings_`` or else ``settings(**setting_values)``."""
    return {
        "format": "abd-scene",
        "version": 1,
        "settings": settings_ if settings_ is not None else settings(**setting_values),
        "bodies": list(bodies),
        "joints": list(joints),
    }


def prismatic_scene(
    base_size: Union[float, Vector] = (2.0, 0.5, 0.5),
    slider_size: Union[float, Vector] = 0.4,
    base_position: Vector = (0.0, 0.0, 0.0),
    slider_position: Vector = (0.0, 0.0, 0.5),
    position0: Optional[Vector] = None,
    position1: Optional[Vector] = None,
    base_motion: str = "fixed",
    slider_motion: str = "dynamic",
    strength_ratio: float = 100.0,
    init_distance: float = 0.0,
    limit: Optional[dict] = None,
    driving: Optional[dict] = None,
    base_fields: Optional[dict] = None,
    slider_fields: Optional[dict] = None,
    **setting_values,
) -> dict:
    """Two boxes, ``"base"`` (parent, l_body) and ``"slider"`` (child, r_body), joined by the
    prismatic joint ``"rail"``.

    The axis runs from ``position0`` to ``position1`` (default: from the slider's centre one
    metre along +x). ``limit`` / ``driving`` are the joint's ``limit`` / ``driving`` objects or
    None; ``base_fields`` / ``slider_fields`` extra body keys; ``setting_values`` go to
    :func:`settings`.
    """
    p0 = list(position0) if position0 is not None else list(slider_position)
    p1 = list(position1) if position1 is not None else [p0[0] + 1.0, p0[1], p0[2]]
    joint = {
        "name": "rail", "type": "prismatic", "l_body": "base", "r_body": "slider",
        "position0": [float(v) for v in p0], "position1": [float(v) for v in p1],
        "strength_ratio": strength_ratio, "init_distance": init_distance,
    }
    if limit is not None:
        joint["limit"] = copy.deepcopy(limit)
    if driving is not None:
        joint["driving"] = copy.deepcopy(driving)
    bodies = [
        box_body("base", base_size, base_position, base_motion, **(base_fields or {})),
        box_body("slider", slider_size, slider_position, slider_motion, **(slider_fields or {})),
    ]
    return scene(bodies, [joint], **setting_values)


def revolute_pendulum_scene(
    pivot_position: Vector = (0.0, 0.0, 2.0),
    arm_size: Union[float, Vector] = (0.1, 0.1, 1.0),
    arm_offset: Vector = (0.0, 0.0, -0.5),
    axis: Vector = (0.0, 1.0, 0.0),
    pivot_size: Union[float, Vector] = 0.2,
    pivot_motion: str = "fixed",
    arm_pose_angle: float = 0.0,
    strength_ratio: float = 100.0,
    init_angle: float = 0.0,
    limit: Optional[dict] = None,
    pivot_fields: Optional[dict] = None,
    arm_fields: Optional[dict] = None,
    **setting_values,
) -> dict:
    """A pendulum: a fixed box ``"pivot"`` (parent) and a dynamic box ``"arm"`` (child) hinged by
    the revolute joint ``"hinge"``.

    The hinge axis runs from ``pivot_position`` to ``pivot_position + axis``. The arm's centre
    is at ``pivot_position + arm_offset`` rotated by ``arm_pose_angle`` (rad) about the axis
    (right-hand rule), and the arm is rotated by the same angle. ``limit`` is the joint's
    ``limit`` object (radians) or None; ``setting_values`` go to :func:`settings`.
    """
    px, py, pz = (float(v) for v in pivot_position)
    rotation = pose((0.0, 0.0, 0.0), axis, arm_pose_angle)
    offset = [sum(rotation[r][c] * float(arm_offset[c]) for c in range(3)) for r in range(3)]
    arm_transform = pose((px + offset[0], py + offset[1], pz + offset[2]), axis, arm_pose_angle)
    joint = {
        "name": "hinge", "type": "revolute", "l_body": "pivot", "r_body": "arm",
        "position0": [px, py, pz],
        "position1": [px + float(axis[0]), py + float(axis[1]), pz + float(axis[2])],
        "strength_ratio": strength_ratio, "init_angle": init_angle,
    }
    if limit is not None:
        joint["limit"] = copy.deepcopy(limit)
    bodies = [
        box_body("pivot", pivot_size, (px, py, pz), pivot_motion, **(pivot_fields or {})),
        box_body("arm", arm_size, motion="dynamic", transform=arm_transform, **(arm_fields or {})),
    ]
    return scene(bodies, [joint], **setting_values)


def every_feature_example() -> dict:
    """A scene document that uses every feature once, with a 4x4 aim."""
    document = prismatic_scene(
        base_motion="dynamic",
        slider_position=(1.0, 0.0, 0.0),
        position0=(0.0, 0.0, 0.0),
        position1=(1.0, 0.0, 0.0),
        limit={"lower": -0.5, "upper": 0.5, "strength": 1.0},
        driving={"strength_ratio": 100.0, "is_constrained": 1, "is_passive": 0, "aim_distance": 0.3},
        base_fields={"soft_transform": {"strength_ratio": [100, 100], "aim_transform": translation((0, 0, 0))}},
    )
    return document
