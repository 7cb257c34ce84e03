"""Validation of a scene: :func:`validate_scene` checks every field of the dataclasses of
:mod:`solver.scene` and returns a normalised copy, or raises :class:`~solver.scene.SceneError`
naming the body or joint and the field. The rules are listed in ``docs/scene_format.md``
("Validation"). The checks are those of :mod:`solver.settings_validation`,
:mod:`solver.body_validation` (the geometry of a mesh by :mod:`solver.mesh_checks`),
:mod:`solver.joint_validation` and :mod:`solver.contact_limits`, built of the field checks of
:mod:`solver.validation_fields`.
"""

from __future__ import annotations

import numpy as np

from .body_validation import mesh_facts, validate_body
from .contact_limits import check_contact_scale
from .joint_validation import validate_joint
from .scene import Body, Joint, Scene, SceneError
from .settings_validation import validate_settings
from .validation_fields import type_name

#: Largest accepted number of values in a trajectory, ``(frame_count + 1) * (16 bodies + 5 joints)``
#: (a 4x4 pose per body, a distance, an angle and a rotation vector per joint, per frame): 8 GB of float64; the
#: per-frame series and the solver's per-frame poses of the bodies take about as much again.
MAX_TRAJECTORY_VALUES = 1_000_000_000


def scene_notes(scene: Scene) -> list[str]:
    """The notes of a validated ``scene``: one sentence per body whose mesh the validation
    turned the right way round (docs/scene_format.md, "Meshes")."""
    return [f"body {body.name!r}: {mesh_facts(body.mesh).note}" for body in scene.bodies if mesh_facts(body.mesh).note]


def validate_scene(scene: Scene) -> Scene:
    """Check a scene completely and return a new, normalised copy (the input is not modified).

    This is the single validation used both by :func:`solver.scene_io.load_scene` and by the
    Blender add-on, which builds the dataclasses directly; so it checks types as well as values.
    The rules are listed in ``docs/scene_format.md`` ("Validation").

    The returned scene has:

    - settings: ``frame_rate``, tolerances as float; counts as int; ``gravity`` (3,) float64;
    - every array float64 of its exact shape (``mesh.triangles`` int64 (T, 3); ``transform``
      (4, 4) with last row exactly (0, 0, 0, 1); ``mass.inertia`` exactly symmetric);
    - every per-frame series broadcast to a new array with a leading axis F + 1 = frame_count + 1:
      ``Driving`` fields and ``Limit`` fields (F+1,); ``SoftTransform.strength_ratio`` (F+1, 2),
      ``is_constrained`` (F+1,), ``aim_transform`` (F+1, 4, 4) (the body's ``transform`` when
      it was None); flags as float64 0.0 / 1.0;
    - ``animated_transforms`` (F+1, 4, 4) for animated bodies, None otherwise.

    Validating an already validated scene returns an equal scene. Its meshes' arrays are
    read-only, and a mesh this function returned is kept as it is, not checked again: a run
    validates its scene when it is loaded, digested and simulated, and a mesh's checks are
    the costly part.

    Args:
        scene: the scene to check.

    Returns:
        A new :class:`Scene`.

    Raises:
        SceneError: on the first problem found; the message starts with ``settings``,
            ``body '<name>'`` or ``joint '<name>'`` (``body #i`` where no usable name exists)
            followed by the field (JSON key path, e.g. ``limit.lower``) and what is wrong.
    """
    if not isinstance(scene, Scene):
        raise SceneError(f"scene: must be a Scene, got {type_name(scene)}")
    settings = validate_settings(scene.settings)
    frames = settings.frame_count + 1
    if not isinstance(scene.bodies, (list, tuple)):
        raise SceneError(f"scene: bodies: must be a list of bodies, got {type_name(scene.bodies)}")
    if not isinstance(scene.joints, (list, tuple)):
        raise SceneError(f"scene: joints: must be a list of joints, got {type_name(scene.joints)}")
    if len(scene.bodies) == 0:
        raise SceneError("scene: bodies: a scene needs at least one body")
    values = frames * (16 * len(scene.bodies) + 5 * len(scene.joints))
    if values > MAX_TRAJECTORY_VALUES:  # checked before the per-frame series are broadcast
        raise SceneError(
            f"settings: frame_count: the trajectory of {len(scene.bodies)} bodies and {len(scene.joints)} joints over "
            f"frame_count + 1 = {frames} frames would hold {values} values (16 per body and 5 per joint and frame), "
            f"more than the {MAX_TRAJECTORY_VALUES} a run may keep ({8 * MAX_TRAJECTORY_VALUES / 1e9:g} GB); lower "
            "frame_count or split the scene"
        )
    bodies: list[Body] = []
    seen: dict[str, int] = {}
    for index, body in enumerate(scene.bodies):
        checked = validate_body(body, index, frames, float(np.linalg.norm(settings.gravity)),
                                 settings.contact.friction)
        if checked.name in seen:
            raise SceneError(
                f"body {checked.name!r}: name: duplicate body name (bodies #{seen[checked.name]} and #{index})"
            )
        seen[checked.name] = index
        bodies.append(checked)
    motions = {body.name: body.motion for body in bodies}
    joints: list[Joint] = []
    seen = {}
    for index, joint in enumerate(scene.joints):
        checked_joint = validate_joint(joint, index, frames, motions)
        if checked_joint.name in seen:
            raise SceneError(
                f"joint {checked_joint.name!r}: name: duplicate joint name "
                f"(joints #{seen[checked_joint.name]} and #{index})"
            )
        seen[checked_joint.name] = index
        joints.append(checked_joint)
    check_contact_scale(settings, bodies)
    return Scene(settings=settings, bodies=bodies, joints=joints)
