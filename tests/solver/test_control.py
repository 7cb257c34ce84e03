"""The per-step inputs flow one way: the stepper fills a Control, the model's terms stay as built."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import solver.control
import solver.model
from solver import Simulation
from solver.constitutions import REGISTRY, Constitution, KineticInput, Registration
from solver.constitutions._kernels import BoundTerm
from solver.control import Control
from solver.model import Model
from solver.potential import IncrementalPotential
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


@dataclass
class CentrePullInput:
    """The toy term's per-step input: its stiffness (n,), kg/s²."""

    stiffness: np.ndarray

    @classmethod
    def default(cls, n: int) -> CentrePullInput:
        return cls(np.zeros(n))


class CentrePull(Constitution):
    """A toy term, E = K/2 |p_i − p_j|² over the revolute joints' two bodies (p: q's first three
    entries), registered by one line the way a new constitution is."""

    Input = CentrePullInput

    @classmethod
    def build(cls, context) -> CentrePull:
        frames = context.joints(lambda joint: joint.type == "revolute")
        return cls(frames.bodies, frames.indices)

    def __init__(self, bodies, joint_indices):
        self.bodies = np.asarray(bodies, dtype=np.int64).reshape(-1, 2)
        self.state_rows = int(self.bodies.max(initial=-1)) + 1
        self.joint_indices = joint_indices

    def bind(self, inputs: CentrePullInput, project: bool = True) -> BoundTerm:
        stiffness = inputs.stiffness

        def energy(q):
            separation = q[self.bodies[:, 0], :3] - q[self.bodies[:, 1], :3]
            return float(0.5 * np.sum(stiffness[:, None] * separation**2))

        def gradient_hessian(q, gradient, hessian):
            separation = q[self.bodies[:, 0], :3] - q[self.bodies[:, 1], :3]
            gradient[:] = 0.0
            hessian[:] = 0.0
            gradient[:, 0:3] = stiffness[:, None] * separation
            gradient[:, 12:15] = -gradient[:, 0:3]
            for a, b, sign in ((0, 0, 1.0), (12, 12, 1.0), (0, 12, -1.0), (12, 0, -1.0)):
                hessian[:, a:a + 3, b:b + 3] = sign * stiffness[:, None, None] * np.eye(3)

        return BoundTerm(energy, None, gradient_hessian)


def test_a_constitution_registered_by_one_line_is_built_given_a_control_part_and_summed(monkeypatch):
    """A new term is one class and one registration line: the model builds it from the scene (the
    revolute joints it selects, their indices), Control.for_model gives it a part of its size,
    and the incremental potential adds its energy, E = K/2 |p_i − p_j|² for the K set in the part."""
    registry = REGISTRY + (Registration("centre_pull", CentrePull),)
    monkeypatch.setattr(solver.model, "REGISTRY", registry)
    monkeypatch.setattr(solver.control, "REGISTRY", registry)
    model = Model(validate_scene(warm_up_scene()))
    pull = model.centre_pull
    assert np.array_equal(pull.joint_indices, model.revolute.joint_indices) and len(pull.joint_indices) > 0
    assert model.terms[-1] is pull and model.term_inputs[-1] == ("centre_pull",)
    control = Control.for_model(model)
    assert control.centre_pull.stiffness.shape == (len(pull.joint_indices),)
    potential = IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs)
    q = model.q0.copy()
    q[:, 0] += np.arange(len(q))  # the bodies apart along x by their index differences
    potential.bind(q, control)
    without = potential.energy(q)
    control.centre_pull.stiffness = np.full(len(pull.joint_indices), 3.0)
    potential.bind(q, control)
    separation = q[pull.bodies[:, 0], :3] - q[pull.bodies[:, 1], :3]
    assert potential.energy(q) - without == pytest.approx(1.5 * np.sum(separation**2), rel=1e-12)


def test_a_control_part_that_no_term_registers_is_refused():
    with pytest.raises(TypeError, match="Control: no part 'kinetics'"):
        Control(kinetics=KineticInput.default(0))
