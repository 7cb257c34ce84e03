"""solver.Simulation: a run advanced a few time steps at a time (the add-on's playback preview)
gives what one call of simulate gives."""

from __future__ import annotations

import numpy as np
import pytest

from solver import Body, Driving, Joint, Limit, Scene, Settings, Simulation, SolverError, simulate
from solver.primitives import box_mesh
from solver.simulation import SimulationCancelled


def drawer_scene(frame_count=12, substeps=3) -> Scene:
    """A fixed cabinet, a drawer on a driven and limited prismatic joint, and a flap hinged to the
    drawer with a revolute limit: both joint types, a drive and both limits."""
    cabinet = Body(name="cabinet", mesh=box_mesh([1.0, 1.0, 1.0]), motion="fixed")
    drawer = Body(name="drawer", mesh=box_mesh([0.8, 0.8, 0.2], center=(0.0, 0.0, 0.6)))
    flap = Body(name="flap", mesh=box_mesh([0.8, 0.05, 0.4], center=(0.0, 0.45, 0.5)))
    aim = np.linspace(0.0, 0.4, frame_count + 1)
    joints = [
        Joint(name="rail", type="prismatic", l_body="cabinet", r_body="drawer", position0=np.zeros(3),
              position1=np.array([1.0, 0.0, 0.0]), limit=Limit(lower=-0.1, upper=0.3, strength=100.0),
              driving=Driving(aim_distance=aim)),
        Joint(name="hinge", type="revolute", l_body="drawer", r_body="flap", position0=np.array([0.0, 0.4, 0.7]),
              position1=np.array([1.0, 0.4, 0.7]), limit=Limit(lower=-0.3, upper=0.3, strength=10.0)),
    ]
    return Scene(settings=Settings(frame_rate=24.0, substeps=substeps, frame_count=frame_count),
                 bodies=[cabinet, drawer, flap], joints=joints)


def test_a_run_advanced_a_few_steps_at_a_time_equals_one_simulate_call():
    expected = simulate(drawer_scene())
    run = Simulation(drawer_scene())
    shown = [run.transforms(0).copy()]
    calls = 0
    while not run.finished:
        before = run.frames_done
        assert run.advance(max_steps=2) == run.frames_done - before
        calls += 1
        if run.frames_done > before:
            shown.append(run.transforms(run.frames_done).copy())
    assert calls == 12 * 2  # three time steps a frame: two calls, as a call stops at the frame's end
    assert run.advance() == 0  # nothing left
    result = run.trajectory()
    for name in ("transforms", "distance", "angle", "newton_iterations", "converged", "residual"):
        np.testing.assert_array_equal(getattr(result, name), getattr(expected, name), err_msg=name)
    np.testing.assert_array_equal(np.array(shown), expected.transforms)
    assert np.ptp(expected.distance[:, 0]) > 0.1  # the drawer moved: the comparison means something


def test_run_goes_on_from_the_frames_already_done_and_reports_only_those_it_simulates():
    expected = simulate(drawer_scene())
    run = Simulation(drawer_scene())
    for _ in range(5):
        assert run.advance() == 1
    assert run.frames_done == 5
    reported = []
    result = run.run(lambda done, total: reported.append((done, total)))
    assert reported == [(frame, 12) for frame in range(6, 13)]
    np.testing.assert_array_equal(result.transforms, expected.transforms)


def test_a_cancelled_run_keeps_its_frames_and_goes_on_later():
    expected = simulate(drawer_scene())
    run = Simulation(drawer_scene())
    with pytest.raises(SimulationCancelled, match="after frame 3 of 12"):
        run.run(lambda done, total: done < 3)
    assert run.frames_done == 3
    np.testing.assert_array_equal(run.run().transforms, expected.transforms)


def test_advance_goes_to_a_later_frame_or_stops_at_its_deadline():
    expected = simulate(drawer_scene())
    run = Simulation(drawer_scene())
    assert run.advance(until_frame=4) == 4
    assert run.advance(deadline=0.0) == 0 and run._step == 13  # one step taken, then the deadline
    assert run.advance(until_frame=99) == 8 and run.finished
    np.testing.assert_array_equal(run.trajectory().transforms, expected.transforms)


def test_unfinished_frames_and_trajectories_are_refused():
    run = Simulation(drawer_scene())
    run.advance()
    with pytest.raises(IndexError, match="frame 2 is not simulated yet"):
        run.transforms(2)
    with pytest.raises(SolverError, match="finished 1 of its 12 frames"):
        run.trajectory()
