"""The compiled kernels' cache folder: used only where no other user can write it or any folder
on its path, nothing created inside a folder another user planted, one private copy reused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from solver import numba_cache

REPO = Path(__file__).resolve().parents[2]
#: A fresh process that configures the cache (importing solver.jit) and prints the folder used.
CACHE_DIR = "import numba.core.config, solver.jit; print(numba.core.config.CACHE_DIR)"


def cache_folder_of(environment: dict) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in environment.items() if key != "NUMBA_CACHE_DIR"}
    return subprocess.run([sys.executable, "-c", CACHE_DIR], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=300, check=True)


def files_under(folder: Path) -> list:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def assert_private(path: Path, below: Path) -> None:
    """Every folder from ``below`` down to ``path`` is a real folder of this user, mode 0700."""
    for depth in range(1, len(path.relative_to(below).parts) + 1):
        status = os.lstat(below.joinpath(*path.relative_to(below).parts[:depth]))
        assert stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() and not status.st_mode & 0o077


@pytest.mark.parametrize("where", ["the-cache-itself", "a-folder-above-it"])
def test_a_cache_folder_others_can_write_is_refused_and_left_as_it_was(tmp_path, where):
    """ABD_JOINTS_CACHE_DIR in a folder anyone can write (0777): another user pre-fills
    ``numba/solver-<stamp>/`` with index files that Numba unpickles, running their code in the
    victim's run. It is refused with a message, nothing is created in it, and a private folder
    in the temporary folder is used."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    cache = shared if where == "the-cache-itself" else shared / "mine"
    planted = shared / "numba" / f"solver-{numba_cache.source_stamp()}"
    planted.mkdir(parents=True)
    (planted / "kernel-1.py311.nbi").write_bytes(b"a pickle that runs code")
    before = files_under(shared)
    temporary = tmp_path / "temp"
    temporary.mkdir()
    result = cache_folder_of(dict(os.environ, ABD_JOINTS_CACHE_DIR=str(cache), TMPDIR=str(temporary)))
    used = Path(result.stdout.strip())
    assert files_under(shared) == before
    assert used.parent.parent == temporary / f"abd_joints-{os.getuid()}" and used.name == planted.name
    assert_private(used, temporary)
    assert f"{shared} can be written by other users (mode 777)" in result.stderr, result.stderr


def test_a_cache_folder_of_another_user_is_refused_and_one_of_root_copied(tmp_path, monkeypatch, capsys):
    """Another user's cache folder (not writable by others, but theirs) is refused: its index files
    are theirs to write. Root's, read-only to this user (a render-farm image warmed up ahead), is
    trusted and copied. Without root, another user's folder is one of this user's while the solver
    runs as another uid (``_user_id`` replaced)."""
    cache = tmp_path / "cache"
    theirs = cache / "numba" / f"solver-{numba_cache.source_stamp()}"
    theirs.mkdir(parents=True)
    (theirs / "kernel-1.py311.nbi").write_bytes(b"their pickle")
    if os.getuid() == 0:
        for folder in (cache, cache / "numba", theirs):
            os.chown(folder, 65534, 65534)
        other = 65534
    else:
        other = os.getuid()
        monkeypatch.setattr(numba_cache, "_user_id", lambda: other + 1)
    temporary = tmp_path / "temp"
    temporary.mkdir()
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(cache))
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    used = Path(numba_cache.choose_folder())
    assert used.is_relative_to(temporary) and not (used / "kernel-1.py311.nbi").exists()
    # (without root, the folders above it are the other uid's too: the first of them is named)
    named = f"{cache} belongs" if os.getuid() == 0 else "belongs"
    assert f"{named} to another user (uid {other})" in capsys.readouterr().err
    if os.getuid() == 0:  # root's own folder, read-only as far as the run is concerned: copied
        for folder in (cache, cache / "numba", theirs):
            os.chown(folder, 0, 0)
        monkeypatch.setattr(numba_cache, "_writable", lambda folder: Path(folder) != theirs)
        used = Path(numba_cache.choose_folder())
        assert (used / "kernel-1.py311.nbi").read_bytes() == b"their pickle"
        assert "(a copy of it)" in capsys.readouterr().err


def test_a_temporary_folder_another_user_planted_gets_nothing_created_in_it(tmp_path, monkeypatch):
    """The private fallback made ``numba/<name>`` inside an ``abd_joints-<uid>`` folder another user
    had planted in the temporary folder before refusing it. Nothing is created there now, and the
    new private folder is removed when the process ends."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    planted = tmp_path / f"abd_joints-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    folder = Path(numba_cache.private_temporary_folder("solver-0123"))
    assert list(planted.iterdir()) == []
    assert folder.name == "solver-0123" and folder.parent.parent.parent == tmp_path
    assert_private(folder, tmp_path)


def test_a_read_only_cache_is_copied_once_and_the_copy_reused(tmp_path, monkeypatch):
    """A read-only cache (a render-farm image warmed up ahead) is copied to the private folder: the
    same folder on every run, its files copied only once, no new folder left per run."""
    cache = tmp_path / "cache"
    warmed = cache / "numba" / f"solver-{numba_cache.source_stamp()}"
    warmed.mkdir(parents=True)
    (warmed / "kernel-1.py311.nbi").write_bytes(b"index")
    (warmed / "kernel-1.py311.1.nbc").write_bytes(b"machine code" * 1000)
    temporary = tmp_path / "temp"
    temporary.mkdir()
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(cache))
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    monkeypatch.setattr(numba_cache, "_writable", lambda folder: Path(folder) != warmed)  # read-only
    first = Path(numba_cache.choose_folder())
    copied = (first / "kernel-1.py311.1.nbc").stat().st_ino
    second = Path(numba_cache.choose_folder())
    assert first == second and first.parent.parent == temporary / f"abd_joints-{os.getuid()}"
    assert (second / "kernel-1.py311.1.nbc").stat().st_ino == copied  # not written again
    assert (second / "kernel-1.py311.nbi").read_bytes() == b"index"
    assert os.listdir(temporary) == [f"abd_joints-{os.getuid()}"]


def test_an_unsafe_temporary_copy_is_removed_when_the_run_ends(tmp_path):
    """Where even the temporary ``abd_joints-<uid>`` was planted by someone else, each run gets a
    new private folder: removed at the end of the run, not a 3 MB copy left behind per run."""
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    temporary = tmp_path / "temp"
    temporary.mkdir()
    planted = temporary / f"abd_joints-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    result = cache_folder_of(dict(os.environ, ABD_JOINTS_CACHE_DIR=str(cache), TMPDIR=str(temporary)))
    used = Path(result.stdout.strip())
    assert used.is_relative_to(temporary) and not used.is_relative_to(planted)
    assert os.listdir(temporary) == [planted.name] and list(planted.iterdir()) == []


def test_importing_the_solver_loads_no_numba_cache_code_beyond_the_standard_library():
    """``import solver`` stays light: the cache's module loads with the standard library only."""
    code = ("import sys, solver; solver.cache_base(); solver.source_stamp(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'numba', 'scipy')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                            check=True)
    assert result.stdout.strip() == "[]"
