"""LIBSVM parsing: the vectorised block parser and ``ingest`` against independently built matrices."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsvm.io
import dsvm.io._libsvm as libsvm
from dsvm.io._libsvm import LineError, check_line, parse_libsvm_block


def _csr(block, n_features, shift=1):
    return sp.csr_matrix((block.data, block.indices - shift, block.indptr), shape=(block.n_rows, n_features))


# Small, explicit cases ---------------------------------------------------------------
def test_basic_quirks():
    text = (
        b"+1 1:0.5 3:1 \r\n"  # CRLF, trailing space
        b"\n"  # blank line
        b"-1.0 qid:7 2:-2.5e-3 4:0.0 # a comment\n"  # qid, exponent, explicit zero, comment
        b"# only a comment\n"
        b"   \t \n"  # whitespace only
        b"-1 \n"  # no features
        b"1.0\t2:1e2   5:.5"  # tabs, several spaces, missing final newline
    )
    block = parse_libsvm_block(text, dtype=np.float64)
    assert block.n_rows == 4
    np.testing.assert_array_equal(block.y, [1, -1, -1, 1])
    X = _csr(block, 5).toarray()
    expected = np.zeros((4, 5))
    expected[0, [0, 2]] = [0.5, 1]
    expected[1, [1, 3]] = [-2.5e-3, 0.0]
    expected[3, [1, 4]] = [100, 0.5]
    np.testing.assert_array_equal(X, expected)
    assert block.nnz == 6  # the explicit zero is kept
    assert (block.min_index, block.max_index) == (1, 5)
    assert block.max_index_line == 7
    assert block.n_lines == 6


def test_values_match_python_float_exactly():
    tokens = ["1", "0.1", "-0.659091", "123456.789012345", "0.1234567890123456", "1e-300", "-3E+5",
              "+.25", "7.", "00012", "9007199254740993", "2.5e-3", "0.0395473"]
    text = "".join(f"1 {k + 1}:{t}\n" for k, t in enumerate(tokens)).encode()
    block = parse_libsvm_block(text, dtype=np.float64)
    np.testing.assert_array_equal(block.data, [float(t) for t in tokens])


def test_many_pieces(monkeypatch):
    monkeypatch.setattr(libsvm, "PIECE_BYTES", 64)
    rng = np.random.default_rng(0)
    lines = [f"{rng.choice([-1, 1])} " + " ".join(f"{j}:{rng.normal():.6g}" for j in sorted(rng.choice(50, 5, replace=False) + 1))
             for _ in range(300)]
    text = ("\n".join(lines) + "\n").encode()
    block = parse_libsvm_block(text, dtype=np.float64)
    assert block.n_rows == 300
    for k in (0, 150, 299):
        label, feats = check_line(lines[k].encode(), dtype=np.float64)
        assert block.y[k] == label
        row = slice(block.indptr[k], block.indptr[k + 1])
        assert list(zip(block.indices[row], block.data[row])) == feats
    with pytest.raises(LineError) as err:
        parse_libsvm_block(text + b"1 3:x\n", dtype=np.float64)
    assert err.value.line == 301


@pytest.mark.parametrize(
    "line, pattern",
    [
        (b"+1 3:abc 5:1", r"cannot parse '3:abc' in line '\+1 3:abc 5:1'"),
        (b"abc 1:1", r"cannot parse label 'abc'"),
        (b"1 3 5:1", r"cannot parse '3'"),
        (b"1 a:1", r"cannot parse 'a:1'"),
        (b"1 -3:1", r"cannot parse '-3:1'"),
        (b"1 1.5:1", r"cannot parse '1.5:1'"),
        (b"1 3:", r"cannot parse '3:'"),
        (b"1 :3", r"cannot parse ':3'"),
        (b"1 3:1:2", r"cannot parse '3:1:2'"),
        (b"1 3:1.2.3", r"cannot parse '3:1.2.3'"),
        (b"1 3:1 2:1", r"strictly increasing: 2 after 3"),
        (b"1 3:1 3:2", r"strictly increasing: 3 after 3"),
        (b"1 3:nan", r"not finite"),
        (b"1 3:1e39", r"not finite in float32"),
        (b"inf 3:1", r"label 'inf' is not finite"),
        (b"1:1 2:1", r"cannot parse label '1:1'"),
        (b"1 3:1\x00", r"cannot parse"),
    ],
)
def test_malformed_line_message(line, pattern):
    text = b"1 1:1\n\n-1 2:1\n" + line + b"\n1 1:1\n"
    with pytest.raises(LineError) as err:
        parse_libsvm_block(text)
    assert err.value.line == 4
    assert re.search(pattern, err.value.message), err.value.message


def test_index_range_checks():
    with pytest.raises(LineError, match="index 0 with one-based"):
        parse_libsvm_block(b"1 2:1\n1 0:1\n", zero_based=False)
    with pytest.raises(LineError, match=r"out of range for n_features=4 \(one-based"):
        parse_libsvm_block(b"1 2:1\n1 5:1\n", zero_based=False, n_features=4)
    with pytest.raises(LineError, match=r"out of range for n_features=4 \(zero-based"):
        parse_libsvm_block(b"1 2:1\n1 4:1\n", zero_based=True, n_features=4)
    block = parse_libsvm_block(b"1 0:1 4:1\n", zero_based="auto", n_features=4)  # checked later by ingest
    assert (block.min_index, block.max_index) == (0, 4)


def test_a_feature_index_beyond_32_bits_is_refused_with_its_line(tmp_path):
    """One token ``1000000000000:1`` would make n_features 10**12 and every dense landmark 8 TB: refused where
    it is read, with its line, and nothing is written."""
    top = libsvm.MAX_FEATURE_INDEX
    assert parse_libsvm_block(f"1 1:1\n-1 {top}:1\n".encode()).max_index == top
    for index in (top + 1, 2**31, 10**12):
        with pytest.raises(LineError, match=f"feature index {index} is too large") as info:
            parse_libsvm_block(f"1 1:1\n-1 2:1\n1 1:0.5 {index}:1\n".encode())
        assert info.value.line == 3
    path = tmp_path / "wide.libsvm"
    path.write_text("1 1:1\n-1 2:1\n1 1:0.5 1000000000000:1\n")
    with pytest.raises(dsvm.exceptions.InputFileError, match=r"wide.libsvm:3: feature index 1000000000000 is too large"):
        dsvm.io.ingest(path, tmp_path / "wide.zarr")
    assert not (tmp_path / "wide.zarr").exists()


# Property tests ------------------------------------------------------------------------
LABELS = {
    -1.0: ["-1", "-1.0", "-1.", "-1e0"],
    1.0: ["1", "+1", "1.0", "+1.000"],
    0.0: ["0", "0.0", "-0"],
    2.0: ["2", "2.0"],
    7.0: ["7", "7e0"],
}


@st.composite
def value_tokens(draw):
    kind = draw(st.sampled_from(["int", "short", "repr", "g", "exp", "zero"]))
    if kind == "int":
        x = float(draw(st.integers(-1000, 1000)))
        return str(int(x)), x
    if kind == "zero":
        tok = draw(st.sampled_from(["0", "0.0", "-0.0", "0.000"]))
        return tok, float(tok)
    x = draw(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=64))
    tok = {"short": f"{x:.4f}", "repr": repr(x), "g": f"{x:g}", "exp": f"{x:.3e}"}[kind]
    return tok, float(tok)


@st.composite
def libsvm_files(draw, max_rows=25, max_features=40):
    """A valid LIBSVM text and the matrix, labels and layout it encodes (1-based indices)."""
    n_rows = draw(st.integers(1, max_rows))
    crlf = draw(st.booleans())
    eol = "\r\n" if crlf else "\n"
    lines, labels, rows = [], [], []
    for _ in range(n_rows):
        while draw(st.integers(0, 5)) == 5:  # blank / whitespace / comment lines
            lines.append(draw(st.sampled_from(["", "  ", "\t", "# comment", " # 1:2 x"])))
        label = draw(st.sampled_from(sorted(LABELS)))
        label_tok = draw(st.sampled_from(LABELS[label]))
        idx = sorted(draw(st.sets(st.integers(1, max_features), max_size=8)))
        vals = [draw(value_tokens()) for _ in idx]
        sep = lambda: draw(st.sampled_from([" ", " ", "  ", "\t"]))  # noqa: E731
        parts = [label_tok]
        if draw(st.integers(0, 4)) == 4:
            parts.append(f"qid:{draw(st.integers(0, 99))}")
        parts += [f"{i}:{tok}" for i, (tok, _) in zip(idx, vals)]
        line = sep().join(parts) if len(parts) > 1 else parts[0]
        line = draw(st.sampled_from(["", " "])) + line
        line += draw(st.sampled_from(["", " ", "  ", " # trailing comment"]))
        lines.append(line)
        labels.append(label)
        rows.append([(i, v) for i, (_, v) in zip(idx, vals)])
    text = eol.join(lines) + (eol if draw(st.booleans()) else "")
    n_features = max([i for r in rows for i, _ in r], default=0)
    X = np.zeros((n_rows, max(n_features, 1)))
    for r, feats in enumerate(rows):
        for i, v in feats:
            X[r, i - 1] = v
    return text.encode(), X[:, :n_features], np.array(labels), lines


@settings(max_examples=150, deadline=None)
@given(libsvm_files(), st.sampled_from([64, 256, 1 << 18]))
def test_parser_round_trip(case, piece_bytes):
    text, X, y, _ = case
    old = libsvm.PIECE_BYTES
    libsvm.PIECE_BYTES = piece_bytes
    try:
        block = parse_libsvm_block(text, dtype=np.float64)
    finally:
        libsvm.PIECE_BYTES = old
    np.testing.assert_array_equal(block.y, y)
    np.testing.assert_array_equal(_csr(block, X.shape[1]).toarray(), X)


CORRUPTIONS = [
    ("3:abc", r"cannot parse '3:abc'"),
    ("x:1", r"cannot parse 'x:1'"),
    ("3", r"cannot parse '3'"),
    ("31", r"cannot parse '31'"),
    ("3:", r"cannot parse '3:'"),
    ("3::1", r"cannot parse '3::1'"),
    ("2.5:1", r"cannot parse '2.5:1'"),
    ("3:1e", r"cannot parse '3:1e'"),
    ("3:--1", r"cannot parse '3:--1'"),
    ("99:1 98:1", r"strictly increasing"),
    ("50:1 50:2", r"strictly increasing"),
    ("LABEL", r"cannot parse label"),
    ("+-1", r"cannot parse label"),
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(libsvm_files(), st.data())
def test_corrupted_line_is_reported(case, data):
    text, _, _, lines = case
    eol = "\r\n" if b"\r\n" in text else "\n"
    k = data.draw(st.integers(0, len(lines)), label="line")
    bad, pattern = data.draw(st.sampled_from(CORRUPTIONS), label="corruption")
    if pattern == r"cannot parse label":
        line = bad + " 1:1"
    else:
        line = "1 " + bad
    lines = lines[:k] + [line] + lines[k:]
    corrupted = (eol.join(lines) + eol).encode()
    with pytest.raises(LineError) as err:
        parse_libsvm_block(corrupted, dtype=np.float64)
    assert err.value.line == k + 1, err.value.message
    assert re.search(pattern, err.value.message), err.value.message


@settings(max_examples=12, deadline=None)
@given(libsvm_files(max_rows=40), st.integers(40, 400), st.sampled_from(["float32", "float64"]))
def test_ingest_round_trip(case, block_bytes, dtype):
    text, X, y, _ = case
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "data.txt"
        src.write_bytes(text)
        ds = dsvm.io.ingest(src, Path(tmp) / "d.zarr", format="libsvm", block_bytes=block_bytes,
                            chunk_rows=7, dtype=dtype)
        Xr, yr = ds.load()
    got = Xr.toarray() if sp.issparse(Xr) else Xr
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, X.astype(dtype))
    np.testing.assert_array_equal(yr, y)
    assert ds.n_features == X.shape[1]
    np.testing.assert_array_equal(ds.classes, np.unique(y))


@settings(max_examples=10, deadline=None)
@given(libsvm_files(max_rows=40), st.data())
def test_ingest_reports_file_and_line(case, data):
    text, _, _, lines = case
    k = data.draw(st.integers(0, len(lines)))
    lines = lines[:k] + ["+1 3:abc 5:1"] + lines[k:]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "a9a.train"
        src.write_bytes(("\n".join(lines) + "\n").encode())
        with pytest.raises(ValueError) as err:
            dsvm.io.ingest(src, Path(tmp) / "d.zarr", format="libsvm", block_bytes=50)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["a9a.train"]
    assert str(err.value) == f"a9a.train:{k + 1}: cannot parse '3:abc' in line '+1 3:abc 5:1'"


@st.composite
def number_tokens(draw):
    sign = draw(st.sampled_from(["", "", "-", "+"]))
    int_digits = draw(st.text("0123456789", max_size=12))
    dot = draw(st.booleans())
    frac_digits = draw(st.text("0123456789", max_size=12)) if dot else ""
    if not int_digits and not frac_digits:
        int_digits = "7"
    exp = draw(st.sampled_from(["", "", "", "e5", "E-3", "e+12"]))
    return sign + int_digits + ("." if dot else "") + frac_digits + exp


@settings(max_examples=200, deadline=None)
@given(st.lists(number_tokens(), min_size=1, max_size=30))
def test_number_conversion_is_exact(tokens):
    text = "".join(f"{t} 1:{t} 2:0\n" for t in tokens).encode()
    block = parse_libsvm_block(text, dtype=np.float64)
    expected = [float(t) for t in tokens]
    np.testing.assert_array_equal(block.y, expected)
    np.testing.assert_array_equal(block.data[::2], expected)


def test_values_written_with_more_than_64_characters(tmp_path):
    """Such a value was refused ("the fast parser rejected it but no line is malformed"); scikit-learn reads it."""
    from sklearn.datasets import load_svmlight_file

    from dsvm.io import ingest

    long_one = "1." + "0" * 80 + "1"
    text = f"+1 1:{long_one} 3:0.25\n-{long_one} 2:{'9' * 70} 3:-1e-3\n+1 2:{long_one}e-2\n"
    block = parse_libsvm_block(text.encode(), dtype=np.float64)
    path = tmp_path / "long.libsvm"
    path.write_text(text)
    X_ref, y_ref = load_svmlight_file(str(path), dtype=np.float64)
    np.testing.assert_array_equal(block.data, X_ref.data)
    np.testing.assert_array_equal(block.y, y_ref)
    X, y = ingest(path, tmp_path / "d.zarr", dtype="float64").load()
    np.testing.assert_array_equal(X.toarray() if sp.issparse(X) else X, X_ref.toarray())
    with pytest.raises(LineError, match=r"line 2: cannot parse '2:9{70}x'"):
        parse_libsvm_block(f"+1 1:0.5\n+1 2:{'9' * 70}x\n".encode())
