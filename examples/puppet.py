"""Puppet: a body that follows a keyframed target loosely, dragging a hanging chain of revolute links.

Run (from the repository root)::

    .venv/bin/python examples/puppet.py --out build/demo/puppet.blend [--frames 96]

``Target`` is an Empty (not a body) whose location is keyframed: it sweeps right, left and back,
and bobs up and down; a small red ball above it (``TargetMarker``, parented to it) shows it in
renders. ``Puppet`` is a dynamic body whose soft transform takes ``Target``'s world transform as its aim,
with small strengths (η_p, η_a) = STRENGTH so it follows loosely: it lags behind the target,
sags a little under its own and the chain's weight, and bobs. Three links hang below it on
revolute joints about world +Y (``Shoulder``, ``Elbow``, ``Wrist``), so the chain swings in the
XZ plane, the camera's view plane.

How small is "loose": the soft transform's energy ½ η δqᵀ M δq sits beside the kinetic term
½ (q − q̃)ᵀ M (q − q̃) of each time step without a dt² factor, so η is a stiffness *per time
step* relative to the inertia: the physical spring is η m / dt², ω = √η / dt. At 24 fps and 10
substeps (dt = 1/240 s), η = 2 gives ω ≈ 340 rad/s (the puppet sits on the target to the
millimetre), η = 0.003 gives ω ≈ 13 rad/s: a visible lag of up to ~0.13 m. Changing the
substeps changes the looseness (dt enters squared).
"""

from __future__ import annotations

import _blender

#: Soft transform strengths (η_p, η_a) of the puppet.
STRENGTH = (0.003, 0.003)
#: Keyed target path: (fraction of the animation, x, z) of the target's location.
TARGET_KEYS = (
    (0.0, 0.0, 1.6), (0.06, 0.0, 1.6), (0.32, 0.5, 1.72), (0.64, -0.5, 1.56), (0.9, 0.0, 1.6), (1.0, 0.0, 1.6),
)
LINK = 0.35
LINKS = 3


def build(frames: int) -> None:
    """Build the puppet rig in the (empty) current scene, animation frames 1..frames."""
    import bpy

    start = TARGET_KEYS[0]
    top = (0.0, 0.0, start[2])
    puppet = _blender.add_box("Puppet", (0.36, 0.24, 0.3), top, (0.85, 0.3, 0.25))
    bpy.ops.object.empty_add(type="CUBE", radius=0.25, location=top)
    target = bpy.context.active_object
    target.name = "Target"
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.06, location=(top[0], top[1], top[2] + 0.32))
    marker = bpy.context.active_object
    marker.name = "TargetMarker"
    marker.color = (0.9, 0.1, 0.1, 1.0)
    marker.parent = target
    marker.matrix_parent_inverse = target.matrix_world.inverted()

    links = []
    joint_z = start[2] - 0.15  # the puppet's bottom face
    colors = ((0.95, 0.7, 0.2), (0.3, 0.7, 0.35), (0.25, 0.45, 0.85))
    for index in range(LINKS):
        link = _blender.add_box(
            f"Link{index + 1}", (0.07, 0.07, LINK), (0.0, 0.0, joint_z - index * LINK - LINK / 2.0), colors[index]
        )
        links.append(link)

    _blender.make_bodies(puppet, *links, motion="DYNAMIC", density=400.0)
    soft = puppet.abd_body.soft_transform
    soft.is_constrained = True
    soft.target = "OBJECT"
    soft.target_object = target
    soft.strength_ratio_p, soft.strength_ratio_a = STRENGTH

    names = ("Shoulder", "Elbow", "Wrist")
    parent = puppet
    for index, link in enumerate(links):
        pivot = (0.0, 0.0, joint_z - index * LINK)
        _blender.connect(parent, link, "REVOLUTE", pivot=pivot, axis="Y", name=names[index])
        parent = link

    last = frames - 1
    for fraction, x, z in TARGET_KEYS:
        frame = 1 + round(fraction * last)
        target.location = (x, 0.0, z)
        target.keyframe_insert(data_path="location", frame=frame)

    _blender.setup_stage(frames, camera_location=(0.0, -5.2, 1.2), camera_target=(0.0, 0.0, 1.15), lens=55.0)
    bpy.context.scene.frame_set(1)


if __name__ == "__main__":
    _blender.run_example(build, "Build the puppet example rig", default_frames=96)
