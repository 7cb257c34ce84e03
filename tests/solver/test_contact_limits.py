"""Limits on the contact distance d_hat and the barrier's resistance that keep every contact step
bounded: values outside are refused naming the field, before a run that would take hours."""

from __future__ import annotations

import re

import numpy as np
import pytest

from solver import Body, ContactSettings, MassOverride, Scene, SceneError, Settings
from solver.primitives import box_mesh
from solver.contact_limits import MIN_D_HAT, barrier_force_per_kappa
from solver.scene_validation import validate_scene


def two_boxes(size=0.2, apart=0.4, mass=None, **contact) -> Scene:
    def box(name, x, motion):
        transform = np.eye(4)
        transform[0, 3] = x
        override = None if mass is None else MassOverride(mass=mass, mass_center=np.zeros(3),
                                                          inertia=np.eye(3) * mass * size * size / 6.0)
        return Body(name=name, mesh=box_mesh([size] * 3), transform=transform, motion=motion, mass=override)

    return Scene(settings=Settings(frame_count=4, contact=ContactSettings(enable=True, **contact)),
                 bodies=[box("floor", 0.0, "fixed"), box("box", apart, "dynamic")], joints=[])


@pytest.mark.parametrize("d_hat", [1e-6, 1e-12])
def test_a_d_hat_below_what_the_ccd_resolves_is_refused(d_hat):
    """d_hat 1e-6 took 37 s for two boxes and 1e-12 hours: each CCD call subdivides to its cap.
    The smallest accepted d_hat is a tenth of the CCD's tolerance."""
    with pytest.raises(SceneError, match=re.escape(f"settings: contact.d_hat: must be at least {MIN_D_HAT:.3g} m "
                                                   f"(a tenth of the contact check's tolerance")):
        validate_scene(two_boxes(d_hat=d_hat))
    validate_scene(two_boxes(d_hat=MIN_D_HAT))


def test_the_smallest_d_hat_is_a_tenth_of_the_ccd_tolerance():
    from solver.contact import CCD_TOLERANCE

    assert MIN_D_HAT == pytest.approx(0.1 * CCD_TOLERANCE)


def test_a_d_hat_below_the_precision_of_a_large_scene_is_refused():
    """Squared distances lose their precision at 1e-7 of a 2 km scene's extent (0.28 mm)."""
    scene = two_boxes(size=1.0, apart=2000.0, d_hat=1e-4)
    with pytest.raises(SceneError,
                       match=r"contact\.d_hat: must be at least 0\.0002\d* m \(1e-07 of the scene's 2e\+03 m"):
        validate_scene(scene)
    scene.settings.contact.d_hat = 1e-3
    validate_scene(scene)


def test_a_d_hat_as_large_as_a_body_is_refused():
    with pytest.raises(SceneError, match=r"contact\.d_hat: must be less than 0\.0866 m, half the size of the smallest "
                                         r"contact-enabled body \('floor'\), got 0\.1"):
        validate_scene(two_boxes(size=0.1, d_hat=0.1))


def test_a_resistance_that_lets_surfaces_press_closer_than_the_ccd_resolves_is_refused():
    """A resistance so low that the heaviest body's weight (10 kg) presses one primitive pair
    below MIN_D_HAT is refused naming the field and the least resistance that works."""
    weight = 10.0 * 9.81
    need = weight / barrier_force_per_kappa(MIN_D_HAT, 1e-3)
    with pytest.raises(SceneError, match=r"settings: contact\.resistance: 1 J/m\^4 lets the heaviest dynamic body's "
                                         r"weight \(98\.1 N\) press surfaces to .* need at least "
                                         + re.escape(f"{need:.3g} J/m^4")):
        validate_scene(two_boxes(mass=10.0, resistance=1.0))
    validate_scene(two_boxes(mass=10.0, resistance=1.01 * need))


def test_the_barrier_force_is_ipctks():
    ipctk = pytest.importorskip("ipctk")
    for distance in (1e-5, 2e-4, 5e-4, 9e-4):
        expected = abs(2.0 * distance * ipctk.barrier_first_derivative(distance * distance, 1e-6))
        assert barrier_force_per_kappa(distance, 1e-3) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("name, code", [("arm\u202eevil", "U+202E RIGHT-TO-LEFT OVERRIDE"),
                                        ("arm\u200b", "U+200B ZERO WIDTH SPACE"),
                                        ("two\u2028lines", "U+2028 LINE SEPARATOR")])
def test_names_with_invisible_formatting_characters_are_refused(name, code):
    """U+202E shows a name backwards and U+200B makes two names look alike: both were accepted."""
    scene = two_boxes()
    scene.bodies[1].name = name
    with pytest.raises(SceneError, match=re.escape(f"body #1: name: must not contain invisible formatting "
                                                   f"characters, got {code}")):
        validate_scene(scene)
