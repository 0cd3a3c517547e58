"""Throughput of ``dsvm.io.ingest`` on LIBSVM text against scikit-learn's reader.

Each benchmark file is decompressed to a temporary plain-text file first, so
the figures measure parsing (and, for ingest, writing the zarr store), not xz.
For every file the script reports the median of ``--repeat`` runs (after one
warm-up run) of

* ``load_svmlight_file``   — scikit-learn, text → CSR in memory;
* ``parse``                — ``dsvm.io._libsvm.parse_libsvm_block`` on the whole file,
                             single thread, text → CSR in memory (same work as sklearn);
* ``ingest``               — ``dsvm.io.ingest``, text → zarr dataset on disk
                             (parallel parse, staging, chunked compressed write),

as MB/s of uncompressed text, and the ratios against scikit-learn.

Usage::

    python benchmarks/bench_ingest.py [--data-dir ../shared/data] [--repeat 3] [--scale 1] [a9a.train ...]
"""

from __future__ import annotations

import argparse
import lzma
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

DEFAULT_FILES = ["a9a.train", "w8a.train", "ijcnn1.train", "ijcnn1.test"]


def _median_seconds(fns, repeat: int) -> list[float]:
    """Median wall time of each function; runs are interleaved so load changes hit all alike."""
    for fn in fns:
        fn()  # warm-up: imports, page cache, zarr codecs
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def main(argv=None) -> int:
    from sklearn.datasets import load_svmlight_file

    import dsvm.io
    from dsvm.io._libsvm import parse_libsvm_block

    repo = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES, help="benchmark sets (names without .xz)")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("DSVM_DATA_DIR", str(repo.parent / "shared" / "data")),
        help="folder with the .xz files (default: $DSVM_DATA_DIR or ../shared/data)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--scale", type=int, default=1, help="concatenate each file this many times (bigger inputs)")
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory(prefix="dsvm-bench-ingest-") as tmp:
        tmp = Path(tmp)
        for name in args.files:
            src = Path(args.data_dir) / f"{name}.xz"
            if not src.exists():
                print(f"skipping {name}: {src} not found")
                continue
            text = tmp / name
            with lzma.open(src) as f:
                content = f.read()
            if not content.endswith(b"\n"):
                content += b"\n"
            with open(text, "wb") as out:
                for _ in range(max(args.scale, 1)):
                    out.write(content)
            mb = text.stat().st_size / 1e6
            raw = text.read_bytes()
            target = tmp / f"{name}.zarr"

            t_sk, t_parse, t_ingest = _median_seconds(
                [
                    lambda: load_svmlight_file(str(text)),  # noqa: B023
                    lambda: parse_libsvm_block(raw, dtype=np.float64),  # noqa: B023
                    lambda: dsvm.io.ingest(text, target, format="libsvm", overwrite=True),  # noqa: B023
                ],
                args.repeat,
            )
            ds = dsvm.io.open_dataset(target)
            rows.append((name, mb, ds.n_samples, "CSR" if ds.sparse else "dense", t_sk, t_parse, t_ingest))

    header = (
        f"{'file':<14}{'MB':>7}{'rows':>9}{'stored':>8}"
        f"{'sklearn MB/s':>14}{'parse MB/s':>12}{'ingest MB/s':>13}{'parse/sk':>10}{'ingest/sk':>11}"
    )
    print(header)
    print("-" * len(header))
    for name, mb, n, kind, t_sk, t_parse, t_ingest in rows:
        print(
            f"{name:<14}{mb:>7.1f}{n:>9,}{kind:>8}"
            f"{mb / t_sk:>14.1f}{mb / t_parse:>12.1f}{mb / t_ingest:>13.1f}"
            f"{t_sk / t_parse:>9.1f}x{t_sk / t_ingest:>10.1f}x"
        )
    print(
        f"(median of {args.repeat} interleaved runs after a warm-up; {os.cpu_count()} cores; "
        f"files x{max(args.scale, 1)}; ingest = parallel parse + staging + zarr write + open)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
