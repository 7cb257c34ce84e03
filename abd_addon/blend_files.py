"""Saving a .blend whole or not at all, for the batch bake.

Blender's own save does not notice a failed write (a full disk, a file-size limit): it reports
success and renames a truncated file over the destination. :func:`save_whole` therefore saves a
copy to a new name beside the destination (``.<name>.<random>.part``), checks it, and only then
renames it over the destination (``os.replace``, atomic within one file system), keeping the
previous file as ``<name>1`` (``<name>2`` ... for more *Save Versions*), as Blender's save does
with the preferences' *Save Versions* (default 1; 0 keeps none). The check
(:func:`blend_problem`) reads the file back with Blender (``bpy.data.libraries.load``, which fails
on a file cut before its DNA block) and looks at its last block: ``ENDB`` for an uncompressed
file, the seek table's end marker for a Zstandard-compressed one.

Leftovers of an interrupted run (``<name>@``, Blender's own temporary file, and the ``.part``
files of :func:`save_whole` and of :func:`solver.output_files.write_aside`) are removed by
:func:`remove_leftovers` before the next run writes that destination.
"""

from __future__ import annotations

import os

from ..solver.output_files import leftovers, part_name

#: First bytes of a Zstandard frame, and the last bytes of the seek table Blender ends a
#: compressed .blend with (the Zstandard seekable format's footer magic number, little-endian).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SEEKABLE_END = b"\xb1\xea\x92\x8f"


def blend_problem(path: str) -> str | None:
    """Why the .blend at ``path`` is not a whole file Blender can read, or None if it is.

    A file header ``BLENDER-``/``BLENDER_`` (pointer size 8 or 4) puts the closing ``ENDB``
    block header 24 or 20 bytes before the end, the header of Blender 5's format
    (``BLENDER17-01v...``) 32 bytes before it; a compressed file ends with the seek table marker
    :data:`ZSTD_SEEKABLE_END`.
    """
    import bpy

    try:
        with open(path, "rb") as stream:
            head = stream.read(17)
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - 32))
            tail = stream.read()
    except OSError as error:
        return f"cannot read the saved file back ({error.strerror or error})"
    if head.startswith(ZSTD_MAGIC):
        whole = tail.endswith(ZSTD_SEEKABLE_END)
    elif head.startswith(b"BLENDER"):
        block_header = 32 if head[7:9].isdigit() else 24 if head[7:8] == b"-" else 20
        whole = len(tail) >= block_header and tail[-block_header:-block_header + 4] == b"ENDB"
    else:
        whole = False
    if not whole:
        return f"the saved file is incomplete ({size} bytes, no end block: is the disk full?)"
    try:
        with bpy.data.libraries.load(path):
            pass
    except Exception as error:  # noqa: BLE001 - Blender's own reader refuses it
        return f"Blender cannot read the saved file back ({str(error).strip()})"
    return None


def remove_leftovers(path: str) -> list:
    """Remove what an interrupted save of ``path`` left beside it: ``<name>@`` (Blender's
    temporary file) and the ``.part`` files of :func:`save_whole` and
    :func:`solver.output_files.write_aside` (:func:`solver.output_files.leftovers`), with
    Blender's ``@`` files of those. Returns the paths removed; a file that cannot be removed is
    left (the save then fails on its own, naming the folder)."""
    target = os.path.realpath(path)
    removed = []
    for leftover in leftovers(target, suffixes=(".part", ".part@")) + [target + "@"]:
        try:
            os.remove(leftover)
            removed.append(leftover)
        except OSError:
            pass
    return removed


def save_whole(path: str) -> None:
    """Save the open file to ``path`` whole or not at all (module docstring); ``path`` is
    unchanged when anything fails, and no temporary file is left.

    Raises:
        OSError: Blender cannot save it, the saved file is incomplete (:func:`blend_problem`), or
            the previous file cannot be kept as a backup; the message says which.
    """
    import bpy

    target = os.path.realpath(path)  # through a symbolic link, as a direct save would write
    temporary = part_name(target)
    try:
        try:
            # The file's own compression setting is kept (the operator's default reads it);
            # relative paths are remapped to the folder, which is the destination's.
            bpy.ops.wm.save_as_mainfile(filepath=temporary, copy=True)
        except Exception as error:  # noqa: BLE001 - Blender's report
            raise OSError(str(error).strip()) from None
        problem = blend_problem(temporary)
        if problem is not None:
            raise OSError(f"{problem}; {path} is unchanged")
        _keep_backups(target, bpy.context.preferences.filepaths.save_version)
        os.replace(temporary, target)
    finally:
        for leftover in (temporary, temporary + "@"):
            if os.path.lexists(leftover):
                os.remove(leftover)


def _keep_backups(target: str, versions: int) -> None:
    """Shift ``<target>1`` ... to ``<target>2`` ... (at most ``versions``), and keep ``target`` as
    ``<target>1``, hard-linked where the file system allows (no space needed), else copied; each
    step is an atomic rename, so ``target`` itself stays in place throughout.

    Raises:
        OSError: the previous file cannot be kept (no space for its copy).
    """
    import shutil

    if versions < 1 or not os.path.isfile(target):
        return
    for number in range(versions - 1, 0, -1):
        if os.path.isfile(f"{target}{number}"):
            os.replace(f"{target}{number}", f"{target}{number + 1}")
    staged = part_name(target)
    try:
        try:
            os.link(target, staged)
        except OSError:
            shutil.copy2(target, staged)
        os.replace(staged, f"{target}1")
    except OSError as error:
        raise OSError(f"cannot keep the previous file as {os.path.basename(target)}1 "
                      f"({error.strerror or error}); it is unchanged") from None
    finally:
        if os.path.lexists(staged):
            os.remove(staged)
