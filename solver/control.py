"""The per-step inputs of a run's energy terms, apart from the model.

A :class:`solver.model.Model` holds what is constant over a run (masses, joint frames, the base
joints' stiffness); what changes from frame to frame or step to step (the predicted state q_tilde,
drive strengths and targets, limit bounds and strengths, a soft transform's strengths and aim, the
revolute extras' step-start angle) lives in a :class:`Control`, which the time stepper
(:mod:`solver.simulation`) fills before each step and the incremental potential passes to the
terms when it binds them (:meth:`solver.newton.IncrementalPotential.bind`). Data flows one way:
scene -> model and stepper -> control -> energies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .constitutions import (
    DrivingPrismaticJointInput,
    DrivingRevoluteJointInput,
    GenericJointInput,
    KineticInput,
    PrismaticJointLimitInput,
    RevoluteJointLimitInput,
    SoftTransformConstraintInput,
)

if TYPE_CHECKING:
    from .model import Model


@dataclass
class Control:
    """A run's per-step inputs, one part per energy term that takes any, each named as the
    :class:`solver.model.Model` attribute of that term (a part of n elements for a term of n
    elements; a model without such a term has a part of 0 elements).

    Attributes:
        kinetic: the inertia term's predicted state q_tilde, (dynamic bodies, 12).
        soft: the soft transform constraints' strength_ratio, aim_q and active.
        driving: the prismatic drives' (#21) stiffness and target.
        prismatic_limit: the prismatic limits' (#669) lower, upper and strength.
        revolute_driving: the revolute drives' (#19) stiffness, target and step-start angle.
        revolute_limit: the revolute limits' (#670) lower, upper, strength and step-start angle.
        animated_pull: with contact, the pose each animated body is pulled to (as q_tilde).
        generic: the generic joints' (#1001) step-start coordinates and whether each still holds.
    """

    kinetic: KineticInput = field(default_factory=lambda: KineticInput.default(0))
    soft: SoftTransformConstraintInput = field(default_factory=lambda: SoftTransformConstraintInput.default(0))
    driving: DrivingPrismaticJointInput = field(default_factory=lambda: DrivingPrismaticJointInput.default(0))
    prismatic_limit: PrismaticJointLimitInput = field(default_factory=lambda: PrismaticJointLimitInput.default(0))
    revolute_driving: DrivingRevoluteJointInput = field(default_factory=lambda: DrivingRevoluteJointInput.default(0))
    revolute_limit: RevoluteJointLimitInput = field(default_factory=lambda: RevoluteJointLimitInput.default(0))
    animated_pull: KineticInput = field(default_factory=lambda: KineticInput.default(0))
    generic: GenericJointInput = field(default_factory=lambda: GenericJointInput.default(0))

    @classmethod
    def for_model(cls, model: Model) -> Control:
        """Every part sized for ``model``'s terms, with each input class's defaults (as before a
        run's first frame)."""
        pull = 0 if model.animated_pull is None else len(model.animated_pull.bodies)
        return cls(
            kinetic=KineticInput.default(len(model.kinetic.bodies)),
            soft=SoftTransformConstraintInput.default(len(model.soft.bodies)),
            driving=DrivingPrismaticJointInput.default(len(model.driving.bodies)),
            prismatic_limit=PrismaticJointLimitInput.default(len(model.prismatic_limit.bodies)),
            revolute_driving=DrivingRevoluteJointInput.default(len(model.revolute_driving.bodies)),
            revolute_limit=RevoluteJointLimitInput.default(len(model.revolute_limit.bodies)),
            animated_pull=KineticInput.default(pull),
            generic=GenericJointInput.default(len(model.generic.base.bodies)),
        )
