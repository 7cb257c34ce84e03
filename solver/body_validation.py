"""Validation of a scene's bodies: the mesh (closed, the right way round, non-zero volume; the
checks of :mod:`solver.mesh_checks`), mass and its source, motion, contact, soft transform and the
stiffness that keeps a body rigid. A mesh validated once is remembered with its mass properties.
"""

from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from .mesh_checks import ZERO_VOLUME, mesh_closure_problem, mesh_inside_out_problem
from .scene import (
    COLLECTION_COUNT, CONTACT_SHAPES, MOTIONS, Body, BodyContact,
    MassOverride, Mesh, SceneError, SoftTransform,
)
from .validation_fields import (
    MIN_POSITIVE, RIGID_TOLERANCE, check_magnitude, check_name, check_non_negative, check_transforms, field_error,
    fixed_array, flag_value, float_array, frame_series, number_value, positive_definite, positive_value, type_name,
)


#: Largest relative stretch of a dynamic body under its own weight that its kappa may allow
#: (:func:`_check_rigid`): a softer OrthoPotential does not give a rigid body.
MAX_STRETCH = 0.01


#: Relative tolerance of symmetry of an inertia tensor (largest entry of I - I^T over largest |I|).
SYMMETRY_TOLERANCE = 1e-6


def _validate_body_contact(contact, where: str, default_friction: float) -> BodyContact:
    if not isinstance(contact, BodyContact):
        raise field_error(where, "contact", f"must be a BodyContact, got {type_name(contact)}")
    friction = default_friction
    if contact.friction is not None:
        friction = number_value(contact.friction, where, "contact.friction")
        if friction < 0.0:
            raise field_error(where, "contact.friction", f"must be >= 0, got {friction}")
    if not isinstance(contact.shape, str) or contact.shape not in CONTACT_SHAPES:
        raise field_error(where, "contact.shape", f"must be one of {list(CONTACT_SHAPES)}, got {contact.shape!r:.60}")
    if not isinstance(contact.collections, (list, tuple, np.ndarray)) or not all(
            isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and 0 <= c < COLLECTION_COUNT
            for c in contact.collections):
        raise field_error(where, "contact.collections",
                    f"must be a list of collection numbers 0 to {COLLECTION_COUNT - 1}, "
                    f"got {contact.collections!r:.60}")
    collections = tuple(sorted({int(c) for c in contact.collections}))
    return BodyContact(enable=flag_value(contact.enable, where, "contact.enable"), friction=friction,
                       shape=contact.shape,
                       collections=collections)


#: The meshes :func:`_validate_mesh` returned, by id: (a weak reference to the mesh, its vertices
#: and triangles arrays, which it made read-only, and its mass properties at density 1). A run
#: validates its scene more than once (loading, its digest, the simulation) and the add-on's
#: overlay once per change of the scene; a mesh checked before is returned as it is.
_VALIDATED_MESHES: dict[int, tuple[weakref.ReferenceType[Mesh], np.ndarray, np.ndarray, "_MeshFacts"]] = {}


class _MeshFacts:
    """What the validation learnt of a mesh: whether it is closed, its mass properties at density
    1 (of the mesh where it is closed, of its convex hull where it is open: None where that is
    flat) and the note of a turned winding (or "")."""

    def __init__(self, closed: bool, unit, note: str = ""):
        self.closed, self.unit, self.note = closed, unit, note


def _known_mesh(mesh: Mesh) -> Optional[tuple]:
    """The :data:`_VALIDATED_MESHES` entry of ``mesh``, or None where it is not (any longer) the
    mesh :func:`_validate_mesh` returned with its arrays untouched."""
    known = _VALIDATED_MESHES.get(id(mesh))
    if (known is not None and known[0]() is mesh and mesh.vertices is known[1] and mesh.triangles is known[2]
            and not mesh.vertices.flags.writeable and not mesh.triangles.flags.writeable):
        return known
    return None


def mesh_facts(mesh: Mesh) -> _MeshFacts:
    """The :class:`_MeshFacts` of ``mesh``: remembered where :func:`solver.scene_validation.validate_scene` returned it,
    else worked out (a mesh taken as it is, not turned)."""
    known = _known_mesh(mesh)
    if known is not None:
        return known[3]
    from .mass import hull_triangles, mesh_mass_properties  # local import: no numerics at import time

    if mesh_closure_problem(mesh.triangles) is None:
        return _MeshFacts(True, mesh_mass_properties(mesh.vertices, mesh.triangles, 1.0))
    hull = hull_triangles(mesh.vertices)
    return _MeshFacts(False, None if hull is None else mesh_mass_properties(*hull, 1.0))


#: Thickness, as a fraction of its largest extent, of the slab that gives a fixed or animated flat
#: open mesh (a plane) without a ``thickness`` its mass (read only by its joints' stiffness and
#: contact's pull on an animated body).
FLAT_THICKNESS = 0.01


def unit_mass_properties(mesh: Mesh, thickness: Optional[float] = None, motion: str = "fixed"):
    """Mass properties at density 1 (a :class:`solver.mass.DyadicMass`; scaled by rho with its
    ``scaled``) of a body's ``mesh``: by the divergence theorem over a closed mesh
    (:func:`solver.mass.mesh_mass_properties`); for an open one, a shell ``thickness`` m thick
    (:func:`solver.mass.shell_mass_properties`) where that is given, else its convex hull, or
    where that is flat a slab :data:`FLAT_THICKNESS` times its extent thick (for a fixed or
    animated ``motion``; a dynamic one is refused by the validation). Remembered for each mesh
    :func:`solver.scene_validation.validate_scene` returned."""
    from .mass import shell_mass_properties

    facts = mesh_facts(mesh)
    if facts.closed:
        return facts.unit
    if thickness is None and (facts.unit is not None or motion == "dynamic"):
        return facts.unit
    if thickness is None:
        thickness = FLAT_THICKNESS * max(float(np.ptp(mesh.vertices, axis=0).max()), MIN_POSITIVE)
    return shell_mass_properties(mesh.vertices, mesh.triangles, thickness, 1.0)


def mass_source(mesh: Mesh, thickness: Optional[float] = None) -> str:
    """Where a body's mass comes from (:func:`unit_mass_properties`): ``"mesh"`` (closed),
    ``"thickness"`` or ``"convex hull"`` (open)."""
    if mesh_facts(mesh).closed:
        return "mesh"
    return "thickness" if thickness is not None else "convex hull"


def _validate_mesh(mesh, where: str) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise field_error(where, "mesh", f"must be a Mesh, got {type_name(mesh)}")
    if _known_mesh(mesh) is not None:
        return mesh
    checked, closed, note = _check_mesh(mesh, where)
    checked.vertices.setflags(write=False)
    checked.triangles.setflags(write=False)
    from .mass import hull_triangles, mesh_mass_properties

    with np.errstate(all="ignore"):
        hull = None if closed else hull_triangles(checked.vertices)
        shape = (checked.vertices, checked.triangles) if closed else hull
        unit = None if shape is None else mesh_mass_properties(*shape, 1.0)
    key = id(checked)
    _VALIDATED_MESHES[key] = (weakref.ref(checked, lambda _: _VALIDATED_MESHES.pop(key, None)),
                              checked.vertices, checked.triangles, _MeshFacts(closed, unit, note))
    return checked


def _check_mesh(mesh: Mesh, where: str) -> tuple[Mesh, bool, str]:
    """A new mesh of float64 vertices and int64 triangles, checked (docs/scene_format.md), whether
    it is closed, and a note where its winding was turned ("" otherwise). A closed mesh wound
    inside out (negative volume) is turned; one that is not closed and consistently oriented is
    taken as an open surface."""
    vertices = float_array(mesh.vertices, where, "mesh.vertices")
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise field_error(where, "mesh.vertices", f"must have shape (V, 3), got {vertices.shape}")
    if vertices.shape[0] < 3:
        raise field_error(where, "mesh.vertices", f"a mesh needs at least 3 vertices, got {vertices.shape[0]}")
    if not np.all(np.isfinite(vertices)):
        row = int(np.argmin(np.isfinite(vertices).all(axis=1)))
        raise field_error(where, "mesh.vertices", f"must be finite (NaN or infinity in vertex {row})")
    check_magnitude(vertices, where, "mesh.vertices")

    raw = float_array(mesh.triangles, where, "mesh.triangles")
    if raw.ndim != 2 or raw.shape[1] != 3 or raw.shape[0] == 0:
        raise field_error(where, "mesh.triangles", f"must have shape (T, 3) with T >= 1, got {raw.shape}")
    if not np.all(np.isfinite(raw)) or not np.all(raw == np.floor(raw)):
        raise field_error(where, "mesh.triangles", "must contain integer vertex indices")
    count = vertices.shape[0]
    out_of_range = (raw < 0) | (raw >= count)
    if out_of_range.any():
        triangle, corner = (int(k) for k in np.argwhere(out_of_range)[0])
        raise field_error(
            where, "mesh.triangles",
            f"vertex index {raw[triangle, corner]:.0f} in triangle {triangle} is out of range "
            f"(the mesh has {count} vertices, indices 0..{count - 1})",
        )
    triangles = raw.astype(np.int64)
    repeated = (triangles[:, 0] == triangles[:, 1]) | (triangles[:, 1] == triangles[:, 2]) | (
        triangles[:, 0] == triangles[:, 2])
    if repeated.any():
        triangle = int(np.argmax(repeated))
        raise field_error(where, "mesh.triangles",
                          f"triangle {triangle} {triangles[triangle].tolist()} repeats a vertex "
                                             "(it has no area; remove it: Blender's Mesh > Clean Up > Degenerate "
                                             "Dissolve)")
    if mesh_closure_problem(triangles) is not None:
        return Mesh(vertices=vertices, triangles=triangles), False, ""

    from .mass import mesh_volume  # local import keeps this module free of numerics at import time

    with np.errstate(all="ignore"):
        volume = mesh_volume(vertices, triangles)
    if not np.isfinite(volume):
        raise field_error(where, "mesh.vertices", "the enclosed volume overflows (coordinates too large)")
    if abs(volume) <= ZERO_VOLUME:
        raise field_error(where, "mesh", f"has zero volume ({volume:.3g} m^3, need |volume| > {ZERO_VOLUME:g})")
    note = ""
    if volume < 0.0:
        triangles = np.ascontiguousarray(triangles[:, [0, 2, 1]])
        note = (f"mesh is wound inside out (signed volume {volume:.6g} m^3 < 0, its normals pointing inwards); "
                "the solver turns it the right way (Blender: Edit Mode, Mesh > Normals > Recalculate Outside "
                "fixes the object itself)")
    problem = mesh_inside_out_problem(vertices, triangles)
    if problem is not None:
        raise field_error(where, "mesh", problem)
    return Mesh(vertices=vertices, triangles=triangles), True, note


def _validate_mass(mass, mesh: Mesh, density: float, where: str, thickness: Optional[float] = None,
                   motion: str = "dynamic") -> Optional[MassOverride]:
    unit = unit_mass_properties(mesh, thickness, motion)
    if unit is None:
        raise field_error(where, "thickness",
                          "the mesh is open and flat (its convex hull has no volume), so it has no mass "
                                        "as a dynamic body: give it a thickness (m; Blender: Physics > Affine "
                                        "Body > Mass > Thickness), close the mesh, or make it Fixed or Animated")
    if mass is None:
        with np.errstate(all="ignore"):
            dyadic = unit.scaled(density)
            values = np.concatenate(([dyadic.mass], dyadic.mass_x_bar, dyadic.second_moment.ravel()))
            if not np.all(np.isfinite(values)) or not dyadic.mass > 0.0:
                raise field_error(
                    where, "mass_density",
                    f"mass properties of the mesh are not finite and positive (mass = {dyadic.mass:.6g} kg); "
                    "check mass_density and the size of the mesh",
                )
            center = dyadic.mass_x_bar / dyadic.mass
            centred = dyadic.second_moment - dyadic.mass * np.outer(center, center)
            centred = 0.5 * (centred + centred.T)
        if positive_definite(centred) is None:
            raise field_error(
                where, "mesh",
                "has a degenerate mass distribution (second moment about the centre of mass is not "
                "positive definite: a flat or self-intersecting mesh?)",
            )
        return None
    if not isinstance(mass, MassOverride):
        raise field_error(where, "mass", f"must be a MassOverride or None, got {type_name(mass)}")
    value = number_value(mass.mass, where, "mass.mass")
    positive_value(value, where, "mass.mass", " kg")
    center = fixed_array(mass.mass_center, (3,), where, "mass.mass_center")
    inertia = fixed_array(mass.inertia, (3, 3), where, "mass.inertia")
    with np.errstate(all="ignore"):
        asymmetry = np.abs(inertia - inertia.T).max()
        symmetric = 0.5 * inertia + 0.5 * inertia.T
    if not asymmetry <= SYMMETRY_TOLERANCE * np.abs(inertia).max():
        raise field_error(where, "mass.inertia", "must be symmetric (the inertia tensor about the centre of mass)")
    eigenvalues = positive_definite(symmetric)
    if eigenvalues is None:
        raise field_error(where, "mass.inertia", "must be symmetric positive definite")
    # The centred second moment S_cm = tr(I)/2 - I must be positive definite too (else the 12x12
    # mass matrix is not): the triangle inequality I1 + I2 > I3 of the principal moments.
    with np.errstate(all="ignore"):
        centred = 0.5 * np.trace(symmetric) * np.eye(3) - symmetric
    if positive_definite(centred) is None:
        raise field_error(
            where, "mass.inertia",
            f"principal moments {eigenvalues.tolist()} violate the triangle inequality I1 + I2 > I3 "
            "of a physical (non-flat) body",
        )
    return MassOverride(mass=value, mass_center=center, inertia=symmetric)


def _validate_soft_transform(soft, transform: np.ndarray, frames: int, where: str) -> Optional[SoftTransform]:
    if soft is None:
        return None
    if not isinstance(soft, SoftTransform):
        raise field_error(where, "soft_transform", f"must be a SoftTransform or None, got {type_name(soft)}")
    strength = frame_series(soft.strength_ratio, (2,), frames, where, "soft_transform.strength_ratio")
    check_non_negative(strength, where, "soft_transform.strength_ratio")
    if soft.aim_transform is None:
        aim = np.array(np.broadcast_to(transform, (frames, 4, 4)))
    else:
        aim = frame_series(soft.aim_transform, (4, 4), frames, where, "soft_transform.aim_transform")
        aim = check_transforms(aim, where, "soft_transform.aim_transform", series=True)
    constrained = frame_series(soft.is_constrained, (), frames, where, "soft_transform.is_constrained", flag=True)
    return SoftTransform(strength_ratio=strength, aim_transform=aim, is_constrained=constrained)


def _check_rigid(mesh: Mesh, mass: Optional[float], density: float, kappa: float, gravity: float, where: str,
                 thickness: Optional[float] = None) -> None:
    """Raise :class:`SceneError` when ``kappa`` (Pa) is too soft for the body to stay rigid under
    its own weight (``gravity``, m/s^2): hanging from a joint at one end, its stretch would
    exceed :data:`MAX_STRETCH` (docs/scene_format.md, "kappa").

    The weight m g at distance L/2 (L the mesh's largest extent) stretches A = I + eps n n^T
    against the OrthoPotential kappa V |A A^T - I|^2 ~ 4 kappa V eps^2 (V the mesh volume, m the
    body's mass, ``mass`` where it is given, else density V); their sum is least at
    eps = m g L / (16 kappa V), so kappa >= m g L / (16 V MAX_STRETCH).
    """
    volume = unit_mass_properties(mesh, thickness, "dynamic").volume
    extent = float(np.ptp(mesh.vertices, axis=0).max())
    weight = (mass if mass is not None else density * volume) * gravity
    stretch = weight * extent / (16.0 * kappa * volume)
    if stretch > MAX_STRETCH:
        bound = weight * extent / (16.0 * volume * MAX_STRETCH)
        raise field_error(where, "kappa", f"{kappa:g} Pa cannot keep the body rigid: hanging from one end under "
                                    f"gravity it would stretch by about {stretch:.3g} (m g L / (16 kappa V)), "
                                    f"more than {MAX_STRETCH:g}; need kappa >= {bound:.3g} Pa (default 1e8)")


def validate_body(body, index: int, frames: int, gravity: float, default_friction: float = 0.5) -> Body:
    """The normalised copy of ``body`` (``#index`` in the scene); ``gravity`` in m/s^2."""
    if not isinstance(body, Body):
        raise SceneError(f"body #{index}: must be a Body, got {type_name(body)}")
    check_name(body.name, f"body #{index}")
    where = f"body {body.name!r}"
    mesh = _validate_mesh(body.mesh, where)
    transform = fixed_array(body.transform, (4, 4), where, "transform")
    transform = check_transforms(transform, where, "transform", series=False)
    density = number_value(body.mass_density, where, "mass_density")
    positive_value(density, where, "mass_density", " kg/m^3")
    kappa = number_value(body.kappa, where, "kappa")
    positive_value(kappa, where, "kappa", " Pa")
    if not isinstance(body.motion, str) or body.motion not in MOTIONS:
        raise field_error(where, "motion", f"must be one of {', '.join(map(repr, MOTIONS))}, got {body.motion!r:.60}")
    linear_velocity = fixed_array(body.linear_velocity, (3,), where, "linear_velocity")
    angular_velocity = fixed_array(body.angular_velocity, (3,), where, "angular_velocity")
    thickness = None
    if body.thickness is not None:
        thickness = positive_value(number_value(body.thickness, where, "thickness"), where, "thickness", " m")
    mass = _validate_mass(body.mass, mesh, density, where, thickness, body.motion)
    if body.motion == "dynamic":
        _check_rigid(mesh, mass.mass if mass is not None else None, density, kappa, gravity, where, thickness)
    soft = _validate_soft_transform(body.soft_transform, transform, frames, where)
    animated = None
    if body.motion == "animated":
        if body.animated_transforms is None:
            raise field_error(where, "animated_transforms",
                              f"an animated body needs frame_count + 1 = {frames} 4x4 poses")
        animated = float_array(body.animated_transforms, where, "animated_transforms")
        if animated.ndim != 3 or animated.shape[1:] != (4, 4):
            raise field_error(where, "animated_transforms",
                        f"must be a list of frame_count + 1 = {frames} 4x4 matrices, got shape {animated.shape}")
        if animated.shape[0] != frames:
            raise field_error(where, "animated_transforms",
                        f"must have exactly frame_count + 1 = {frames} entries, got {animated.shape[0]}")
        finite = np.isfinite(animated).reshape(frames, -1).all(axis=1)
        if not finite.all():
            raise field_error(where, "animated_transforms",
                        f"must be finite (NaN or infinity at frame {int(np.argmin(finite))})")
        check_magnitude(animated, where, "animated_transforms")
        animated = check_transforms(animated, where, "animated_transforms", series=True)
        if np.abs(animated[0] - transform).max() > RIGID_TOLERANCE * max(1.0, np.abs(transform).max()):
            raise field_error(where, "animated_transforms", "frame 0 must equal the body's transform")
    elif body.animated_transforms is not None:
        raise field_error(where, "animated_transforms",
                          f"is only used by animated bodies, but motion is {body.motion!r}")
    return Body(
        name=body.name, mesh=mesh, transform=transform, mass_density=density, kappa=kappa, motion=body.motion,
        linear_velocity=linear_velocity, angular_velocity=angular_velocity, mass=mass, soft_transform=soft,
        animated_transforms=animated, contact=_validate_body_contact(body.contact, where, default_friction),
        thickness=thickness,
    )
