"""Energy constitutions of the ABD solver, one module per constitution (q -> F -> E(F), Numba kernels).

Every class derives from :class:`.base.Constitution`: it has ``uid``, ``Input``, ``build(context)``,
``bodies`` (n, k) int64, ``energy(q) -> float``, ``gradient(q)`` and
``gradient_hessian(q, project=True, out=None) -> (gradient (n, 12k), Hessian (n, 12k, 12k))``
(``out``: optional arrays of those shapes to fill instead of allocating), with the global state q
of shape (n_bodies, 12). A term whose energy depends on
values that change from step to step (a predicted state, drive targets and strengths, limit bounds,
a soft transform's aim) takes them as an input dataclass defined beside it (``KineticInput``,
``DrivingRevoluteJointInput``, ...; the time stepper's :class:`solver.control.Control` holds them),
passed after q: ``energy(q, inputs)``, ``gradient_hessian(q, inputs, project=True, out=None)``;
the term itself holds only what is constant over a run. The terms the Newton loop sums also have
``bind(*inputs, project=True)``: their kernels with the inputs checked once, for the many calls of
a time step (:class:`._kernels.BoundTerm`); their public methods are ``bind`` plus one call. See
each module's docstring for the formula and its source. :mod:`.prismatic_group` is not a
constitution: it evaluates a prismatic joint together with its drive and limit for the Newton loop;
nor is :mod:`.quadratic_joint`, the kernels the fixed and spherical joints share.

:data:`REGISTRY` holds one registration line per term: the model builds the terms in its order
(:meth:`.base.Constitution.build`), the Newton loop sums the ``summed`` ones in that order, and
:class:`solver.control.Control` has a part for each term with an ``Input``.
"""

from .base import Constitution, Registration
from .driving_prismatic_joint import DrivingPrismaticJoint, DrivingPrismaticJointInput
from .driving_revolute_joint import DrivingRevoluteJoint, DrivingRevoluteJointInput
from .fixed_joint import FixedJoint
from .generic_joint import GenericJoint, GenericJointInput
from .kinetic import Kinetic, KineticInput
from .ortho_potential import OrthoPotential
from .prismatic_group import PrismaticJointGroup
from .prismatic_joint import PrismaticJoint
from .prismatic_joint_limit import PrismaticJointLimit, PrismaticJointLimitInput
from .revolute_joint import RevoluteJoint
from .revolute_joint_limit import RevoluteJointLimit, RevoluteJointLimitInput
from .soft_transform_constraint import SoftTransformConstraint, SoftTransformConstraintInput
from .spherical_joint import SphericalJoint

#: Every energy term of a model, one line each: its name (the Model attribute and Control part),
#: its class; in the order the terms are built and the Newton loop sums them.
REGISTRY: tuple[Registration, ...] = (
    Registration("kinetic", Kinetic),
    Registration("ortho", OrthoPotential),
    Registration("soft", SoftTransformConstraint),
    Registration("revolute", RevoluteJoint),
    Registration("prismatic", PrismaticJoint, summed=False),  # summed in prismatic_group
    Registration("driving", DrivingPrismaticJoint, summed=False),  # summed in prismatic_group
    Registration("prismatic_limit", PrismaticJointLimit, summed=False),  # summed in prismatic_group
    Registration("prismatic_group", PrismaticJointGroup, inputs=("driving", "prismatic_limit")),
    Registration("revolute_limit", RevoluteJointLimit),
    Registration("revolute_driving", DrivingRevoluteJoint),
    Registration("fixed", FixedJoint),
    Registration("spherical", SphericalJoint),
    Registration("generic", GenericJoint),
)

__all__ = [
    "REGISTRY", "Constitution", "Registration",
    "DrivingPrismaticJoint", "DrivingPrismaticJointInput", "DrivingRevoluteJoint", "DrivingRevoluteJointInput",
    "FixedJoint", "GenericJoint", "GenericJointInput", "Kinetic", "KineticInput", "OrthoPotential", "PrismaticJoint",
    "PrismaticJointGroup", "PrismaticJointLimit", "PrismaticJointLimitInput", "RevoluteJoint", "RevoluteJointLimit",
    "RevoluteJointLimitInput", "SoftTransformConstraint", "SoftTransformConstraintInput", "SphericalJoint",
]
