"""CSV options: the label column by name or index, the delimiter, the header (and their one-line errors).

Oracle: the matrix and labels written by hand next to each file.
"""

from __future__ import annotations

import numpy as np
import pytest

from dsvm.exceptions import InputFileError
from dsvm.io import ingest

ROWS = [[0.5, 2.0, 1], [1.5, 0.25, -1], [-0.5, 1.0, 1]]


def _write(path, rows, delimiter=",", header=None):
    lines = ([delimiter.join(header)] if header else []) + [delimiter.join(str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("label_column", ["y", 2, -1])
def test_label_column_by_name_or_index(tmp_path, label_column):
    src = _write(tmp_path / "last.csv", ROWS, header=["a", "b", "y"])
    ds = ingest(src, tmp_path / "d.zarr", label_column=label_column)
    X, y = ds.load()
    np.testing.assert_array_equal(X, np.float32([r[:2] for r in ROWS]))
    np.testing.assert_array_equal(y, [1, -1, 1])
    assert ds.feature_names.tolist() == ["a", "b"] and ds.attrs["label_column"] == 2


def test_label_column_errors(tmp_path):
    src = _write(tmp_path / "n.csv", ROWS)
    with pytest.raises(InputFileError, match=r"n\.csv: label_column='y' names a column, but the file has no header"):
        ingest(src, tmp_path / "a.zarr", label_column="y")
    with pytest.raises(InputFileError, match=r"n\.csv:1: label column 3 does not exist \(3 fields\)"):
        ingest(src, tmp_path / "b.zarr", label_column=3)
    named = _write(tmp_path / "h.csv", ROWS, header=["a", "b", "y"])
    with pytest.raises(InputFileError, match=r"h\.csv: no column named 'z' in the header \['a', 'b', 'y'\]"):
        ingest(named, tmp_path / "c.zarr", label_column="z")
    with pytest.raises(ValueError, match="label_column must be a column index or name"):
        ingest(named, tmp_path / "d.zarr", label_column=1.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv", "n.csv"]


@pytest.mark.parametrize("delimiter, given", [(";", ";"), ("\t", "\t"), ("\t", "\\t"), ("\t", "tab"), ("|", "|")])
def test_delimiter(tmp_path, delimiter, given):
    src = _write(tmp_path / "d.txt", ROWS, delimiter=delimiter, header=["a", "b", "y"])
    ds = ingest(src, tmp_path / "d.zarr", format="csv", delimiter=given, label_column="y")
    np.testing.assert_array_equal(ds.load()[1], [1, -1, 1])
    assert ds.feature_names.tolist() == ["a", "b"]


def test_bad_delimiters_and_the_wrong_one(tmp_path):
    src = _write(tmp_path / "s.csv", ROWS, delimiter=";")
    for bad in ("", ";;", '"', "#", "\n"):
        with pytest.raises(ValueError, match="delimiter must be one character"):
            ingest(src, tmp_path / "a.zarr", delimiter=bad)
    with pytest.raises(InputFileError, match=r"s\.csv: every line holds one field only.*delimiter ','"):
        ingest(src, tmp_path / "b.zarr", header=False)


def test_tsv_files_default_to_tab(tmp_path):
    src = _write(tmp_path / "t.tsv", ROWS, delimiter="\t")
    np.testing.assert_array_equal(ingest(src, tmp_path / "d.zarr", label_column=-1).load()[1], [1, -1, 1])


def test_a_text_feature_points_at_the_label_column(tmp_path):
    """pandas writes iris with the label last; dsvm's default label column is 0: the error says what to pass."""
    src = tmp_path / "iris.csv"
    src.write_text("sepal,petal,species\n5.1,1.4,setosa\n7.0,4.7,versicolor\n")
    with pytest.raises(InputFileError, match=r"^iris\.csv:2: cannot parse 'setosa' \(field 3\) in column 'species' "
                                             r".*only the label column 'sepal' \(field 1\) may hold text.*"
                                             r"pass label_column='species' \(CLI: --label-column species\)"):
        ingest(src, tmp_path / "d.zarr")


def test_a_missing_label_column_is_reported_before_the_file_is_parsed(tmp_path, monkeypatch):
    """The error came after every block of the file had been parsed (50 s for 890 MB), each failing alike."""
    import dsvm.io._csv_ingest as csv_ingest

    src = tmp_path / "iris.csv"
    rows = [f"{5 + k % 3}.1,{k % 5}.4,{'setosa' if k % 2 else 'virginica'}" for k in range(5000)]
    src.write_text("sepal,petal,species\n" + "\n".join(rows) + "\n")
    parsed = []
    block = csv_ingest._csv_block
    monkeypatch.setattr(csv_ingest, "_csv_block", lambda *a, **k: parsed.append(1) or block(*a, **k))
    with pytest.raises(InputFileError, match=r"^iris\.csv:2: cannot parse 'virginica' \(field 3\) in column 'species'"
                                             r".*pass label_column='species' \(CLI: --label-column species\)$"):
        ingest(src, tmp_path / "d.zarr", block_bytes=4096)
    assert parsed == []
    ds = ingest(src, tmp_path / "d.zarr", block_bytes=4096, label_column="species")
    assert ds.n_samples == 5000 and len(parsed) > 10
