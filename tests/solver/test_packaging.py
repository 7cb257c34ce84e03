"""The solver as a package of its own (pyproject.toml), for render-farm nodes without Blender: its
wheel holds the solver and nothing else, carries the extension's version and the solver's
dependencies, and once installed runs a scene file from outside the repository. And the packages
the extension bundles (tools/build_extension.py) are enough for the URDF importer's mesh formats."""

from __future__ import annotations

import email
import importlib.util
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
#: Each test builds or installs the wheel: left to ``make test`` (docs/testing.md).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The solver's wheel, built from a copy of the files pyproject.toml uses (setuptools builds
    in the source tree; the checkout stays clean)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "LICENSE"):
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
    assert "solver/urdf/importer.py" in names and "solver/urdf/command.py" in names
    assert "solver/mjcf/importer.py" in names and "solver/mjcf/command.py" in names
    left_out = ("abd_addon", "tests", "benchmarks", "examples", "tools")
    assert not [name for name in names if name.split("/")[0] in left_out]
    (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    metadata = email.message_from_bytes(zipfile.ZipFile(wheel).read(metadata_name))
    manifest = tomllib.loads((REPO / "blender_manifest.toml").read_text(encoding="utf-8"))
    assert metadata["Name"] == "abd-joints-solver" and metadata["Version"] == manifest["version"]
    required = {requirement.split(">")[0].split(";")[0].strip() for requirement in metadata.get_all("Requires-Dist")}
    assert {"numpy", "scipy", "numba", "threadpoolctl"} <= required
    assert "solver/uipc_backend.py" in names
    assert metadata.get_all("Provides-Extra") and "uipc" in metadata.get_all("Provides-Extra")
    assert 'pyuipc==0.0.29; extra == "uipc"' in metadata.get_all("Requires-Dist")
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


BUNDLED_ONLY = r'''
import importlib.machinery, json, sys, warnings

ALLOWED = set(json.loads(sys.argv[1]))


class BundledOnly(importlib.machinery.PathFinder):
    """Blender's Python: the standard library, numpy and the extension's wheels; other packages
    of this venv are not found (optional ones, such as Pillow, are then skipped as there)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is None and name not in ALLOWED and name not in sys.stdlib_module_names:
            return None
        return super().find_spec(name, path, target)


sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = BundledOnly
from solver.urdf import import_urdf

warnings.simplefilter("ignore")
for path in sys.argv[2:]:
    result = import_urdf(path, load_visuals=True)
    print("RESULT", len(result.bodies), sum(len(body.visuals) for body in result.bodies), flush=True)
'''

#: A closed tetrahedron with texture coordinates and a textured material, as exported by Blender
#: (pybullet_data's laikago meshes): trimesh gives it a textured material, which needs Pillow.
TEXTURED_OBJ = """mtllib part.mtl
v 0 0 0
v 0.1 0 0
v 0 0.1 0
v 0 0 0.1
vt 0 0
vt 1 0
vt 0 1
usemtl skin
f 1/1 3/3 2/2
f 1/1 2/2 4/3
f 1/1 4/3 3/3
f 2/2 3/3 4/1
"""


def test_the_urdf_importer_reads_dae_and_textured_obj_meshes_with_the_bundled_packages_alone(tmp_path):
    """In Blender the URDF importer has the wheels tools/build_extension.py bundles, numpy and the
    standard library, nothing else: no Pillow and, before, no pycollada. A COLLADA mesh (trimesh
    needs pycollada for it) and an OBJ with texture coordinates (trimesh's default texture image
    needs Pillow) failed there with ImportError; a subprocess that can import nothing else reads
    both, as collision and as visual meshes."""
    import trimesh
    from importlib.metadata import packages_distributions
    from packaging.utils import canonicalize_name

    spec = importlib.util.spec_from_file_location("build_extension", REPO / "tools" / "build_extension.py")
    build_extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_extension)
    bundled = {canonicalize_name(requirement.split("==")[0])
               for requirement in build_extension.WHEEL_REQUIREMENTS + build_extension.PURE_WHEEL_REQUIREMENTS}
    allowed = ["solver"] + [module for module, distributions in packages_distributions().items()
                            if {canonicalize_name(name) for name in distributions} & (bundled | {"numpy"})]
    (tmp_path / "part.dae").write_bytes(trimesh.creation.box(extents=(0.1, 0.2, 0.3)).export(file_type="dae"))
    (tmp_path / "part.obj").write_text(TEXTURED_OBJ)
    (tmp_path / "part.mtl").write_text("newmtl skin\nKd 1 1 1\nmap_Kd skin.png\n")
    paths = []
    for mesh in ("part.dae", "part.obj"):
        path = tmp_path / f"{mesh}.urdf"
        geometry = f'<geometry><mesh filename="{mesh}"/></geometry>'
        path.write_text(f'<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" '
                        f'ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial><collision>{geometry}</collision>'
                        f'<visual>{geometry}</visual></link></robot>')
        paths.append(str(path))
    ran = subprocess.run([sys.executable, "-c", BUNDLED_ONLY, json.dumps(allowed), *paths], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert [line for line in ran.stdout.splitlines() if line.startswith("RESULT")] == ["RESULT 1 1"] * 2
