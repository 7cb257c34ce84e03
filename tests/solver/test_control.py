"""The per-step inputs flow one way: the stepper fills a Control, the model's terms stay as built."""

from __future__ import annotations

import numpy as np
import pytest

from solver import Simulation
from solver.control import Control
from solver.model import Model
from solver.newton import IncrementalPotential
from solver.scene_validation import validate_scene
from solver.warmup import warm_up_scene


def terms_of(model: Model) -> dict:
    """Every energy term of ``model`` by a readable name, the prismatic group's extras included."""
    group = model.prismatic_group
    terms = {f"terms[{index}] {type(term).__name__}": term for index, term in enumerate(model.terms)}
    terms.update({"prismatic driving": group.driving, "prismatic limit": group.limit,
                  "prismatic joint": group.joint})
    return terms


def snapshot(term) -> dict:
    """A term's attributes (arrays copied), without the curvature projection weight (a solver
    setting the Newton loop switches, not a per-step input)."""
    return {name: value.copy() if isinstance(value, np.ndarray) else value
            for name, value in vars(term).items() if name != "_curvature_projection"}


def test_a_simulation_leaves_its_model_terms_as_built():
    """The warm-up scene uses every energy term (drives and limits of both kinds, with per-frame
    series, and a soft transform): after a run every term holds the attributes it was built with,
    no more and no other values, while the run's Control holds the last step's inputs."""
    simulation = Simulation(warm_up_scene())
    model = simulation._stepper.model
    before = {name: snapshot(term) for name, term in terms_of(model).items()}
    trajectory = simulation.run()
    assert trajectory.all_converged
    for name, term in terms_of(model).items():
        after = snapshot(term)
        assert after.keys() == before[name].keys(), name
        for attribute, value in after.items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value, before[name][attribute]), f"{name}.{attribute}"
            else:
                assert value is before[name][attribute] or value == before[name][attribute], f"{name}.{attribute}"
    control = simulation._stepper.control
    assert np.any(control.driving.stiffness > 0.0) and np.any(control.revolute_driving.stiffness > 0.0)
    assert np.any(control.kinetic.q_tilde != 0.0) and np.any(control.soft.active == 1.0)


def test_a_control_for_a_model_has_each_term_s_size():
    model = Model(validate_scene(warm_up_scene()))
    control = Control.for_model(model)
    assert control.kinetic.q_tilde.shape == (len(model.kinetic.bodies), 12)
    assert control.soft.aim_q.shape == (len(model.soft.bodies), 12)
    assert control.driving.target.shape == (len(model.driving.bodies),)
    assert control.revolute_limit.cos_t.shape == (len(model.revolute_limit.bodies),)
    assert control.animated_pull.q_tilde.shape == (0, 12)  # no contact: no animated pull


@pytest.mark.parametrize("part, field, message", [
    ("kinetic", "q_tilde", "control.kinetic: q_tilde: expected shape"),
    ("soft", "aim_q", "control.soft: aim_q: expected shape"),
    ("revolute_limit", "lower", "control.revolute_limit: lower: expected shape"),
    ("revolute_driving", "sin_t", "control.revolute_driving: sin_t: expected shape"),
    ("driving", "target", "control.driving or control.prismatic_limit: target: expected shape"),
    ("prismatic_limit", "strength", "control.driving or control.prismatic_limit: strength: expected shape"),
])
def test_binding_a_control_of_a_wrong_shape_names_its_part_and_field(part, field, message):
    """IncrementalPotential.bind checks each term's inputs: an array of one element too many is
    refused with a ValueError naming the Control part and the field (the prismatic group takes two
    parts, its drives' and its limits')."""
    model = Model(validate_scene(warm_up_scene()))
    potential = IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs)
    control = Control.for_model(model)
    potential.bind(model.q0, control)  # the defaults are valid
    inputs = getattr(control, part)
    value = getattr(inputs, field)
    setattr(inputs, field, np.zeros((value.shape[0] + 1,) + value.shape[1:]))
    with pytest.raises(ValueError, match=message):
        potential.bind(model.q0, control)


def test_limit_bounds_out_of_order_in_a_control_are_refused():
    model = Model(validate_scene(warm_up_scene()))
    potential = IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs)
    control = Control.for_model(model)
    control.revolute_limit.lower = control.revolute_limit.upper + 0.1
    with pytest.raises(ValueError, match="control.revolute_limit: limit: lower must be <= upper"):
        potential.bind(model.q0, control)


def test_inputs_must_name_a_control_part_per_term():
    model = Model(validate_scene(warm_up_scene()))
    with pytest.raises(ValueError, match="inputs: expected one tuple of Control parts per term"):
        IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs[:-1])
