"""The archive format of model and checkpoint files: ``.npz`` (a zip of ``.npy`` arrays) plus one JSON
member ``__meta__``, no pickle.

Writing goes through :func:`dsvm.io._replace.write_file` (a private temporary
file, moved into place when complete; only a file of the same format is ever
replaced).  Reading is bounded, so a crafted or damaged file cannot exhaust
memory or hang the reader:

- only a regular file is opened (a FIFO, a device such as ``/dev/zero``
  behind a symbolic link, or a directory is refused before any read);
- only the members the format names are read, the metadata first (at most
  :data:`MAX_META_BYTES`, parsed with a nesting limit);
- before any array data is decompressed, each member's ``.npy`` header is
  read and checked: a plain numeric or string dtype, a shape that agrees with
  the metadata and with the other members (:class:`MemberRules`), and a size
  that agrees with the zip's declared size.  An uncompressed member (what
  dsvm writes) must lie within the file; a compressed one may declare at most
  :data:`MAX_COMPRESSED_MEMBER` bytes.  Memory is therefore bounded by the
  file's size plus a small constant.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ModelFileError
from ..user_files import open_user_file
from ._replace import regular_file_problem, write_file

__all__ = ["ModelFileError", "MemberRules", "read_npz", "write_npz", "meta_array", "npz_problem", "read_meta",
           "SUPPORTED_VERSION"]

META = "__meta__"
MAX_META_BYTES = 16 * 2**20
MAX_COMPRESSED_MEMBER = 64 * 2**20
MAX_MEMBERS = 100_000
SUPPORTED_VERSION = 1


@dataclass
class MemberRules:
    """What the members of one archive may be, given its metadata.

    ``shapes`` maps each member the format names to a shape template: a tuple
    of symbols (str) and fixed sizes (int), or None for any shape.  A symbol
    takes one value across all members; ``known`` fixes some from the
    metadata and ``at_most`` bounds others.  ``kinds`` gives each member's
    allowed dtype kinds (numpy ``dtype.kind`` letters, default ``"biuf"``).
    """

    shapes: dict[str, tuple | None]
    known: dict[str, int] = field(default_factory=dict)
    at_most: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


def meta_array(meta: dict) -> np.ndarray:
    """The metadata as the ``__meta__`` member: UTF-8 JSON bytes."""
    return np.frombuffer(json.dumps(meta, default=_json_default).encode("utf-8"), dtype=np.uint8)


def _json_default(obj: Any):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in model metadata")


def write_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray], *, overwrite: bool, what: str,
              expected_format: str) -> Path:
    """Write ``arrays`` (``__meta__`` included) as an uncompressed ``.npz`` through :func:`~dsvm.io._replace.write_file`.

    An existing ``path`` is replaced only with ``overwrite`` and only if it is
    a file of ``expected_format`` (:func:`npz_problem`).
    """
    needed = sum(np.asarray(a).nbytes + 256 for a in arrays.values())
    return write_file(path, lambda f: np.savez(f, **arrays), overwrite=overwrite, what=what, needed=needed,
                      ours=lambda p: npz_problem(p, expected_format))


def npz_problem(path: Path, expected_format: str) -> str | None:
    """None if ``path`` is a regular ``expected_format`` file (by its metadata), else why it is not."""
    reason = regular_file_problem(path)
    if reason is not None:
        return reason
    try:
        meta = read_meta(path, expected_format)
    except ModelFileError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return None if meta.get("format") == expected_format else f"its format is {meta.get('format')!r}"


def _open_regular(path: Path, kind: str):
    """``path`` opened for reading, refused before any read unless it is a regular file
    (:func:`dsvm.user_files.open_user_file`: opening a FIFO does not wait for a writer)."""
    try:
        return open_user_file(path, f"dsvm {kind} file", ModelFileError)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot be opened ({exc.strerror})") from None


def _kind(expected_format: str) -> str:
    return expected_format.split("-")[-1]


def _open_zip(path: Path, expected_format: str):
    f = _open_regular(path, _kind(expected_format))
    try:
        if not zipfile.is_zipfile(f):
            # np.load would try anything else as a pickle (and suggest allowing it)
            raise ModelFileError(f"{path}: not a dsvm {_kind(expected_format)} file (not an .npz archive)")
        f.seek(0)
        z = zipfile.ZipFile(f)
        if len(z.infolist()) > MAX_MEMBERS:
            raise ModelFileError(f"{path}: {len(z.infolist())} archive members; a dsvm file has a few")
        return f, z
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        f.close()
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{path}: not a dsvm file or corrupted ({exc})") from None
    except BaseException:
        f.close()
        raise


def _member(z: zipfile.ZipFile, name: str) -> zipfile.ZipInfo | None:
    try:
        return z.getinfo(f"{name}.npy")
    except KeyError:
        return None


def _header(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo, file_size: int):
    """``(shape, fortran_order, dtype, data_bytes)`` of a member, checked before any data is read."""
    name = info.filename
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size or info.header_offset + info.compress_size > file_size:
            raise ModelFileError(f"{path}: member {name} declares {info.file_size} bytes but the file holds "
                                 f"{max(0, file_size - info.header_offset)} from its start")
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if info.file_size > MAX_COMPRESSED_MEMBER or info.compress_size > file_size:
            raise ModelFileError(f"{path}: compressed member {name} declares {info.file_size} bytes "
                                 f"(at most {MAX_COMPRESSED_MEMBER} are read from a compressed member)")
    else:
        raise ModelFileError(f"{path}: member {name} uses compression method {info.compress_type}; "
                             "dsvm reads stored or deflated members")
    with z.open(info) as fp:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"npy format version {version} is not supported")
        header_bytes = fp.tell()
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biufU":
        raise ModelFileError(f"{path}: member {name} has dtype {dtype}; refused (dsvm files hold plain numbers "
                             "and strings, never objects or pickles)")
    data_bytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if header_bytes + data_bytes != info.file_size:
        raise ModelFileError(f"{path}: member {name} declares shape {shape} of {dtype} ({data_bytes} bytes) but "
                             f"the archive declares {info.file_size - header_bytes} bytes of data")
    return tuple(int(s) for s in shape), bool(fortran), dtype, data_bytes


def _read_data(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo, header) -> np.ndarray:
    shape, fortran, dtype, data_bytes = header
    out = np.empty(data_bytes, dtype=np.uint8)
    view = memoryview(out)
    with z.open(info) as fp:
        fp.seek(info.file_size - data_bytes)
        done = 0
        while done < data_bytes:
            n = fp.readinto(view[done:])
            if not n:
                raise ModelFileError(f"{path}: member {info.filename} is truncated")
            done += n
        fp.read(1)  # reaching the member's end checks its CRC
    arr = out.view(dtype)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def _loads(path: Path, raw: bytes) -> dict:
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: metadata is corrupted ({exc})") from None
    except RecursionError:
        raise ModelFileError(f"{path}: metadata nests too deeply (corrupted or crafted)") from None
    return meta


def _check_format(path: Path, meta: Any, expected_format: str) -> dict:
    if not isinstance(meta, dict) or meta.get("format") != expected_format:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ModelFileError(f"{path}: not a {expected_format} file (format={found!r})")
    if meta.get("format_version") != SUPPORTED_VERSION:
        raise ModelFileError(f"{path}: format version {meta.get('format_version')!r} is not supported "
                             f"(this dsvm reads version {SUPPORTED_VERSION})")
    return meta


def _read_meta_member(path: Path, z: zipfile.ZipFile, file_size: int, expected_format: str) -> dict:
    info = _member(z, META)
    if info is None:
        raise ModelFileError(f"{path}: not a dsvm file (no {META} entry)")
    if info.file_size > MAX_META_BYTES:
        raise ModelFileError(f"{path}: metadata declares {info.file_size} bytes (at most {MAX_META_BYTES})")
    header = _header(path, z, info, file_size)
    if header[2] != np.dtype(np.uint8) or len(header[0]) != 1:
        raise ModelFileError(f"{path}: metadata member has shape {header[0]} and dtype {header[2]}, expected bytes")
    return _check_format(path, _loads(path, _read_data(path, z, info, header).tobytes()), expected_format)


@contextmanager
def _opened(path: Path, expected_format: str) -> Iterator[tuple[zipfile.ZipFile, int]]:
    """The archive and the file's size; a read error inside becomes a :class:`ModelFileError` naming the file."""
    f, z = _open_zip(path, expected_format)
    with f, z:
        try:
            yield z, os.fstat(f.fileno()).st_size
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"{path}: not a dsvm file or corrupted ({exc})") from None


def read_meta(path: str | os.PathLike, expected_format: str) -> dict:
    """Only the metadata of an archive (e.g. to recognise a file before replacing it)."""
    path = Path(path)
    with _opened(path, expected_format) as (z, file_size):
        return _read_meta_member(path, z, file_size, expected_format)


KIND_NAMES = {"f": "floating point", "iu": "integers", "biuf": "numbers", "biufU": "numbers or strings"}


def _unify(path: Path, rules: MemberRules, headers: dict[str, tuple]) -> None:
    """Every member's shape matches its template, each symbol one value, within the metadata's bounds."""
    value = dict(rules.known)
    for name, (shape, _, dtype, _) in headers.items():
        kinds = rules.kinds.get(name, "biuf")
        if dtype.kind not in kinds:
            raise ModelFileError(f"{path}: array {name!r} has dtype {dtype}, expected {KIND_NAMES.get(kinds, kinds)}")
        template = rules.shapes[name]
        if template is None:
            continue
        if len(shape) != len(template):
            raise ModelFileError(f"{path}: {name} has shape {shape}, expected {len(template)} dimensions")
        for size, sym in zip(shape, template):
            if isinstance(sym, int):
                ok = size == sym
            else:
                ok = value.setdefault(sym, size) == size and size <= rules.at_most.get(sym, size)
            if not ok:
                want = "(" + ", ".join(str(s if isinstance(s, int) else value.get(s, s)) for s in template) + ")"
                bound = {s: rules.at_most[s] for s in template if s in rules.at_most}
                limit = "".join(f", {s} at most {b}" for s, b in bound.items())
                raise ModelFileError(f"{path}: {name} has shape {shape}, which does not match the metadata and the "
                                     f"other arrays (expected {want}{limit})")


def read_npz(path: str | os.PathLike, expected_format: str,
             rules: Callable[[Path, dict], MemberRules]) -> tuple[dict, dict[str, np.ndarray]]:
    """Read an archive written by :func:`write_npz`: ``(meta, arrays)`` (see the module docstring).

    ``rules(path, meta)`` checks the metadata (raising :class:`ModelFileError`)
    and returns the :class:`MemberRules` of the format; members it does not
    name are not read.
    """
    path = Path(path)
    with _opened(path, expected_format) as (z, file_size):
        meta = _read_meta_member(path, z, file_size, expected_format)
        member_rules = rules(path, meta)
        infos = {name: info for name in member_rules.shapes if (info := _member(z, name)) is not None}
        headers = {name: _header(path, z, info, file_size) for name, info in infos.items()}
        _unify(path, member_rules, headers)
        arrays = {name: _read_data(path, z, infos[name], headers[name]) for name in infos}
    return meta, arrays
