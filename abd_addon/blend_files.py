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

A bake in place keeps the original file: the file's scenes record the digest of the file the bake
replaced, and a later bake in place of the result leaves ``<name>1`` alone where it is that
original (a save in Blender in between rotates the backups as usual, and the digest then no
longer matches).

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

    A save over the open file itself (a bake in place) keeps the file it replaces as
    ``<name>1`` only where that is not a bake in place already: where ``<name>1`` is the file
    an earlier bake in place replaced (its digest, recorded in the open file as
    :data:`ORIGINAL_PROPERTY`, matches), it is kept as it is, so that baking in place again
    never pushes the original out.

    Raises:
        OSError: Blender cannot save it (the message says so where the disk is full), the saved
            file is incomplete (:func:`blend_problem`), or the previous file cannot be kept as a
            backup; the message says which.
    """
    import bpy

    target = os.path.realpath(path)  # through a symbolic link, as a direct save would write
    keep_previous = _record_original(target)
    temporary = part_name(target)
    try:
        try:
            # The file's own compression setting is kept (the operator's default reads it);
            # relative paths are remapped to the folder, which is the destination's.
            _save_copy(temporary)
        except Exception as error:  # noqa: BLE001 - Blender's report
            raise OSError(_save_failure(str(error), target)) from None
        problem = blend_problem(temporary)
        if problem is not None:
            raise OSError(f"{problem}; {path} is unchanged")
        if keep_previous:
            _keep_backups(target, bpy.context.preferences.filepaths.save_version)
        os.replace(temporary, target)
    finally:
        for leftover in (temporary, temporary + "@"):
            if os.path.lexists(leftover):
                os.remove(leftover)


#: Scene property in which a bake in place records the SHA-256 of the file it replaced.
ORIGINAL_PROPERTY = "abd_original_file"


def _save_copy(path: str) -> None:
    """Blender's save of the open file as a copy at ``path`` (raises RuntimeError with its report)."""
    import bpy

    bpy.ops.wm.save_as_mainfile(filepath=path, copy=True)


def _save_failure(report: str, target: str) -> str:
    """The reason of a failed save of ``target`` from Blender's ``report`` (``"Error: ..."``):
    where the folder's file system has less room left than the file takes (an estimate: the open
    file's size, at least 1 MiB), that, since Blender's report of a full disk names another
    error."""
    import shutil

    import bpy

    reason = report.strip()
    reason = reason[len("Error:"):].strip() if reason.startswith("Error:") else reason
    folder = os.path.dirname(target)
    try:
        free = shutil.disk_usage(folder).free
        size = os.path.getsize(bpy.data.filepath) if bpy.data.filepath else 0
    except OSError:
        return reason
    if free < max(size, 1 << 20):
        return f"no space left on the disk of {folder} ({free} bytes free; Blender: {reason})"
    return reason


def _record_original(target: str) -> bool:
    """For a save over the open file (a bake in place): record in the open file (every scene's
    :data:`ORIGINAL_PROPERTY`) the digest of the file it replaces, or, where ``<target>1`` is
    already that of an earlier bake in place, that one's. Returns whether the file replaced is to
    be kept as ``<target>1`` (False: it is a bake in place whose original ``<target>1`` holds)."""
    import bpy

    if not bpy.data.filepath or os.path.realpath(bpy.data.filepath) != target or not os.path.isfile(target):
        return True
    recorded = {scene.get(ORIGINAL_PROPERTY) for scene in bpy.data.scenes} - {None}
    original, keep = None, True
    if len(recorded) == 1 and os.path.isfile(target + "1") and _digest(target + "1") == next(iter(recorded)):
        original, keep = next(iter(recorded)), False
    else:
        original = _digest(target)
    for scene in bpy.data.scenes:
        scene[ORIGINAL_PROPERTY] = original
    return keep


def _digest(path: str) -> str:
    """SHA-256 of the file at ``path`` (hex)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
