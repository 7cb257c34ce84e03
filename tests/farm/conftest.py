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
