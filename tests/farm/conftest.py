"""Farm tests: the batch bake driven by Dask, Open Job Description and a Flamenco job type.

This process never imports ``bpy`` (what the farms' submitting side must not do either): every
Blender step (building the example rigs, baking, reading the baked keys back) runs in a
subprocess under ``timeout`` (``farm_jobs.py``).
"""

from __future__ import annotations

import sys

import pytest
from farm_jobs import FRAMES, NAMES, ROOT, baked_keys, run


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
