"""Fuzzed LIBSVM and CSV files, plain and compressed, damaged or not, against independent readers.

Oracles: scikit-learn's ``load_svmlight_file`` for LIBSVM text, the ``csv``
module (plus ``float`` on ASCII decimal numbers; the label column's other texts
as class names) for CSV text, and Python's
``gzip`` / ``lzma`` / ``bz2`` modules for the compressed streams.  A file
``dsvm.io.ingest`` accepts must give exactly the oracle's matrix and labels;
a file it refuses must raise :class:`dsvm.exceptions.InputFileError` naming the file
(never another exception type), and leave nothing behind.  dsvm may refuse
more than the oracles (non-finite values, indices out of order): what it
accepts must still be exact.

The budget is fixed (``derandomize=True``): CI runs the same examples every time.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsvm.exceptions import InputFileError
from dsvm.io import ingest

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

COMPRESSORS = {"gzip": gzip.compress, "xz": lzma.compress, "bz2": bz2.compress}
DECOMPRESSORS = {"gzip": gzip.decompress, "xz": lzma.decompress, "bz2": bz2.decompress}
MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"BZh": "bz2"}


# Compression and damage -------------------------------------------------------------------------
@st.composite
def stored_bytes(draw, text: bytes, flips: bool):
    """``text`` as stored: plain or compressed, then intact, truncated or (compressed only) with a byte flipped."""
    kind = draw(st.sampled_from([None, "gzip", "xz", "bz2"]))
    raw = text if kind is None else COMPRESSORS[kind](text)
    damage = draw(st.sampled_from(["none", "none", "truncate", "flip"] if kind and flips else ["none", "truncate"]))
    if damage == "truncate" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif damage == "flip" and raw:
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([raw[at] ^ draw(st.integers(1, 255))]) + raw[at + 1:]
    return raw


def decompressed(raw: bytes) -> bytes | None:
    """What the stored bytes hold, as Python's own modules read them; None if they cannot."""
    kind = next((name for magic, name in MAGIC.items() if raw.startswith(magic)), None)
    if kind is None:
        return raw
    try:
        return DECOMPRESSORS[kind](raw)
    except Exception:  # truncated or corrupted: any error of the library
        return None


def ingest_or_error(raw: bytes, name: str, **options):
    """``(X dense float64, y)`` from dsvm, or the InputFileError it raised; checks nothing is left behind."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / name
        src.write_bytes(raw)
        try:
            ds = ingest(src, Path(tmp) / "d.zarr", dtype="float64", block_bytes=64, **options)
        except InputFileError as exc:
            assert name in str(exc), str(exc)
            assert os.listdir(tmp) == [name]
            return exc
        X, y = ds.load()
    return (X.toarray() if sp.issparse(X) else np.asarray(X)), np.asarray(y)


def assert_same(got, expected):
    if expected is None:
        assert isinstance(got, InputFileError), "dsvm accepted a file the oracle refuses"
        return
    if isinstance(got, InputFileError):
        return  # dsvm may refuse more than the oracle (non-finite values, ...)
    X, y = got
    X_ref, y_ref = expected
    assert X.shape == X_ref.shape
    np.testing.assert_array_equal(X, X_ref)
    np.testing.assert_array_equal(y, y_ref)


# LIBSVM -------------------------------------------------------------------------------------------
VALUES = ["0", "1", "-1", "2.5", "-0.125", "1e-3", "3.25E+2", ".5", "7.", "+4", "123456.789"]
BAD_TOKENS = ["3:abc", "x:1", "3:", "3::1", "2.5:1", "3:1e", "3:nan", "3:inf", "9:1 8:1", "3:0x10", "qid:1:2"]


@st.composite
def libsvm_text(draw):
    lines = []
    for _ in range(draw(st.integers(1, 15))):
        if draw(st.integers(0, 6)) == 6:
            lines.append(draw(st.sampled_from(["", "# comment", "  "])))
            continue
        label = draw(st.sampled_from(["1", "-1", "+1", "0", "2", "-1.0"]))
        idx = sorted(draw(st.sets(st.integers(1, 12), max_size=5)))
        feats = [f"{i}:{draw(st.sampled_from(VALUES))}" for i in idx]
        if draw(st.integers(0, 8)) == 8:
            feats.insert(0, f"qid:{draw(st.integers(0, 9))}")
        sep = draw(st.sampled_from([" ", "\t", "  "]))
        lines.append(sep.join([label, *feats]) + draw(st.sampled_from(["", " ", " # note"])))
    if draw(st.integers(0, 3)) == 3:  # one bad token somewhere
        k = draw(st.integers(0, len(lines)))
        lines.insert(k, "1 " + draw(st.sampled_from(BAD_TOKENS)))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return (eol.join(lines) + draw(st.sampled_from([eol, ""]))).encode()


def libsvm_oracle(raw: bytes):
    from sklearn.datasets import load_svmlight_file

    text = decompressed(raw)
    if text is None:
        return None
    try:
        X, y = load_svmlight_file(io.BytesIO(text), dtype=np.float64)
    except ValueError:
        return None
    if X.shape[0] == 0:
        return None  # dsvm refuses a file without rows
    if X.shape[1] == 1 and not re.search(rb"(^|\s)\d+:", text):
        X = sp.csr_matrix((X.shape[0], 0))  # no feature at all: scikit-learn still reports one column
    return X.toarray(), y


@FUZZ
@given(st.data())
def test_libsvm_ingest_matches_scikit_learn(data):
    text = data.draw(libsvm_text(), label="text")
    raw = data.draw(stored_bytes(text, flips=True), label="stored")
    assert_same(ingest_or_error(raw, "fuzz.libsvm", format="libsvm"), libsvm_oracle(raw))


# CSV ----------------------------------------------------------------------------------------------
NAMES = ["label", "alpha", "bravo", "charlie", "delta"]  # no name a flipped byte could make a number
CSV_VALUES = ["0", "1", "-1", "2.5", "-0.125", "1e-3", "3.25E+2", ".5", "7.", "+4", " 6 ", '"1.5"', '"-2"']
CSV_FAULTS = ["", "NA", "0x10", "nan", "inf", "abc", "1_000", '"1,5"', ' "3"', "1.2.3"]
_DECIMAL = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")


@st.composite
def csv_text(draw):
    """A CSV text and whether its first line is a header (the generator knows, the oracle is told)."""
    n_cols = draw(st.integers(2, 5))
    header = draw(st.booleans())
    rows = [[draw(st.sampled_from(CSV_VALUES)) for _ in range(n_cols)] for _ in range(draw(st.integers(1, 12)))]
    if draw(st.integers(0, 2)) == 2:  # one fault: a bad field, or a row too short or too long
        r, c = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, n_cols - 1))
        fault = draw(st.sampled_from(CSV_FAULTS + ["short", "long"]))
        if fault == "short":
            del rows[r][c]
        elif fault == "long":
            rows[r].append("1")
        else:
            rows[r][c] = fault
    lines = [",".join(NAMES[:n_cols])] if header else []
    for row in rows:
        if draw(st.integers(0, 6)) == 6:
            lines.append(draw(st.sampled_from(["", "# comment"])))
        lines.append(",".join(row) + draw(st.sampled_from(["", "", " # note"])))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + eol.join(lines) + draw(st.sampled_from([eol, ""]))).encode(), header


def csv_oracle(raw: bytes, header: bool):  # noqa: C901
    """The csv module's reading of the text, the first row being a header iff the file has one."""
    text = decompressed(raw)
    if text is None:
        return None
    try:
        text = text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.removeprefix("\ufeff")
    rows = []
    for line in text.replace("\r\n", "\n").split("\n"):
        body = line.split("#", 1)[0]
        if body.strip():
            rows.extend(csv.reader([body]))
    if header:
        rows = rows[1:]
    if not rows or len({len(r) for r in rows}) > 1:
        return None
    if not all(_DECIMAL.fullmatch(f) for r in rows for f in r[1:]):
        return None
    arr = np.array([[float(f) for f in r[1:]] for r in rows])
    if not np.isfinite(arr).all():
        return None
    labels = [r[0].strip() for r in rows]
    if all(_DECIMAL.fullmatch(f) for f in labels):
        y = np.array([float(f) for f in labels])
        return (arr, y) if np.isfinite(y).all() else None
    # a label that is not a number makes every label a class name: its text, numbers written shortest
    if any(not f or f.lower() in ("na", "n/a", "nan", "null") for f in labels):
        return None
    texts = []
    for f in labels:
        if _DECIMAL.fullmatch(f) or f.lower().lstrip("+-") in ("inf", "infinity"):
            v = float(f)
            if not np.isfinite(v):
                return None
            texts.append(str(int(v)) if v.is_integer() else repr(v))
        else:
            texts.append(f)
    return arr, np.array(texts)


@FUZZ
@given(st.data())
def test_csv_ingest_matches_the_csv_module(data):
    text, header = data.draw(csv_text(), label="text")
    raw = data.draw(stored_bytes(text, flips=True), label="stored")
    if header and raw and decompressed(raw) is not None and not decompressed(raw).lstrip(b"\xef\xbb\xbf").strip():
        return  # nothing left of the file
    assert_same(ingest_or_error(raw, "fuzz.csv", format="csv"), csv_oracle(raw, header))


def test_the_fuzz_budget_reaches_every_outcome():
    """The fixed examples cover accepted, refused, compressed and damaged files (checked once)."""
    outcomes = set()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def classify(data):
        text, header = data.draw(csv_text(), label="text")
        raw = data.draw(stored_bytes(text, flips=True), label="stored")
        plain = decompressed(raw)
        outcomes.add("compressed" if plain is not raw else "plain")
        outcomes.add("damaged" if plain is None else ("accepted" if csv_oracle(raw, header) else "refused"))

    classify()
    assert outcomes == {"compressed", "plain", "damaged", "accepted", "refused"}
