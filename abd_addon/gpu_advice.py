"""Whether a GPU device would pay for a rig, read from its settings alone (no UI).

The Solver panel shows :func:`gpu_advice` under Device: GPU (CuPy) and :func:`uipc_advice` under
Device: GPU (libuipc); the bake does not use them.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..solver.linear_solver import band_order

#: Where the GPU path (Device: GPU) pays against the CPU's banded solve: at least this many
#: dynamic bodies, coupled in a band at least this many bodies wide (a net of 400 hinged cubes is
#: about 20 wide, of 1024 about 32, a chain 1), from the runs in docs/performance.md ("The GPU
#: path"). Below these the panel advises the CPU.
GPU_MIN_BODIES = 500
GPU_MIN_BAND = 16


def gpu_advice(view_layer: bpy.types.ViewLayer, min_bodies: int = GPU_MIN_BODIES,
               min_band: int = GPU_MIN_BAND) -> str | None:
    """Why the CPU would bake this view layer's rig faster than the GPU path, or None where the
    GPU may pay: fewer than ``min_bodies`` dynamic bodies, or a Newton matrix that the CPU stores
    as a band narrower than ``min_band`` bodies (in the order of
    :func:`solver.linear_solver.band_order`: chains, trees and rigs with few loops; joints to
    fixed or animated bodies couple nothing). Reads only the bodies' and joints' settings."""
    names = sorted(ob.name_full for ob in view_layer.objects if ob.abd_body.enabled and ob.abd_body.motion == "DYNAMIC")
    if len(names) < min_bodies:
        return f"{len(names)} dynamic bodies: the CPU is usually faster below about {min_bodies}"
    index = {name: i for i, name in enumerate(names)}
    rows, columns = list(range(len(names))), list(range(len(names)))
    for ob in view_layer.objects:
        joint = ob.abd_joint
        if joint.enabled and joint.l_body is not None and joint.r_body is not None:
            i, j = index.get(joint.l_body.name_full), index.get(joint.r_body.name_full)
            if i is not None and j is not None:
                rows += [i, j]
                columns += [j, i]
    band = band_order(len(names), np.array(rows), np.array(columns))[2]
    if band < min_band:
        return f"Its joints form a band {band} bod{'y' if band == 1 else 'ies'} wide: the CPU is faster"
    return None


#: Where libuipc (Device: GPU (libuipc)) pays against this solver on the CPU: contact on, and at
#: least this many dynamic bodies that collide. On jointed rigs without contact the CPU solver is
#: 10 to 50 times faster; with contact libuipc wins from piles of about a hundred bodies and
#: chains of a hundred links on (docs/performance.md, "libuipc on the GPU"). Below this the panel
#: advises the CPU.
UIPC_MIN_COLLIDING = 50
#: The Newton velocity tolerance (m/s) at which libuipc slides a body under friction as Coulomb's
#: law and the CPU solver do: at the default 0.05 its Newton loop stops at the first short
#: direction and a box on a ramp creeps (docs/performance.md, "libuipc on the GPU").
UIPC_FRICTION_VELOCITY_TOL = 0.0005


def uipc_advice(view_layer: bpy.types.ViewLayer, contact: bool, min_colliding: int = UIPC_MIN_COLLIDING) -> str | None:
    """Why the CPU would bake this view layer's rig faster than libuipc, or None where libuipc may
    pay: contact is off (``contact`` False: a jointed rig without contact), or fewer than
    ``min_colliding`` dynamic bodies collide. Reads only the bodies' settings."""
    if not contact:
        return "Contact is off: this solver on the CPU is faster for jointed rigs"
    colliding = sum(1 for ob in view_layer.objects
                    if ob.abd_body.enabled and ob.abd_body.motion == "DYNAMIC" and ob.abd_body.use_collision)
    if colliding < min_colliding:
        return f"{colliding} colliding dynamic bodies: the CPU is usually faster below about {min_colliding}"
    return None
