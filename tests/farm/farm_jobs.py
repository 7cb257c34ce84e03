"""What the farm tests share: the repository root, the example files' names, and running and
reading back Blender steps in subprocesses (this process never imports ``bpy``).

Importing it points ``BLENDER_USER_RESOURCES`` at a scratch folder and ``ABD_JOINTS_CACHE_DIR``
(unless set) at the repository's ``build/cache``, as the add-on tests and the demo use, so the
workers' warm-up loads the kernels the other suites compiled; subprocesses and Dask's worker
processes inherit both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a Blender subprocess may take (a fresh checkout compiles the solver's kernels first).
TIMEOUT = 420
#: Frames of the example rigs baked here (their own length is longer: kept short for CI).
FRAMES = 12
#: The files of :func:`shots`, in the order they are baked.
NAMES = ("drawer.blend", "broken.blend", "door.blend")

os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="abd_farm_tests_")
os.environ.setdefault("ABD_JOINTS_CACHE_DIR", str(ROOT / "build" / "cache"))


def run(*command, **kwargs) -> subprocess.CompletedProcess:
    """``command`` from the repository root under ``timeout``, output captured as text."""
    full = ["timeout", "-k", "10", str(TIMEOUT), *map(str, command)]
    return subprocess.run(full, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT + 30, **kwargs)


def baked_keys(*paths) -> dict:
    """The keyframes of the baked files, read back in a Blender subprocess (``blend_keys.py``)."""
    result = run(sys.executable, Path(__file__).with_name("blend_keys.py"), *paths)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_same_keys(keys: dict, expected: dict) -> None:
    """The same files (by name), objects and F-curves, with equal keys (to float32 round-off)."""
    assert [Path(path).name for path in keys] == [Path(path).name for path in expected]
    for (path, curves), expected_curves in zip(keys.items(), expected.values()):
        assert curves.keys() == expected_curves.keys(), path
        for name, channels in curves.items():
            assert channels.keys() == expected_curves[name].keys(), (path, name)
            for channel, values in channels.items():
                assert values == pytest.approx(expected_curves[name][channel], abs=1e-6), (path, name, channel)
    assert all(len(curves) >= 2 for curves in keys.values())  # each rig keys two objects or more
