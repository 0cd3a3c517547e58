"""Row blocks: the one interface every pass over rows goes through, in memory or on Dask.

:class:`RowBlocks` (:mod:`dsvm.blocks.interface`) has two implementations,
row blocks held in this process and row blocks of a Dask array; callers get
them from :func:`as_row_blocks`, :func:`from_blocks`, :func:`aligned_vector`
and the interface's own methods, never by class.  This sub-package is the
only training-side code that imports ``dask.array`` and ``distributed``: it
also answers what the cluster offers (:mod:`dsvm.blocks.resources`), waits
on it without ever waiting silently (:mod:`dsvm.blocks.waiting`), hashes
rows independently of the blocking (:mod:`dsvm.blocks.rowhash`) and makes
the scratch folders spilled blocks and temporary datasets go to
(:mod:`dsvm.blocks.scratch`), where :func:`spill_blocks` writes row blocks
as raw files read back with ``O_DIRECT`` (:mod:`dsvm.blocks.file_blocks`).
"""

from ..exceptions import NoWorkersError, WorkerMemoryError, WorkersPausedError
from .convert import (
    aligned_vector,
    as_row_blocks,
    check_dask_X,
    dask_frame_input,
    from_blocks,
    is_dask_array,
    is_dask_collection,
    is_dask_frame,
    lazy_result,
    row_index_blocks,
)
from .dask_blocks import active_client, compute
from .file_blocks import BlockReduction, current_block_key, spill_blocks
from .interface import TREE_FANIN, RowBlocks, tree_add, tree_sum
from .raw_files import thread_buffer
from .resources import (
    WorkerMemory,
    available_memory,
    available_threads,
    check_worker_memory,
    cluster_memory,
    describe_scheduler,
    probe_workers,
    task_bytes,
    task_memory_budget,
    task_sized_blocks,
    worker_memory,
)
from .rowhash import row_hash, row_uniform
from .scratch import (
    OWNER_FILE,
    Leftover,
    claim_folder,
    find_leftovers,
    make_temporary_folder,
    mark_owner,
    read_owner,
    remove_leftover,
    remove_temporary_folder,
    sweep_stale,
    temporary_folder,
)
from .waiting import TaskFootprint, gather

__all__ = [
    "RowBlocks", "TREE_FANIN", "tree_add", "tree_sum", "spill_blocks", "BlockReduction", "current_block_key",
    "as_row_blocks", "from_blocks", "aligned_vector", "row_index_blocks", "lazy_result", "is_dask_array",
    "is_dask_collection", "is_dask_frame", "dask_frame_input", "check_dask_X", "compute", "gather", "TaskFootprint",
    "NoWorkersError", "WorkerMemoryError", "WorkersPausedError", "active_client", "available_threads", "cluster_memory",
    "probe_workers", "thread_buffer", "task_memory_budget", "task_sized_blocks", "task_bytes", "check_worker_memory", "WorkerMemory", "worker_memory",
    "available_memory", "describe_scheduler", "row_uniform", "row_hash",
    "OWNER_FILE", "Leftover", "claim_folder", "find_leftovers", "make_temporary_folder", "mark_owner", "read_owner",
    "remove_leftover", "remove_temporary_folder", "sweep_stale", "temporary_folder",
]
