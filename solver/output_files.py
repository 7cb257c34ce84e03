"""Output files written whole or not at all: the checks before a run or a bake, and the writes.

A trajectory or scene file is first written to a temporary file in its destination's folder and
then renamed over the destination (``os.replace``, atomic within one file system): a failed write
(a full disk, a file-size limit, Ctrl+C) leaves the previous file as it was and no partial one,
and the temporary file is removed. The temporary file gets the permissions a file created there
directly would get (the process's umask), not ``tempfile.mkstemp``'s private 0600. A destination
that is a symbolic link is written through it (the file it points to is replaced, the link kept),
as writing to the path directly would.
"""

from __future__ import annotations

import glob
import os
import secrets
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Union


def file_problem(path: Union[str, Path]) -> Optional[str]:
    """Why a file cannot be written at ``path``, or None if it can (as far as ``os.access`` tells:
    the file's or else its folder's write permission): checked before a run or a bake, so that a
    result is never computed only to be lost."""
    path = Path(path)
    if not path.parent.is_dir():
        return f"directory {str(path.parent)!r} does not exist"
    if path.is_dir():
        return f"{str(path)!r} is a directory, not a file that can be written"
    if path.exists():
        if not os.access(path, os.W_OK):
            return f"{str(path)!r} exists and is not writable"
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        return f"cannot create files in directory {str(path.parent)!r} (no write permission)"
    return None


def part_name(path: Union[str, Path]) -> str:
    """A new name for a temporary file beside ``path``: ``.<name>.<random>.part`` in its folder,
    the pattern :func:`leftovers` finds (the file is not created)."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.{secrets.token_hex(4)}.part")


def leftovers(path: Union[str, Path], suffixes: tuple = (".part",)) -> list:
    """The temporary files of writes of ``path`` that were interrupted before they could remove
    them (a killed process): ``.<name>.*<suffix>`` in its folder (:func:`write_aside`,
    :func:`part_name`), sorted."""
    folder, name = os.path.split(os.fspath(path))
    return sorted(found for suffix in suffixes
                  for found in glob.glob(os.path.join(glob.escape(folder or "."), f".{glob.escape(name)}.*{suffix}")))


def write_aside(path: Union[str, Path], write: Callable[[BinaryIO], object]) -> Path:
    """Write a file meant for ``path`` into a new temporary file in the same folder, through
    ``write(stream)`` (a binary stream), and return the temporary file's path; the caller moves it
    into place with :func:`move_into_place` (or removes it). Where the write fails, the temporary
    file is removed and the error propagates.

    Raises:
        OSError: the folder cannot be written, or the write failed; whatever ``write`` raises.
    """
    path = Path(os.path.realpath(path))  # through a symbolic link, into the folder of its target
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as a file created there directly
        with os.fdopen(descriptor, "wb") as stream:
            write(stream)
    except BaseException:  # also Ctrl+C: no temporary file is left behind
        os.remove(temporary)
        raise
    return Path(temporary)


def move_into_place(temporary: Union[str, Path], path: Union[str, Path]) -> None:
    """Rename the file :func:`write_aside` wrote over ``path`` (atomic: readers see the old file
    or the new one); where that fails the temporary file is removed.

    Raises:
        OSError: the rename failed (``path`` is a folder, say); ``path`` is then unchanged.
    """
    try:
        os.replace(temporary, os.path.realpath(path))
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def write_whole(path: Union[str, Path], write: Callable[[BinaryIO], object]) -> None:
    """Write the file at ``path`` through ``write(stream)`` whole or not at all
    (:func:`write_aside`, then :func:`move_into_place`).

    Raises:
        OSError: as those two; ``path`` is then as it was.
    """
    move_into_place(write_aside(path, write), path)
