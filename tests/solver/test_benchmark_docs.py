"""``benchmarks/peers.py --update-docs``: the ratio table and the generated block of the performance page."""

from __future__ import annotations

import numpy as np
import pytest

import benchmark_modules

peers = benchmark_modules.load("peers")


def _result(key: str, kind: str, count: int, rate):
    return peers.Result(engine=f"{key} label", key=key, kind=kind, count=count, dt=240, rate=rate)


def test_ratios_are_ours_over_each_other_engine_of_the_same_chain():
    results = [_result("ours", "revolute", 10, 0.06), _result("blender", "revolute", 10, 0.006),
               _result("mujoco", "revolute", 10, 0.002), _result("ours", "revolute", 100, 0.2),
               _result("blender", "revolute", 100, None),  # a failed row has no ratio
               _result("blender", "prismatic", 10, 0.01)]  # no row of ours for this chain
    lines = peers.ratios_markdown(results).splitlines()
    assert lines[2:] == ["| revolute | 10 | 1/240 | blender label | 10.00 |",
                         "| revolute | 10 | 1/240 | mujoco label | 30.00 |"]
    assert peers.ratios_markdown([_result("blender", "revolute", 10, 0.006)]) == ""


def test_docs_block_is_appended_once_then_replaced_in_place():
    page = "# Performance\n\nhand-written analysis\n"
    first = peers.with_docs_block(page, "table one\n")
    assert first.startswith(page.rstrip("\n"))
    assert "## Latest `peers.py` run" in first and "table one\n" in first
    edited = first + "\nmore analysis after the block\n"
    second = peers.with_docs_block(edited, "table two\n")
    assert "table one" not in second and second.count("table two") == 1
    assert second.count(peers.DOCS_BEGIN) == 1 and second.count("## Latest `peers.py` run") == 1
    assert second.endswith("more analysis after the block\n")  # what follows the block is kept
    with pytest.raises(ValueError, match="markers"):
        peers.with_docs_block(page + peers.DOCS_END + "\n", "table\n")


def test_chains_runs_the_peers_frames_unless_told_otherwise():
    """``chains.py --dt 24`` once ran 2.4 frames a second of 10 steps (its fixed default), and the
    same dt then gave other drifts than ``peers.py`` on the chaotic chains (1.66e-3 against
    1.78e-3 m on the 10-box revolute chain); both now make frames of 1/24 s."""
    chains = benchmark_modules.load("chains")
    for dt in (240, 120, 24):
        assert chains.default_steps_per_frame(dt) == peers.steps_per_frame(dt)
    assert chains.default_steps_per_frame(240) == 10 and chains.default_steps_per_frame(24) == 1


def test_pile_column_is_the_described_layout_and_its_block_is_appended_then_replaced():
    """``benchmarks/pile.py``: 27 boxes of 0.2 m in 3 x 3 x 3, 0.25 m apart sideways and 0.3 m
    upwards, the lowest 5 cm above the ground's top, each turned by at most 0.1 rad, seeded; the
    keyed poses are the nearest rotations; its generated block is appended once, then replaced."""
    pile = benchmark_modules.load("pile")
    bodies = pile.column_layout(27)
    assert bodies[0]["motion"] == "fixed" and len(bodies) == 28
    centres = np.array([body["transform"][:3, 3] for body in bodies[1:]])
    assert np.allclose(np.unique(centres[:, 0].round(9)), [-0.25, 0.0, 0.25])
    assert np.allclose(np.unique(centres[:, 2].round(9)), [0.15, 0.45, 0.75])
    rotations = np.array([body["transform"][:3, :3] for body in bodies[1:]])
    angles = np.arccos(np.clip((np.trace(rotations, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0))
    assert np.all(angles <= 0.1 + 1e-12) and np.all(angles > 0.0)
    assert np.array_equal(centres, np.array([b["transform"][:3, 3] for b in pile.column_layout(27)[1:]]))
    affine = np.array([body["transform"] for body in bodies])[None].copy()
    affine[0, 1, :3, :3] *= 1.01  # a stretched state keys as its rotation
    assert np.allclose(pile.rigid_poses(affine)[0, 1, :3, :3], rotations[0])

    page = "# Latest benchmark runs\n\nother runs\n"
    first = pile.with_docs_block(page, "table one\n")
    assert first.startswith(page.rstrip("\n")) and "## Latest `pile.py` run" in first
    second = pile.with_docs_block(first + "\nafter\n", "table two\n")
    assert "table one" not in second and second.count(pile.DOCS_BEGIN) == 1 and second.endswith("after\n")


def test_a_workers_result_line_is_read_and_its_failure_named():
    """``benchmarks/reporting.py``: the scripts' Blender workers print one result line after a
    mark; a worker that fails says why in the error, with its last line of standard error."""
    import sys

    reporting = benchmark_modules.load("reporting")
    speak = "print('noise'); print('MARK {\"rate\": 0.5}'); print('MARK {\"rate\": 0.25}')"
    assert reporting.worker_result([sys.executable, "-c", speak], "MARK ", 60) == {"rate": 0.25}
    fail = "import sys; print('MARK {}'); sys.exit('the bpy wheel is missing')"
    with pytest.raises(RuntimeError, match="exited 1: the bpy wheel is missing"):
        reporting.worker_result([sys.executable, "-c", fail], "MARK ", 60)
    with pytest.raises(RuntimeError, match="exited 0: no output"):
        reporting.worker_result([sys.executable, "-c", "pass"], "MARK ", 60)
    assert reporting.markdown_table(["a", "b"], [["1", "x|y"]]) == "| a | b |\n|---|---|\n| 1 | x\\|y |\n"
