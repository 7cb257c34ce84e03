"""Bake .blend files on a Dask cluster: one task per file, each a fresh ``python -m abd_addon.batch``.

Command line (from the repository root)::

    python -m abd_addon.batch shots/*.blend --out-dir baked/ --scheduler tcp://scheduler:8786

In a pipeline::

    from farm.dask_bake import bake_on_cluster
    results = bake_on_cluster("tcp://scheduler:8786", ["/shots/a.blend", "/shots/b.blend"], ["--out-dir", "/baked"])
    failed = [result for result in results if not result["ok"]]

Each task runs the batch bake of one file in a new process on a worker (``subprocess.run`` of
``python -m abd_addon.batch FILE OPTIONS`` from the repository folder), so every bake has a ``bpy``
of its own: Blender's Python is not thread-safe, and a process that imported ``bpy`` must not be
forked. Neither the caller nor the Dask worker processes import ``bpy``. Before its first task each worker runs
``python -m abd_addon.batch --warm-up`` once (a worker plugin, :class:`WarmUp`), so that its bakes
load the solver's compiled kernels instead of compiling them; a warm-up that fails is logged by the
worker and costs its bakes only the compilation. A file that fails comes back with the batch's
one-line reason; the others are still baked. Paths must name the same files on the workers as
here (a shared file system; relative paths are made absolute first).

The warm-up plugin is pickled by value (cloudpickle) and the tasks are ``subprocess.run`` calls,
so the scheduler and the workers need ``distributed`` and the batch command's own requirements,
not this module. A scheduler that does not answer within :data:`CONNECT_TIMEOUT` s, or an address Dask
cannot use, is one line of error; a cluster with no worker is reported after :data:`WORKER_WAIT`
s. While a file bakes its task holds a lock on it, so a task that Dask reruns after losing its
worker never bakes beside the first bake, which on Linux ends with its worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
from distributed import Client, WorkerPlugin, as_completed
from tqdm import tqdm

#: The checkout this module belongs to: where the workers run ``python -m abd_addon.batch``.
REPOSITORY = str(Path(__file__).resolve().parents[1])
#: Batch options a task of one file cannot take: they name one file's outputs, or are not a bake.
REFUSED_OPTIONS = ("--out", "--trajectory", "--from-trajectory", "--warm-up", "--scheduler")
#: Batch options followed by a path (made absolute before they go to the workers).
PATH_OPTIONS = ("--out-dir", "--trajectory-dir", "--from-trajectory-dir", "--export-scene-dir")
#: Seconds the scheduler has to answer a connection (a service that accepts it and stays silent is
#: not one).
CONNECT_TIMEOUT = 30.0
#: Seconds without a worker after which the wait is reported on stderr.
WORKER_WAIT = 30.0
#: Python run on the worker for each file (``python -c BAKE_LAUNCHER FILE OPTIONS...``): takes an
#: exclusive lock (``flock``) on the file, which the bake's process keeps (the descriptor is
#: inherited across the exec), so that where Dask reruns the task of a worker it lost while its bake
#: still runs, the rerun refuses (exit status 1, one ``error:`` line) instead of writing the same
#: output; asks Linux to end the bake (SIGTERM) when the worker that started it dies
#: (PR_SET_PDEATHSIG, kept across the exec); then runs the batch bake of the file. A file that
#: cannot be opened, or a file system without locks, bakes without a lock (the batch names a
#: missing file).
BAKE_LAUNCHER = """\
import fcntl, os, signal, sys
blend = sys.argv[1]
try:
    held = os.open(blend, os.O_RDONLY)
except OSError:
    held = None
if held is not None:
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"error: {blend}: another bake of this file is still running (its worker was lost?): "
                 "not baked twice at once")
    except OSError:
        pass
    os.set_inheritable(held, True)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):
    pass
os.execv(sys.executable, [sys.executable, "-m", "abd_addon.batch", *sys.argv[1:]])
"""


def batch_command(blend: str, options: list, python: str) -> list:
    """The command line that bakes ``blend`` with the batch ``options``: ``python -m abd_addon.batch
    blend options...``."""
    return [python, "-m", "abd_addon.batch", blend, *options]


def task_command(blend: str, options: list, python: str) -> list:
    """The command line of ``blend``'s task on a worker: :func:`batch_command` run through
    :data:`BAKE_LAUNCHER` (a lock on the file, the bake ending with its worker)."""
    return [python, "-c", BAKE_LAUNCHER, blend, *options]


def file_result(blend: str, status: int | None, stdout: str = "", stderr: str = "") -> dict:
    """What one file's batch bake gave: ``file``, ``ok`` (exit status 0), ``status`` (the exit
    status; None when the task itself failed), ``summary`` (the batch's ``key=value`` line as a
    dict of strings; None on failure), ``error`` (the batch's ``error:`` lines joined, else the
    file, its exit status and the end of its stderr; None on success) and ``warnings`` (its ``warning:`` lines)."""
    lines = stderr.splitlines()
    errors = [line[len("error: "):] for line in lines if line.startswith("error: ")]
    if status != 0 and not errors:  # no error line of the batch's (it crashed, or was killed): name the file
        end = " / ".join(line.strip() for line in lines[-3:] if line.strip())
        errors = [f"{blend}: exit status {status}" + (f": {end}" if end else "")]
    summaries = [line for line in stdout.splitlines() if line.startswith("file=")]
    return {
        "file": blend,
        "ok": status == 0,
        "status": status,
        "summary": parse_summary(summaries[-1]) if summaries and status == 0 else None,
        "error": "; ".join(errors) if status != 0 else None,
        "warnings": [line for line in lines if line.startswith("warning: ")],
    }


def parse_summary(line: str) -> dict:
    """The batch's summary line ``key=value key=value ...`` as a dict of strings (a value may hold
    spaces: a new pair starts only at `` name=``)."""
    return dict(part.split("=", 1) for part in re.split(r" (?=[a-z_]+=)", line.strip()))


def connect(address: str, timeout: float = CONNECT_TIMEOUT) -> Client:
    """A ``Client`` of the scheduler at ``address``, or a one-line error.

    Raises:
        OSError: an address Dask cannot use here (``http://``: a dashboard's; ``tls://`` without
            Dask's TLS settings; ``ucx://`` without UCX-Py), no scheduler answering within
            ``timeout`` s (a service that accepts the connection and stays silent), or a service
            that is not a Dask scheduler (one whose reply Dask cannot read).
    """
    import importlib.util
    import threading

    import dask.config

    scheme = address.split("://", 1)[0].lower() if "://" in address else "tcp"
    if scheme in ("http", "https"):
        raise OSError("an HTTP address (a dashboard's?): give the scheduler's, tcp://HOST:8786 by default")
    if scheme in ("tls", "wss") and not dask.config.get("distributed.comm.tls.ca-file", None):
        raise OSError(f"{scheme}:// needs Dask's TLS settings (distributed.comm.tls: ca-file, and client cert "
                      "and key, in the Dask configuration)")
    if scheme == "ucx" and not any(importlib.util.find_spec(name) for name in ("ucp", "ucxx", "distributed_ucxx")):
        raise OSError("ucx:// needs UCX-Py (the distributed-ucxx package), which is not installed here")
    outcome: dict = {}

    def attempt() -> None:
        try:
            outcome["client"] = Client(address, timeout=timeout)
        except BaseException as error:  # noqa: BLE001 - reported below, in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=attempt, name="abd-joints-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 5.0)
    if thread.is_alive():
        raise OSError(f"no answer within {timeout:g} s: not a Dask scheduler, or one that does not respond")
    error = outcome.get("error")
    if error is None:
        return outcome["client"]
    if isinstance(error, OSError):
        raise error
    if isinstance(error, MemoryError):
        raise OSError("its reply is not a Dask scheduler's") from None
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    raise OSError(f"{type(error).__name__}: {first}") from None


class WarmUp(WorkerPlugin):
    """Run ``python -m abd_addon.batch --warm-up`` once on each worker, before its first task (and
    on each worker that joins later). Registered under one name with ``idempotent``, so a second
    :func:`bake_on_cluster` on the same cluster does not warm its workers again. The outcome,
    ``(exit status, seconds, last line of output)``, is kept in :attr:`outcome`."""

    name = "abd-joints-warm-up"
    idempotent = True

    def __init__(self, python: str, repository: str = REPOSITORY):
        self.python, self.repository, self.outcome = python, repository, None

    async def setup(self, worker):
        """Run the warm-up in a subprocess, awaited (the worker's event loop keeps serving meanwhile)."""
        started = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                self.python, "-m", "abd_addon.batch", "--warm-up", cwd=self.repository,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            output, _ = await process.communicate()
            status, text = process.returncode, output.decode(errors="replace").strip()
        except OSError as error:
            status, text = 127, str(error)
        last = text.splitlines()[-1] if text else ""
        self.outcome = (status, round(time.perf_counter() - started, 3), last)
        if status != 0:
            logging.getLogger("distributed.worker").warning(
                "abd-joints: the warm-up failed (exit status %s: %s); bakes compile the solver", status, last)


def check_inputs(blends: list, options: list) -> tuple:
    """``(blends, options)`` with absolute paths, for workers whose working folder is the repository.

    Raises:
        ValueError: no input, an option of :data:`REFUSED_OPTIONS` (each task bakes one file: use
            ``--out-dir``, ``--trajectory-dir``, ``--from-trajectory-dir``), or two inputs with the
            same file name (their outputs would be written to one path).
    """
    blends, options = [os.fspath(blend) for blend in blends], [os.fspath(option) for option in options]
    if not blends:
        raise ValueError("a .blend file is required")
    refused = [option for option in options if option.split("=", 1)[0] in REFUSED_OPTIONS]
    if refused:
        raise ValueError(f"{refused[0].split('=', 1)[0]} cannot be given to each file's task; on a cluster each "
                         "file is a task of its own: use --out-dir, --trajectory-dir, --from-trajectory-dir")
    names = [Path(blend).stem for blend in blends]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"two inputs are named {twice[0]}: their outputs would be written to the same path")
    absolute = []
    for k, option in enumerate(options):
        flag, equals, value = option.partition("=")
        if equals and flag in PATH_OPTIONS:  # --out-dir=DIR
            option = f"{flag}={os.path.abspath(value)}"
        elif k and options[k - 1] in PATH_OPTIONS:  # --out-dir DIR
            option = os.path.abspath(option)
        absolute.append(option)
    return [os.path.abspath(blend) for blend in blends], absolute


def bake_on_cluster(scheduler, blends: list, options: list = (), python: str | None = None,
                    repository: str = REPOSITORY, progress: bool | None = None, on_result=None,
                    connect_timeout: float = CONNECT_TIMEOUT, worker_wait: float = WORKER_WAIT) -> list:
    """Bake each of ``blends`` as one task on a Dask cluster; return the results in input order.

    ``scheduler`` is the scheduler's address (``tcp://host:8786``) or a ``distributed.Client`` (or
    anything ``Client`` accepts, a ``LocalCluster`` say). ``options`` are the batch command's
    options for every file (``["--out-dir", "baked", "--device", "cpu"]``). The workers run
    ``python -m abd_addon.batch`` (:func:`batch_command`) with the interpreter ``python`` (default:
    this one's path) from the checkout ``repository`` (default: this one): a farm whose machines
    share one image, or one file system, has both at the same paths. ``progress``: a bar of
    finished files on stderr (tqdm; None: when stderr is a terminal). ``on_result(result)`` is
    called as each file finishes. Results are :func:`file_result`'s dicts; a task that could not
    run (no such interpreter on the worker, the worker lost) has ``ok`` False and the reason.
    Ctrl+C cancels the files not yet started (a bake already running finishes on its worker).
    The scheduler has ``connect_timeout`` s to answer (:func:`connect`); where no worker has
    joined it after ``worker_wait`` s, a line on stderr says so, and the files are baked as
    workers join. Each task holds a lock on its file while it bakes (:data:`BAKE_LAUNCHER`): a task
    Dask reruns after losing its worker refuses while the first bake still runs, and that bake
    ends with its worker (on Linux).

    Raises:
        ValueError: bad inputs (:func:`check_inputs`).
        OSError: the scheduler cannot be reached or is not one (:func:`connect`).
    """
    blends, options = check_inputs(list(blends), list(options))
    python = python or sys.executable
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugin: the workers need not import this
    own = not isinstance(scheduler, Client)
    client = connect(str(scheduler), connect_timeout) if own else scheduler
    futures = []
    try:
        client.register_plugin(WarmUp(python, repository))
        # subprocess.run itself is the task: a fresh process per file, and nothing of ours to unpickle.
        futures = [client.submit(subprocess.run, task_command(blend, options, python), cwd=repository,
                                 capture_output=True, text=True, stdin=subprocess.DEVNULL, pure=False)
                   for blend in blends]
        try:
            client.wait_for_workers(1, timeout=worker_wait)
        except (TimeoutError, asyncio.TimeoutError):
            print(f"waiting for workers: none has joined the scheduler at {client.scheduler.address} in "
                  f"{worker_wait:g} s; the files are baked as workers join (Ctrl+C cancels)", file=sys.stderr,
                  flush=True)
        order = {future.key: k for k, future in enumerate(futures)}
        results = [None] * len(blends)
        with tqdm(total=len(blends), unit="file", desc="baking", file=sys.stderr,
                  disable=None if progress is None else not progress) as bar:
            for future in as_completed(futures):
                k = order[future.key]
                try:
                    done = future.result()
                    result = file_result(blends[k], done.returncode, done.stdout, done.stderr)
                except Exception as error:  # noqa: BLE001 - the task could not run, or its worker was lost
                    result = file_result(blends[k], None, stderr=f"error: {blends[k]}: {type(error).__name__}: {error}")
                results[k] = result
                bar.update(1)
                if on_result is not None:
                    on_result(result)
        return results
    except BaseException:
        if futures:
            client.cancel(futures)
        raise
    finally:
        if own:
            client.close()


def bake_from_command_line(args) -> int:
    """``python -m abd_addon.batch ... --scheduler ADDRESS``: the batch's parsed ``args`` baked on
    the cluster; prints what the batch prints (a summary line per file on stdout, ``error:`` lines
    and the count on stderr) and returns its exit status: 0 when every file was baked, 1 otherwise
    (or when the cluster cannot be used), 130 after Ctrl+C."""
    options = []
    for flag, value in (("--out-dir", args.out_dir), ("--trajectory-dir", args.trajectory_dir),
                        ("--from-trajectory-dir", args.from_trajectory_dir),
                        ("--export-scene-dir", args.export_scene_dir), ("--scene", args.scene),
                        ("--device", args.device)):
        if value is not None:
            options += [flag, value]
    options += [flag for flag, on in (("--in-place", args.in_place), ("--allow-unconverged", args.allow_unconverged))
                if on]

    def report(result: dict) -> None:
        if result["ok"] and result["summary"]:
            tqdm.write(" ".join(f"{key}={value}" for key, value in result["summary"].items()), file=sys.stdout)
        else:
            tqdm.write(f"error: {result['error']}", file=sys.stderr)
        for warning in result["warnings"]:
            tqdm.write(warning, file=sys.stderr)
        sys.stdout.flush()

    try:
        results = bake_on_cluster(args.scheduler, args.blend, options, progress=True if args.progress else None,
                                  on_result=report)
    except (OSError, ValueError) as error:
        print(f"error: cannot bake on the Dask cluster at {args.scheduler}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cancelled: the files not yet started are not baked (bakes already running finish on their "
              "workers)", file=sys.stderr)
        return 130
    failures = sum(not result["ok"] for result in results)
    verb = "exported" if args.export_scene_dir is not None else "baked"
    print(f"{verb} {len(results) - failures} of {len(results)} files on the cluster", file=sys.stderr)
    return 1 if failures else 0
