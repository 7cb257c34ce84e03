"""The built extension zip installs and enables in the bpy module, as a user would install it.

The zip is built (``tools/build_extension.py``, linux-x64 only) once per session into a tmp
folder; the bundled wheels (the solver's numba, llvmlite, scipy and threadpoolctl, and the URDF
importer's yourdfpy, trimesh, six, lxml, pycollada, python-dateutil and tzdata) come from
``wheels/`` or are downloaded from PyPI.
Without them the tests skip with the reason. The install runs in a subprocess with its own
``BLENDER_USER_RESOURCES``, so it cannot clash with the extension this session has enabled;
there every bundled package may only come from the extension's unpacked wheels (Blender itself
ships numpy, nothing else of ours). A static test checks that every third-party import of the
extension's code is bundled or shipped by Blender.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
from abd_rigs import ROOT

#: What Blender itself provides to an extension's code: its own modules and numpy.
BLENDER_SHIPS = {"bpy", "bpy_extras", "bmesh", "mathutils", "gpu", "gpu_extras", "blf", "addon_utils", "numpy"}
#: The NumPy of the oldest Blender the manifest admits (4.2: 1.24.3, from Blender's
#: build_files/build_environment/cmake/versions.cmake) and of the one the tests run (4.5: 1.26.4).
BLENDER_NUMPY = ("1.24.3", "1.26.4")
#: Optional packages the user installs to use a feature (the GPU paths: CuPy, libuipc; the MJCF
#: import: MuJoCo), imported only inside the function that needs them, so that the extension loads
#: without them.
OPTIONAL = {"cupy", "cupyx", "uipc", "mujoco"}

INSTALL_SCRIPT = r'''
import importlib.machinery, json, os, sys
import bpy, addon_utils
result = {}
zip_path = sys.argv[1]
site = os.path.join(os.environ["BLENDER_USER_RESOURCES"], "extensions", ".local", "lib",
                    "python%d.%d" % sys.version_info[:2], "site-packages")


class BundledOnly:
    """The bundled packages come from the extension's unpacked wheels, never the venv."""

    def find_spec(self, name, path=None, target=None):
        if path is None and name in ("numba", "llvmlite", "scipy", "threadpoolctl", "yourdfpy", "trimesh", "lxml",
                                     "six", "collada", "dateutil", "tzdata", "ipctk"):
            spec = importlib.machinery.PathFinder.find_spec(name, [site])
            if spec is None:
                raise ModuleNotFoundError(f"{name} is not in the extension's site-packages", name=name)
            return spec
        return None


sys.meta_path.insert(0, BundledOnly())
status = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
result["install"] = sorted(status)
name = "bl_ext.user_default.abd_joints"
result["enabled"] = name in bpy.context.preferences.addons
result["registered"] = all(hasattr(bpy.types, n) for n in ("ABD_OT_bake", "PHYSICS_PT_abd_joint")) \
    and "abd_body" in bpy.types.Object.bl_rna.properties
BUNDLED = ("numba", "llvmlite", "scipy", "threadpoolctl.py", "lxml", "trimesh", "yourdfpy", "six.py", "ipc")
result["bundled"] = sorted(n for n in os.listdir(site) if n in BUNDLED) if os.path.isdir(site) else []
# A tiny bake through the operator: one falling cube, two frames.
bpy.ops.wm.read_homefile(app_template="")
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 3
cube = bpy.data.objects["Cube"]
for ob in bpy.context.view_layer.objects:
    ob.select_set(ob == cube)
bpy.ops.abd.body_add()
result["bake"] = sorted(bpy.ops.abd.bake())
scene.frame_set(3)
result["drop"] = -cube.matrix_world.translation.z
result["solver"] = sys.modules[name + ".solver"].__file__
import numba.core.config
result["numba_cache"] = numba.core.config.CACHE_DIR
# File > Import > URDF as ABD Rig works in the installed extension.
import pybullet_data
before = len(bpy.data.objects)
cartpole = os.path.join(pybullet_data.getDataPath(), "cartpole.urdf")
result["urdf"] = sorted(bpy.ops.import_scene.abd_urdf(filepath=cartpole))
result["urdf_objects"] = len(bpy.data.objects) - before
result["urdf_packages"] = [sys.modules[n].__file__ for n in ("yourdfpy", "trimesh", "lxml.etree", "six")]
result["solver_packages"] = [sys.modules[n].__file__ for n in ("numba", "llvmlite", "scipy.linalg", "threadpoolctl")]
addon_utils.disable(name, default_set=True)
result["disabled"] = "abd_body" not in bpy.types.Object.bl_rna.properties
print("RESULT " + json.dumps(result))
sys.stdout.flush()
os._exit(0)
'''


@pytest.fixture(scope="session")
def built_zip(tmp_path_factory):
    """Build the linux-x64 zip into a tmp folder; skip when the wheels cannot be had."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the install test builds the linux-x64 zip")
    output = tmp_path_factory.mktemp("dist")
    completed = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_extension.py"), "--platform", "linux-x64",
         "--output-dir", str(output)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    if completed.returncode != 0:
        if "pip download" in completed.stderr:
            pytest.skip("numba/llvmlite wheels unavailable (no wheels/ and no PyPI): "
                        f"{completed.stderr.strip()[-300:]}")
        pytest.fail(f"build failed:\n{completed.stdout}\n{completed.stderr}")
    zips = sorted(output.glob("abd_joints-*-linux_x64.zip"))
    assert len(zips) == 1, completed.stdout
    return zips[0]


def test_zip_contents(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert "abd_addon/bake.py" in names and "solver/simulation.py" in names
    wheels = [n for n in names if n.startswith("wheels/")]
    assert sorted(n.split("/")[1].split("-")[0] for n in wheels) == [
        "ipctk", "llvmlite", "lxml", "numba", "pycollada", "python_dateutil", "scipy", "six", "threadpoolctl",
        "trimesh", "tzdata", "yourdfpy"]
    assert all("x86_64" in n or n.endswith("-none-any.whl") for n in wheels)
    left_out = ("tests/", ".venv/", "build/", "dist/", "tools/", "docs/", "examples/", "benchmarks/")
    assert not [n for n in names if n.startswith(left_out)]
    assert not [n for n in names if "__pycache__" in n or n.startswith(".")]
    manifest = zipfile.ZipFile(built_zip).read("blender_manifest.toml").decode()
    assert 'id = "abd_joints"' in manifest and 'blender_version_min = "4.2.0"' in manifest
    # The cp311 wheels need Blender's Python 3.11: 4.2 to 5.0 (5.1 and later embed 3.13).
    assert 'blender_version_max = "5.1.0"' in manifest
    assert all("-cp311-" in n or n.endswith("-none-any.whl") for n in wheels)
    assert "numpy" not in " ".join(wheels)


def test_bundled_wheels_accept_the_numpy_blender_ships(built_zip):
    """Blender unpacks the wheels without resolving their requirements, so a wheel that needs a
    newer NumPy than the user's Blender ships fails only at import there (SciPy 1.16+ on Blender
    4.2: 'No module named numpy.exceptions'). Every bundled wheel's NumPy requirement must admit
    the NumPy of each Blender the manifest admits."""
    import io

    from packaging.requirements import Requirement

    checked = []
    with zipfile.ZipFile(built_zip) as extension:
        for name in (n for n in extension.namelist() if n.startswith("wheels/") and n.endswith(".whl")):
            with zipfile.ZipFile(io.BytesIO(extension.read(name))) as wheel:
                metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
                for line in wheel.read(metadata).decode().splitlines():
                    if not line.startswith("Requires-Dist:"):
                        continue
                    requirement = Requirement(line.split(":", 1)[1].strip())
                    if requirement.name == "numpy" and requirement.marker is None:
                        for version in BLENDER_NUMPY:
                            assert requirement.specifier.contains(version), (name, str(requirement), version)
                        checked.append(name.split("/")[1].split("-")[0])
    assert {"numba", "scipy"} <= set(checked)  # the binary wheels that need NumPy were looked at


def test_zip_installs_and_enables_in_the_bpy_module(built_zip, tmp_path):
    env = dict(os.environ)
    env["BLENDER_USER_RESOURCES"] = str(tmp_path / "user")
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("ABD_JOINTS_CACHE_DIR", None)
    completed = subprocess.run(
        ["timeout", "-k", "10", "600", sys.executable, "-c", INSTALL_SCRIPT, str(built_zip)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=660,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0 and lines, completed.stdout[-2000:] + completed.stderr[-2000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["install"] == ["FINISHED"]
    assert result["enabled"] and result["registered"]
    # The wheels were unpacked for the extension (the URDF importer's too).
    assert result["bundled"] == ["ipc", "llvmlite", "lxml", "numba", "scipy", "six.py", "threadpoolctl.py", "trimesh",
                                 "yourdfpy"]
    assert result["urdf"] == ["FINISHED"] and result["urdf_objects"] == 5  # cartpole: 3 bodies, 2 joints
    assert all(path.startswith(env["BLENDER_USER_RESOURCES"])
               for path in result["urdf_packages"] + result["solver_packages"])
    assert result["numba_cache"].startswith(env["BLENDER_USER_RESOURCES"])
    assert re.search(r"abd_joints\.solver-[0-9a-f]{16}$", result["numba_cache"])  # per import name and version
    assert result["bake"] == ["FINISHED"]
    assert result["drop"] > 0.0  # the cube fell
    assert result["solver"].startswith(env["BLENDER_USER_RESOURCES"])  # the installed copy ran
    assert result["disabled"]


def load_build_extension():
    """tools/build_extension.py as a module (tools/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_extension", ROOT / "tools" / "build_extension.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheels_are_sorted_by_platform_and_no_macos_wheel_needs_more_than_macos_12():
    """numba's macOS wheels need macOS 12; a SciPy wheel for macOS 14 (Apple Accelerate) would not
    load on 12 or 13, so it is never taken, not even when an earlier build left it in wheels/."""
    wheel_platform = load_build_extension().wheel_platform
    assert wheel_platform("scipy-1.15.3-cp311-cp311-macosx_12_0_arm64.whl") == "macos-arm64"
    assert wheel_platform("scipy-1.15.3-cp311-cp311-macosx_14_0_arm64.whl") is None
    assert wheel_platform("lxml-6.1.3-cp311-cp311-macosx_10_9_universal2.whl") == "macos-arm64"
    assert wheel_platform("scipy-1.15.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl") == "linux-x64"
    assert wheel_platform("scipy-1.15.3-cp311-cp311-win_amd64.whl") == "windows-x64"
    assert wheel_platform("threadpoolctl-3.8.0-py3-none-any.whl") == "any"


def test_every_third_party_import_is_bundled_or_shipped_by_blender():
    """A package the extension's code imports that is neither in the standard library, nor shipped
    by Blender, nor bundled as a wheel would be missing in a user's Blender (the venv that runs
    these tests has it anyway, so only this check finds it)."""
    import ast

    build_extension = load_build_extension()
    bundled = {requirement.split("==")[0] for requirement in
               build_extension.WHEEL_REQUIREMENTS + build_extension.PURE_WHEEL_REQUIREMENTS}
    imported = {}
    sources = [ROOT / "__init__.py", *sorted((ROOT / "abd_addon").rglob("*.py")),
               *sorted((ROOT / "solver").rglob("*.py"))]
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                imported.setdefault(name.split(".")[0], path.relative_to(ROOT).as_posix())
                assert not (name.split(".")[0] in OPTIONAL and id(node) in top_level), \
                    f"{path.relative_to(ROOT)}: the optional {name} is imported at module level"
    third_party = {name: path for name, path in imported.items() if name not in sys.stdlib_module_names}
    missing = {name: path for name, path in third_party.items() if name not in bundled | BLENDER_SHIPS | OPTIONAL}
    assert not missing, f"imported but neither bundled nor shipped by Blender: {missing}"
    assert {"numba", "scipy"} <= set(third_party)  # the check sees the solver's imports


def test_solver_runs_with_the_oldest_numpy_blender_ships(built_zip, tmp_path):
    """The zip's solver and its bundled wheels, unpacked as Blender unpacks them (no dependency
    resolution) next to the NumPy of the oldest Blender the manifest admits, simulate a scene
    that uses every constitution. Skips when that NumPy cannot be had from PyPI."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    completed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                f"numpy=={BLENDER_NUMPY[0]}"], capture_output=True, text=True, timeout=900)
    if completed.returncode != 0:
        pytest.skip(f"numpy {BLENDER_NUMPY[0]} unavailable: {completed.stderr.strip()[-300:]}")
    extension = tmp_path / "extension"
    with zipfile.ZipFile(built_zip) as archive:
        archive.extractall(extension)
    wheels = sorted(str(path) for path in (extension / "wheels").glob("*.whl"))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index",
                    *wheels], check=True, capture_output=True, timeout=900)
    script = ("import numpy, scipy\n"
              "from solver import simulate\n"
              "from solver.warmup import warm_up_scene\n"
              "trajectory = simulate(warm_up_scene())\n"
              "print('RESULT', numpy.__version__, scipy.__version__, bool(trajectory.converged.all()))\n")
    env = dict(os.environ, PYTHONPATH=str(extension), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("ABD_JOINTS_CACHE_DIR", None)
    completed = subprocess.run([python, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=900)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0 and lines, completed.stdout[-2000:] + completed.stderr[-2000:]
    numpy_version, _, converged = lines[-1].split()[1:]
    assert numpy_version == BLENDER_NUMPY[0] and converged == "True"
