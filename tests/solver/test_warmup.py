"""The warm-up scene exercises every energy term and both Newton paths, and solves."""

from __future__ import annotations

import numpy as np

from solver.model import Model
from solver.scene import validate_scene
from solver.simulation import simulate
from solver.warmup import warm_up_scene


def test_warm_up_scene_uses_every_term_and_converges():
    scene = validate_scene(warm_up_scene())
    model = Model(scene)
    group = model.prismatic_group
    for name, term in (("kinetic", model.kinetic), ("ortho", model.ortho), ("soft", model.soft),
                       ("revolute", model.revolute.base), ("prismatic", group), ("driving", group.driving),
                       ("prismatic limit", group.limit), ("revolute limit", model.revolute_limit)):
        assert len(term.bodies) > 0, name
    motions = {body.motion for body in scene.bodies}
    assert motions == {"fixed", "animated", "dynamic"}
    trajectory = simulate(scene)
    assert trajectory.all_converged
    assert trajectory.newton_iterations.max() >= 2  # steps that needed a second (chord) direction
    assert np.all(np.isfinite(trajectory.transforms))
    # The prismatic limit is pushed past its upper bound by the drive (aim 0.1 > upper 0.01).
    rail = [joint.name for joint in scene.joints].index("rail")
    assert trajectory.distance[-1, rail] > 0.01
