"""Reading text files in blocks of complete lines.

* every open goes through :func:`open_data_file`: only a regular file is read
  (a FIFO or a device is refused at once, see :mod:`dsvm.user_files`);
* :func:`compression` recognises gzip, xz and bzip2 by their magic bytes (so
  the file name does not matter); :func:`open_binary` decompresses them as a
  stream, and a truncated or corrupted stream raises
  :class:`~dsvm.exceptions.InputFileError` naming the file, whatever the
  compression library raised;
* uncompressed files are cut into byte ranges (:func:`byte_ranges`) that
  tasks read independently (:func:`read_range`): a range owns the lines that
  *start* inside it, so every line belongs to exactly one range;
* compressed files are decompressed as a stream and cut into blocks at line
  boundaries (:func:`stream_blocks`), holding one block (plus a partial line)
  at a time, in time linear in the text (also for one very long line);
* :func:`detect_format` guesses the format from the name, then from the first
  line.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..exceptions import InputFileError
from ..user_files import open_user_file

__all__ = [
    "open_data_file",
    "compression",
    "open_binary",
    "CompressedFile",
    "byte_ranges",
    "read_range",
    "stream_blocks",
    "detect_format",
    "DEFAULT_BLOCK_BYTES",
]

DEFAULT_BLOCK_BYTES = 16 * 2**20
# one line (one row) is held whole while it is parsed: a longer one is an error, not an exhausted memory
MAX_LINE_BYTES = 2**30
_MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"BZh": "bz2"}
_COMPRESSED_SUFFIXES = (".gz", ".xz", ".lzma", ".bz2")
# the compression a suffix promises (.lzma files may be of the legacy format, which has no signature)
_SUFFIX_KINDS = {".gz": "gzip", ".xz": "xz", ".bz2": "bz2"}
_LIBSVM_LINE = re.compile(rb"^\s*[+-]?[\d.]+[eE0-9+-]*(\s+(qid:\S+|\d+:\S+))*\s*(#.*)?$")


def open_data_file(path: str | os.PathLike) -> BinaryIO:
    """A data file opened for reading bytes: only a regular file (a FIFO or a device is an
    :class:`InputFileError` at once, see :mod:`dsvm.user_files`)."""
    return open_user_file(path, "data file", InputFileError)


def compression(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"xz"``, ``"bz2"`` or ``None``, from the first bytes of the file.

    A file named as compressed (``.gz``, ``.xz``, ``.bz2``) whose first bytes
    are not that compression's signature is damaged (or misnamed): an
    :class:`InputFileError`, as for a stream damaged further on, never text
    read as it is.
    """
    with open_data_file(path) as f:
        head = f.read(6)
    for magic, name in _MAGIC.items():
        if head.startswith(magic):
            return name
    suffix = Path(path).suffix.lower()
    expected = _SUFFIX_KINDS.get(suffix)
    if expected is not None:
        start = f"starts with {head!r}" if head else "is empty"
        raise InputFileError(
            f"{path}: the {expected} data is corrupted: the file does not start as {expected} data does (it {start}); "
            f"the file is damaged: copy or compress it again (or, if it is not compressed, name it without {suffix})")
    return None


_OPENERS = {"gzip": lambda f: gzip.GzipFile(fileobj=f), "xz": lzma.LZMAFile, "bz2": bz2.BZ2File}


class CompressedFile:
    """The decompressed bytes of a gzip / xz / bzip2 file, read as a stream.

    A truncated or corrupted stream raises :class:`InputFileError` naming the
    file and how far it was read, instead of the library's ``EOFError``,
    ``zlib.error``, ``BadGzipFile``, ``LZMAError`` or ``OSError``.
    """

    def __init__(self, path: str | os.PathLike, kind: str):
        self.path = str(path)
        self.kind = kind
        self.raw = open_data_file(path)
        self.stream = _OPENERS[kind](self.raw)
        self.position = 0  # decompressed bytes delivered so far

    def _checked(self, fn, *args) -> bytes:
        try:
            data = fn(*args)
        except (EOFError, zlib.error, lzma.LZMAError) as exc:
            raise self._damaged(exc) from None
        except OSError as exc:
            if exc.errno is not None:  # a real I/O error, not damaged data
                raise
            raise self._damaged(exc) from None
        self.position += len(data)
        return data

    def _damaged(self, exc: Exception) -> InputFileError:
        what = "truncated" if isinstance(exc, EOFError) else "corrupted"
        return InputFileError(
            f"{self.path}: the {self.kind} data is {what} ({exc}) after {self.position} bytes of decompressed "
            "text; the file is damaged: copy or compress it again"
        )

    def read(self, size: int = -1) -> bytes:
        return self._checked(self.stream.read, size)

    def readline(self) -> bytes:
        return self._checked(self.stream.readline)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def compressed_position(self) -> int:
        """Bytes of the compressed file consumed so far (for progress)."""
        return self.raw.tell()

    def close(self) -> None:
        self.stream.close()
        self.raw.close()

    def __enter__(self) -> CompressedFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_binary(path: str | os.PathLike) -> BinaryIO | CompressedFile:
    """Open a file for reading bytes, decompressing it transparently (see :class:`CompressedFile`)."""
    kind = compression(path)
    if kind is not None:
        return CompressedFile(path, kind)
    return open_data_file(path)


def byte_ranges(size: int, block_bytes: int, start: int = 0) -> list[tuple[int, int]]:
    """Split ``[start, size)`` into ranges of about ``block_bytes``."""
    block_bytes = max(int(block_bytes), 1)
    edges = list(range(start, size, block_bytes)) + [size]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:])] or [(start, size)]


def _line_too_long(name: str, offset: int) -> InputFileError:
    return InputFileError(f"{name}: the line starting near byte {offset:,} of the data is longer than "
                          f"{MAX_LINE_BYTES // 2**20:,} MiB; dsvm holds one line whole while it parses it, so a row "
                          "must fit in that (is it really a line-based text file?)")


def read_range(path: str, start: int, end: int, chunk: int = 1 << 20) -> bytes:
    """The complete lines that start in ``[start, end)`` of an uncompressed file (each at most
    :data:`MAX_LINE_BYTES`)."""
    with open_data_file(path) as f:
        if start > 0:
            f.seek(start - 1)
            data = f.read(end - start + 1)
            nl = data.find(b"\n")
            if nl < 0 or nl >= end - start:  # no line starts inside the range
                return b""
            data = data[nl + 1 :]
        else:
            data = f.read(end - start)
        if data and not data.endswith(b"\n"):
            tail, held = [], len(data) - data.rfind(b"\n") - 1
            while True:
                more = f.read(chunk)
                if not more:
                    break
                nl = more.find(b"\n")
                held += nl + 1 if nl >= 0 else len(more)
                if held > MAX_LINE_BYTES:
                    raise _line_too_long(path, end - (len(data) - data.rfind(b"\n") - 1))
                if nl >= 0:
                    tail.append(more[: nl + 1])
                    break
                tail.append(more)
            data += b"".join(tail)
    return data


def stream_blocks(stream: BinaryIO, block_bytes: int, name: str = "the input") -> Iterator[bytes]:
    """Blocks of complete lines (about ``block_bytes`` each) from a byte stream.

    A line longer than a block is gathered as a list of reads and joined once,
    when its end arrives: joining the partial line to every read would copy it
    once per read, quadratic in the line's length.  A line longer than
    :data:`MAX_LINE_BYTES` is an :class:`InputFileError` naming ``name``.
    """
    carry: list[bytes] = []  # the partial line so far: reads without a newline
    held, offset = 0, 0  # bytes in carry; bytes of the stream before carry
    while True:
        data = stream.read(block_bytes)
        if not data:
            if carry:
                yield b"".join(carry)
            return
        nl = data.rfind(b"\n")
        if nl < 0:
            carry.append(data)
            held += len(data)
            if held > MAX_LINE_BYTES:
                raise _line_too_long(name, offset)
            continue
        carry.append(data[: nl + 1])
        block = b"".join(carry)
        offset += len(block)
        yield block
        carry = [data[nl + 1 :]] if nl + 1 < len(data) else []
        held = len(data) - nl - 1


def _strip_compression_suffix(name: str) -> str:
    lower = name.lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def detect_format(path: str | os.PathLike) -> str:
    """``"libsvm"``, ``"csv"``, ``"npy"`` or ``"parquet"`` from the file name, else from the content."""
    name = _strip_compression_suffix(Path(path).name).lower()
    suffix = Path(name).suffix
    if suffix == ".npy":
        return "npy"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".libsvm", ".svm", ".svmlight", ".svml"):
        return "libsvm"
    if suffix in (".parquet", ".parq", ".pq"):
        return "parquet"
    with open_binary(path) as f:
        head = f.read(64 * 1024)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PAR1"):
        return "parquet"
    for line in head.split(b"\n")[:50]:
        body = line.split(b"#", 1)[0].strip()
        if not body:
            continue
        if b":" in body and _LIBSVM_LINE.match(line.rstrip(b"\r")):
            return "libsvm"
        if b"," in body or b"\t" in body or b";" in body:
            return "csv"
        if _LIBSVM_LINE.match(line.rstrip(b"\r")):
            continue  # a label-only line: look further
        break
    raise ValueError(
        f"cannot tell the format of {path}; pass format='libsvm', 'csv', 'npy' or 'parquet'"
    )
