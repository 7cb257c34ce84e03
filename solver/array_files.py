"""NumPy ``.npz`` files: reading ones that may come from anyone (bounded memory, no hang, the
file named), and writing them so that a failed write leaves no half-closed archive behind.

``np.load`` of an ``.npz`` reads a member whole when it is asked for, allocating what the
member's ``.npy`` header claims. :class:`ArrayFile` opens the archive instead and reads a member
only when it is asked for by name (a scene's meshes name theirs, a trajectory has its fields),
after checking its header: a plain numeric, boolean or string dtype (never a pickled object),
the shape its reader expects, and a size that fits what the archive says the member holds, what
its reader can need (a trajectory's bodies x frames x 16 values), the reader's byte budget across
all the members it reads, and half the memory the machine has free. The archive's own figures
are the sender's (a compressed member of zeros claims a thousand times its size), so the reader's
and the machine's decide: the memory a read takes is the size of the array it accepts, plus
NumPy's read buffer. It refuses a path that is not a regular file (a FIFO would
block the reader forever) before reading anything from it.

:func:`save_npz` writes what ``np.savez_compressed`` writes, but closes the archive when a write
fails (a full disk): NumPy's left it open, and its ``__del__`` later printed an ignored
exception about the stream its caller had closed.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO, Optional, Union

import numpy as np

#: dtype kinds a member may have: booleans, integers, floats, complex numbers, strings.
PLAIN_KINDS = "biufcU"
#: Largest ``.npy`` header read (NumPy's own default limit).
MAX_HEADER_SIZE = 10000


def available_memory() -> Optional[int]:
    """Bytes of memory this machine has free for a new allocation: ``MemAvailable`` of
    ``/proc/meminfo`` (Linux: free memory plus what the page cache gives back), else the free
    physical pages (``os.sysconf``); None where neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


class ArrayFileError(ValueError):
    """An ``.npz`` file, or a member of it, cannot be read within the limits. ``str()`` is
    ``"<path>: <detail>"``; ``detail`` names the member where one is at fault."""

    def __init__(self, path, detail: str):
        super().__init__(f"{path}: {detail}")
        self.path, self.detail = str(path), detail


def open_regular_file(path: Union[str, Path]):
    """Open ``path`` for binary reading if it is a regular file (a link to one included).

    Opened without blocking and checked on the open descriptor, so a FIFO or a device is refused
    instead of waited on.

    Raises:
        OSError: it cannot be opened (missing, no permission).
        ArrayFileError: it is not a regular file.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
            raise ArrayFileError(path, f"not a regular file ({kind})")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def save_npz(target: Union[str, Path, BinaryIO], arrays: dict) -> None:
    """Write ``arrays`` (name: array) to ``target`` (a path, or a binary stream) as a compressed
    ``.npz`` (the format of ``np.savez_compressed``: one ``<name>.npy`` member per array, no
    pickles).

    Raises:
        OSError: the write failed (the archive is closed all the same).
        ValueError: an array of objects.
    """
    with zipfile.ZipFile(target, mode="w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


class ArrayShapeError(ArrayFileError):
    """A member whose header declares another shape than its reader expects (:attr:`shape`)."""

    def __init__(self, path, detail: str, shape: tuple):
        super().__init__(path, detail)
        self.shape = shape


class ArrayFile:
    """The named arrays of an ``.npz`` file, each read (and checked) when first asked for.

    Use as a context manager (the file stays open inside it); ``name in file``, ``file[name]``
    and ``file.get(name)`` as for a dict, ``file.names`` the archive's array names.

    Args:
        path: the ``.npz`` file.
        max_bytes: the most bytes all the arrays read from it may take together.

    Raises (on opening, and on reading a member):
        OSError: the file cannot be opened or read.
        ArrayFileError: not a regular file, not a ``.npz`` archive, or a member that is damaged,
            of an object or other non-plain dtype, larger than the archive says it holds, or
            beyond ``max_bytes``; the message names the file and the member.
    """

    def __init__(self, path: Union[str, Path], max_bytes: int):
        self.path = str(path)
        self.max_bytes = int(max_bytes)
        self.bytes_read = 0
        self._stream = open_regular_file(path)
        try:
            self._zip = zipfile.ZipFile(self._stream)
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as error:
            self._stream.close()
            raise ArrayFileError(self.path, f"not a .npz archive of named arrays ({error})") from None
        self._members = {info.filename[:-4]: info for info in self._zip.infolist() if info.filename.endswith(".npy")}

    @property
    def names(self) -> list:
        """The names of the archive's arrays (its ``<name>.npy`` members), sorted."""
        return sorted(self._members)

    def __contains__(self, name) -> bool:
        return name in self._members

    def get(self, name: str, default=None):
        """The array ``name``, or ``default`` when the archive has none of that name."""
        return self[name] if name in self._members else default

    def __getitem__(self, name: str) -> np.ndarray:
        return self.read(name)

    def read(self, name: str, shape: Optional[tuple] = None, max_size: Optional[int] = None,
             need: str = "") -> np.ndarray:
        """The array ``name``, its ``.npy`` header checked before any of its data is read.

        Args:
            name: the array's name (a ``KeyError`` where the archive has none).
            shape: the shape it must have, ``None`` entries any length; None: any shape.
            max_size: the most bytes it may take (what its reader can need), or None: no limit
                beyond the file's and the machine's.
            need: why ``max_size`` (for the message), e.g. ``"3 bodies x 25 frames x 16 values"``.

        Raises:
            ArrayFileError: as the class says; also a shape other than ``shape``, more than
                ``max_size`` bytes, more than half the memory the machine has free
                (:func:`available_memory`), or no memory left while it is read.
        """
        info = self._members[name]
        where = f"array {name!r:.60}"
        try:
            with self._zip.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    read_header = np.lib.format.read_array_header_1_0
                elif version == (2, 0):
                    read_header = np.lib.format.read_array_header_2_0
                else:
                    raise ArrayFileError(self.path, f"{where}: .npy format version {version} is not read")
                # numpy's stubs (lib/format.pyi) leave out the max_header_size argument numpy >= 1.24 takes
                declared, fortran_order, dtype = read_header(member, MAX_HEADER_SIZE)  # type: ignore[call-arg]
                header_size = member.tell()
            if dtype.kind not in PLAIN_KINDS or dtype.hasobject or dtype.names is not None:
                raise ArrayFileError(
                    self.path, f"{where}: dtype {dtype.str} is not a plain numeric, boolean or string type")
            if shape is not None and (len(declared) != len(shape) or any(
                    want is not None and have != want for have, want in zip(declared, shape))):
                expected = "(" + ", ".join("any" if want is None else str(want) for want in shape) + ")"
                raise ArrayShapeError(self.path, f"{where}: shape {tuple(declared)}, not {expected}", tuple(declared))
            size = int(np.prod(declared, dtype=object)) * dtype.itemsize
            if size > info.file_size - header_size:
                raise ArrayFileError(self.path, f"{where}: its header claims {size} bytes, more than the "
                                     f"{info.file_size - header_size} the archive holds for it")
            if max_size is not None and size > max_size:
                raise ArrayFileError(self.path, f"{where}: its header claims {size} bytes, more than the {max_size} "
                                     f"it can need{f' ({need})' if need else ''}")
            if self.bytes_read + size > self.max_bytes:
                raise ArrayFileError(self.path, f"{where}: {size} bytes, beyond the limit of {self.max_bytes} bytes "
                                     "for this file's arrays")
            free = available_memory()
            if free is not None and 2 * size > free:
                raise ArrayFileError(self.path, f"{where}: its header claims {size} bytes, more than half the {free} "
                                     "bytes of memory this machine has free")
            with self._zip.open(info) as member:
                array = np.lib.format.read_array(member, allow_pickle=False)
        except ArrayFileError:
            raise
        except MemoryError:
            raise ArrayFileError(self.path, f"{where}: not enough memory to read it") from None
        except (ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as error:
            raise ArrayFileError(self.path, f"{where}: damaged ({error})") from None
        self.bytes_read += size
        return array

    def close(self) -> None:
        """Close the file (the arrays read stay valid)."""
        self._zip.close()
        self._stream.close()

    def __enter__(self) -> "ArrayFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
