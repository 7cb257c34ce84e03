"""abd-joints solver: Affine Body Dynamics with joints, no Blender required.

Public API::

    scene = solver.load_scene("scene.json")          # -> Scene, raises SceneError
    trajectory = solver.simulate(scene, progress=cb)  # -> Trajectory, raises SolverError
    run = solver.Simulation(scene); run.advance(max_steps=4); run.transforms(run.frames_done)
    trajectory.save("result.npz")

Only relative imports are used inside this package, so it works both as the top-level package
``solver`` (``python -m solver``, the tests) and inside the Blender extension.
"""

from __future__ import annotations

import os as _os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `import solver` stays this light


def source_stamp(root: str | None = None) -> str:
    """Hex digest (16 characters) of a solver's sources: each ``.py`` file's path relative to
    ``root`` (default: this package's folder) and its contents. Names the Numba cache folder of
    this solver version (:func:`_configure_numba_cache`) and the add-on's warm-up marker
    (``abd_addon/warmup.py``), so the two agree on whether the cache is current."""
    import hashlib

    root = root or _os.path.dirname(_os.path.abspath(__file__))
    digest = hashlib.sha1()
    for folder, folders, files in sorted(_os.walk(root)):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = _os.path.join(folder, name)
                digest.update(_os.path.relpath(path, root).replace(_os.sep, "/").encode() + b"\0")
                with open(path, "rb") as source:
                    digest.update(source.read())
    return digest.hexdigest()[:16]


def _writable(folder: str) -> bool:
    """Whether ``folder`` exists (created if missing) and files can be created in it."""
    try:
        _os.makedirs(folder, exist_ok=True)
        probe = _os.path.join(folder, f".write-test-{_os.getpid()}")
        with open(probe, "w"):
            pass
        _os.remove(probe)
        return True
    except OSError:
        return False


def _is_private_folder(path: str) -> bool:
    """Whether ``path`` is a real folder (not a symbolic link) that only this user can write: owned
    by this user, with no write permission for group or others. Where the platform has no user ids
    (Windows, whose temporary folder is per user), any real folder counts."""
    import stat

    try:
        status = _os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(status.st_mode):
        return False
    return not hasattr(_os, "getuid") or (status.st_uid == _os.getuid() and not status.st_mode & 0o022)


def _private_temporary_folder(name: str) -> str:
    """This user's folder ``name`` for a copied cache: ``abd_joints-<uid>/numba/<name>`` in the
    temporary folder, made with mode 0700, or, when any folder of that path is not a private folder
    of this user (:func:`_is_private_folder`: another user's folder, a symbolic link, a folder
    others can write), ``numba/<name>`` in a new folder from :func:`tempfile.mkdtemp`.

    Raises:
        OSError: no folder can be created in the temporary folder.
    """
    import tempfile

    uid = _os.getuid() if hasattr(_os, "getuid") else 0
    root = _os.path.join(tempfile.gettempdir(), f"abd_joints-{uid}")
    folders = [root, _os.path.join(root, "numba"), _os.path.join(root, "numba", name)]
    for folder in folders:
        try:
            _os.mkdir(folder, 0o700)
        except OSError:
            pass
    if all(_is_private_folder(folder) for folder in folders):
        return folders[-1]
    folder = tempfile.mkdtemp(prefix=f"abd_joints-{uid}-")
    for part in ("numba", name):
        folder = _os.path.join(folder, part)
        _os.mkdir(folder, 0o700)
    return folder


def _copy_without_links(source: str, destination: str) -> None:
    """Copy the regular files and folders of ``source`` into ``destination`` (an existing private
    folder), skipping symbolic links in ``source``, and never writing through one in
    ``destination``: each file is written to a new name (created exclusively) and renamed over its
    destination, which replaces a link instead of following it. Files that cannot be copied
    are skipped (Numba compiles what it does not find)."""
    import shutil

    for entry in _os.scandir(source):
        target = _os.path.join(destination, entry.name)
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if not _is_private_folder(target):
                    if _os.path.lexists(target):
                        _os.remove(target)
                    _os.mkdir(target, 0o700)
                _copy_without_links(entry.path, target)
            elif entry.is_file():
                temporary = f"{target}.{_os.getpid()}.copy"
                descriptor = _os.open(temporary, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL
                                      | getattr(_os, "O_NOFOLLOW", 0), 0o600)
                try:
                    with open(entry.path, "rb") as reader, _os.fdopen(descriptor, "wb") as writer:
                        shutil.copyfileobj(reader, writer)
                    _os.replace(temporary, target)
                except BaseException:
                    _os.remove(temporary)
                    raise
        except OSError:
            continue


def cache_base() -> str:
    """The folder that holds the solver's compiled kernels (in ``numba/``) and the add-on's warm-up
    markers: ``$ABD_JOINTS_CACHE_DIR``, else ``abd_joints`` in the user cache folder
    (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    return _os.environ.get("ABD_JOINTS_CACHE_DIR") or _os.path.join(
        _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache"), "abd_joints"
    )


def _configure_numba_cache() -> None:
    """Give Numba's on-disk cache a writable folder of this package and solver version.

    An installed extension's folder may be read-only, so the cache lives under
    ``$ABD_JOINTS_CACHE_DIR`` (the add-on points it at ``bpy.utils.extension_path_user``) or the
    user cache folder. Numba keys its cache on the source path, not on the import name, and its
    entries name the module they were compiled for, so the same sources imported as ``solver``
    and as ``bl_ext.<repo>.abd_joints.solver`` need separate folders: the package's own name, and
    the digest of its sources (:func:`source_stamp`), name the last path element. The digest is
    needed because Numba checks a cached kernel against its own source file only, not against
    the helpers it inlined from other modules: after an update that changes only those, Numba
    would load the old machine code. Where that folder cannot be written (a read-only render-farm image warmed
    up ahead), a per-user temporary folder is used, filled with a copy of what the read-only one
    holds, with a warning on stderr: Numba loads only from a folder it can write. That folder is
    private (:func:`_private_temporary_folder`): Numba unpickles its index files, so a folder
    another user could write would let them run code in this process. It is set in
    Numba's config, not in the environment, so that child processes (a batch bake) choose their
    own. ``NUMBA_CACHE_DIR``, when set, wins. :mod:`solver.jit`, through which every compiled
    function of the solver is made, calls it when it is first imported (``import solver`` itself
    loads no Numba).
    """
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba.core.config

    folder = _os.path.join(cache_base(), "numba", f"{__name__}-{source_stamp()}")
    if not _writable(folder):
        import sys

        try:
            fallback = _private_temporary_folder(_os.path.basename(folder))
        except OSError:  # no temporary folder either: Numba compiles without a cache
            fallback = folder
        if _os.path.isdir(folder) and fallback != folder:
            _copy_without_links(folder, fallback)
        print(f"abd-joints: the solver's cache folder {folder} cannot be written; using {fallback}"
              + (" (a copy of it)" if _os.path.isdir(folder) else ""), file=sys.stderr)
        folder = fallback
    numba.core.config.CACHE_DIR = folder  # type: ignore[attr-defined]  # a setting, not in the stubs


if TYPE_CHECKING:  # the public names as type checkers see them; at run time __getattr__ imports them
    from .scene import (
        Body, BodyContact, ContactSettings, Driving, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings,
        SoftTransform,
    )
    from .scene_io import load_scene
    from .simulation import Simulation, SolverError, simulate
    from .trajectory import Trajectory

__all__ = [
    "Body", "BodyContact", "ContactSettings", "Driving", "Joint", "Limit", "MassOverride", "Mesh", "Scene",
    "SceneError", "Settings", "SoftTransform", "Trajectory", "Simulation", "SolverError", "load_scene", "simulate",
]

#: The module of each public name.
_PUBLIC = {
    **dict.fromkeys(("Body", "BodyContact", "ContactSettings", "Driving", "Joint", "Limit", "MassOverride", "Mesh",
                     "Scene", "SceneError", "Settings", "SoftTransform"), "scene"),
    "Trajectory": "trajectory", "load_scene": "scene_io",
    "simulate": "simulation", "Simulation": "simulation", "SolverError": "simulation",
}


def __getattr__(name: str):
    """The public names, imported at their first use (PEP 562): ``import solver`` loads only the
    standard library, so that ``python -m solver`` imports NumPy and Numba inside its Ctrl+C
    handling, and tools that only read scenes compile nothing.

    Raises:
        AttributeError: ``name`` is not a public name of the package."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
