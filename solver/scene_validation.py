"""Validation of a scene: :func:`validate_scene` checks every field of the dataclasses of
:mod:`solver.scene` and returns a normalised copy, or raises :class:`~solver.scene.SceneError`
naming the body or joint and the field. The rules are listed in ``docs/scene_format.md``
("Validation"); the geometry of a mesh is checked by :mod:`solver.mesh_checks`.
"""

from __future__ import annotations

import unicodedata
import weakref
from typing import Optional

import numpy as np

from .mesh_checks import ZERO_VOLUME, mesh_closure_problem, mesh_inside_out_problem
from .scene import (
    AIM_KEYS, AXIS_JOINT_TYPES, COLLECTION_COUNT, CONTACT_SHAPES, DEVICES, JOINT_TYPES, MOTIONS, Body, BodyContact,
    ContactSettings, Driving, Generic, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings, SoftTransform,
)

#: Largest accepted ``frame_count`` (a bound on the memory of the per-frame series).
MAX_FRAME_COUNT = 1_000_000
#: Largest accepted ``substeps``.
MAX_SUBSTEPS = 100_000
#: Largest accepted number of time steps, ``frame_count * substeps``: a run keeps 26 bytes of
#: records per step (2.6 GB here), and one free body alone takes about 30 us per step (50 minutes).
MAX_TIME_STEPS = 100_000_000
#: Largest accepted number of values in a trajectory, ``(frame_count + 1) * (16 bodies + 5 joints)``
#: (a 4x4 pose per body, a distance, an angle and a rotation vector per joint, per frame): 8 GB of float64; the
#: per-frame series and the solver's per-frame poses of the bodies take about as much again.
MAX_TRAJECTORY_VALUES = 1_000_000_000
#: Largest accepted ``max_iterations`` / ``min_iterations``.
MAX_NEWTON_ITERATIONS = 100_000
#: Largest accepted ``line_search_max_iterations`` (halvings; 2^-100 is already far below 1e-16).
MAX_LINE_SEARCH_ITERATIONS = 100
#: Largest accepted magnitude of any number in a scene (SI units). Larger values are unit
#: errors and would overflow the solver's arithmetic (products of several such numbers).
MAX_MAGNITUDE = 1e12
#: Largest relative stretch of a dynamic body under its own weight that its kappa may allow
#: (:func:`_check_rigid`): a softer OrthoPotential does not give a rigid body.
MAX_STRETCH = 0.01
#: Unicode categories of characters refused in names: format characters (Cf: U+202E RIGHT-TO-LEFT
#: OVERRIDE shows a name backwards, U+200B ZERO WIDTH SPACE makes two names that look the same)
#: and the line and paragraph separators (Zl, Zp), which split an error line.
INVISIBLE_CATEGORIES = ("Cf", "Zl", "Zp")
#: Smallest accepted contact ``d_hat``, m: a tenth of the tolerance of the solver's CCD
#: (:data:`solver.contact.CCD_TOLERANCE`, 1e-4). Surfaces kept closer than the CCD resolves make
#: each CCD call subdivide to its iteration cap: steps take seconds, then hours (docs/contact.md).
MIN_D_HAT = 1e-5
#: Smallest accepted ``d_hat`` relative to the scene's extent (the diagonal of the bounding box of
#: its contact-enabled bodies at frame 0): below it, squared distances (which ipctk's barrier takes)
#: lose their precision in double precision at that scale.
MIN_RELATIVE_D_HAT = 1e-7
#: Longest accepted body or joint name, in characters (Blender's own names have at most 255 bytes).
MAX_NAME_LENGTH = 1000
#: Smallest accepted value of a quantity that must be positive (densities, kappa, mass,
#: frame_rate, tolerances).
MIN_POSITIVE = 1e-12
#: |R^T R - I| (largest entry) above which a transform is not rigid.
RIGID_TOLERANCE = 1e-6
#: A joint axis shorter than this times max(1, |position0|, |position1|) (m) has zero length.
ZERO_AXIS = 1e-9
#: Relative tolerance of symmetry of an inertia tensor (largest entry of I - I^T over largest |I|).
SYMMETRY_TOLERANCE = 1e-6
#: Smallest accepted ratio of the smallest to the largest eigenvalue of a mass tensor.
DEFINITE_TOLERANCE = 1e-12


def _fail(where: str, field_name: str, message: str) -> SceneError:
    """A SceneError ``"<where>: <field>: <message>"`` (``where`` names the body/joint/settings)."""
    return SceneError(f"{where}: {field_name}: {message}")


def _type_name(value) -> str:
    return type(value).__name__


def _number(value, where: str, field_name: str) -> float:
    """A finite Python float from a real scalar; booleans, strings, None and arrays are refused."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _fail(where, field_name, f"must be a number, got {_type_name(value)} {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        raise _fail(where, field_name, "number is too large") from None
    if not np.isfinite(number):
        raise _fail(where, field_name, f"must be finite, got {number}")
    if abs(number) > MAX_MAGNITUDE:
        raise _fail(where, field_name, f"magnitude must be at most {MAX_MAGNITUDE:g} (check the units), got {number:g}")
    return number


def _positive(value: float, where: str, field_name: str, unit: str = "") -> float:
    """``value`` if it is at least MIN_POSITIVE, else a SceneError."""
    if not value >= MIN_POSITIVE:
        raise _fail(where, field_name, f"must be > 0{unit} (at least {MIN_POSITIVE:g}), got {value:g}")
    return value


def _check_magnitude(array: np.ndarray, where: str, field_name: str, what: str = "") -> None:
    """Refuse entries above MAX_MAGNITUDE; ``what`` locates the first (e.g. " at frame 3")."""
    if array.size and np.abs(array).max() > MAX_MAGNITUDE:
        raise _fail(
            where, field_name,
            f"magnitude must be at most {MAX_MAGNITUDE:g} (check the units), got {np.abs(array).max():g}{what}",
        )


def _count(value, where: str, field_name: str, minimum: int, maximum: int) -> int:
    """A Python int in [minimum, maximum]; a float is accepted only when its value is integral."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        raise _fail(where, field_name, f"must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        count = int(value)
    elif isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        count = int(value)
    else:
        raise _fail(where, field_name, f"must be an integer, got {_type_name(value)} {value!r:.60}")
    if count < minimum:
        raise _fail(where, field_name, f"must be >= {minimum}, got {count}")
    if count > maximum:
        raise _fail(where, field_name, f"must be <= {maximum}, got {count}")
    return count


def _float_array(value, where: str, field_name: str, *, allow_bool: bool = False) -> np.ndarray:
    """A new float64 array of (nested lists of) numbers of a regular shape, not yet shape-checked."""
    if value is None or isinstance(value, (str, bytes, dict, set)):
        got = "null (None)" if value is None else _type_name(value)
        raise _fail(where, field_name, f"must be a number or a (nested) list of numbers, got {got}")
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise _fail(where, field_name, "must be a number or a (nested) list of numbers of a regular shape") from None
    kind = array.dtype.kind
    if not allow_bool and (kind == "b" or (kind in "iuf" and _holds_bool(value))):
        raise _fail(where, field_name, "must contain numbers, not booleans")
    if kind not in "biuf":
        raise _fail(where, field_name, "must contain only (finite, at most ~1e308) numbers")
    try:
        return array.astype(np.float64)
    except (ValueError, TypeError, OverflowError):  # pragma: no cover - defensive
        raise _fail(where, field_name, "must contain only numbers") from None


def _holds_bool(value) -> bool:
    """Whether (nested lists or tuples of) ``value`` hold a boolean among numbers, which NumPy
    would read as 1 or 0 (``[true, 0, -9.81]``); an array holds one type, told by its dtype."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_bool(item) for item in value)
    return False


def _fixed_array(value, shape: tuple, where: str, field_name: str) -> np.ndarray:
    """A finite float64 array of exactly ``shape``."""
    array = _float_array(value, where, field_name)
    if array.shape != shape:
        raise _fail(where, field_name, f"must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise _fail(where, field_name, "must be finite (found NaN or infinity)")
    _check_magnitude(array, where, field_name)
    return array


def _series(value, item_shape: tuple, frames: int, where: str, field_name: str, *, flag: bool = False) -> np.ndarray:
    """Broadcast one value of ``item_shape`` or a per-frame series to (frames,) + item_shape.

    ``frames`` is frame_count + 1. With ``flag`` the values must be 0 or 1 (booleans accepted).
    """
    array = _float_array(value, where, field_name, allow_bool=flag)
    item = "a number" if item_shape == () else f"one value of shape {item_shape}"
    if array.shape == item_shape:
        array = np.array(np.broadcast_to(array, (frames,) + item_shape))
    elif array.ndim == len(item_shape) + 1 and array.shape[1:] == item_shape:
        if array.shape[0] != frames:
            raise _fail(
                where, field_name,
                f"per-frame series must have frame_count + 1 = {frames} entries, got {array.shape[0]}",
            )
    else:
        raise _fail(
            where, field_name,
            f"must be {item} or a per-frame series of frame_count + 1 = {frames} of them, got shape {array.shape}",
        )
    finite = np.isfinite(array).reshape(frames, -1).all(axis=1)
    if not finite.all():
        raise _fail(where, field_name, f"must be finite (NaN or infinity at frame {int(np.argmin(finite))})")
    large = (np.abs(array) > MAX_MAGNITUDE).reshape(frames, -1).any(axis=1)
    if large.any():
        _check_magnitude(array[int(np.argmax(large))], where, field_name, f" at frame {int(np.argmax(large))}")
    if flag:
        good = ((array == 0.0) | (array == 1.0)).reshape(frames, -1).all(axis=1)
        if not good.all():
            frame = int(np.argmin(good))
            raise _fail(where, field_name, f"must be 0 or 1, got {array[frame]} at frame {frame}")
    return array


def _check_non_negative(array: np.ndarray, where: str, field_name: str) -> None:
    bad = np.nonzero((array < 0.0).reshape(array.shape[0], -1).any(axis=1))[0]
    if bad.size:
        frame = int(bad[0])
        raise _fail(where, field_name, f"must be >= 0, got {array[frame].tolist()} at frame {frame}")


def _check_transforms(matrices: np.ndarray, where: str, field_name: str, *, series: bool) -> np.ndarray:
    """Check (..., 4, 4) finite matrices are rigid poses; returns a copy with an exact last row."""
    batch = matrices.reshape(-1, 4, 4)
    deviation = np.abs(batch[:, 3, :] - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=1)
    if np.any(deviation > 1e-9):
        frame = int(np.argmax(deviation > 1e-9))
        at = f" at frame {frame}" if series else ""
        raise _fail(where, field_name, f"last row must be [0, 0, 0, 1], got {batch[frame, 3].tolist()}{at}")
    rotation = batch[:, 0:3, 0:3]
    with np.errstate(all="ignore"):
        error = np.abs(np.einsum("nki,nkj->nij", rotation, rotation) - np.eye(3)).max(axis=(1, 2))
        determinant = np.linalg.det(rotation)
    bad = np.nonzero(~(error <= RIGID_TOLERANCE) | ~(determinant > 0.0))[0]
    if bad.size:
        frame = int(bad[0])
        at = f" at frame {frame}" if series else ""
        if error[frame] <= RIGID_TOLERANCE:
            raise _fail(
                where, field_name,
                f"is a reflection{at} (det R = {determinant[frame]:.6g} <= 0); give a proper rotation + translation",
            )
        raise _fail(
            where, field_name,
            f"is not rigid{at}: |R^T R - I| = {error[frame]:.3g} > {RIGID_TOLERANCE:g} "
            f"(det R = {determinant[frame]:.6g}): "
            "it is scaled or sheared; bake (apply) the scale into the mesh vertices and give a "
            "rotation + translation only",
        )
    out = matrices.copy()
    out[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return out


def _positive_definite(matrix: np.ndarray) -> Optional[np.ndarray]:
    """Eigenvalues (ascending) of a symmetric 3x3 matrix if it is finite and positive definite.

    Positive definite here means the smallest eigenvalue exceeds ``DEFINITE_TOLERANCE`` times the
    largest, which must be positive. Returns None otherwise.
    """
    if not np.all(np.isfinite(matrix)):
        return None
    try:
        eigenvalues = np.linalg.eigvalsh(matrix)
    except np.linalg.LinAlgError:  # pragma: no cover - finite symmetric input
        return None
    if not np.all(np.isfinite(eigenvalues)) or not eigenvalues[-1] > 0.0:
        return None
    if not eigenvalues[0] > DEFINITE_TOLERANCE * eigenvalues[-1]:
        return None
    return eigenvalues


def _flag(value, where: str, field_name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(where, field_name, f"must be true or false, got {_type_name(value)}")
    return bool(value)


def _validate_contact_settings(contact) -> ContactSettings:
    where = "settings"
    if not isinstance(contact, ContactSettings):
        raise _fail(where, "contact", f"must be a ContactSettings, got {_type_name(contact)}")
    d_hat = _positive(_number(contact.d_hat, where, "contact.d_hat"), where, "contact.d_hat", " m")
    resistance = None
    if contact.resistance is not None:
        resistance = _positive(_number(contact.resistance, where, "contact.resistance"), where, "contact.resistance",
                               " J/m^4")
    friction = _number(contact.friction, where, "contact.friction")
    if friction < 0.0:
        raise _fail(where, "contact.friction", f"must be >= 0, got {friction}")
    eps_velocity = _positive(_number(contact.eps_velocity, where, "contact.eps_velocity"), where,
                             "contact.eps_velocity", " m/s")
    return ContactSettings(enable=_flag(contact.enable, where, "contact.enable"), d_hat=d_hat,
                           resistance=resistance, friction=friction, eps_velocity=eps_velocity)


def _validate_body_contact(contact, where: str, default_friction: float) -> BodyContact:
    if not isinstance(contact, BodyContact):
        raise _fail(where, "contact", f"must be a BodyContact, got {_type_name(contact)}")
    friction = default_friction
    if contact.friction is not None:
        friction = _number(contact.friction, where, "contact.friction")
        if friction < 0.0:
            raise _fail(where, "contact.friction", f"must be >= 0, got {friction}")
    if not isinstance(contact.shape, str) or contact.shape not in CONTACT_SHAPES:
        raise _fail(where, "contact.shape", f"must be one of {list(CONTACT_SHAPES)}, got {contact.shape!r:.60}")
    if not isinstance(contact.collections, (list, tuple, np.ndarray)) or not all(
            isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and 0 <= c < COLLECTION_COUNT
            for c in contact.collections):
        raise _fail(where, "contact.collections",
                    f"must be a list of collection numbers 0 to {COLLECTION_COUNT - 1}, "
                    f"got {contact.collections!r:.60}")
    collections = tuple(sorted({int(c) for c in contact.collections}))
    return BodyContact(enable=_flag(contact.enable, where, "contact.enable"), friction=friction, shape=contact.shape,
                       collections=collections)


def _validate_settings(settings) -> Settings:
    where = "settings"
    if not isinstance(settings, Settings):
        raise SceneError(f"settings: must be a Settings, got {_type_name(settings)}")
    frame_rate = _number(settings.frame_rate, where, "frame_rate")
    _positive(frame_rate, where, "frame_rate", " frames/s")
    substeps = _count(settings.substeps, where, "substeps", 1, MAX_SUBSTEPS)
    frame_count = _count(settings.frame_count, where, "frame_count", 0, MAX_FRAME_COUNT)
    if frame_count * substeps > MAX_TIME_STEPS:
        raise _fail(
            where, "substeps",
            f"frame_count * substeps = {frame_count} * {substeps} = {frame_count * substeps} time steps, more than "
            f"the {MAX_TIME_STEPS} a run may take; lower substeps or frame_count (or split the shot)",
        )
    gravity = _fixed_array(settings.gravity, (3,), where, "gravity")
    max_iterations = _count(settings.max_iterations, where, "max_iterations", 1, MAX_NEWTON_ITERATIONS)
    min_iterations = _count(settings.min_iterations, where, "min_iterations", 1, MAX_NEWTON_ITERATIONS)
    if min_iterations > max_iterations:
        raise _fail(where, "min_iterations", f"must be <= max_iterations = {max_iterations}, got {min_iterations}")
    tolerances = {}
    for name in ("velocity_tol", "transrate_tol"):
        tolerances[name] = _number(getattr(settings, name), where, name)
        _positive(tolerances[name], where, name)
    line_search = _count(
        settings.line_search_max_iterations, where, "line_search_max_iterations", 0, MAX_LINE_SEARCH_ITERATIONS
    )
    if not 0.0 < 1.0 / (frame_rate * substeps) < np.inf:
        raise _fail(where, "frame_rate", "time step 1 / (frame_rate * substeps) is not a positive finite number")
    if not isinstance(settings.device, str) or settings.device not in DEVICES:
        raise _fail(where, "device", f"must be one of {list(DEVICES)}, got {settings.device!r}")
    return Settings(
        frame_rate=frame_rate, substeps=substeps, frame_count=frame_count, gravity=gravity,
        max_iterations=max_iterations, min_iterations=min_iterations,
        velocity_tol=tolerances["velocity_tol"], transrate_tol=tolerances["transrate_tol"],
        line_search_max_iterations=line_search, device=settings.device,
        contact=_validate_contact_settings(settings.contact),
    )


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


def _facts(mesh: Mesh) -> _MeshFacts:
    """The :class:`_MeshFacts` of ``mesh``: remembered where :func:`validate_scene` returned it,
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
    :func:`validate_scene` returned."""
    from .mass import shell_mass_properties

    facts = _facts(mesh)
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
    if _facts(mesh).closed:
        return "mesh"
    return "thickness" if thickness is not None else "convex hull"


def scene_notes(scene: Scene) -> list[str]:
    """The notes of a validated ``scene``: one sentence per body whose mesh the validation
    turned the right way round (docs/scene_format.md, "Meshes")."""
    return [f"body {body.name!r}: {_facts(body.mesh).note}" for body in scene.bodies if _facts(body.mesh).note]


def _validate_mesh(mesh, where: str) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise _fail(where, "mesh", f"must be a Mesh, got {_type_name(mesh)}")
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
    vertices = _float_array(mesh.vertices, where, "mesh.vertices")
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise _fail(where, "mesh.vertices", f"must have shape (V, 3), got {vertices.shape}")
    if vertices.shape[0] < 3:
        raise _fail(where, "mesh.vertices", f"a mesh needs at least 3 vertices, got {vertices.shape[0]}")
    if not np.all(np.isfinite(vertices)):
        row = int(np.argmin(np.isfinite(vertices).all(axis=1)))
        raise _fail(where, "mesh.vertices", f"must be finite (NaN or infinity in vertex {row})")
    _check_magnitude(vertices, where, "mesh.vertices")

    raw = _float_array(mesh.triangles, where, "mesh.triangles")
    if raw.ndim != 2 or raw.shape[1] != 3 or raw.shape[0] == 0:
        raise _fail(where, "mesh.triangles", f"must have shape (T, 3) with T >= 1, got {raw.shape}")
    if not np.all(np.isfinite(raw)) or not np.all(raw == np.floor(raw)):
        raise _fail(where, "mesh.triangles", "must contain integer vertex indices")
    count = vertices.shape[0]
    out_of_range = (raw < 0) | (raw >= count)
    if out_of_range.any():
        triangle, corner = (int(k) for k in np.argwhere(out_of_range)[0])
        raise _fail(
            where, "mesh.triangles",
            f"vertex index {raw[triangle, corner]:.0f} in triangle {triangle} is out of range "
            f"(the mesh has {count} vertices, indices 0..{count - 1})",
        )
    triangles = raw.astype(np.int64)
    repeated = (triangles[:, 0] == triangles[:, 1]) | (triangles[:, 1] == triangles[:, 2]) | (
        triangles[:, 0] == triangles[:, 2])
    if repeated.any():
        triangle = int(np.argmax(repeated))
        raise _fail(where, "mesh.triangles", f"triangle {triangle} {triangles[triangle].tolist()} repeats a vertex "
                                             "(it has no area; remove it: Blender's Mesh > Clean Up > Degenerate "
                                             "Dissolve)")
    if mesh_closure_problem(triangles) is not None:
        return Mesh(vertices=vertices, triangles=triangles), False, ""

    from .mass import mesh_volume  # local import keeps this module free of numerics at import time

    with np.errstate(all="ignore"):
        volume = mesh_volume(vertices, triangles)
    if not np.isfinite(volume):
        raise _fail(where, "mesh.vertices", "the enclosed volume overflows (coordinates too large)")
    if abs(volume) <= ZERO_VOLUME:
        raise _fail(where, "mesh", f"has zero volume ({volume:.3g} m^3, need |volume| > {ZERO_VOLUME:g})")
    note = ""
    if volume < 0.0:
        triangles = np.ascontiguousarray(triangles[:, [0, 2, 1]])
        note = (f"mesh is wound inside out (signed volume {volume:.6g} m^3 < 0, its normals pointing inwards); "
                "the solver turns it the right way (Blender: Edit Mode, Mesh > Normals > Recalculate Outside "
                "fixes the object itself)")
    problem = mesh_inside_out_problem(vertices, triangles)
    if problem is not None:
        raise _fail(where, "mesh", problem)
    return Mesh(vertices=vertices, triangles=triangles), True, note


def _validate_mass(mass, mesh: Mesh, density: float, where: str, thickness: Optional[float] = None,
                   motion: str = "dynamic") -> Optional[MassOverride]:
    unit = unit_mass_properties(mesh, thickness, motion)
    if unit is None:
        raise _fail(where, "thickness", "the mesh is open and flat (its convex hull has no volume), so it has no mass "
                                        "as a dynamic body: give it a thickness (m; Blender: Physics > Affine "
                                        "Body > Mass > Thickness), close the mesh, or make it Fixed or Animated")
    if mass is None:
        with np.errstate(all="ignore"):
            dyadic = unit.scaled(density)
            values = np.concatenate(([dyadic.mass], dyadic.mass_x_bar, dyadic.second_moment.ravel()))
            if not np.all(np.isfinite(values)) or not dyadic.mass > 0.0:
                raise _fail(
                    where, "mass_density",
                    f"mass properties of the mesh are not finite and positive (mass = {dyadic.mass:.6g} kg); "
                    "check mass_density and the size of the mesh",
                )
            center = dyadic.mass_x_bar / dyadic.mass
            centred = dyadic.second_moment - dyadic.mass * np.outer(center, center)
            centred = 0.5 * (centred + centred.T)
        if _positive_definite(centred) is None:
            raise _fail(
                where, "mesh",
                "has a degenerate mass distribution (second moment about the centre of mass is not "
                "positive definite: a flat or self-intersecting mesh?)",
            )
        return None
    if not isinstance(mass, MassOverride):
        raise _fail(where, "mass", f"must be a MassOverride or None, got {_type_name(mass)}")
    value = _number(mass.mass, where, "mass.mass")
    _positive(value, where, "mass.mass", " kg")
    center = _fixed_array(mass.mass_center, (3,), where, "mass.mass_center")
    inertia = _fixed_array(mass.inertia, (3, 3), where, "mass.inertia")
    with np.errstate(all="ignore"):
        asymmetry = np.abs(inertia - inertia.T).max()
        symmetric = 0.5 * inertia + 0.5 * inertia.T
    if not asymmetry <= SYMMETRY_TOLERANCE * np.abs(inertia).max():
        raise _fail(where, "mass.inertia", "must be symmetric (the inertia tensor about the centre of mass)")
    eigenvalues = _positive_definite(symmetric)
    if eigenvalues is None:
        raise _fail(where, "mass.inertia", "must be symmetric positive definite")
    # The centred second moment S_cm = tr(I)/2 - I must be positive definite too (else the 12x12
    # mass matrix is not): the triangle inequality I1 + I2 > I3 of the principal moments.
    with np.errstate(all="ignore"):
        centred = 0.5 * np.trace(symmetric) * np.eye(3) - symmetric
    if _positive_definite(centred) is None:
        raise _fail(
            where, "mass.inertia",
            f"principal moments {eigenvalues.tolist()} violate the triangle inequality I1 + I2 > I3 "
            "of a physical (non-flat) body",
        )
    return MassOverride(mass=value, mass_center=center, inertia=symmetric)


def _validate_soft_transform(soft, transform: np.ndarray, frames: int, where: str) -> Optional[SoftTransform]:
    if soft is None:
        return None
    if not isinstance(soft, SoftTransform):
        raise _fail(where, "soft_transform", f"must be a SoftTransform or None, got {_type_name(soft)}")
    strength = _series(soft.strength_ratio, (2,), frames, where, "soft_transform.strength_ratio")
    _check_non_negative(strength, where, "soft_transform.strength_ratio")
    if soft.aim_transform is None:
        aim = np.array(np.broadcast_to(transform, (frames, 4, 4)))
    else:
        aim = _series(soft.aim_transform, (4, 4), frames, where, "soft_transform.aim_transform")
        aim = _check_transforms(aim, where, "soft_transform.aim_transform", series=True)
    constrained = _series(soft.is_constrained, (), frames, where, "soft_transform.is_constrained", flag=True)
    return SoftTransform(strength_ratio=strength, aim_transform=aim, is_constrained=constrained)


def _check_name(name, where: str) -> None:
    """Raise :class:`SceneError` (naming ``where``, ``body #i``) unless ``name`` is a non-empty
    string of at most :data:`MAX_NAME_LENGTH` characters with no control character (a NUL
    would cut it short in the trajectory file's names, a line break split an error line) and no
    invisible formatting character (:data:`INVISIBLE_CATEGORIES`)."""
    if not isinstance(name, str) or not name:
        raise SceneError(f"{where}: name: must be a non-empty string, got {name!r:.60}")
    if len(name) > MAX_NAME_LENGTH:
        raise SceneError(f"{where}: name: {len(name)} characters, more than the {MAX_NAME_LENGTH} a name may have "
                         f"(it starts {name[:40]!r})")
    control = next((character for character in name if unicodedata.category(character) == "Cc"), None)
    if control is not None:
        raise SceneError(f"{where}: name: must not contain control characters, got {control!r} in {name!r:.60}")
    hidden = next((character for character in name if unicodedata.category(character) in INVISIBLE_CATEGORIES), None)
    if hidden is not None:
        raise SceneError(f"{where}: name: must not contain invisible formatting characters, got "
                         f"U+{ord(hidden):04X} {unicodedata.name(hidden, 'FORMAT CHARACTER')} in {name!r:.60}")


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
        raise _fail(where, "kappa", f"{kappa:g} Pa cannot keep the body rigid: hanging from one end under "
                                    f"gravity it would stretch by about {stretch:.3g} (m g L / (16 kappa V)), "
                                    f"more than {MAX_STRETCH:g}; need kappa >= {bound:.3g} Pa (default 1e8)")


def barrier_force_per_kappa(distance: float, d_hat: float) -> float:
    """|d b(d^2, d_hat^2) / d d| of ipctk's barrier b(x, D) = -(x - D)^2 ln(x / D) on squared
    distances x = d^2 (Li et al. 2020, "Incremental Potential Contact", eq. 6, in squared
    distances as ipctk takes them): the force (N per unit of resistance, J/m^4) with which two
    primitives ``distance`` m apart (0 < distance < d_hat) push apart."""
    x, big = distance * distance, d_hat * d_hat
    return 2.0 * distance * (2.0 * (x - big) * np.log(x / big) + (x - big) ** 2 / x)


def _resting_gap(resistance: float, weight: float, d_hat: float) -> float:
    """The distance (m) at which one primitive pair of a barrier of ``resistance`` holds ``weight``
    (N): where :func:`barrier_force_per_kappa` times resistance equals it (bisection; the force
    falls from infinity at 0 to 0 at d_hat)."""
    low, high = 0.0, d_hat
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            break
        if resistance * barrier_force_per_kappa(middle, d_hat) > weight:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def _check_contact_scale(settings: Settings, bodies: list) -> None:
    """Refuse a ``d_hat`` or ``resistance`` with which a contact step is not bounded
    (docs/contact.md, "Limits"): d_hat below :data:`MIN_D_HAT` or :data:`MIN_RELATIVE_D_HAT` of
    the scene's extent; d_hat not below the half-diagonal of the smallest contact-enabled body
    (such a body would be shrunk to nothing where it starts touching another, and every body
    within d_hat of it would push it); a resistance under which the heaviest dynamic body's
    weight would press one primitive pair closer than MIN_D_HAT."""
    contact = settings.contact
    members = [body for body in bodies if body.contact.enable]
    if not contact.enable or len(members) < 2:
        return
    where = "settings"
    corners = [body.mesh.vertices @ body.transform[:3, :3].T + body.transform[:3, 3] for body in members]
    points = np.concatenate(corners)
    extent = float(np.linalg.norm(points.max(axis=0) - points.min(axis=0)))
    diagonals = [float(np.linalg.norm(np.ptp(body.mesh.vertices, axis=0))) for body in members]
    smallest = members[int(np.argmin(diagonals))]
    half_size = 0.5 * min(diagonals)
    lowest = max(MIN_D_HAT, MIN_RELATIVE_D_HAT * extent)
    if contact.d_hat < lowest:
        reason = ("a tenth of the contact check's tolerance" if lowest == MIN_D_HAT else
                  f"{MIN_RELATIVE_D_HAT:g} of the scene's {extent:.3g} m extent")
        raise _fail(where, "contact.d_hat", f"must be at least {lowest:.3g} m ({reason}: closer gaps make each "
                                           f"contact step take seconds to hours), got {contact.d_hat:g}")
    if contact.d_hat >= half_size:
        raise _fail(where, "contact.d_hat", f"must be less than {half_size:.3g} m, half the size of the smallest "
                                           f"contact-enabled body ({smallest.name!r}), got {contact.d_hat:g}")
    if contact.resistance is None:
        return
    gravity = max(float(np.linalg.norm(settings.gravity)), 9.81)
    masses = [body.mass.mass if body.mass is not None else body.mass_density * unit_mass_properties(body.mesh).volume
              for body in members if body.motion == "dynamic"]
    weight = max(masses, default=1.0) * gravity
    gap = _resting_gap(contact.resistance, weight, contact.d_hat)
    if gap < MIN_D_HAT:
        need = weight / barrier_force_per_kappa(MIN_D_HAT, contact.d_hat)
        raise _fail(where, "contact.resistance",
                    f"{contact.resistance:g} J/m^4 lets the heaviest dynamic body's weight ({weight:.3g} N) press "
                    f"surfaces to {gap:.3g} m, closer than {MIN_D_HAT:g} m (a tenth of the contact check's "
                    f"tolerance: each contact step would take seconds to hours); need at least {need:.3g} J/m^4, "
                    "or null to choose it from that body")


def _validate_body(body, index: int, frames: int, gravity: float, default_friction: float = 0.5) -> Body:
    if not isinstance(body, Body):
        raise SceneError(f"body #{index}: must be a Body, got {_type_name(body)}")
    _check_name(body.name, f"body #{index}")
    where = f"body {body.name!r}"
    mesh = _validate_mesh(body.mesh, where)
    transform = _fixed_array(body.transform, (4, 4), where, "transform")
    transform = _check_transforms(transform, where, "transform", series=False)
    density = _number(body.mass_density, where, "mass_density")
    _positive(density, where, "mass_density", " kg/m^3")
    kappa = _number(body.kappa, where, "kappa")
    _positive(kappa, where, "kappa", " Pa")
    if not isinstance(body.motion, str) or body.motion not in MOTIONS:
        raise _fail(where, "motion", f"must be one of {', '.join(map(repr, MOTIONS))}, got {body.motion!r:.60}")
    linear_velocity = _fixed_array(body.linear_velocity, (3,), where, "linear_velocity")
    angular_velocity = _fixed_array(body.angular_velocity, (3,), where, "angular_velocity")
    thickness = None
    if body.thickness is not None:
        thickness = _positive(_number(body.thickness, where, "thickness"), where, "thickness", " m")
    mass = _validate_mass(body.mass, mesh, density, where, thickness, body.motion)
    if body.motion == "dynamic":
        _check_rigid(mesh, mass.mass if mass is not None else None, density, kappa, gravity, where, thickness)
    soft = _validate_soft_transform(body.soft_transform, transform, frames, where)
    animated = None
    if body.motion == "animated":
        if body.animated_transforms is None:
            raise _fail(where, "animated_transforms", f"an animated body needs frame_count + 1 = {frames} 4x4 poses")
        animated = _float_array(body.animated_transforms, where, "animated_transforms")
        if animated.ndim != 3 or animated.shape[1:] != (4, 4):
            raise _fail(where, "animated_transforms",
                        f"must be a list of frame_count + 1 = {frames} 4x4 matrices, got shape {animated.shape}")
        if animated.shape[0] != frames:
            raise _fail(where, "animated_transforms",
                        f"must have exactly frame_count + 1 = {frames} entries, got {animated.shape[0]}")
        finite = np.isfinite(animated).reshape(frames, -1).all(axis=1)
        if not finite.all():
            raise _fail(where, "animated_transforms",
                        f"must be finite (NaN or infinity at frame {int(np.argmin(finite))})")
        _check_magnitude(animated, where, "animated_transforms")
        animated = _check_transforms(animated, where, "animated_transforms", series=True)
        if np.abs(animated[0] - transform).max() > RIGID_TOLERANCE * max(1.0, np.abs(transform).max()):
            raise _fail(where, "animated_transforms", "frame 0 must equal the body's transform")
    elif body.animated_transforms is not None:
        raise _fail(where, "animated_transforms", f"is only used by animated bodies, but motion is {body.motion!r}")
    return Body(
        name=body.name, mesh=mesh, transform=transform, mass_density=density, kappa=kappa, motion=body.motion,
        linear_velocity=linear_velocity, angular_velocity=angular_velocity, mass=mass, soft_transform=soft,
        animated_transforms=animated, contact=_validate_body_contact(body.contact, where, default_friction),
        thickness=thickness,
    )


def _validate_limit(limit, frames: int, where: str) -> Optional[Limit]:
    if limit is None:
        return None
    if not isinstance(limit, Limit):
        raise _fail(where, "limit", f"must be a Limit or None, got {_type_name(limit)}")
    lower = _series(limit.lower, (), frames, where, "limit.lower")
    upper = _series(limit.upper, (), frames, where, "limit.upper")
    strength = _series(limit.strength, (), frames, where, "limit.strength")
    crossed = np.nonzero(lower > upper)[0]
    if crossed.size:
        frame = int(crossed[0])
        at = "" if np.ndim(limit.lower) == 0 and np.ndim(limit.upper) == 0 else f" at frame {frame}"
        raise _fail(where, "limit.lower", f"lower {lower[frame]} > upper {upper[frame]}{at}")
    _check_non_negative(strength, where, "limit.strength")
    return Limit(lower=lower, upper=upper, strength=strength)


def _validate_driving(driving, kind: str, frames: int, where: str) -> Optional[Driving]:
    """A validated drive of a joint of type ``kind`` (prismatic or revolute): its position aim
    (:data:`AIM_KEYS`) a series (0 when not given) unless ``aim_velocity`` is given, then None."""
    if driving is None:
        return None
    if not isinstance(driving, Driving):
        raise _fail(where, "driving", f"must be a Driving or None, got {_type_name(driving)}")
    aim_key = AIM_KEYS[kind]
    for key in AIM_KEYS.values():
        if key != aim_key and getattr(driving, key) is not None:
            raise _fail(where, f"driving.{key}", f"is for {'revolute' if key == 'aim_angle' else 'prismatic'} "
                        f"joints; a {kind} joint's drive aims with {aim_key} or aim_velocity")
    if getattr(driving, aim_key) is not None and driving.aim_velocity is not None:
        raise _fail(where, "driving.aim_velocity", f"give either {aim_key} (position mode) or aim_velocity "
                    "(velocity mode), not both")
    strength = _series(driving.strength_ratio, (), frames, where, "driving.strength_ratio")
    _check_non_negative(strength, where, "driving.strength_ratio")
    constrained = _series(driving.is_constrained, (), frames, where, "driving.is_constrained", flag=True)
    passive = _series(driving.is_passive, (), frames, where, "driving.is_passive", flag=True)
    aims = {}
    if driving.aim_velocity is not None:
        aims["aim_velocity"] = _series(driving.aim_velocity, (), frames, where, "driving.aim_velocity")
    else:
        aim = getattr(driving, aim_key)
        aims[aim_key] = _series(0.0 if aim is None else aim, (), frames, where, f"driving.{aim_key}")
    effort_key = "max_force" if kind == "prismatic" else "max_torque"
    other_key = "max_torque" if kind == "prismatic" else "max_force"
    if getattr(driving, other_key) is not None:
        raise _fail(where, f"driving.{other_key}", f"is for {'revolute' if kind == 'prismatic' else 'prismatic'} "
                    f"joints; a {kind} joint's drive is limited with {effort_key}")
    caps = {}
    for key in (effort_key, "max_speed"):
        value = getattr(driving, key)
        if value is not None:
            value = _number(value, where, f"driving.{key}")
            if not value > 0.0:
                raise _fail(where, f"driving.{key}", f"must be > 0 (or null for no limit), got {value}")
            caps[key] = value
    validated = Driving(strength_ratio=strength, is_constrained=constrained, is_passive=passive)
    for key, value in {**aims, **caps}.items():
        setattr(validated, key, value)
    return validated


def _flags(value, where: str, field_name: str) -> tuple:
    """Six true/false values."""
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 6:
        raise _fail(where, field_name, f"must be a list of 6 true/false values, got {_type_name(value)}")
    return tuple(_flag(item, where, f"{field_name}[{k}]") for k, item in enumerate(value))


def _validate_generic(generic, where: str) -> Generic:
    """A generic joint's validated coordinates (:class:`Generic`), every array float64 (6,) or (3, 3)."""
    if generic is None:
        return Generic()
    if not isinstance(generic, Generic):
        raise _fail(where, "generic", f"must be a Generic or None, got {_type_name(generic)}")
    rotations = {}
    for name in ("axes", "cone_axes"):
        matrix = _fixed_array(getattr(generic, name), (3, 3), where, f"generic.{name}")
        if not (np.allclose(matrix.T @ matrix, np.eye(3), atol=RIGID_TOLERANCE) and np.linalg.det(matrix) > 0.0):
            raise _fail(where, f"generic.{name}", "must be a rotation (orthonormal columns, determinant +1)")
        rotations[name] = matrix
    swing: Optional[tuple] = None
    twist = None
    if generic.swing_limit is not None:
        half_angles = _fixed_array(generic.swing_limit, (2,), where, "generic.swing_limit")
        if not np.all((half_angles > 0.0) & (half_angles < np.pi / 2)):
            raise _fail(where, "generic.swing_limit",
                        f"half-angles must lie in (0, π/2) rad, got {half_angles.tolist()}")
        swing = (float(half_angles[0]), float(half_angles[1]))
    if generic.twist_limit is not None:
        if swing is None:
            raise _fail(where, "generic.twist_limit", "is the twist of a swing cone: give swing_limit too")
        twist = _positive(_number(generic.twist_limit, where, "generic.twist_limit"), where, "generic.twist_limit",
                          " rad")
    values = {name: _fixed_array(getattr(generic, name), (6,), where, f"generic.{name}")
              for name in ("rest", "stiffness", "damping", "lower", "upper")}
    for name in ("stiffness", "damping"):
        if np.any(values[name] < 0.0):
            raise _fail(where, f"generic.{name}", f"must be >= 0, got {values[name].tolist()}")
    limited = _flags(generic.limited, where, "generic.limited")
    for k in range(6):
        if limited[k] and values["lower"][k] > values["upper"][k]:
            raise _fail(where, f"generic.lower[{k}]", f"lower {values['lower'][k]} > upper {values['upper'][k]}")
    strength = _number(generic.limit_strength, where, "generic.limit_strength")
    if strength < 0.0:
        raise _fail(where, "generic.limit_strength", f"must be >= 0, got {strength}")
    break_force = None
    if generic.break_force is not None:
        break_force = _positive(_number(generic.break_force, where, "generic.break_force"), where,
                                "generic.break_force", " N")
    return Generic(locked=_flags(generic.locked, where, "generic.locked"), limited=limited, limit_strength=strength,
                   swing_limit=swing, twist_limit=twist, break_force=break_force, **rotations, **values)


def _validate_joint(joint, index: int, frames: int, bodies: dict) -> Joint:
    if not isinstance(joint, Joint):
        raise SceneError(f"joint #{index}: must be a Joint, got {_type_name(joint)}")
    _check_name(joint.name, f"joint #{index}")
    where = f"joint {joint.name!r}"
    if not isinstance(joint.type, str) or joint.type not in JOINT_TYPES:
        raise _fail(where, "type", f"must be one of {', '.join(map(repr, JOINT_TYPES))}, got {joint.type!r:.60}")
    for side in ("l_body", "r_body"):
        name = getattr(joint, side)
        if not isinstance(name, str):
            raise _fail(where, side, f"must be a body name (string), got {_type_name(name)}")
        if name not in bodies:
            raise _fail(where, side, f"no body named {name!r:.80}")
    if joint.l_body == joint.r_body:
        raise _fail(where, "r_body", f"a joint needs two different bodies, but both are {joint.l_body!r}")
    position0 = position1 = position = None
    if joint.type in AXIS_JOINT_TYPES:
        if joint.position is not None:
            raise _fail(where, "position", f"a {joint.type} joint has an axis: give position0 and position1")
        position0 = _fixed_array(joint.position0, (3,), where, "position0")
        position1 = _fixed_array(joint.position1, (3,), where, "position1")
        with np.errstate(all="ignore"):
            length = float(np.linalg.norm(position1 - position0))
        if not np.isfinite(length):
            raise _fail(where, "position1", "axis length overflows (coordinates too large)")
        if not length > ZERO_AXIS * max(1.0, float(np.abs(position0).max()), float(np.abs(position1).max())):
            raise _fail(where, "position1",
                        f"zero-length axis: position1 must differ from position0 (|axis| = {length:.3g} m)")
    else:
        for key in ("position0", "position1"):
            if getattr(joint, key) is not None:
                raise _fail(where, key, f"a {joint.type} joint has one anchor: give position, not position0/position1")
        position = _fixed_array(joint.position, (3,), where, "position")
    strength = _number(joint.strength_ratio, where, "strength_ratio")
    if strength < 0.0:
        raise _fail(where, "strength_ratio", f"must be >= 0, got {strength}")
    init_distance = _number(joint.init_distance, where, "init_distance")
    init_angle = _number(joint.init_angle, where, "init_angle")
    if joint.type == "prismatic" and init_angle != 0.0:
        raise _fail(where, "init_angle", "is for revolute joints; a prismatic joint uses init_distance")
    if joint.type == "revolute" and init_distance != 0.0:
        raise _fail(where, "init_distance", "is for prismatic joints; a revolute joint uses init_angle")
    if joint.type not in AXIS_JOINT_TYPES:
        given = {"init_angle": init_angle != 0.0, "init_distance": init_distance != 0.0,
                 "limit": joint.limit is not None, "driving": joint.driving is not None}
        for key, present in given.items():
            if present:
                raise _fail(where, key, f"is for prismatic and revolute joints, not for a {joint.type} joint")
    damping = _number(joint.damping, where, "damping")
    if damping < 0.0:
        raise _fail(where, "damping", f"must be >= 0, got {damping}")
    if damping and joint.type not in AXIS_JOINT_TYPES:
        raise _fail(where, "damping", f"is for prismatic and revolute joints, not for a {joint.type} joint")
    if joint.generic is not None and joint.type != "generic":
        raise _fail(where, "generic", f"is for generic joints, not for a {joint.type} joint")
    generic = _validate_generic(joint.generic, where) if joint.type == "generic" else None
    limit = _validate_limit(joint.limit, frames, where)
    driving = None if joint.driving is None else _validate_driving(joint.driving, joint.type, frames, where)
    return Joint(
        name=joint.name, type=joint.type, l_body=joint.l_body, r_body=joint.r_body,
        position0=position0, position1=position1, strength_ratio=strength,
        init_distance=init_distance, init_angle=init_angle, limit=limit, driving=driving, position=position,
        collide_connected=_flag(joint.collide_connected, where, "collide_connected"), damping=damping,
        generic=generic,
    )


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
        raise SceneError(f"scene: must be a Scene, got {_type_name(scene)}")
    settings = _validate_settings(scene.settings)
    frames = settings.frame_count + 1
    if not isinstance(scene.bodies, (list, tuple)):
        raise SceneError(f"scene: bodies: must be a list of bodies, got {_type_name(scene.bodies)}")
    if not isinstance(scene.joints, (list, tuple)):
        raise SceneError(f"scene: joints: must be a list of joints, got {_type_name(scene.joints)}")
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
        checked = _validate_body(body, index, frames, float(np.linalg.norm(settings.gravity)),
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
        checked_joint = _validate_joint(joint, index, frames, motions)
        if checked_joint.name in seen:
            raise SceneError(
                f"joint {checked_joint.name!r}: name: duplicate joint name "
                f"(joints #{seen[checked_joint.name]} and #{index})"
            )
        seen[checked_joint.name] = index
        joints.append(checked_joint)
    _check_contact_scale(settings, bodies)
    return Scene(settings=settings, bodies=bodies, joints=joints)
