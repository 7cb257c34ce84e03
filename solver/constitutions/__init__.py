"""Energy constitutions of the ABD solver, one module per constitution (q -> F -> E(F), Numba kernels).

Every class has ``uid``, ``bodies`` (n, k) int64, ``energy(q) -> float`` and
``gradient_hessian(q, project=True, out=None) -> (gradient (n, 12k), Hessian (n, 12k, 12k))``
(``out``: optional arrays of those shapes to fill instead of allocating), with the global state q
of shape (n_bodies, 12); some also have ``gradient(q)`` alone. The terms the Newton loop sums
(kinetic, OrthoPotential, soft transform, revolute joint and limit, prismatic group) also have
``bind(project=True)``: their kernels with the current parameters checked once, for the many
calls of a time step (:class:`._kernels.BoundTerm`); their public methods are ``bind`` plus one
call. See each module's docstring for the formula and its source. :mod:`.prismatic_group` is not
a constitution: it evaluates a prismatic joint together with its drive and limit for the Newton
loop; nor is :mod:`.quadratic_joint`, the kernels the fixed and spherical joints share.
"""

from .driving_prismatic_joint import DrivingPrismaticJoint
from .driving_revolute_joint import DrivingRevoluteJoint
from .fixed_joint import FixedJoint
from .kinetic import Kinetic
from .ortho_potential import OrthoPotential
from .prismatic_joint import PrismaticJoint
from .prismatic_joint_limit import PrismaticJointLimit
from .revolute_joint import RevoluteJoint
from .revolute_joint_limit import RevoluteJointLimit
from .soft_transform_constraint import SoftTransformConstraint
from .spherical_joint import SphericalJoint

__all__ = [
    "DrivingPrismaticJoint", "DrivingRevoluteJoint", "FixedJoint", "Kinetic", "OrthoPotential", "PrismaticJoint",
    "PrismaticJointLimit", "RevoluteJoint", "RevoluteJointLimit", "SoftTransformConstraint", "SphericalJoint",
]
