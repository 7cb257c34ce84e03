"""The bounds on contact's ``d_hat`` and ``resistance`` with which a contact step stays bounded
(docs/contact.md, "Limits"): checked against the validated bodies of a scene.
"""

from __future__ import annotations

import numpy as np

from .body_validation import unit_mass_properties
from .scene import Settings
from .validation_fields import field_error


#: Smallest accepted contact ``d_hat``, m: a tenth of the tolerance of the solver's CCD
#: (:data:`solver.contact.CCD_TOLERANCE`, 1e-4). Surfaces kept closer than the CCD resolves make
#: each CCD call subdivide to its iteration cap: steps take seconds, then hours (docs/contact.md).
MIN_D_HAT = 1e-5


#: Smallest accepted ``d_hat`` relative to the scene's extent (the diagonal of the bounding box of
#: its contact-enabled bodies at frame 0): below it, squared distances (which ipctk's barrier takes)
#: lose their precision in double precision at that scale.
MIN_RELATIVE_D_HAT = 1e-7


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


def check_contact_scale(settings: Settings, bodies: list) -> None:
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
        raise field_error(where, "contact.d_hat", f"must be at least {lowest:.3g} m ({reason}: closer gaps make each "
                                           f"contact step take seconds to hours), got {contact.d_hat:g}")
    if contact.d_hat >= half_size:
        raise field_error(where, "contact.d_hat", f"must be less than {half_size:.3g} m, half the size of the smallest "
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
        raise field_error(where, "contact.resistance",
                    f"{contact.resistance:g} J/m^4 lets the heaviest dynamic body's weight ({weight:.3g} N) press "
                    f"surfaces to {gap:.3g} m, closer than {MIN_D_HAT:g} m (a tenth of the contact check's "
                    f"tolerance: each contact step would take seconds to hours); need at least {need:.3g} J/m^4, "
                    "or null to choose it from that body")
