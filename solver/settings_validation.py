"""Validation of a scene's :class:`~solver.scene.Settings` and :class:`~solver.scene.ContactSettings`:
frame rate, substeps and frame count within the run's bounds, Newton and line-search limits,
tolerances, device, contact (docs/scene_format.md, "Validation").
"""

from __future__ import annotations

import numpy as np

from .scene import DEVICES, ContactSettings, SceneError, Settings
from .validation_fields import (
    count_value, field_error, fixed_array, flag_value, number_value, positive_value, type_name,
)


#: Largest accepted ``frame_count`` (a bound on the memory of the per-frame series).
MAX_FRAME_COUNT = 1_000_000


#: Largest accepted ``substeps``.
MAX_SUBSTEPS = 100_000


#: Largest accepted number of time steps, ``frame_count * substeps``: a run keeps 26 bytes of
#: records per step (2.6 GB here), and one free body alone takes about 30 us per step (50 minutes).
MAX_TIME_STEPS = 100_000_000


#: Largest accepted ``max_iterations`` / ``min_iterations``.
MAX_NEWTON_ITERATIONS = 100_000


#: Largest accepted ``line_search_max_iterations`` (halvings; 2^-100 is already far below 1e-16).
MAX_LINE_SEARCH_ITERATIONS = 100


def _validate_contact_settings(contact) -> ContactSettings:
    where = "settings"
    if not isinstance(contact, ContactSettings):
        raise field_error(where, "contact", f"must be a ContactSettings, got {type_name(contact)}")
    d_hat = positive_value(number_value(contact.d_hat, where, "contact.d_hat"), where, "contact.d_hat", " m")
    resistance = None
    if contact.resistance is not None:
        resistance = positive_value(number_value(contact.resistance, where, "contact.resistance"), where,
                                    "contact.resistance",
                               " J/m^4")
    friction = number_value(contact.friction, where, "contact.friction")
    if friction < 0.0:
        raise field_error(where, "contact.friction", f"must be >= 0, got {friction}")
    eps_velocity = positive_value(number_value(contact.eps_velocity, where, "contact.eps_velocity"), where,
                             "contact.eps_velocity", " m/s")
    return ContactSettings(enable=flag_value(contact.enable, where, "contact.enable"), d_hat=d_hat,
                           resistance=resistance, friction=friction, eps_velocity=eps_velocity)


def validate_settings(settings) -> Settings:
    """The normalised copy of a scene's ``settings``."""
    where = "settings"
    if not isinstance(settings, Settings):
        raise SceneError(f"settings: must be a Settings, got {type_name(settings)}")
    frame_rate = number_value(settings.frame_rate, where, "frame_rate")
    positive_value(frame_rate, where, "frame_rate", " frames/s")
    substeps = count_value(settings.substeps, where, "substeps", 1, MAX_SUBSTEPS)
    frame_count = count_value(settings.frame_count, where, "frame_count", 0, MAX_FRAME_COUNT)
    if frame_count * substeps > MAX_TIME_STEPS:
        raise field_error(
            where, "substeps",
            f"frame_count * substeps = {frame_count} * {substeps} = {frame_count * substeps} time steps, more than "
            f"the {MAX_TIME_STEPS} a run may take; lower substeps or frame_count (or split the shot)",
        )
    gravity = fixed_array(settings.gravity, (3,), where, "gravity")
    max_iterations = count_value(settings.max_iterations, where, "max_iterations", 1, MAX_NEWTON_ITERATIONS)
    min_iterations = count_value(settings.min_iterations, where, "min_iterations", 1, MAX_NEWTON_ITERATIONS)
    if min_iterations > max_iterations:
        raise field_error(where, "min_iterations",
                          f"must be <= max_iterations = {max_iterations}, got {min_iterations}")
    tolerances = {}
    for name in ("velocity_tol", "transrate_tol"):
        tolerances[name] = number_value(getattr(settings, name), where, name)
        positive_value(tolerances[name], where, name)
    line_search = count_value(
        settings.line_search_max_iterations, where, "line_search_max_iterations", 0, MAX_LINE_SEARCH_ITERATIONS
    )
    if not 0.0 < 1.0 / (frame_rate * substeps) < np.inf:
        raise field_error(where, "frame_rate", "time step 1 / (frame_rate * substeps) is not a positive finite number")
    if not isinstance(settings.device, str) or settings.device not in DEVICES:
        raise field_error(where, "device", f"must be one of {list(DEVICES)}, got {settings.device!r}")
    return Settings(
        frame_rate=frame_rate, substeps=substeps, frame_count=frame_count, gravity=gravity,
        max_iterations=max_iterations, min_iterations=min_iterations,
        velocity_tol=tolerances["velocity_tol"], transrate_tol=tolerances["transrate_tol"],
        line_search_max_iterations=line_search, device=settings.device,
        contact=_validate_contact_settings(settings.contact),
    )
