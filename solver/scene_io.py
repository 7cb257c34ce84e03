"""The JSON scene file (``"format": "abd-scene", "version": 1``): read, convert, write.

The format is documented field by field in ``docs/scene_format.md``. Reading is done in two
stages: :func:`scene_from_dict` checks the document's structure (objects, known and required
keys, per-type keys) and builds the :mod:`solver.scene` dataclasses with the raw values, then
:func:`solver.scene_validation.validate_scene` checks every value and normalises it. Every
problem with the input is reported as :class:`~solver.scene.SceneError`, whose message names the
body or joint and the field.

Big meshes (more than :data:`INLINE_VERTEX_LIMIT` vertices) are written by :func:`save_scene` to
a NumPy ``.npz`` file beside the JSON file (``<stem>_meshes.npz``, named by the top-level key
``"arrays"``), and the mesh's ``vertices`` and ``triangles`` are then the names of its arrays
there, not lists, which is far smaller and faster to write and read (docs/scene_format.md, "Big
meshes: the arrays file").
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from .array_files import ArrayFile, ArrayFileError, ArrayShapeError, save_npz
from .output_files import move_into_place, write_aside
from .scene import (
    AXIS_JOINT_TYPES, JOINT_TYPES, Body, BodyContact, ContactSettings, Driving, Generic, Joint, Limit, MassOverride,
    Mesh, Scene, SceneError, Settings, SoftTransform,
)
from .scene_validation import validate_scene

FORMAT = "abd-scene"
VERSION = 1
#: Meshes with more vertices than this go to the arrays file beside the scene file (:func:`save_scene`).
INLINE_VERTEX_LIMIT = 1000
#: The arrays file's name: the scene file's stem with this suffix (not ``<stem>.npz``, which is
#: where ``python -m solver run`` writes the trajectory by default).
ARRAYS_SUFFIX = "_meshes.npz"
#: The most bytes the arrays a scene's meshes name may take together when read from its arrays
#: file (4 GiB: about 60 million vertices and twice as many triangles, float64 and int64).
MAX_ARRAYS_BYTES = 2**32

_TOP_KEYS = ("format", "version", "arrays", "settings", "bodies", "joints")
_SETTINGS_KEYS = (
    "frame_rate", "substeps", "frame_count", "gravity", "max_iterations", "min_iterations", "velocity_tol",
    "transrate_tol", "line_search_max_iterations", "device", "contact",
)
_CONTACT_KEYS = ("enable", "d_hat", "resistance", "friction", "eps_velocity")
_BODY_CONTACT_KEYS = ("enable", "friction", "shape", "collections")
_BODY_KEYS = (
    "name", "mesh", "transform", "mass_density", "kappa", "motion", "linear_velocity", "angular_velocity", "mass",
    "soft_transform", "animated_transforms", "contact", "thickness",
)
_MESH_KEYS = ("vertices", "triangles")
_MASS_KEYS = ("mass", "mass_center", "inertia")
_SOFT_KEYS = ("strength_ratio", "aim_transform", "is_constrained")
_JOINT_KEYS = (
    "name", "type", "l_body", "r_body", "position0", "position1", "position", "strength_ratio", "init_distance",
    "init_angle", "limit", "driving", "collide_connected", "damping", "generic",
)
#: Keys that only some joint types take (each with those types).
_JOINT_ONLY = {
    "init_angle": ("revolute",), "init_distance": ("prismatic",), "driving": ("prismatic", "revolute"),
    "limit": ("prismatic", "revolute"), "position0": ("prismatic", "revolute"), "position1": ("prismatic", "revolute"),
    "position": ("fixed", "spherical", "generic"), "damping": ("prismatic", "revolute"), "generic": ("generic",),
}
_GENERIC_KEYS = ("axes", "locked", "rest", "stiffness", "damping", "limited", "lower", "upper", "limit_strength",
                 "swing_limit", "twist_limit", "cone_axes", "break_force")
_LIMIT_KEYS = ("lower", "upper", "strength")
_DRIVING_KEYS = ("strength_ratio", "is_constrained", "is_passive", "aim_distance", "aim_angle", "aim_velocity",
                 "max_force", "max_torque", "max_speed")


def _object(value: Any, where: str, field_name: str) -> dict:
    if not isinstance(value, dict):
        raise SceneError(f"{where}: {field_name}: must be an object {{...}}, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _check_keys(obj: dict, where: str, prefix: str, allowed: tuple, required: tuple = ()) -> None:
    """Refuse unknown keys (suggesting the closest known one) and missing required keys."""
    for key in obj:
        if key not in allowed:
            hint = ""
            if isinstance(key, str):
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SceneError(
                f"{where}: {prefix}{key}: unknown key{hint}; allowed keys: {', '.join(allowed)}"
            )
    for key in required:
        if key not in obj:
            raise SceneError(f"{where}: {prefix}{key}: missing required field")


def _optional(obj: dict, key: str) -> dict:
    """The keyword arguments for a dataclass field that is only set when present in ``obj``."""
    return {key: obj[key]} if key in obj else {}


def _settings_from_dict(data: Any) -> Settings:
    data = _object(data, "settings", "settings")
    _check_keys(data, "settings", "", _SETTINGS_KEYS)
    values = {key: data[key] for key in _SETTINGS_KEYS if key in data}
    if "contact" in data:
        contact = _object(data["contact"], "settings", "contact")
        _check_keys(contact, "settings", "contact.", _CONTACT_KEYS)
        values["contact"] = ContactSettings(**contact)
    return Settings(**values)


def _mesh_array(value: Any, arrays, where: str, field_name: str):
    """A mesh field's value: the inline list itself, or the array a string names in ``arrays``."""
    if not isinstance(value, str):
        return value
    if arrays is None:
        raise SceneError(f"{where}: mesh.{field_name}: names the array {value!r:.60}, but the scene has no "
                         f'"arrays" file (give the list itself, or "arrays": "<file>.npz" at the top level)')
    if value not in arrays:
        raise SceneError(f"{where}: mesh.{field_name}: no array {value!r:.60} in the arrays file")
    if isinstance(arrays, ArrayFile):  # (V, 3) vertices or (T, 3) triangles, checked before it is read
        try:
            return arrays.read(value, shape=(None, 3))
        except ArrayShapeError as error:
            raise SceneError(f"{where}: mesh.{field_name}: must have shape ({field_name[0].upper()}, 3), "
                             f"got {error.shape}") from None
    return arrays[value]


def _body_from_dict(data: Any, index: int, arrays=None) -> Body:
    if not isinstance(data, dict):
        raise SceneError(f"body #{index}: must be an object {{...}}, got {_json_type(data)}")
    name = data.get("name")
    where = f"body {name!r}" if isinstance(name, str) and name else f"body #{index}"
    _check_keys(data, where, "", _BODY_KEYS, ("name", "mesh"))
    mesh = _object(data["mesh"], where, "mesh")
    _check_keys(mesh, where, "mesh.", _MESH_KEYS, _MESH_KEYS)
    kwargs: dict = {"name": name, "mesh": Mesh(vertices=_mesh_array(mesh["vertices"], arrays, where, "vertices"),
                                                triangles=_mesh_array(mesh["triangles"], arrays, where, "triangles"))}
    for key in ("transform", "mass_density", "kappa", "motion", "linear_velocity", "angular_velocity",
                "animated_transforms", "thickness"):
        kwargs.update(_optional(data, key))
    if data.get("mass") is not None:
        mass = _object(data["mass"], where, "mass")
        _check_keys(mass, where, "mass.", _MASS_KEYS, _MASS_KEYS)
        kwargs["mass"] = MassOverride(mass=mass["mass"], mass_center=mass["mass_center"], inertia=mass["inertia"])
    if data.get("soft_transform") is not None:
        soft = _object(data["soft_transform"], where, "soft_transform")
        _check_keys(soft, where, "soft_transform.", _SOFT_KEYS)
        kwargs["soft_transform"] = SoftTransform(**{key: soft[key] for key in _SOFT_KEYS if key in soft})
    if "contact" in data:
        contact = _object(data["contact"], where, "contact")
        _check_keys(contact, where, "contact.", _BODY_CONTACT_KEYS)
        kwargs["contact"] = BodyContact(**contact)
    # An animated body may leave out "transform": it is then frame 0 of its animation.
    animated = data.get("animated_transforms")
    if "transform" not in data and data.get("motion") == "animated" and isinstance(animated, list) and animated:
        kwargs["transform"] = animated[0]
    return Body(**kwargs)


def _joint_from_dict(data: Any, index: int) -> Joint:
    if not isinstance(data, dict):
        raise SceneError(f"joint #{index}: must be an object {{...}}, got {_json_type(data)}")
    name = data.get("name")
    where = f"joint {name!r}" if isinstance(name, str) and name else f"joint #{index}"
    _check_keys(data, where, "", _JOINT_KEYS, ("name", "type", "l_body", "r_body"))
    kind = data["type"]
    known = isinstance(kind, str) and kind in JOINT_TYPES
    for key, only in _JOINT_ONLY.items():
        misplaced = key in data and not (key in ("driving", "limit") and data[key] is None)
        if misplaced and known and kind not in only:
            raise SceneError(f"{where}: {key}: is only valid on {' and '.join(only)} joints, not on a {kind} joint")
    positions = ("position0", "position1") if kind in AXIS_JOINT_TYPES or not known else ("position",)
    for key in positions:
        if key not in data:
            raise SceneError(f"{where}: {key}: missing required field")
    kwargs: dict = {key: data[key] for key in ("name", "type", "l_body", "r_body") + positions}
    for key in ("strength_ratio", "init_distance", "init_angle", "collide_connected", "damping"):
        kwargs.update(_optional(data, key))
    if data.get("limit") is not None:
        limit = _object(data["limit"], where, "limit")
        _check_keys(limit, where, "limit.", _LIMIT_KEYS)
        kwargs["limit"] = Limit(**{key: limit[key] for key in _LIMIT_KEYS if key in limit})
    if data.get("generic") is not None:
        generic = _object(data["generic"], where, "generic")
        _check_keys(generic, where, "generic.", _GENERIC_KEYS)
        kwargs["generic"] = Generic(**{key: generic[key] for key in _GENERIC_KEYS if key in generic})
    if data.get("driving") is not None:
        driving = _object(data["driving"], where, "driving")
        _check_keys(driving, where, "driving.", _DRIVING_KEYS)
        kwargs["driving"] = Driving(**{key: driving[key] for key in _DRIVING_KEYS if key in driving})
    return Joint(**kwargs)


def scene_from_dict(data: dict, arrays=None) -> Scene:
    """Build and validate a :class:`~solver.scene.Scene` from a parsed scene document.

    Args:
        data: the JSON document as Python objects (dicts, lists, str, numbers, bool, None):
            ``{"format": "abd-scene", "version": 1, "settings": {...}, "bodies": [...],
            "joints": [...]}``; ``settings`` and ``joints`` are optional.
        arrays: the arrays that a mesh's ``vertices`` or ``triangles`` may name instead of
            listing them (a mapping of name to array: the opened arrays file, see
            :func:`load_scene`), or None.

    Returns:
        The normalised scene returned by :func:`solver.scene_validation.validate_scene` (arrays float64,
        per-frame series broadcast to ``frame_count + 1`` entries).

    Raises:
        SceneError: for any malformed or invalid document: not an object, wrong ``format`` or
            ``version``, missing or unknown keys, wrong types, shapes or values. The message
            names the body or joint and the field.
    """
    if not isinstance(data, dict):
        raise SceneError(f"scene: must be a JSON object {{...}}, got {_json_type(data)}")
    _check_keys(data, "scene", "", _TOP_KEYS, ("format", "version", "bodies"))
    if data["format"] != FORMAT or not isinstance(data["format"], str):
        raise SceneError(f"scene: format: must be {FORMAT!r}, got {data['format']!r:.60}")
    version = data["version"]
    if type(version) is not int or version != VERSION:
        raise SceneError(f"scene: version: unsupported version {version!r:.60}; this solver reads version {VERSION}")
    settings = _settings_from_dict(data["settings"]) if "settings" in data else Settings()
    bodies = data["bodies"]
    if not isinstance(bodies, list):
        raise SceneError(f"scene: bodies: must be a list of body objects, got {_json_type(bodies)}")
    joints = data.get("joints", [])
    if not isinstance(joints, list):
        raise SceneError(f"scene: joints: must be a list of joint objects, got {_json_type(joints)}")
    scene = Scene(
        settings=settings,
        bodies=[_body_from_dict(body, index, arrays) for index, body in enumerate(bodies)],
        joints=[_joint_from_dict(joint, index) for index, joint in enumerate(joints)],
    )
    return validate_scene(scene)


def _reject_duplicate_keys(pairs: list) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            named = dict(pairs).get("name")  # which body or joint, where the object has a name
            where = f"the object named {named!r:.60}" if isinstance(named, str) else "a JSON object"
            raise SceneError(f"scene: {key}: duplicate key in {where}")
        result[key] = value
    return result


def load_scene(path: Union[str, Path]) -> Scene:
    """Read, check and normalise a JSON scene file (and the arrays file it names, if any).

    Args:
        path: the ``.json`` scene file (UTF-8). Its top-level ``"arrays"``, when present, is the
            file name of a NumPy ``.npz`` in the same folder holding the arrays its meshes name.

    Returns:
        The validated :class:`~solver.scene.Scene` (see :func:`solver.scene_validation.validate_scene`).

    Raises:
        SceneError: when the file cannot be read, is not valid JSON (also: duplicate keys in an
            object), or is not a valid scene (see :func:`scene_from_dict`); when ``"arrays"`` is
            not a file name in the scene file's folder, or that file cannot be read as an
            ``.npz`` of plain arrays.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SceneError(f"{path}: cannot read the scene file: {error}") from None
    try:
        data = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except json.JSONDecodeError as error:
        raise SceneError(f"{path}: not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except (ValueError, RecursionError) as error:  # e.g. an integer literal with too many digits
        raise SceneError(f"{path}: not a readable JSON document: {error}") from None
    if not isinstance(data, dict) or data.get("arrays") is None:
        return scene_from_dict(data)
    name = data["arrays"]
    if not isinstance(name, str) or not name.endswith(".npz") or Path(name).name != name:
        raise SceneError(
            f"scene: arrays: must be the name of a .npz file in the scene file's folder, got {name!r:.60}")
    arrays_path = Path(path).parent / name
    try:
        with ArrayFile(arrays_path, MAX_ARRAYS_BYTES) as arrays:  # reads the arrays the meshes name
            return scene_from_dict(data, arrays)
    except OSError as error:  # missing, no permission
        raise SceneError(f"{arrays_path}: cannot read the scene's arrays file: {error.strerror or error}") from None
    except ArrayFileError as error:  # not a regular file or an .npz, a damaged or oversized array
        raise SceneError(f"{error.path}: cannot read the scene's arrays file: {error.detail}") from None


def scene_input_files(path: Union[str, Path]) -> list[Path]:
    """The files a run of the scene file at ``path`` reads: the scene file and, when it names
    one, its arrays file (a run's outputs must be neither). For a scene file that
    :func:`load_scene` read; one it cannot read gives the scene file alone."""
    path = Path(path)
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("arrays")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, AttributeError):
        return [path]
    return [path, path.parent / name] if isinstance(name, str) else [path]


def _plain(array: npt.ArrayLike, flag: bool = False):
    """A JSON value of a float array: nested lists of floats (ints for flags)."""
    array = np.asarray(array)
    return array.astype(np.int64).tolist() if flag else array.astype(np.float64).tolist()


def _series_value(series: npt.ArrayLike, flag: bool = False):
    """One value when every frame of a broadcast series is equal, else the per-frame list."""
    series = np.asarray(series)
    if np.all(series == series[0]):
        return _plain(series[0], flag)
    return _plain(series, flag)


def scene_to_dict(scene: Scene, arrays: dict | None = None, inline_limit: int | None = None) -> dict:
    """The JSON document (plain dicts, lists, str, float, int) of a scene.

    The scene is validated first; every field is written explicitly, optional sub-objects that
    are None are left out, and a per-frame series whose frames are all equal is written as one
    value. ``scene_from_dict(scene_to_dict(s))`` equals ``validate_scene(s)``.

    Args:
        scene: the scene.
        arrays: None (every mesh inline), or a dict that receives the vertices ((V, 3) float64,
            m) and triangles ((T, 3) int64) of each mesh with more than ``inline_limit``
            vertices (default :data:`INLINE_VERTEX_LIMIT`), under the names the document gives
            them (``body<index>_vertices``, ``body<index>_triangles``); the caller writes them to
            the arrays file and sets the document's ``"arrays"``.
        inline_limit: most vertices of a mesh written inline when ``arrays`` is given.

    Raises:
        SceneError: if the scene is not valid.
    """
    scene = validate_scene(scene)
    settings = scene.settings
    document: dict = {
        "format": FORMAT,
        "version": VERSION,
        "settings": {
            "frame_rate": settings.frame_rate,
            "substeps": settings.substeps,
            "frame_count": settings.frame_count,
            "gravity": _plain(settings.gravity),
            "max_iterations": settings.max_iterations,
            "min_iterations": settings.min_iterations,
            "velocity_tol": settings.velocity_tol,
            "transrate_tol": settings.transrate_tol,
            "line_search_max_iterations": settings.line_search_max_iterations,
            "device": settings.device,
        },
        "bodies": [],
        "joints": [],
    }
    if settings.contact != ContactSettings():  # files without contact stay as they were
        document["settings"]["contact"] = dict(vars(settings.contact))
    limit = INLINE_VERTEX_LIMIT if inline_limit is None else inline_limit
    for index, body in enumerate(scene.bodies):
        if arrays is not None and len(body.mesh.vertices) > limit:
            mesh = {"vertices": f"body{index}_vertices", "triangles": f"body{index}_triangles"}
            arrays[mesh["vertices"]] = np.asarray(body.mesh.vertices, dtype=np.float64)
            arrays[mesh["triangles"]] = np.asarray(body.mesh.triangles, dtype=np.int64)
        else:
            mesh = {"vertices": _plain(body.mesh.vertices), "triangles": body.mesh.triangles.tolist()}
        entry: dict = {
            "name": body.name,
            "mesh": mesh,
            "transform": _plain(body.transform),
            "mass_density": body.mass_density,
            "kappa": body.kappa,
            "motion": body.motion,
            "linear_velocity": _plain(body.linear_velocity),
            "angular_velocity": _plain(body.angular_velocity),
        }
        if body.thickness is not None:
            entry["thickness"] = body.thickness
        if body.mass is not None:
            entry["mass"] = {
                "mass": body.mass.mass,
                "mass_center": _plain(body.mass.mass_center),
                "inertia": _plain(body.mass.inertia),
            }
        if body.soft_transform is not None:
            soft = body.soft_transform
            assert soft.aim_transform is not None  # validate_scene fills it in (the body's transform)
            entry["soft_transform"] = {
                "strength_ratio": _series_value(soft.strength_ratio),
                "aim_transform": _series_value(soft.aim_transform),
                "is_constrained": _series_value(soft.is_constrained, flag=True),
            }
        if body.animated_transforms is not None:
            entry["animated_transforms"] = _plain(body.animated_transforms)
        if body.contact != BodyContact(friction=settings.contact.friction):
            entry["contact"] = {"enable": body.contact.enable, "friction": body.contact.friction,
                                "shape": body.contact.shape, "collections": list(body.contact.collections)}
        document["bodies"].append(entry)
    for joint in scene.joints:
        entry = {
            "name": joint.name,
            "type": joint.type,
            "l_body": joint.l_body,
            "r_body": joint.r_body,
        }
        # validate_scene checks that a joint has the points of its type
        if joint.type in AXIS_JOINT_TYPES:
            assert joint.position0 is not None and joint.position1 is not None
            entry["position0"], entry["position1"] = _plain(joint.position0), _plain(joint.position1)
        else:
            assert joint.position is not None
            entry["position"] = _plain(joint.position)
        entry["strength_ratio"] = joint.strength_ratio
        if joint.type == "prismatic":
            entry["init_distance"] = joint.init_distance
        elif joint.type == "revolute":
            entry["init_angle"] = joint.init_angle
        if joint.limit is not None:
            entry["limit"] = {
                "lower": _series_value(joint.limit.lower),
                "upper": _series_value(joint.limit.upper),
                "strength": _series_value(joint.limit.strength),
            }
        if joint.generic is not None:
            generic = joint.generic
            entry["generic"] = {key: _plain(np.asarray(getattr(generic, key), dtype=np.float64))
                                for key in ("axes", "rest", "stiffness", "damping", "lower", "upper")}
            entry["generic"].update(locked=[bool(flag) for flag in generic.locked],
                                    limited=[bool(flag) for flag in generic.limited],
                                    limit_strength=float(generic.limit_strength))
            if generic.swing_limit is not None:
                entry["generic"].update(swing_limit=_plain(np.asarray(generic.swing_limit)),
                                        cone_axes=_plain(np.asarray(generic.cone_axes)))
            if generic.twist_limit is not None:
                entry["generic"]["twist_limit"] = float(generic.twist_limit)
            if generic.break_force is not None:
                entry["generic"]["break_force"] = float(generic.break_force)
        if joint.collide_connected:
            entry["collide_connected"] = True
        if joint.damping:
            entry["damping"] = joint.damping
        if joint.driving is not None:
            entry["driving"] = {
                "strength_ratio": _series_value(joint.driving.strength_ratio),
                "is_constrained": _series_value(joint.driving.is_constrained, flag=True),
                "is_passive": _series_value(joint.driving.is_passive, flag=True),
            }
            for key in ("aim_distance", "aim_angle", "aim_velocity"):
                if getattr(joint.driving, key) is not None:
                    entry["driving"][key] = _series_value(getattr(joint.driving, key))
            for key in ("max_force", "max_torque", "max_speed"):
                if getattr(joint.driving, key) is not None:
                    entry["driving"][key] = float(getattr(joint.driving, key))
        document["joints"].append(entry)
    return document


#: A JSON string (matched first, so that it is left as it is: a name such as "part[ 1 ]") or an
#: innermost list of numbers as ``json.dumps(indent=2)`` spreads it over lines (group 1 its numbers).
_NUMBER_LIST = re.compile(r'"(?:\\.|[^"\\])*"|\[\s+(-?[0-9][0-9.eE+-]*(?:,\s+-?[0-9][0-9.eE+-]*)*)\s+\]')


def dumps_scene(scene: Scene) -> str:
    """The scene file text: indented JSON with each innermost list of numbers on one line.

    Raises:
        SceneError: if the scene is not valid.
    """
    return _document_text(scene_to_dict(scene))


def _document_text(document: dict) -> str:
    """Indented JSON with each innermost list of numbers on one line (strings untouched)."""
    text = json.dumps(document, indent=2, allow_nan=False)

    def one_line(match: re.Match) -> str:
        if match.group(1) is None:  # a string
            return match.group(0)
        return "[" + ", ".join(re.split(r",\s+", match.group(1))) + "]"
    return _NUMBER_LIST.sub(one_line, text) + "\n"


def scene_digest(scene: Scene) -> str:
    """SHA-256 (64 hex digits) of everything a simulation of ``scene`` reads: its scene file's
    content (:func:`scene_to_dict`, every mesh as arrays) without the ``device`` setting, which
    changes where the Newton systems are solved, not the motion. Equal for a scene and the scene
    loaded back from its file; ``python -m solver run`` stores it in the trajectory
    (``Trajectory.scene_digest``) so that a result can be matched to the rig it was computed for.

    Raises:
        SceneError: if the scene is not valid.
    """
    arrays: dict = {}
    document = scene_to_dict(scene, arrays, inline_limit=0)  # every mesh as arrays: one form, and fast
    del document["settings"]["device"]
    digest = hashlib.sha256(json.dumps(document, sort_keys=True, allow_nan=False).encode("utf-8"))
    for name in sorted(arrays):
        digest.update(name.encode("utf-8"))
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    return digest.hexdigest()


def save_scene(scene: Scene, path: Union[str, Path]) -> Path | None:
    """Validate ``scene`` and write it to ``path`` as a JSON scene file (UTF-8).

    Meshes with more than :data:`INLINE_VERTEX_LIMIT` vertices are written to the arrays file
    ``<stem>_meshes.npz`` beside it (compressed NumPy arrays, named by the document's
    ``"arrays"``), before the JSON file, so that a scene file never names an arrays file that is
    not there. Both are written whole or not at all (:mod:`solver.output_files`): a failed write
    leaves the files that were at those paths as they were.

    Returns:
        The arrays file's path when one was written, else None.

    Raises:
        SceneError: if the scene is not valid (nothing is written).
        OSError: if a file cannot be written, or ``path`` is a directory (nothing is written).
    """
    path = Path(path)
    arrays: dict = {}
    document = scene_to_dict(scene, arrays)
    arrays_path = None
    if arrays:
        arrays_path = path.with_name(path.stem + ARRAYS_SUFFIX)
        document = {"format": document.pop("format"), "version": document.pop("version"),
                    "arrays": arrays_path.name, **document}
    if path.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a directory")
    # Both files are written aside first and then renamed into place, the arrays file first:
    # a failed write leaves the files that were there as they were (no truncated JSON, no new
    # arrays beside an old document) and no partial file.
    text = _document_text(document).encode("utf-8")
    arrays_aside = None  # (the arrays file written aside, its path)
    if arrays_path is not None:  # a stream: savez would append ".npz" to a name
        arrays_aside = (write_aside(arrays_path, lambda stream: save_npz(stream, arrays)), arrays_path)
    try:
        written = write_aside(path, lambda stream: stream.write(text))
    except BaseException:
        if arrays_aside is not None:
            os.remove(arrays_aside[0])
        raise
    if arrays_aside is not None:
        try:
            move_into_place(*arrays_aside)
        except BaseException:
            os.remove(written)
            raise
    move_into_place(written, path)
    return arrays_path
