"""Configuration defaults under the ``dsvm`` namespace of ``dask.config``.

Every key can be set in a Dask YAML config file, with ``dask.config.set``,
or with an environment variable, e.g.::

    DASK_DSVM__SCRATCH_DIRECTORY=/local/scratch dsvm train ...
    DASK_DSVM__MEMORY_FRACTION=0.3

Keys
----
scratch-directory
    Where spilled feature blocks go (``feature_store="disk"``); default: Dask's
    ``temporary-directory`` or the system temporary directory.  On a cluster it
    must be visible to all workers.
direct-io
    Read and write the scratch feature store with ``O_DIRECT`` (default true;
    filesystems that refuse it get buffered I/O anyway).
feature-store-dtype
    How the scratch feature store keeps F: ``float32`` (default, as computed),
    ``int16`` (16-bit fixed point: half the bytes per pass, for RBF features,
    which lie in [-1, 1]; 1.5e-5 apart) or ``auto`` (int16 where reading the
    saved bytes takes longer than decoding, by the cost model; logged).
memory-fraction
    Share of the cluster's memory that persisted feature blocks may take
    before ``feature_store="auto"`` streams them from disk instead.
block-bytes
    Upper bound of one row block on Dask input (fits and predictions), as rows x k x 8
    bytes (default 256 MiB: 33,554 rows at k = 1000); blocks are smaller
    where the workers' memory asks for it.
task-memory-share
    Without a distributed cluster, a block may use at most this machine's
    available memory / (threads x this number), as a task holds several
    block-sized temporaries.  On a cluster the blocks are sized from what
    each worker really has (see :mod:`dsvm.blocks._resources`).
worker-heap-bytes
    Memory a worker keeps during a computation besides its data and its
    tasks' arrays (allocator fragmentation, caches), counted by the check of
    the workers' memory before the work.
no-worker-timeout
    Seconds a fit waits on a distributed cluster that has no worker left
    before failing with a clear error (lost workers are otherwise replaced by
    recomputing their blocks on the others).
connect-timeout
    Seconds to wait for a running Dask scheduler (``--scheduler-address``,
    ``--scheduler-file``) to answer before failing with a one-line error.
paused-timeout
    Seconds dsvm waits while the workers it needs are paused by Dask for
    lack of memory (every worker, or a worker that holds blocks a pass must
    run on) before failing with a clear error naming the memory they hold;
    also when they pause again and again (paused in 90 % of the checks over
    three times this).
disk-bandwidth, flops-per-thread
    Rough machine constants of the feature-store cost model (bytes/s, flop/s).
io.chunk-bytes
    Target size of one stored row chunk of a dataset written by ``dsvm.io``
    (uncompressed; default 64 MiB), when ``chunk_rows`` is not given.
io.dense-density
    Sparse input is stored dense when its density (non-zeros / cells) is at
    least this (default 0.25: there dense float32 takes at most twice the
    space of CSR, and dense kernels are much faster).

Values are read on the client when a fit starts, never inside worker tasks.
"""

from __future__ import annotations

import tempfile
from typing import Any

import dask.config

DEFAULTS: dict[str, Any] = {
    "scratch-directory": None,
    "direct-io": True,
    "feature-store-dtype": "float32",
    "memory-fraction": 0.4,
    # every distributed task costs the scheduler a fixed overhead: 256 MiB blocks (b = 2^25 / k rows)
    # halve the tasks of every pass against 128 MiB, at 12 b k bytes per thread where memory allows it
    # (timings in the documentation's performance page)
    "block-bytes": 256 * 2**20,
    "task-memory-share": 16,
    "disk-bandwidth": 1.0e9,
    "flops-per-thread": 2.5e10,
    "no-worker-timeout": 60.0,
    "connect-timeout": 10.0,
    "paused-timeout": 60.0,
    "worker-heap-bytes": 64 * 2**20,
    "io": {"chunk-bytes": 64 * 2**20, "dense-density": 0.25},
}

dask.config.update_defaults({"dsvm": DEFAULTS})


def get(key: str) -> Any:
    """``dask.config.get("dsvm.<key>")`` with the package default as fallback (``key`` may be dotted:
    ``"io.chunk-bytes"``)."""
    default: Any = DEFAULTS
    for part in key.split("."):
        default = default[part]
    return dask.config.get(f"dsvm.{key}", default)


def scratch_base() -> str:
    """Where scratch stores go: ``dsvm.scratch-directory``, else Dask's ``temporary-directory``, else
    the system's temporary folder."""
    return get("scratch-directory") or dask.config.get("temporary-directory", None) or tempfile.gettempdir()
