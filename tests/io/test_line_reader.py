"""Reading text in blocks of lines, format detection."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsvm.io._line_reader import byte_ranges, compression, detect_format, read_range, stream_blocks


@st.composite
def texts(draw):
    lines = draw(st.lists(st.text("ab :.\r", max_size=30).map(lambda s: s.encode()), max_size=40))
    return b"\n".join(lines) + (b"\n" if draw(st.booleans()) else b"")


@settings(max_examples=200, deadline=None)
@given(texts(), st.integers(1, 60))
def test_byte_ranges_cover_every_line_once(tmp_path_factory, text, block):
    path = tmp_path_factory.mktemp("r") / "f.txt"
    path.write_bytes(text)
    pieces = [read_range(str(path), a, b) for a, b in byte_ranges(len(text), block)]
    assert b"".join(pieces) == text
    ends = np.cumsum([len(p) for p in pieces])
    assert all(p.endswith(b"\n") or not p or end == len(text) for p, end in zip(pieces, ends))


@settings(max_examples=200, deadline=None)
@given(texts(), st.integers(1, 60))
def test_stream_blocks_cut_at_line_ends(text, block):
    blocks = list(stream_blocks(io.BytesIO(text), block))
    assert b"".join(blocks) == text
    assert all(b.endswith(b"\n") for b in blocks[:-1])


def test_compression_and_format_detection(tmp_path):
    svm = b"+1 1:0.5 3:1\n-1 2:1\n"
    csv = b"1.5,2,0\n3,4,1\n"
    for opener, kind in [(open, None), (gzip.open, "gzip"), (bz2.open, "bz2"), (lzma.open, "xz")]:
        for content, fmt in [(svm, "libsvm"), (csv, "csv")]:
            path = tmp_path / f"{fmt}-{kind}"
            with opener(path, "wb") as f:
                f.write(content)
            assert compression(path) == kind
            assert detect_format(path) == fmt
    label_only = tmp_path / "labels"
    label_only.write_bytes(b"1\n-1\n+1 4:2\n")
    assert detect_format(label_only) == "libsvm"
    assert detect_format(tmp_path / "x.npy.gz") == "npy"
    assert detect_format(tmp_path / "x.tsv") == "csv"
    odd = tmp_path / "odd"
    odd.write_bytes(b"hello world\n")
    with pytest.raises(ValueError, match="format="):
        detect_format(odd)
    np.save(tmp_path / "arr", np.ones(3))
    (tmp_path / "arr.npy").rename(tmp_path / "arr.bin")
    assert detect_format(tmp_path / "arr.bin") == "npy"


# --------------------------------------------------------------------------- what is read, and how fast
def test_one_long_line_is_cut_in_linear_time():
    """The partial line was joined to every read: a 50 MB line took 15 s, a 1 GB one hours.  Here a 32 MiB
    line in 8 KiB reads (4096 reads: quadratic joining copies about 64 GiB) must take well under 10 s."""
    import time

    long_line = b"+1 " + b"7:1 " * (2**23) + b"\n"
    text = long_line + b"-1 2:1\n" + b"+1 3:1"
    started = time.perf_counter()
    blocks = list(stream_blocks(io.BytesIO(text), 8192))
    assert time.perf_counter() - started < 10
    assert blocks[0] == long_line + b"-1 2:1\n" and b"".join(blocks) == text
    assert all(b.endswith(b"\n") for b in blocks[:-1])


@pytest.mark.parametrize("reader", ["compression", "detect_format", "read_range", "open_binary"])
def test_a_fifo_is_refused_before_any_read(tmp_path, reader):
    from helpers import call_near_fifos

    from dsvm.exceptions import InputFileError
    from dsvm.io._line_reader import open_binary

    fifo = tmp_path / "data"
    os.mkfifo(fifo)
    call = {"compression": lambda: compression(fifo), "detect_format": lambda: detect_format(fifo),
            "read_range": lambda: read_range(str(fifo), 0, 10), "open_binary": lambda: open_binary(fifo).close()}
    exc = call_near_fifos(call[reader], fifo)
    assert isinstance(exc, InputFileError), exc
    assert str(exc) == f"{fifo}: it is a FIFO (named pipe), not a regular file; a data file must be a regular file"


@pytest.mark.parametrize("compressed", [False, True])
def test_a_line_longer_than_the_bound_is_an_error_not_exhausted_memory(tmp_path, monkeypatch, compressed):
    """One huge line (a small .gz can hold gigabytes of it) was gathered whole, however long."""
    from dsvm import io as dsvm_io
    from dsvm.exceptions import InputFileError
    from dsvm.io import _line_reader as text

    monkeypatch.setattr(text, "MAX_LINE_BYTES", 50_000)
    body = b"+1 1:1\n-1 " + " ".join(f"{j}:1" for j in range(1, 20_001)).encode() + b"\n+1 2:1\n"
    path = tmp_path / ("d.libsvm.gz" if compressed else "d.libsvm")
    path.write_bytes(gzip.compress(body) if compressed else body)
    with pytest.raises(InputFileError, match=r"d\.libsvm(\.gz)?: the line starting near byte 7 of the data is longer"):
        dsvm_io.ingest(str(path), tmp_path / "d.zarr", block_bytes=4096)
    assert not (tmp_path / "d.zarr").exists()
    monkeypatch.setattr(text, "MAX_LINE_BYTES", 200_000)  # within the bound the same file is read
    assert dsvm_io.ingest(str(path), tmp_path / "d.zarr", block_bytes=4096).n_samples == 3


@pytest.mark.parametrize("suffix, kind", [(".bz2", "bz2"), (".gz", "gzip"), (".xz", "xz")])
@pytest.mark.parametrize("content", [b"x", b"", b"1,2\n3,4\n"])
def test_a_compressed_name_without_compressed_data_is_damaged(tmp_path, suffix, kind, content):
    """`one.csv.bz2` holding `x` was read as plain text: "holds no rows of data" (a header `x` and nothing else)."""
    import dsvm
    from dsvm.exceptions import InputFileError

    path = tmp_path / f"one.csv{suffix}"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=rf"one\.csv\{suffix}: the {kind} data is corrupted: the file does not "
                                             rf"start as {kind} data does"):
        dsvm.ingest(path, tmp_path / "d.zarr")
    assert not (tmp_path / "d.zarr").exists()


def test_a_damaged_bz2_stream_is_named_as_such(tmp_path):
    import dsvm
    from dsvm.exceptions import InputFileError

    path = tmp_path / "one.csv.bz2"
    path.write_bytes(b"BZh9" + b"x" * 40)
    with pytest.raises(InputFileError, match=r"one\.csv\.bz2: the bz2 data is corrupted"):
        dsvm.ingest(path, tmp_path / "d.zarr")
    path.write_bytes(bz2.compress(b"a,b\n1,2\n3,4\n"))
    assert dsvm.ingest(path, tmp_path / "d.zarr").n_samples == 2
