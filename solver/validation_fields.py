"""Checks of one field of a scene (:mod:`solver.scene`): a number, a count, an array of a fixed
shape, a per-frame series, a transform, a flag, a name. Each returns the normalised value or raises
:class:`~solver.scene.SceneError` ``"<where>: <field>: <message>"``; the validation of settings,
bodies and joints is built from them (:func:`solver.scene_validation.validate_scene`).
"""

from __future__ import annotations

import unicodedata
from typing import Optional

import numpy as np

from .scene import SceneError


#: Largest accepted magnitude of any number in a scene (SI units). Larger values are unit
#: errors and would overflow the solver's arithmetic (products of several such numbers).
MAX_MAGNITUDE = 1e12


#: Unicode categories of characters refused in names: format characters (Cf: U+202E RIGHT-TO-LEFT
#: OVERRIDE shows a name backwards, U+200B ZERO WIDTH SPACE makes two names that look the same)
#: and the line and paragraph separators (Zl, Zp), which split an error line.
INVISIBLE_CATEGORIES = ("Cf", "Zl", "Zp")


#: Longest accepted body or joint name, in characters (Blender's own names have at most 255 bytes).
MAX_NAME_LENGTH = 1000


#: Smallest accepted value of a quantity that must be positive (densities, kappa, mass,
#: frame_rate, tolerances).
MIN_POSITIVE = 1e-12


#: |R^T R - I| (largest entry) above which a transform is not rigid.
RIGID_TOLERANCE = 1e-6


#: Smallest accepted ratio of the smallest to the largest eigenvalue of a mass tensor.
DEFINITE_TOLERANCE = 1e-12


def field_error(where: str, field_name: str, message: str) -> SceneError:
    """A SceneError ``"<where>: <field>: <message>"`` (``where`` names the body/joint/settings)."""
    return SceneError(f"{where}: {field_name}: {message}")


def type_name(value) -> str:
    """The name of ``value``'s type, for messages."""
    return type(value).__name__


def number_value(value, where: str, field_name: str) -> float:
    """A finite Python float from a real scalar; booleans, strings, None and arrays are refused."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise field_error(where, field_name, f"must be a number, got {type_name(value)} {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        raise field_error(where, field_name, "number is too large") from None
    if not np.isfinite(number):
        raise field_error(where, field_name, f"must be finite, got {number}")
    if abs(number) > MAX_MAGNITUDE:
        raise field_error(where, field_name,
                          f"magnitude must be at most {MAX_MAGNITUDE:g} (check the units), got {number:g}")
    return number


def positive_value(value: float, where: str, field_name: str, unit: str = "") -> float:
    """``value`` if it is at least MIN_POSITIVE, else a SceneError."""
    if not value >= MIN_POSITIVE:
        raise field_error(where, field_name, f"must be > 0{unit} (at least {MIN_POSITIVE:g}), got {value:g}")
    return value


def check_magnitude(array: np.ndarray, where: str, field_name: str, what: str = "") -> None:
    """Refuse entries above MAX_MAGNITUDE; ``what`` locates the first (e.g. " at frame 3")."""
    if array.size and np.abs(array).max() > MAX_MAGNITUDE:
        raise field_error(
            where, field_name,
            f"magnitude must be at most {MAX_MAGNITUDE:g} (check the units), got {np.abs(array).max():g}{what}",
        )


def count_value(value, where: str, field_name: str, minimum: int, maximum: int) -> int:
    """A Python int in [minimum, maximum]; a float is accepted only when its value is integral."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        raise field_error(where, field_name, f"must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        count = int(value)
    elif isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        count = int(value)
    else:
        raise field_error(where, field_name, f"must be an integer, got {type_name(value)} {value!r:.60}")
    if count < minimum:
        raise field_error(where, field_name, f"must be >= {minimum}, got {count}")
    if count > maximum:
        raise field_error(where, field_name, f"must be <= {maximum}, got {count}")
    return count


def float_array(value, where: str, field_name: str, *, allow_bool: bool = False) -> np.ndarray:
    """A new float64 array of (nested lists of) numbers of a regular shape, not yet shape-checked."""
    if value is None or isinstance(value, (str, bytes, dict, set)):
        got = "null (None)" if value is None else type_name(value)
        raise field_error(where, field_name, f"must be a number or a (nested) list of numbers, got {got}")
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise field_error(where, field_name,
                          "must be a number or a (nested) list of numbers of a regular shape") from None
    kind = array.dtype.kind
    if not allow_bool and (kind == "b" or (kind in "iuf" and holds_bool(value))):
        raise field_error(where, field_name, "must contain numbers, not booleans")
    if kind not in "biuf":
        raise field_error(where, field_name, "must contain only (finite, at most ~1e308) numbers")
    try:
        return array.astype(np.float64)
    except (ValueError, TypeError, OverflowError):  # pragma: no cover - defensive
        raise field_error(where, field_name, "must contain only numbers") from None


def holds_bool(value) -> bool:
    """Whether (nested lists or tuples of) ``value`` hold a boolean among numbers, which NumPy
    would read as 1 or 0 (``[true, 0, -9.81]``); an array holds one type, told by its dtype."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_bool(item) for item in value)
    return False


def fixed_array(value, shape: tuple, where: str, field_name: str) -> np.ndarray:
    """A finite float64 array of exactly ``shape``."""
    array = float_array(value, where, field_name)
    if array.shape != shape:
        raise field_error(where, field_name, f"must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise field_error(where, field_name, "must be finite (found NaN or infinity)")
    check_magnitude(array, where, field_name)
    return array


def frame_series(value, item_shape: tuple, frames: int, where: str, field_name: str, *,
                 flag: bool = False) -> np.ndarray:
    """Broadcast one value of ``item_shape`` or a per-frame series to (frames,) + item_shape.

    ``frames`` is frame_count + 1. With ``flag`` the values must be 0 or 1 (booleans accepted).
    """
    array = float_array(value, where, field_name, allow_bool=flag)
    item = "a number" if item_shape == () else f"one value of shape {item_shape}"
    if array.shape == item_shape:
        array = np.array(np.broadcast_to(array, (frames,) + item_shape))
    elif array.ndim == len(item_shape) + 1 and array.shape[1:] == item_shape:
        if array.shape[0] != frames:
            raise field_error(
                where, field_name,
                f"per-frame series must have frame_count + 1 = {frames} entries, got {array.shape[0]}",
            )
    else:
        raise field_error(
            where, field_name,
            f"must be {item} or a per-frame series of frame_count + 1 = {frames} of them, got shape {array.shape}",
        )
    finite = np.isfinite(array).reshape(frames, -1).all(axis=1)
    if not finite.all():
        raise field_error(where, field_name, f"must be finite (NaN or infinity at frame {int(np.argmin(finite))})")
    large = (np.abs(array) > MAX_MAGNITUDE).reshape(frames, -1).any(axis=1)
    if large.any():
        check_magnitude(array[int(np.argmax(large))], where, field_name, f" at frame {int(np.argmax(large))}")
    if flag:
        good = ((array == 0.0) | (array == 1.0)).reshape(frames, -1).all(axis=1)
        if not good.all():
            frame = int(np.argmin(good))
            raise field_error(where, field_name, f"must be 0 or 1, got {array[frame]} at frame {frame}")
    return array


def check_non_negative(array: np.ndarray, where: str, field_name: str) -> None:
    """Raise a SceneError naming the first frame where ``array`` (a per-frame series) is negative."""
    bad = np.nonzero((array < 0.0).reshape(array.shape[0], -1).any(axis=1))[0]
    if bad.size:
        frame = int(bad[0])
        raise field_error(where, field_name, f"must be >= 0, got {array[frame].tolist()} at frame {frame}")


def check_transforms(matrices: np.ndarray, where: str, field_name: str, *, series: bool) -> np.ndarray:
    """Check (..., 4, 4) finite matrices are rigid poses; returns a copy with an exact last row."""
    batch = matrices.reshape(-1, 4, 4)
    deviation = np.abs(batch[:, 3, :] - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=1)
    if np.any(deviation > 1e-9):
        frame = int(np.argmax(deviation > 1e-9))
        at = f" at frame {frame}" if series else ""
        raise field_error(where, field_name, f"last row must be [0, 0, 0, 1], got {batch[frame, 3].tolist()}{at}")
    rotation = batch[:, 0:3, 0:3]
    with np.errstate(all="ignore"):
        error = np.abs(np.einsum("nki,nkj->nij", rotation, rotation) - np.eye(3)).max(axis=(1, 2))
        determinant = np.linalg.det(rotation)
    bad = np.nonzero(~(error <= RIGID_TOLERANCE) | ~(determinant > 0.0))[0]
    if bad.size:
        frame = int(bad[0])
        at = f" at frame {frame}" if series else ""
        if error[frame] <= RIGID_TOLERANCE:
            raise field_error(
                where, field_name,
                f"is a reflection{at} (det R = {determinant[frame]:.6g} <= 0); give a proper rotation + translation",
            )
        raise field_error(
            where, field_name,
            f"is not rigid{at}: |R^T R - I| = {error[frame]:.3g} > {RIGID_TOLERANCE:g} "
            f"(det R = {determinant[frame]:.6g}): "
            "it is scaled or sheared; bake (apply) the scale into the mesh vertices and give a "
            "rotation + translation only",
        )
    out = matrices.copy()
    out[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return out


def positive_definite(matrix: np.ndarray) -> Optional[np.ndarray]:
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


def flag_value(value, where: str, field_name: str) -> bool:
    """``value`` as a bool; anything but a bool is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise field_error(where, field_name, f"must be true or false, got {type_name(value)}")
    return bool(value)


def check_name(name, where: str) -> None:
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


def flag_values(value, where: str, field_name: str) -> tuple:
    """Six true/false values."""
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 6:
        raise field_error(where, field_name, f"must be a list of 6 true/false values, got {type_name(value)}")
    return tuple(flag_value(item, where, f"{field_name}[{k}]") for k, item in enumerate(value))
