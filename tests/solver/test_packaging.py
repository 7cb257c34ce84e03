"""The solver as a package of its own (pyproject.toml), for render-farm nodes without Blender: its
wheel holds the solver and nothing else, carries the extension's version and the solver's
dependencies, and once installed runs a scene file from outside the repository."""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import scenes

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The solver's wheel, built from a copy of the files pyproject.toml uses (setuptools builds
    in the source tree; the checkout stays clean)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "solver", source / "solver", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(out), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (path,) = out.glob("abd_joints_solver-*.whl")
    return path


def test_the_wheel_holds_the_solver_alone_with_its_version_and_dependencies(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "solver/__main__.py" in names and "solver/constitutions/revolute_joint.py" in names
    assert not [name for name in names if name.split("/")[0] in ("abd_addon", "tests", "benchmarks", "examples", "tools")]
    (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    metadata = email.message_from_bytes(zipfile.ZipFile(wheel).read(metadata_name))
    manifest = tomllib.loads((REPO / "blender_manifest.toml").read_text(encoding="utf-8"))
    assert metadata["Name"] == "abd-joints-solver" and metadata["Version"] == manifest["version"]
    required = {requirement.split(">")[0].split(";")[0].strip() for requirement in metadata.get_all("Requires-Dist")}
    assert {"numpy", "scipy", "numba", "threadpoolctl"} <= required
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "abd-solver = solver.__main__:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_solver_runs_a_scene_file_outside_the_repository(wheel, tmp_path):
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    scene_path = tmp_path / "pendulum.json"
    scene_path.write_text(json.dumps(scenes.revolute_pendulum_scene(frame_count=3)), encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=str(target), ABD_JOINTS_CACHE_DIR=str(tmp_path / "cache"))
    ran = subprocess.run([sys.executable, "-m", "solver", "run", str(scene_path), "--quiet"], cwd=tmp_path,
                         env=environment, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (tmp_path / "pendulum.npz").is_file()
    where = subprocess.run([sys.executable, "-c", "import solver; print(solver.__file__)"], cwd=tmp_path,
                           env=environment, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(target)  # the installed copy ran, not the checkout's
