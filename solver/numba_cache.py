"""The on-disk cache of the solver's compiled (Numba) kernels: which folder, and that no one else can fill it.

Numba unpickles the index files of its cache, so whoever can write the cache folder, or any folder
on its path (and rename the folder beneath it), can run code in the process that loads it. Every
cache folder the solver uses is therefore checked before use (:func:`folder_problem`): each
folder from the cache base down is a real folder (not a symbolic link) of this user (or root's,
read-only to this user: then copied) that no one else can write, and each folder above it
belongs to this user or to root and is not writable by others, unless it has the sticky bit
(``/tmp``). A folder that fails is refused with a message on
stderr, nothing is created in it, and a private folder of this user in the temporary folder is
used instead (the same one on every run). Where the platform has no user ids (Windows, whose
temporary folder is per user), only symbolic links are refused.

Imports only the standard library; Numba itself is imported by :func:`configure`, which
:mod:`solver.jit` calls when it is first imported.
"""

from __future__ import annotations

import os
import stat
import sys

#: The solver package's import name (``solver``, or ``bl_ext.<repo>.abd_joints.solver`` in Blender).
PACKAGE = __name__.rpartition(".")[0]


def source_stamp(root: str | None = None) -> str:
    """Hex digest (16 characters) of a solver's sources: each ``.py`` file's path relative to
    ``root`` (default: the solver package's folder) and its contents. Names the Numba cache folder
    of this solver version (:func:`configure`) and the add-on's warm-up marker
    (``abd_addon/warmup.py``), so the two agree on whether the cache is current."""
    import hashlib

    root = root or os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha1()
    for folder, folders, files in sorted(os.walk(root)):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
                with open(path, "rb") as source:
                    digest.update(source.read())
    return digest.hexdigest()[:16]


def cache_base() -> str:
    """The folder that holds the solver's compiled kernels (in ``numba/``) and the add-on's warm-up
    markers: ``$ABD_JOINTS_CACHE_DIR``, else ``abd_joints`` in the user cache folder
    (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    return os.environ.get("ABD_JOINTS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "abd_joints"
    )


def _user_id():
    """This process's user id, or None where the platform has none (Windows)."""
    return os.getuid() if hasattr(os, "getuid") else None


def _owner_problem(path: str, status: os.stat_result, above: bool) -> str | None:
    """Why the folder ``path`` (its ``lstat`` ``status``) is not safe for this user's cache, or
    None: it must be this user's or root's (a read-only cache root installed, in a render-farm
    image say, is copied), and writable by no one else; a folder above the cache (``above``
    True) may be writable by others where it has the sticky bit (``/tmp``)."""
    user = _user_id()
    if user is None:
        return None
    if status.st_uid not in (user, 0):
        return f"{path} belongs to another user (uid {status.st_uid})"
    if status.st_mode & 0o022 and not (above and status.st_mode & stat.S_ISVTX):
        return f"{path} can be written by other users (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def folder_problem(folder: str, base: str, create: bool = True) -> str | None:
    """Why ``folder`` (``base`` or a folder inside it) cannot be trusted as a cache folder of this
    user, or None when it can. Walks the path from the file system's root: each folder above
    ``base`` (through its symbolic links) must belong to this user or root and not be writable by
    others unless sticky; ``base`` and each folder below it down to ``folder`` must be a real
    folder of this user or root that no one else can write. With ``create``, missing folders are made
    (mode 0700), each only after the folder holding it passed: nothing is created in a folder that
    fails."""
    base = os.path.abspath(base)
    folder = os.path.abspath(folder)
    above = os.path.realpath(os.path.dirname(base))
    below = os.path.relpath(folder, base).split(os.sep) if folder != base else []
    if below and below[0] == os.pardir:
        raise ValueError(f"{folder} is not inside {base}")
    from pathlib import Path

    steps = [(str(parent), True) for parent in reversed(Path(above).parents)] + [(above, True)]
    path = os.path.join(above, os.path.basename(base))
    steps.append((path, False))
    for part in below:
        path = os.path.join(path, part)
        steps.append((path, False))
    for path, is_above in steps:
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return f"{path} does not exist"
            try:
                os.mkdir(path, 0o700)
                status = os.lstat(path)
            except OSError as error:
                return f"{path} cannot be created ({error.strerror or error})"
        except OSError as error:
            return f"{path} cannot be read ({error.strerror or error})"
        if stat.S_ISLNK(status.st_mode):
            return f"{path} is a symbolic link"
        if not stat.S_ISDIR(status.st_mode):
            return f"{path} is not a folder"
        problem = _owner_problem(path, status, is_above)
        if problem:
            return problem
    return None


def _writable(folder: str) -> bool:
    """Whether files can be created in the existing ``folder``."""
    probe = os.path.join(folder, f".write-test-{os.getpid()}")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
        return True
    except OSError:
        return False


def private_temporary_folder(name: str) -> str:
    """This user's folder ``name`` for a copied cache: ``abd_joints-<uid>/numba/<name>`` in the
    temporary folder, the same on every run, made with mode 0700 where missing; or, when that path
    fails :func:`folder_problem` (a folder another user planted there), ``numba/<name>`` in a new
    folder from :func:`tempfile.mkdtemp`, removed when the process exits.

    Raises:
        OSError: no folder can be created in the temporary folder.
    """
    import tempfile

    uid = _user_id() or 0
    base = os.path.join(tempfile.gettempdir(), f"abd_joints-{uid}")
    folder = os.path.join(base, "numba", name)
    if folder_problem(folder, base) is None:
        return folder
    import atexit
    import shutil

    base = tempfile.mkdtemp(prefix=f"abd_joints-{uid}-")
    atexit.register(shutil.rmtree, base, True)
    folder = base
    for part in ("numba", name):
        folder = os.path.join(folder, part)
        os.mkdir(folder, 0o700)
    return folder


def copy_without_links(source: str, destination: str) -> None:
    """Copy the regular files and folders of ``source`` into ``destination`` (an existing private
    folder), skipping symbolic links in ``source`` and files ``destination`` already holds (same
    size and modification time: a copy made by an earlier run), and never writing through a link
    in ``destination``: each file is written to a new name (created exclusively) and renamed over
    its destination, which replaces a link instead of following it. Files that cannot be copied
    are skipped (Numba compiles what it does not find)."""
    import shutil

    for entry in os.scandir(source):
        target = os.path.join(destination, entry.name)
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if folder_problem(target, target, create=False) is not None:
                    if os.path.lexists(target):
                        os.remove(target)
                    os.mkdir(target, 0o700)
                copy_without_links(entry.path, target)
            elif entry.is_file():
                status = entry.stat()
                try:
                    present = os.lstat(target)
                    if (stat.S_ISREG(present.st_mode) and present.st_size == status.st_size
                            and present.st_mtime_ns == status.st_mtime_ns):
                        continue
                except FileNotFoundError:
                    pass
                temporary = f"{target}.{os.getpid()}.copy"
                descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
                try:
                    with open(entry.path, "rb") as reader, os.fdopen(descriptor, "wb") as writer:
                        shutil.copyfileobj(reader, writer)
                    os.utime(temporary, ns=(status.st_atime_ns, status.st_mtime_ns))
                    os.replace(temporary, target)
                except BaseException:
                    os.remove(temporary)
                    raise
        except OSError:
            continue


def choose_folder() -> str:
    """The folder for Numba's cache of this solver version: ``$NUMBA_CACHE_DIR`` when set, else
    ``numba/<package>-<source stamp>`` in :func:`cache_base`, where it passes
    :func:`folder_problem` and can be written; else a private temporary folder
    (:func:`private_temporary_folder`) with a copy of what the refused or read-only folder holds
    (a copy only from a folder that passed: never another user's files), and a warning on stderr.

    Numba keys its cache on the source path, not on the import name, and its entries name the
    module they were compiled for, so the same sources imported as ``solver`` and as
    ``bl_ext.<repo>.abd_joints.solver`` need separate folders: the package's name, and the digest
    of its sources (:func:`source_stamp`), name the last path element. The digest is needed
    because Numba checks a cached kernel against its own source file only, not against the
    helpers it inlined from other modules. Numba loads only from a folder it can write, hence the
    copy of a read-only one (a render-farm image warmed up ahead)."""
    numba_folder = os.environ.get("NUMBA_CACHE_DIR")
    if numba_folder:
        folder, base = numba_folder, numba_folder
    else:
        base = cache_base()
        folder = os.path.join(base, "numba", f"{PACKAGE}-{source_stamp()}")
    problem = folder_problem(folder, base)
    if problem is None and _writable(folder):
        return folder
    try:
        fallback = private_temporary_folder(os.path.basename(folder))
    except OSError:  # no temporary folder either: Numba compiles without a cache
        return folder
    copied = problem is None and os.path.isdir(folder)
    if copied:
        copy_without_links(folder, fallback)
    reason = f"cannot be used ({problem})" if problem else "cannot be written"
    print(f"abd-joints: the solver's cache folder {folder} {reason}; using {fallback}"
          + (" (a copy of it)" if copied else ""), file=sys.stderr)
    return fallback


def configure() -> None:
    """Set Numba's cache folder (:func:`choose_folder`) in Numba's config, not in the
    environment, so that child processes (a batch bake) choose their own. :mod:`solver.jit`,
    through which every compiled function of the solver is made, calls it when it is first
    imported (``import solver`` itself loads no Numba)."""
    import numba.core.config

    numba.core.config.CACHE_DIR = choose_folder()  # type: ignore[attr-defined]  # a setting, not in the stubs
