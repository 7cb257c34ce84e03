"""The extension registers and unregisters cleanly, loaded as Blender loads an extension."""

from __future__ import annotations

import os
from pathlib import Path

import addon_utils
import bpy
from abd_rigs import PACKAGE

PANELS = (
    "PHYSICS_PT_abd_body", "PHYSICS_PT_abd_body_velocity", "PHYSICS_PT_abd_body_soft_transform",
    "PHYSICS_PT_abd_joint", "PHYSICS_PT_abd_joint_limits", "PHYSICS_PT_abd_joint_drive",
    "PHYSICS_PT_abd_world", "PHYSICS_PT_abd_world_solver", "PHYSICS_PT_abd_bake", "VIEW3D_PT_abd", "VIEW3D_PT_abd_bake",
)
OPERATORS = (
    "body_add", "body_remove", "connect", "bake", "bake_free", "export_scene", "apply_trajectory", "compile_solver",
)
POINTERS = ((bpy.types.Object, "abd_body"), (bpy.types.Object, "abd_joint"), (bpy.types.Object, "abd_bake"),
            (bpy.types.Scene, "abd_world"))


def _registered() -> dict:
    return {
        "panels": [name for name in PANELS if hasattr(bpy.types, name)],
        "operators": [name for name in OPERATORS if hasattr(bpy.types, "ABD_OT_" + name)],
        "pointers": [name for owner, name in POINTERS if name in owner.bl_rna.properties],
    }


def test_loaded_as_an_extension(extension, addon, solver):
    assert extension.__name__ == PACKAGE
    assert PACKAGE in bpy.context.preferences.addons
    assert addon.__name__ == PACKAGE + ".abd_addon"
    # The solver is reached by relative import, inside the extension's package.
    assert solver.__name__ == PACKAGE + ".solver"
    assert addon.bake.export.validate_scene.__module__ == PACKAGE + ".solver.scene_validation"


def test_everything_registered():
    registered = _registered()
    assert registered["panels"] == list(PANELS)
    assert registered["operators"] == list(OPERATORS)
    assert registered["pointers"] == [name for _owner, name in POINTERS]
    assert bpy.ops.abd.bake.idname() == "ABD_OT_bake"


def test_unregister_removes_everything_and_register_restores(addon):
    cube = bpy.data.objects["Cube"]
    cube.abd_body.enabled = True
    cube.abd_body.kappa = 12345.0
    addon_utils.disable(PACKAGE, default_set=True)
    try:
        assert _registered() == {"panels": [], "operators": [], "pointers": []}
        assert PACKAGE not in bpy.context.preferences.addons
    finally:
        module = addon_utils.enable(PACKAGE, default_set=True, handle_error=lambda error: (_ for _ in ()).throw(error))
    assert module is not None
    registered = _registered()
    assert len(registered["panels"]) == len(PANELS) and len(registered["operators"]) == len(OPERATORS)
    # The values stored in the .blend data come back with the classes.
    assert cube.abd_body.enabled and cube.abd_body.kappa == 12345.0


def test_numba_cache_dir_in_the_extension_user_folder(addon, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("ABD_JOINTS_CACHE_DIR", raising=False)
    addon.configure_numba_cache()
    path = Path(os.environ["ABD_JOINTS_CACHE_DIR"])
    assert path.is_dir()
    if hasattr(os, "getuid"):  # a folder of this user that no one else can write: the solver trusts it
        assert not path.stat().st_mode & 0o077
    assert path.name == "cache"
    assert Path(os.environ["BLENDER_USER_RESOURCES"]) in path.parents


def test_no_viewport_overlay_in_background(addon):
    assert bpy.app.background
    assert addon.overlay._handles == []
