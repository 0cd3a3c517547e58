"""Row blocks: the one interface every pass over rows goes through, in memory or on Dask.

:class:`RowBlocks` (:mod:`dsvm.blocks._interface`) has two implementations,
row blocks held in this process and row blocks of a Dask array; callers get
them from :func:`as_row_blocks`, :func:`from_blocks`, :func:`aligned_vector`
and the interface's own methods, never by class.  This sub-package is the
only training-side code that imports ``dask.array`` and ``distributed``: it
also answers what the cluster offers (:mod:`dsvm.blocks._resources`), waits
on it without ever waiting silently (:mod:`dsvm.blocks._waiting`), hashes
rows independently of the blocking (:mod:`dsvm.blocks._rowhash`) and makes
the scratch folders spilled blocks and temporary datasets go to
(:mod:`dsvm.blocks._scratch`), where :func:`spill_blocks` writes row blocks
as raw files read back with ``O_DIRECT`` (:mod:`dsvm.blocks._file_blocks`).
"""

from ._convert import (
    aligned_vector,
    as_row_blocks,
    check_dask_X,
    dask_frame_input,
    from_blocks,
    is_dask_array,
    is_dask_frame,
    lazy_result,
    row_index_blocks,
)
from ._dask_blocks import active_client, compute
from ._file_blocks import BlockReduction, current_block_key, spill_blocks
from ._interface import RowBlocks
from ._raw_files import thread_buffer
from ._resources import (
    available_memory,
    check_worker_memory,
    cluster_memory,
    describe_scheduler,
    probe_workers,
    task_sized_blocks,
)
from ._rowhash import row_hash, row_uniform
from ._scratch import (
    claim_folder,
    find_leftovers,
    make_temporary_folder,
    remove_leftover,
    remove_temporary_folder,
    temporary_folder,
)
from ._waiting import gather, scheduler_workers

__all__ = [
    "RowBlocks", "as_row_blocks", "from_blocks", "aligned_vector", "row_index_blocks", "lazy_result",
    "is_dask_array", "is_dask_frame", "dask_frame_input", "check_dask_X", "compute", "gather", "spill_blocks",
    "BlockReduction", "current_block_key", "thread_buffer", "active_client", "probe_workers", "available_memory",
    "cluster_memory", "check_worker_memory", "task_sized_blocks", "describe_scheduler", "row_uniform", "row_hash",
    "claim_folder", "make_temporary_folder", "remove_temporary_folder", "temporary_folder", "find_leftovers",
    "remove_leftover", "scheduler_workers",
]
