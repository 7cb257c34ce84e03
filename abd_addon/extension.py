"""Where the extension lives: its package name, its folder, and the solver's cache folder in it.

Imported by the package's ``__init__`` and by the modules that start or run the solver's warm-up;
it imports nothing of the add-on, so that none of them imports the package back.
"""

from __future__ import annotations

import os


def extension_package() -> str:
    """The extension's package name (``bl_ext.<repo>.abd_joints``): the parent of this package."""
    return __package__.rpartition(".")[0]


def extension_root():
    """The folder of :func:`extension_package` (the one holding ``solver/``), a ``Path`` as
    imported, not resolved: Numba keys its cache on the source path as imported (symlinks included)."""
    from pathlib import Path

    return Path(os.path.abspath(__file__)).parents[1]


def configure_numba_cache() -> None:
    """Point the solver's cache base (``ABD_JOINTS_CACHE_DIR``) at the extension's user folder.

    Must run before the solver is imported; an installed extension's own folder may be
    read-only. The folder is made private to the user (mode 0700), as the solver's cache checks
    require. The solver puts Numba's cache in a sub-folder named after its own import name
    (see ``solver.numba_cache.choose_folder``). Kept when ``ABD_JOINTS_CACHE_DIR`` or
    ``NUMBA_CACHE_DIR`` is already set; outside an extension (no user folder) the solver's
    default is kept.
    """
    if os.environ.get("ABD_JOINTS_CACHE_DIR") or os.environ.get("NUMBA_CACHE_DIR"):
        return
    import bpy

    try:
        path = bpy.utils.extension_path_user(extension_package(), path="cache", create=False)
    except Exception:  # noqa: BLE001 - not loaded as an extension: keep the solver's default
        return
    from ..solver.numba_cache import folder_problem  # the standard library only

    # Made private (0700) where missing, not with Blender's umask modes: a cache folder others can
    # write is refused when the solver uses it (solver.numba_cache), which then says why.
    folder_problem(path, path)
    os.environ["ABD_JOINTS_CACHE_DIR"] = path
