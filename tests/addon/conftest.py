"""Add-on tests on the ``bpy`` wheel, with the repository loaded as a user's Blender loads it.

- ``BLENDER_USER_RESOURCES`` points at a scratch folder, so nothing touches ``~/.config/blender``.
- The repository is an *extension repository*: a folder holding a symlink ``abd_joints`` ->
  the checkout, added with ``preferences.extensions.repos.new(..., source='USER')``, and the
  extension is enabled with ``addon_utils.enable("bl_ext.abd_dev.abd_joints")``. Nothing puts
  ``abd_addon`` on ``sys.path``.
- Every test starts from a fresh default scene (``read_homefile``; ``read_factory_settings``
  would disable the extension).
- bpy 4.5.15 can deadlock at interpreter exit while Python callbacks are registered, so the
  session ends with ``os._exit(status)`` after pytest has written everything.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SCRATCH = Path(tempfile.mkdtemp(prefix="abd_addon_tests_"))
os.environ["BLENDER_USER_RESOURCES"] = str(_SCRATCH / "blender_user")
# A stable Numba cache (the solver's kernels compile once, not once per session).
os.environ.setdefault("ABD_JOINTS_CACHE_DIR", str(ROOT / "build" / "cache"))
# The extension repository: a stable folder (Numba's cache is keyed by source path) with a
# symlink named after the extension id pointing at the checkout.
DEV_REPO = Path(tempfile.gettempdir()) / f"abd_joints_dev_repo_{os.getuid()}"

import bpy  # noqa: E402  (after BLENDER_USER_RESOURCES)
from abd_rigs import PACKAGE, REPO_MODULE  # noqa: E402


def _link_dev_repo() -> None:
    DEV_REPO.mkdir(exist_ok=True)
    link = DEV_REPO / "abd_joints"
    if link.is_symlink() and Path(os.readlink(link)) == ROOT:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(ROOT, target_is_directory=True)
    except FileExistsError:  # a concurrent session made it
        pass


def _raise(error):
    raise error


@pytest.fixture(scope="session", autouse=True)
def extension():
    """The enabled extension's root module ``bl_ext.abd_dev.abd_joints`` (disabled at the end)."""
    import addon_utils

    _link_dev_repo()
    repos = bpy.context.preferences.extensions.repos
    if REPO_MODULE not in [repo.module for repo in repos]:
        repos.new(name=REPO_MODULE, module=REPO_MODULE, custom_directory=str(DEV_REPO), source="USER")
    module = addon_utils.enable(PACKAGE, default_set=True, handle_error=_raise)
    assert module is not None, f"could not enable {PACKAGE}"
    yield module
    addon_utils.disable(PACKAGE, default_set=True)


@pytest.fixture(scope="session")
def addon(extension):
    """The extension's ``abd_addon`` package (``bake.export``, ``bake.rig_rules``, ``bake.bake``, ``batch``, ...
    submodules)."""
    import importlib

    package = importlib.import_module(PACKAGE + ".abd_addon")
    for name in ("bake.export", "bake.rig_rules", "gpu_advice", "bake.bake", "operators", "overlay", "batch",
                 "properties", "rig"):
        importlib.import_module(f"{PACKAGE}.abd_addon.{name}")
    return package


@pytest.fixture(scope="session")
def solver(extension):
    """The solver package as the extension sees it (``bl_ext.abd_dev.abd_joints.solver``)."""
    import importlib

    return importlib.import_module(PACKAGE + ".solver")


@pytest.fixture(autouse=True)
def fresh_scene(extension):
    """Each test starts from the default scene (the extension stays enabled)."""
    bpy.ops.wm.read_homefile(app_template="")
    yield
    bpy.ops.wm.read_homefile(app_template="")


@pytest.fixture
def tmp_blend(tmp_path):
    """A path for a .blend file in the test's tmp folder."""
    return tmp_path / "scene.blend"


_exit_status = 0


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Leave with ``os._exit`` so bpy 4.5.15's exit-time deadlock cannot hang the run
    (docs/testing.md, "The bpy wheel")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)
