"""Dask farms that go wrong: an address that is not a scheduler's gives one line of error within
the connect timeout, a cluster with no worker is reported, and a task Dask reruns after losing its
worker never bakes beside the first bake."""

from __future__ import annotations

import fcntl
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from farm_jobs import ROOT, run
from distributed import LocalCluster

from farm import dask_bake


@pytest.fixture
def silent_service():
    """A TCP service that accepts connections and never says a word; its address."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []

    def accept():
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in accepted:
        connection.close()


@pytest.fixture
def web_server():
    """An HTTP server (a Dask dashboard's port, say); its host:port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_service_that_accepts_and_stays_silent_times_out_naming_it(silent_service):
    """The batch waited 15 minutes or more, with no output, on a service that accepts the
    connection and says nothing: it gives up after the connect timeout."""
    started = time.monotonic()
    with pytest.raises(OSError, match=r"no answer within 1 s: not a Dask scheduler"):
        dask_bake.bake_on_cluster(silent_service, ["shot.blend"], ["--out-dir", "baked"], connect_timeout=1.0)
    assert time.monotonic() - started < 30


def test_an_http_server_is_not_taken_for_a_scheduler(web_server):
    """An HTTP service behind tcp:// made Dask allocate 3 EiB for its reply (a traceback); behind
    http:// it is named as the HTTP address it is."""
    with pytest.raises(OSError) as raised:
        dask_bake.bake_on_cluster(f"tcp://{web_server}", ["shot.blend"], connect_timeout=2.0)
    assert "\n" not in str(raised.value) and "Traceback" not in str(raised.value)
    with pytest.raises(OSError, match=r"an HTTP address \(a dashboard's\?\): give the scheduler's"):
        dask_bake.connect(f"http://{web_server}")


@pytest.mark.parametrize("address, expected", [
    ("tls://127.0.0.1:1", "tls:// needs Dask's TLS settings"),
    ("ucx://127.0.0.1:1", "ucx:// needs UCX-Py"),
    ("http://127.0.0.1:8787/status", "an HTTP address"),
])
def test_addresses_dask_cannot_use_here_give_one_line(tmp_path, address, expected):
    """tls:// without Dask's TLS settings and ucx:// without UCX-Py gave TypeError tracebacks."""
    result = run(sys.executable, "-m", "abd_addon.batch", tmp_path / "shot.blend", "--out-dir", tmp_path / "baked",
                 "--scheduler", address)
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: cannot bake on the Dask cluster at {address}: " + lines[0].split(": ", 2)[2]], lines
    assert expected in lines[0]


def test_a_cluster_without_workers_is_reported_and_bakes_when_one_joins(tmp_path, capsys):
    """A scheduler with no worker waited in silence: the wait is reported after worker_wait s, and
    the file is baked (here: refused, as it is missing) once a worker joins."""
    with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        timer = threading.Timer(4.0, cluster.scale, (1,))
        timer.start()
        try:
            results = dask_bake.bake_on_cluster(cluster.scheduler_address, [tmp_path / "missing.blend"],
                                                ["--out-dir", tmp_path], worker_wait=1.0)
        finally:
            timer.cancel()
    assert f"waiting for workers: none has joined the scheduler at {cluster.scheduler_address} in 1 s" in \
        capsys.readouterr().err
    assert not results[0]["ok"] and "missing.blend" in results[0]["error"]


def test_a_rerun_of_a_file_still_baking_refuses(tmp_path):
    """Dask reruns the task of a worker it lost; the first bake, if still running, holds the file's
    lock, and the rerun refuses instead of writing the same output."""
    blend = tmp_path / "shot.blend"
    blend.write_bytes(b"not read")
    with open(blend, "rb") as first_bake:
        fcntl.flock(first_bake, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = subprocess.run(dask_bake.task_command(str(blend), ["--out-dir", str(tmp_path)], sys.executable),
                                cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and result.stderr == (
        f"error: {blend}: another bake of this file is still running (its worker was lost?): not baked twice at once\n")
    assert dask_bake.file_result(str(blend), result.returncode, result.stdout, result.stderr)["error"].startswith(
        f"{blend}: another bake of this file is still running")


WORKER = """
import subprocess, sys
from farm import dask_bake
blend, out = sys.argv[1:]
subprocess.run(dask_bake.task_command(blend, ["--out-dir", out], sys.executable))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bake ends with its worker on Linux")
def test_a_bake_ends_with_its_worker(tmp_path):
    """A worker killed mid-bake left its bake running while Dask reran the task: the bake's process
    now ends with the worker, and the file's lock with it."""
    blend = tmp_path / "shot.blend"
    blend.write_bytes(b"BLENDER-v405 not a blend file")
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(blend), str(tmp_path)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        bakes: list = []
        while not bakes and time.monotonic() < deadline:
            bakes = [int(pid) for task in os.listdir(f"/proc/{worker.pid}/task")
                     for pid in open(f"/proc/{worker.pid}/task/{task}/children").read().split()]
            time.sleep(0.01)
        assert bakes, "the worker never started its bake"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and os.path.exists(f"/proc/{bakes[0]}") and \
                open(f"/proc/{bakes[0]}/stat").read().split()[2] != "Z":
            time.sleep(0.05)
        alive = os.path.exists(f"/proc/{bakes[0]}") and open(f"/proc/{bakes[0]}/stat").read().split()[2] != "Z"
        if alive:
            os.kill(bakes[0], signal.SIGKILL)
        assert not alive, "the bake went on after its worker died"
    finally:
        worker.kill()
        worker.wait()
    with open(blend, "rb") as rerun:
        fcntl.flock(rerun, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
