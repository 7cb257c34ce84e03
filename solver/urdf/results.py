"""What the URDF importer returns and raises: the scene with per-body display meshes, and its errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..scene import (
    Scene, SceneError,
)



class UrdfError(SceneError):
    """A URDF file cannot be imported; the message names the file and the link, joint or mesh."""


class UrdfWarning(UserWarning):
    """Something in a URDF file was approximated or ignored; the message names the element."""


@dataclass
class VisualPart:
    """One ``<visual>`` geometry of a link, for display (not used by the solver).

    Attributes:
        link: the URDF link it belongs to.
        vertices: (V, 3) float, in the body-local frame (the body's top link frame), m.
        triangles: (T, 3) int. The mesh is as in the file: it may be open.
        rgba: (4,) colour in [0, 1] from the visual's ``<material>`` (or the robot-level material
            of that name), or None.
        material: the material name, or None.
    """

    link: str
    vertices: np.ndarray
    triangles: np.ndarray
    rgba: Optional[np.ndarray] = None
    material: Optional[str] = None


@dataclass
class UrdfBody:
    """How one scene body was made (same order as ``Scene.bodies``).

    Attributes:
        name: the body name (the group's top link).
        links: the URDF links merged into the body, top link first.
        link_transforms: link name -> (4, 4) pose of that link in the body-local frame.
        shape: where the body mesh came from: ``"collision"``, ``"visual"`` (a mix of links
            using one or the other is reported as ``"collision+visual"``), ``"inertia box"`` or
            ``"placeholder"``.
        massless: True when the URDF gives the body no mass (docs/urdf.md, "Massless groups").
        visuals: the ``<visual>`` geometries of the links (empty unless ``load_visuals``).
    """

    name: str
    links: list
    link_transforms: dict
    shape: str
    massless: bool
    visuals: list = field(default_factory=list)


@dataclass
class UrdfJoint:
    """A URDF joint as imported (fixed and floating joints included, for reference).

    Attributes:
        name: URDF joint name (the scene joint has the same name when ``imported``).
        type: URDF type (``revolute``, ``continuous``, ``prismatic``, ``spherical``, ``fixed``, ``floating``).
        parent, child: URDF link names.
        parent_body, child_body: scene body names.
        imported: True when the scene has a joint of this name.
        position, velocity: initial q (rad or m) and dq/dt (rad/s or m/s).
        lower, upper: URDF limits in the joint coordinate, or None when unlimited.
        axis: (3,) unit axis in the joint (= child link) frame: URDF ``<axis xyz>`` normalised;
            None for fixed and floating joints.
        mimic: the joint named by ``<mimic joint>``, or None (the mimic relation is not imported).
    """

    name: str
    type: str
    parent: str
    child: str
    parent_body: str
    child_body: str
    imported: bool
    position: float = 0.0
    velocity: float = 0.0
    lower: Optional[float] = None
    upper: Optional[float] = None
    axis: Optional[np.ndarray] = None
    mimic: Optional[str] = None


@dataclass
class UrdfImport:
    """Result of :func:`import_urdf`.

    Attributes:
        scene: the scene (not normalised: scalars stay scalars, so ``settings`` may still be
            changed; it passed :func:`~solver.scene_validation.validate_scene`).
        robot_name: the ``<robot name>``.
        bodies: one :class:`UrdfBody` per scene body, same order.
        joints: one :class:`UrdfJoint` per URDF joint, file order.
        warnings: the warning messages issued.
    """

    scene: Scene
    robot_name: str
    bodies: list
    joints: list
    warnings: list

