"""``benchmarks/peers.py --update-docs``: the ratio table and the generated block of the performance page."""

from __future__ import annotations

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
