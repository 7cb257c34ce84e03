"""Scene model: plain dataclasses for bodies, joints and settings, and :class:`SceneError`.

No numerics live here: :func:`solver.scene_validation.validate_scene` checks a scene's values
(and, through :mod:`solver.mesh_checks`, its meshes' geometry); the scene file format (JSON) is
read and written by :mod:`solver.scene_io` and documented field by field in
``docs/scene_format.md``.

Units are SI throughout: metres, kilograms, seconds, radians.

Per-frame series
----------------
Values an artist may animate (``aim_distance``, ``is_constrained``, ``is_passive``, the
``strength_ratio`` of a drive or of a soft transform, the limit's ``lower``/``upper``/``strength``,
the soft transform's ``is_constrained``, and ``aim_transform``) are given either as one value or
as one value per frame, ``frame_count + 1`` entries with frame 0 first.
:func:`~solver.scene_validation.validate_scene` broadcasts every such field to a NumPy array with a
leading axis of length ``frame_count + 1``. Strengths and flags of frame
``f`` hold for every substep that computes frame ``f`` (frames ``1 .. frame_count``); targets and
bounds (``aim_distance``, ``lower``/``upper``, ``aim_transform``) move from frame ``f - 1``'s
value to frame ``f``'s over those substeps, as Blender interpolates an animated value
(:meth:`solver.simulation._Stepper.begin_step`; docs/scene_format.md "Per-frame series").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

#: A value that may be given once or once per frame (``frame_count + 1`` entries).
Series = Union[float, int, list, tuple, np.ndarray]

MOTIONS = ("dynamic", "fixed", "animated")
JOINT_TYPES = ("prismatic", "revolute", "fixed", "spherical", "generic")
#: The joint types with an axis (``position0``, ``position1``); the others have one anchor (``position``).
AXIS_JOINT_TYPES = ("prismatic", "revolute")
#: The aim of a drive in position mode, per joint type.
AIM_KEYS = {"prismatic": "aim_distance", "revolute": "aim_angle"}
#: Strength ratio gamma (K = gamma (m_i + m_j)) of a joint, drive or soft transform that sets
#: none: libuipc's default for its joint constitutions.
DEFAULT_STRENGTH_RATIO = 100.0
#: Where the scene is solved (``Settings.device``): this solver on the CPU, this solver with its
#: Newton system on an NVIDIA GPU through CuPy, or libuipc on an NVIDIA GPU (:mod:`solver.uipc_backend`).
DEVICES = ("cpu", "cupy", "libuipc")


class SceneError(ValueError):
    """Raised for any invalid scene; the message names the body or joint and the field."""


@dataclass
class ContactSettings:
    """Contact between bodies (docs/contact.md): the IPC barrier and friction, through ipctk.

    Attributes:
        enable: whether bodies touch at all (default off: every body passes through every other).
        d_hat: barrier activation distance, m, > 0: surfaces closer than this push apart.
        resistance: barrier stiffness kappa, J/m^4 (ipctk's barrier is in squared distances),
            > 0; None: chosen from the heaviest dynamic body (:func:`solver.contact.adaptive_kappa`).
        friction: default friction coefficient mu of the bodies, >= 0.
        eps_velocity: friction's transition from static to sliding, m/s, > 0.
    """

    enable: bool = False
    d_hat: float = 1e-3
    resistance: Optional[float] = None
    friction: float = 0.5
    eps_velocity: float = 0.01


#: Collision shapes of a body (``BodyContact.shape``): its mesh, or the convex hull of its vertices.
CONTACT_SHAPES = ("mesh", "convex_hull")
#: Collision collections are numbered 0 .. COLLECTION_COUNT - 1 (Blender's rigid bodies have 20).
COLLECTION_COUNT = 20


@dataclass
class BodyContact:
    """A body's contact settings.

    Attributes:
        enable: whether the body touches others (when ``settings.contact.enable``).
        friction: its friction coefficient mu (>= 0), None for ``settings.contact.friction``; a
            pair of bodies uses sqrt(mu_a mu_b).
        shape: ``"mesh"`` (the body's mesh) or ``"convex_hull"`` (the convex hull of its vertices:
            fewer primitives, faster); contact only, the mass comes from the mesh.
        collections: the collision collections (0 .. 19) the body is in; two bodies touch only
            when they share one (as Blender's rigid bodies' ``collision_collections``).
    """

    enable: bool = True
    friction: Optional[float] = None
    shape: str = "mesh"
    collections: tuple = (0,)


@dataclass
class Settings:
    """Time stepping and Newton settings.

    Attributes:
        frame_rate: frames per second (1/s), > 0.
        substeps: time steps per frame, >= 1; dt = 1 / (frame_rate * substeps) in s.
        frame_count: number of frames simulated after frame 0, >= 0.
        gravity: (3,) acceleration in m/s^2.
        max_iterations: Newton iteration cap per time step.
        min_iterations: Newton iterations always taken (libuipc ``newton/min_iter``, 1).
        velocity_tol: convergence tolerance on the largest vertex displacement of a Newton
            direction, in m/s (multiplied by dt; libuipc ``newton/velocity_tol``, 0.05).
        transrate_tol: convergence tolerance on the affine part of a Newton direction, in 1/s
            (multiplied by dt; libuipc ``newton/transrate_tol``, 0.1).
        line_search_max_iterations: halvings of the backtracking line search (libuipc 8).
        device: where the scene is solved, one of :data:`DEVICES`: ``"cpu"`` (banded Cholesky or
            sparse LU) or ``"cupy"`` (dense Cholesky on an NVIDIA GPU through CuPy, optional,
            :mod:`solver.device_solver`), the same trajectory within round-off; or ``"libuipc"``
            (the scene translated to libuipc and run there on an NVIDIA GPU, optional,
            :mod:`solver.uipc_backend`).
        contact: :class:`ContactSettings` (off by default).
    """

    frame_rate: float = 24.0
    substeps: int = 10
    frame_count: int = 48
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    max_iterations: int = 100
    min_iterations: int = 1
    velocity_tol: float = 0.05
    transrate_tol: float = 0.1
    line_search_max_iterations: int = 8
    device: str = "cpu"
    contact: ContactSettings = field(default_factory=ContactSettings)

    @property
    def dt(self) -> float:
        """Time step in s: 1 / (frame_rate * substeps)."""
        return 1.0 / (self.frame_rate * self.substeps)


@dataclass
class Mesh:
    """Closed, outward-oriented triangle mesh in body-local coordinates.

    Attributes:
        vertices: (V, 3) float, m.
        triangles: (T, 3) int, vertex indices, counter-clockwise seen from outside (a closed
            mesh wound the other way round is turned by the validation, with a note; an open
            one collides as a surface).
    """

    vertices: np.ndarray
    triangles: np.ndarray


@dataclass
class MassOverride:
    """Explicit mass properties instead of integrating the mesh with ``mass_density``.

    Attributes:
        mass: kg, > 0.
        mass_center: (3,) body-local centre of mass, m.
        inertia: (3, 3) symmetric positive definite inertia tensor about the centre of mass,
            in body-local axes, kg m^2.
    """

    mass: float
    mass_center: np.ndarray
    inertia: np.ndarray


@dataclass
class SoftTransform:
    """Soft Transform Constraint #16 on one body (docs/constitutions/16_soft_transform_constraint.md).

    Attributes:
        strength_ratio: (eta_p, eta_a), or a per-frame series of pairs; dimensionless, >= 0.
        aim_transform: target 4x4 pose, or a per-frame series of them. ``None`` means the
            body's initial ``transform``.
        is_constrained: 1 enables, 0 disables the constraint; scalar or per-frame series.
    """

    strength_ratio: Series = (DEFAULT_STRENGTH_RATIO, DEFAULT_STRENGTH_RATIO)
    aim_transform: Optional[Series] = None
    is_constrained: Series = 1


@dataclass
class Body:
    """One affine body (12 DOF: q = [p, a1, a2, a3]).

    Attributes:
        name: unique name.
        mesh: rest shape in body-local coordinates.
        transform: (4, 4) rigid pose at frame 0 (rotation + translation, det > 0).
        mass_density: kg/m^3, used unless ``mass`` is given.
        kappa: OrthoPotential stiffness, Pa.
        motion: ``"dynamic"``, ``"fixed"`` (never moves) or ``"animated"`` (follows
            ``animated_transforms``).
        linear_velocity: (3,) initial velocity of the centre of mass, m/s.
        angular_velocity: (3,) initial angular velocity, rad/s, world axes.
        mass: explicit mass properties, or ``None`` to integrate the mesh.
        soft_transform: Soft Transform Constraint #16 settings, or ``None``.
        animated_transforms: (frame_count + 1, 4, 4) poses of an animated body, frame 0 first.
        contact: :class:`BodyContact` (used when ``settings.contact.enable``).
        thickness: for a mesh that is not closed (an open surface: a plane, a terrain, Suzanne),
            m, > 0: its mass and inertia are those of a shell this thick about the surface;
            None: those of its convex hull (docs/scene_format.md, "Open meshes"). Unused for a
            closed mesh.
    """

    name: str
    mesh: Mesh
    transform: np.ndarray = field(default_factory=lambda: np.eye(4))
    mass_density: float = 1000.0
    kappa: float = 1e8
    motion: str = "dynamic"
    linear_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    mass: Optional[MassOverride] = None
    soft_transform: Optional[SoftTransform] = None
    animated_transforms: Optional[np.ndarray] = None
    contact: BodyContact = field(default_factory=BodyContact)
    thickness: Optional[float] = None


@dataclass
class Limit:
    """Joint limit: Prismatic Joint Limit #669 or Revolute Joint Limit #670.

    docs/constitutions/669_prismatic_joint_limit.md and 670_revolute_joint_limit.md. Attribute
    defaults are the specification's (lower 0, upper 0, strength 1). Units: m (prismatic) or rad (revolute); strength
    is an energy in J at the incremental-potential level. Each may be a per-frame series.
    """

    lower: Series = 0.0
    upper: Series = 0.0
    strength: Series = 1.0


@dataclass
class Driving:
    """Driving Prismatic Joint #21 (docs/constitutions/21_driving_prismatic_joint.md) or Driving Revolute Joint
    #19 (docs/constitutions/19_driving_revolute_joint.md).

    A drive aims at a position (``aim_distance`` on a prismatic joint, ``aim_angle`` on a revolute
    one; 0 when neither is given) or, when ``aim_velocity`` is given, at a velocity: each time step
    then aims at the step-start coordinate plus dt times the velocity. Giving both a position aim
    and ``aim_velocity`` is an error.

    Attributes (each a scalar or a per-frame series; None: not given):
        strength_ratio: gamma in K = gamma (m_i + m_j), >= 0.
        is_constrained: 1 enables the drive, 0 disables it (energy zero).
        is_passive: 1 locks at the committed (step-start) coordinate, 0 drives to the aim.
        aim_distance: prismatic target in the reported frame (raw + ``init_distance``), m.
        aim_angle: revolute target in the reported frame (raw + ``init_angle``), rad; any number
            of turns (10 pi is five turns).
        aim_velocity: target rate of the coordinate, m/s (prismatic) or rad/s (revolute).

    Effort and speed limits (constants; None: unlimited):
        max_force: the largest force a prismatic drive exerts, N, > 0.
        max_torque: the largest torque a revolute drive exerts, N m, > 0.
        max_speed: the fastest a drive moves its target, m/s or rad/s, > 0: a position aim is
            approached at most this fast, an aim_velocity is clamped to it.
    """

    strength_ratio: Series = DEFAULT_STRENGTH_RATIO
    is_constrained: Series = 1
    is_passive: Series = 0
    aim_distance: Optional[Series] = None
    aim_angle: Optional[Series] = None
    aim_velocity: Optional[Series] = None
    max_force: Optional[float] = None
    max_torque: Optional[float] = None
    max_speed: Optional[float] = None


#: The six coordinates of a generic joint, in order (docs/constitutions/generic_joint.md).
GENERIC_COORDINATES = ("x", "y", "z", "angle_x", "angle_y", "angle_z")


@dataclass
class Generic:
    """Generic joint (docs/constitutions/generic_joint.md): six coordinates, body j's
    anchor along body i's joint axes (m) and the XYZ Euler angles of body j's joint axes relative
    to body i's (rad), as Bullet's generic constraints; each may be locked, sprung, damped and
    limited. Per-coordinate fields are 6 values in :data:`GENERIC_COORDINATES` order.

    Attributes:
        axes: (3, 3) rotation whose columns are the joint's x, y, z axes in the world at frame 0.
        locked: 6 flags: the coordinate is held at its ``rest`` value by the joint's strength.
        rest: 6 rest values of the locks and springs, m and rad.
        stiffness: 6 spring stiffnesses k >= 0, N/m and N m/rad (0: no spring).
        damping: 6 spring dampings c >= 0, N s/m and N m s/rad.
        limited: 6 flags: the coordinate is kept between ``lower`` and ``upper``.
        lower, upper: 6 limits each, m and rad (lower <= upper where limited).
        limit_strength: s of the cubic limit penalty, J (as ``Limit.strength``), of the cone's too.
        swing_limit: (Y, Z) half-angles in (0, π/2), rad, of an elliptical swing cone about the
            ``cone_axes``' x, Y about their y and Z about their z (None: no cone).
        twist_limit: with a cone, the half-angle T > 0, rad, of the twist about the cone's x
            (None: no twist limit).
        cone_axes: (3, 3) rotation, the cone's axes (columns) in the joint's axes: its x is the
            cone's centre and the twist axis.
        break_force: the force, N, past which a locked linear coordinate breaks the joint for
            good (None: unbreakable).
    """

    axes: np.ndarray = field(default_factory=lambda: np.eye(3))
    locked: tuple = (False,) * 6
    rest: Union[tuple, np.ndarray] = (0.0,) * 6
    stiffness: Union[tuple, np.ndarray] = (0.0,) * 6
    damping: Union[tuple, np.ndarray] = (0.0,) * 6
    limited: tuple = (False,) * 6
    lower: Union[tuple, np.ndarray] = (0.0,) * 6
    upper: Union[tuple, np.ndarray] = (0.0,) * 6
    limit_strength: float = 1.0
    swing_limit: Optional[tuple] = None
    twist_limit: Optional[float] = None
    cone_axes: np.ndarray = field(default_factory=lambda: np.eye(3))
    break_force: Optional[float] = None


@dataclass
class Joint:
    """A joint between a left (parent, i) and right (child, j) body: revolute (#18), prismatic
    (#20), fixed (#25), spherical (#26) or generic (ours, docs/constitutions/generic_joint.md).

    Attributes:
        name: unique name.
        type: ``"prismatic"``, ``"revolute"``, ``"fixed"``, ``"spherical"`` or ``"generic"``.
        l_body, r_body: body names (i = parent, j = child); they must differ.
        position0, position1: (3,) world points at frame 0 of a prismatic or revolute joint; the
            anchor and the end of the axis (t-hat runs from position0 to position1), m.
            None on a fixed or spherical joint.
        strength_ratio: gamma in K = gamma (m_i + m_j), >= 0.
        init_distance: reported-distance offset of a prismatic joint, m.
        init_angle: reported-angle offset of a revolute joint, rad.
        limit: #669 (prismatic) or #670 (revolute), or ``None``.
        driving: #21 (prismatic) or #19 (revolute) settings, or ``None``.
        position: (3,) world anchor at frame 0 of a fixed, spherical or generic joint, m; None on
            the others.
        generic: a generic joint's coordinates (:class:`Generic`; None on the others, and on a
            generic joint for one with every coordinate free).
        collide_connected: whether the two bodies touch each other when contact is on (default
            False, as Blender's rigid-body constraints' *Disable Collisions*).
        damping: viscous damping of a prismatic (N s/m) or revolute (N m s/rad) joint's
            coordinate, >= 0; 0 on a fixed or spherical joint.
    """

    name: str
    type: str
    l_body: str
    r_body: str
    position0: Optional[np.ndarray] = None
    position1: Optional[np.ndarray] = None
    strength_ratio: float = DEFAULT_STRENGTH_RATIO
    init_distance: float = 0.0
    init_angle: float = 0.0
    limit: Optional[Limit] = None
    driving: Optional[Driving] = None
    position: Optional[np.ndarray] = None
    collide_connected: bool = False
    damping: float = 0.0
    generic: Optional[Generic] = None


@dataclass
class Scene:
    """A whole simulation: settings, bodies and joints (joint bodies are referenced by name)."""

    settings: Settings
    bodies: list[Body]
    joints: list[Joint] = field(default_factory=list)
