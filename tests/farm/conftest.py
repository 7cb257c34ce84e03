"""Farm tests: the batch bake driven by Dask, Open Job Description and a Flamenco job type.

This process never imports ``bpy`` (what the farms' submitting side must not do either): every
Blender step (building the example rigs, baking, reading the baked keys back) runs in a
subprocess under ``timeout``. The Blender user folder is a scratch folder, and the solver's
Numba cache is the repository's ``build/cache`` (as the add-on tests and the demo use), so a
warm-up on the workers loads the kernels the other suites compiled.
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


@pytest.fixture(scope="session")
def shots(tmp_path_factory):
    """``drawer.blend`` and ``door.blend`` (the examples, FRAMES frames, unbaked) and
    ``broken.blend`` (not a .blend file) in one folder."""
    folder = tmp_path_factory.mktemp("shots")
    for name in ("drawer", "door"):
        result = run(sys.executable, ROOT / "examples" / f"{name}.py", "--out", folder / f"{name}.blend",
                     "--frames", FRAMES)
        assert result.returncode == 0, result.stderr[-2000:]
    (folder / "broken.blend").write_bytes(b"BLENDER-v405 this is not a blend file" * 10)
    return folder


@pytest.fixture(scope="session")
def one_process(shots, tmp_path_factory):
    """The keys of :func:`shots` baked by the one-process batch (exit status 1: broken.blend), as
    :func:`baked_keys` gives them: what every farm's bake must equal."""
    out = tmp_path_factory.mktemp("one_process")
    result = run(sys.executable, "-m", "abd_addon.batch", *(shots / name for name in NAMES), "--out-dir", out)
    assert result.returncode == 1 and "baked 2 of 3 files" in result.stderr, result.stderr[-2000:]
    return baked_keys(out / "drawer.blend", out / "door.blend")


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
