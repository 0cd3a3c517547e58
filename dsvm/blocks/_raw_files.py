"""One row block per raw file, moved between disk and page-aligned buffers with ``O_DIRECT``.

A feature block read every pass of a solve is read faster straight into a
buffer the reading thread keeps (:func:`thread_buffer`) than through a
storage library: no decode, no bytes object, no fresh allocation (and page
faults) per block.  ``O_DIRECT`` moves the bytes between the disk and that
buffer without the page cache, so one pass over a feature matrix larger than
memory does not evict what the next needs, and reads at the speed of the disk.
It needs a page-aligned buffer and a length that is a multiple of the
page: files are padded to :data:`ALIGN` bytes.  Where the filesystem refuses
``O_DIRECT`` (tmpfs, some network filesystems: ``EINVAL``), or ``direct`` is
off, the same calls fall back to buffered I/O and drop the file's pages from
the cache after a read (``POSIX_FADV_DONTNEED``).
"""

from __future__ import annotations

import errno
import mmap
import os
import threading

import numpy as np

__all__ = ["ALIGN", "padded", "thread_buffer", "aligned_empty", "write_raw", "read_raw"]

ALIGN = 4096
_LOCAL = threading.local()
_DIRECT = getattr(os, "O_DIRECT", 0)


def padded(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-int(nbytes) // ALIGN) * ALIGN


def thread_buffer(nbytes: int, name: str = "block") -> np.ndarray:
    """A page-aligned byte buffer of ``padded(nbytes)`` bytes, one per thread and ``name``, reused by the next call.

    The thread's next call with that name may hand out the same memory: a
    caller must be done with it (its I/O finished) before it returns.
    """
    size = padded(nbytes)
    have = getattr(_LOCAL, name, None)
    if have is None or have.nbytes < size:
        if have is not None:  # release the smaller buffer before mapping the larger one
            delattr(_LOCAL, name)
            del have
        have = np.frombuffer(mmap.mmap(-1, size), dtype=np.uint8)
        setattr(_LOCAL, name, have)
    return have[:size]


def aligned_empty(nbytes: int) -> np.ndarray:
    """A new page-aligned byte array of ``padded(nbytes)`` bytes (for a block that outlives its task)."""
    size = padded(nbytes)
    base = np.empty(size + ALIGN, dtype=np.uint8)
    start = -base.ctypes.data % ALIGN
    return base[start : start + size]


def _refused(exc: OSError) -> bool:
    return exc.errno == errno.EINVAL


def _direct_io(path: str, flags: int, io) -> bool:
    """``io(fd)`` on ``path`` opened with ``flags | O_DIRECT``; False (nothing done) where the platform or
    the filesystem refuses ``O_DIRECT``, so that the caller does it buffered."""
    if not _DIRECT:
        return False
    try:
        fd = os.open(path, flags | _DIRECT, 0o600)
    except OSError as exc:
        if not _refused(exc):
            raise
        return False
    try:
        io(fd)
        return True
    except OSError as exc:
        if not _refused(exc):
            raise
        return False
    finally:
        os.close(fd)


def _write_all(fd: int, data: memoryview) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], done)


def write_raw(path: str, data: np.ndarray, direct: bool = True) -> None:
    """Write the bytes ``data`` (page-aligned, a multiple of :data:`ALIGN` long) to a new file ``path``.

    ``O_DIRECT`` when ``direct`` and the filesystem takes it, else buffered.
    The folder must exist: a store removed meanwhile is not made again.
    """
    view = memoryview(data).cast("B")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if direct and _direct_io(path, flags, lambda fd: _write_all(fd, view)):
        return
    fd = os.open(path, flags, 0o600)
    try:
        _write_all(fd, view)
    finally:
        os.close(fd)


def _read_all(fd: int, view: memoryview, path: str) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], done)
        if got == 0:
            raise EOFError(f"{path}: the file ends after {done} of {len(view)} bytes")
        done += got


def read_raw(path: str, out: np.ndarray, direct: bool = True) -> None:
    """Fill ``out`` (page-aligned bytes, a multiple of :data:`ALIGN` long) from the start of file ``path``.

    ``O_DIRECT`` when ``direct`` and the filesystem takes it; else a buffered
    read, after which the file's pages are dropped from the page cache.
    """
    view = memoryview(out).cast("B")
    if direct and _direct_io(path, os.O_RDONLY, lambda fd: _read_all(fd, view, path)):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        _read_all(fd, view, path)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
