"""The per-step inputs of a run's energy terms, apart from the model.

A :class:`solver.model.Model` holds what is constant over a run (masses, joint frames, the base
joints' stiffness); what changes from frame to frame or step to step (the predicted state q_tilde,
drive strengths and targets, limit bounds and strengths, a soft transform's strengths and aim, the
revolute extras' step-start angle) lives in a :class:`Control`, which the time stepper
(:mod:`solver.simulation`) fills before each step and the incremental potential passes to the
terms when it binds them (:meth:`solver.potential.IncrementalPotential.bind`). Data flows one way:
scene -> model and stepper -> control -> energies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .constitutions import REGISTRY, KineticInput
from .jit import kernel

if TYPE_CHECKING:
    from .model import Model


class Control:
    """A run's per-step inputs, one part per energy term that takes any: for each registered term
    (:data:`solver.constitutions.REGISTRY`) whose class has an ``Input``, an instance of it named
    as the term (a part of n elements for a term of n elements); and ``animated_pull``, with
    contact the pose each animated body is pulled to (a :class:`KineticInput`).

    Args:
        parts: parts by name; those not given have 0 elements.

    Raises:
        TypeError: on a name that is no part.

    The parts of the registered terms: ``kinetic`` (the inertia term's predicted state q_tilde,
    (dynamic bodies, 12)), ``soft`` (the soft transform constraints' strength_ratio, aim_q and
    active), ``driving`` (the prismatic drives' (#21) stiffness and target), ``prismatic_limit``
    (the prismatic limits' (#669) lower, upper and strength), ``revolute_driving`` (the revolute
    drives' (#19) stiffness, target and step-start angle), ``revolute_limit`` (the revolute
    limits' (#670) lower, upper, strength and step-start angle).
    """

    def __init__(self, **parts: Any):
        inputs = part_inputs()
        for name in parts:
            if name not in inputs:
                raise TypeError(f"Control: no part {name!r} (parts: {', '.join(inputs)})")
        for name, input_class in inputs.items():
            setattr(self, name, parts[name] if name in parts else input_class.default(0))

    def __getattr__(self, name: str) -> Any:
        """Only for names that are no part (every part is an attribute)."""
        raise AttributeError(f"Control has no part {name!r}")

    @classmethod
    def for_model(cls, model: Model) -> Control:
        """Every part sized for ``model``'s terms, with each input class's defaults (as before a
        run's first frame)."""
        pull = 0 if model.animated_pull is None else len(model.animated_pull.bodies)
        parts = {name: input_class.default(len(getattr(model, name).bodies))
                 for name, input_class in part_inputs().items() if name != "animated_pull"}
        return cls(animated_pull=KineticInput.default(pull), **parts)


def part_inputs() -> dict[str, Any]:
    """Each part's input class by name: the registered terms' ``Input``, and ``animated_pull``'s."""
    inputs: dict[str, Any] = {registration.name: registration.constitution.Input
                              for registration in REGISTRY if registration.constitution.Input is not None}
    inputs["animated_pull"] = KineticInput
    return inputs


@kernel
def drive_targets(committed, init, aim, velocity, max_speed, by_velocity, passive, dt):
    """(drives,) raw targets of a step's drives (docs/constitutions/21_driving_prismatic_joint.md,
    19_driving_revolute_joint.md) from the ``committed`` (step-start) raw coordinates and the
    offsets ``init`` (init_distance or init_angle), m or rad: a ``passive`` drive holds the
    committed coordinate; one driven ``by_velocity`` aims at it plus ``dt`` times its aim
    ``velocity`` (libuipc's servo pattern), kept within ``max_speed``; a position drive at its
    ``aim`` minus the offset, kept within dt times ``max_speed`` of the committed coordinate
    (all (drives,); max_speed inf where there is none). One compiled loop (the stepper sets the
    targets every step); np.minimum and np.maximum keep NumPy's handling of NaN."""
    targets = np.empty(committed.shape[0])
    for k in range(committed.shape[0]):
        if passive[k]:
            targets[k] = committed[k]
        elif by_velocity[k]:
            speed = np.minimum(np.maximum(velocity[k], -max_speed[k]), max_speed[k])
            targets[k] = committed[k] + dt * speed
        else:
            step = dt * max_speed[k]
            targets[k] = np.minimum(np.maximum(aim[k] - init[k], committed[k] - step), committed[k] + step)
    return targets

