"""The batch's saves: a full disk named as such, and baking in place twice keeps the original."""

from __future__ import annotations

import collections
import importlib
import shutil

import bpy
import pytest
from abd_rigs import slider_rig
from test_batch import run_batch


def test_a_full_disk_is_named_where_blender_cannot_save(addon, tmp_path, monkeypatch):
    """Blender reports a save on a full disk as "Error: No such file or directory" (the file it
    could not write): the batch said "cannot save: Error: No such file or directory"."""
    blend_files = importlib.import_module(addon.__name__ + ".blend_files")
    slider_rig(frame_end=4)

    def full_disk(path):
        raise RuntimeError("Error: No such file or directory\n")

    monkeypatch.setattr(blend_files, "_save_copy", full_disk)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10**9, 10**9 - 4096, 4096))
    with pytest.raises(OSError) as raised:
        blend_files.save_whole(str(tmp_path / "baked.blend"))
    assert str(raised.value) == (f"no space left on the disk of {tmp_path} (4096 bytes free; Blender: No such file "
                                 "or directory)")
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10**12, 0, 10**12))
    with pytest.raises(OSError, match=r"^No such file or directory$"):  # room enough: Blender's reason, as it is
        blend_files.save_whole(str(tmp_path / "baked.blend"))
    assert list(tmp_path.iterdir()) == []


def test_baking_in_place_twice_keeps_the_original_as_blend1(tmp_path):
    """Two batches --in-place on one file left the first bake in .blend1: the original was lost.
    The second bake in place keeps the .blend1 that holds the original; a save in Blender in
    between rotates the backups as usual."""
    slider_rig(frame_end=8)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    original = source.read_bytes()
    for _ in range(2):
        result = run_batch(tmp_path, source, "--in-place")
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "rig.blend1").read_bytes() == original
    baked = source.read_bytes()
    bpy.ops.wm.open_mainfile(filepath=str(source))
    assert bpy.data.objects["Slider"].abd_bake.is_baked
    bpy.ops.wm.save_mainfile()  # the user's own save: the bake becomes .blend1
    edited = source.read_bytes()
    assert (tmp_path / "rig.blend1").read_bytes() == baked
    result = run_batch(tmp_path, source, "--in-place")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "rig.blend1").read_bytes() == edited
