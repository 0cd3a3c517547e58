"""The parse stage of a text ingest: the file cut into blocks of complete lines, each parsed by a task.

An uncompressed file is split into byte ranges read and parsed by Dask tasks
(threads, or the workers of the current ``distributed.Client``, which must
see the file); a gzip / xz / bzip2 file is decompressed as a stream here and
its blocks parsed on a few local threads.  Each task saves its rows as a
staging part and returns a result dict (``error``, ``part``, ``n_lines``, and
what its format adds); errors are returned, not raised, so that the first one
in the file is reported with its line number (:func:`raise_first_error`).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dask

from ..exceptions import InputFileError
from ._line_reader import DEFAULT_BLOCK_BYTES, byte_ranges, compression, open_binary, open_data_file, stream_blocks
from ._progress import ProgressBar, compute_tasks

__all__ = ["parse_stage", "raise_first_error", "line_offsets", "block_bytes_for"]


def block_bytes_for(path: str, block_bytes: int | None) -> int:
    """Default: enough blocks to keep every core busy, between 1 MiB and 16 MiB."""
    if block_bytes is not None:
        return int(block_bytes)
    size = os.path.getsize(path)
    if compression(path) is not None:
        size *= 5  # typical ratio for LIBSVM text
    return int(min(DEFAULT_BLOCK_BYTES, max(2**20, size // (4 * (os.cpu_count() or 1)))))


def parse_stage(
    path: str,
    staging: Path,
    block_task,
    range_task,
    options: dict,
    block_bytes: int | None,
    progress: bool,
    start: int = 0,
) -> list[dict[str, Any]]:
    """Run the block parser over the file from byte ``start`` on; one result per block, in order.

    The first result stands for the skipped ``start`` bytes (its ``n_lines``
    keeps line numbers right).
    """
    staging.mkdir(parents=True, exist_ok=True)
    block_bytes = block_bytes_for(path, block_bytes)
    name = Path(path).name
    size = os.path.getsize(path)
    bar = ProgressBar(size, label=f"parse {name}", unit="B", enabled=progress)
    try:
        if compression(path) is None:
            with open_data_file(path) as f:
                skipped = {"error": None, "part": None, "n_lines": f.read(start).count(b"\n"), "n_bytes": start}
            ranges = byte_ranges(size, block_bytes, start)

            tasks = [
                dask.delayed(range_task, pure=False)(path, a, b, str(staging / f"part-{k:06d}"), options)
                for k, (a, b) in enumerate(ranges)
            ]
            bar.update(start)
            return [skipped] + compute_tasks(tasks, weights=[b - a for a, b in ranges], bar=bar)
        results: list[dict[str, Any]] = []
        workers = max(1, min(os.cpu_count() or 1, 8))
        done = 0
        with open_binary(path) as stream, ThreadPoolExecutor(workers, thread_name_prefix="dsvm-parse") as pool:
            head = stream.read(start) if start else b""
            results.append({"error": None, "part": None, "n_lines": head.count(b"\n"), "n_bytes": len(head)})
            pending: deque = deque()
            for k, block in enumerate(stream_blocks(stream, block_bytes, path)):
                pending.append(pool.submit(block_task, block, str(staging / f"part-{k:06d}"), options,
                                           k == 0 and not start))
                while len(pending) > workers:
                    results.append(pending.popleft().result())
                pos = stream.compressed_position()
                bar.update(pos - done)
                done = pos
            while pending:
                results.append(pending.popleft().result())
        bar.update(size - done)
        return results
    finally:
        bar.close()


def raise_first_error(name: str, results: list[dict[str, Any]]) -> None:
    """The first error a block reported, as ``InputFileError`` naming the file and the line."""
    offset = 0
    for res in results:
        if res["error"] is not None:
            line, message = res["error"]
            raise InputFileError(f"{name}:{offset + line}: {message}")
        offset += res["n_lines"]


def line_offsets(results: list[dict[str, Any]]) -> list[int]:
    """The number of lines before each block."""
    offsets, total = [], 0
    for res in results:
        offsets.append(total)
        total += res.get("n_lines", 0)
    return offsets


