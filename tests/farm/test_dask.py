"""Dask: three files baked through a real LocalCluster (two worker processes), one of them broken,
give the keys the one-process batch gives; the command line's --scheduler does the same."""

from __future__ import annotations

import os
import sys

import pytest
from farm_jobs import NAMES, assert_same_keys, baked_keys, run
from distributed import Client, LocalCluster

from farm import dask_bake


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of two worker processes, one thread each (each runs one bake at a time)."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def test_cluster_bakes_each_file_in_a_task_like_the_one_process_batch(cluster, shots, one_process, tmp_path):
    """bake_on_cluster: results in input order, the broken file named, each worker warmed once, no bpy here,
    and the baked keys of the one-process batch."""
    out = tmp_path / "baked"
    seen = []
    with Client(cluster) as client:
        results = dask_bake.bake_on_cluster(client, [shots / name for name in NAMES], ["--out-dir", out],
                                            on_result=seen.append)
        warm_ups = client.run(lambda dask_worker: dask_worker.plugins[dask_bake.WarmUp.name].outcome)
        # A second bake on the same cluster does not warm its workers again (the plugin is idempotent).
        again = dask_bake.bake_on_cluster(client, [shots / "door.blend"], ["--out-dir", tmp_path / "again"])
        assert client.run(lambda dask_worker: dask_worker.plugins[dask_bake.WarmUp.name].outcome) == warm_ups
    assert "bpy" not in sys.modules  # neither this process nor (by construction) the Dask workers import it

    assert [result["file"] for result in results] == [str(shots / name) for name in NAMES]
    assert [result["ok"] for result in results] == [True, False, True] and again[0]["ok"]
    assert sorted(result["file"] for result in seen) == sorted(result["file"] for result in results)
    broken = results[1]
    assert broken["status"] == 1 and str(shots / "broken.blend") in broken["error"] and "cannot open" in broken["error"]
    assert results[0]["summary"]["out"] == str(out / "drawer.blend")
    assert results[0]["summary"]["keyed_objects"] == "2" and results[2]["summary"]["all_converged"] == "True"
    assert sorted(path.name for path in out.iterdir()) == ["door.blend", "drawer.blend"]
    assert len(warm_ups) == 2 and all(status == 0 and "warm_up=done" in line for status, _, line in warm_ups.values())

    keys = baked_keys(out / "drawer.blend", out / "door.blend")
    assert_same_keys(keys, one_process)


def test_command_line_scheduler_option(cluster, shots, tmp_path):
    """``python -m abd_addon.batch ... --scheduler ADDRESS --progress``: a summary line per baked
    file on stdout, the broken file named on stderr, a progress bar, exit status 1."""
    out = tmp_path / "baked"
    result = run(sys.executable, "-m", "abd_addon.batch", *(shots / name for name in NAMES), "--out-dir", out,
                 "--scheduler", cluster.scheduler_address, "--progress")
    assert result.returncode == 1, result.stderr[-2000:]
    assert sorted(line.split()[0] for line in result.stdout.splitlines() if line.startswith("file=")) == [
        f"file={shots / 'door.blend'}", f"file={shots / 'drawer.blend'}"]
    assert f"error: {shots / 'broken.blend'}: cannot open" in result.stderr
    assert "3/3" in result.stderr and "baked 2 of 3 files on the cluster" in result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["door.blend", "drawer.blend"]


def test_scheduler_that_cannot_be_reached_is_named(shots, tmp_path):
    """An unreachable scheduler: exit status 1, naming its address (after a 2 s connect timeout)."""
    result = run(sys.executable, "-m", "abd_addon.batch", shots / "drawer.blend", "--out-dir", tmp_path,
                 "--scheduler", "tcp://127.0.0.1:1",
                 env=dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s"))
    assert result.returncode == 1
    assert "error: cannot bake on the Dask cluster at tcp://127.0.0.1:1" in result.stderr, result.stderr[-2000:]


def test_scheduler_refuses_options_for_one_file_and_inputs_with_one_name(tmp_path):
    """--out with --scheduler is a bad argument (exit 2); check_inputs refuses it and same-named inputs,
    and makes paths absolute."""
    result = run(sys.executable, "-m", "abd_addon.batch", tmp_path / "a.blend", "--out", tmp_path / "b.blend",
                 "--scheduler", "tcp://127.0.0.1:1")
    assert result.returncode == 2 and "--scheduler bakes each file as a task of its own" in result.stderr
    with pytest.raises(ValueError, match="--out cannot be given to each file's task"):
        dask_bake.check_inputs(["shot.blend"], ["--out", "baked.blend"])
    with pytest.raises(ValueError, match="two inputs are named shot"):
        dask_bake.check_inputs(["a/shot.blend", "b/shot.blend"], ["--out-dir", "baked"])
    blends, options = dask_bake.check_inputs(["shot.blend"], ["--out-dir", "baked", "--device", "cpu"])
    assert blends == [os.path.abspath("shot.blend")]
    assert options == ["--out-dir", os.path.abspath("baked"), "--device", "cpu"]
    blends, options = dask_bake.check_inputs(["shot.blend"], ["--out-dir=baked", "--trajectory-dir=results"])
    assert options == [f"--out-dir={os.path.abspath('baked')}", f"--trajectory-dir={os.path.abspath('results')}"]


def test_file_result_names_the_file_of_a_bake_without_an_error_line():
    """A batch killed or crashed before its ``error:`` line: the error names the file and the exit
    status; the batch's own error line is passed on as it is."""
    killed = dask_bake.file_result("/shots/a.blend", -9, stderr="/shots/a.blend: frame 3/12\n")
    assert killed["error"] == "/shots/a.blend: exit status -9: /shots/a.blend: frame 3/12" and not killed["ok"]
    silent = dask_bake.file_result("/shots/a.blend", 139)
    assert silent["error"] == "/shots/a.blend: exit status 139"
    refused = dask_bake.file_result("/shots/a.blend", 1, stderr="error: /shots/a.blend: cannot open: bad\n")
    assert refused["error"] == "/shots/a.blend: cannot open: bad" and refused["summary"] is None
