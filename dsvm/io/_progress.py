"""Running a list of Dask tasks with a progress bar (:class:`dsvm.progress.ProgressBar`).

:func:`compute_tasks` runs ``dask.delayed`` tasks on whatever Dask would use
(the current ``distributed.Client`` if there is one, the threaded scheduler
otherwise, or always local threads with ``local=True``) and advances the bar
by each task's weight as it finishes.  On a cluster it waits through
:func:`dsvm.blocks.gather`: no worker left, or workers paused for lack of
memory, end the wait with a clear error instead of a silent hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dask
from dask.callbacks import Callback

from ..blocks import active_client, gather
from ..progress import LINE_SECONDS, LINE_STEP, ProgressBar

__all__ = ["ProgressBar", "compute_tasks", "LINE_STEP", "LINE_SECONDS"]


def compute_tasks(
    tasks: Sequence[Any],
    *,
    weights: Sequence[float] | None = None,
    bar: ProgressBar | None = None,
    local: bool = False,
) -> list[Any]:
    """Compute ``dask.delayed`` tasks, in order; advance ``bar`` by ``weights``.

    ``local=True`` runs them on threads of this process even if a cluster is
    active (for tasks that use in-memory data).
    """

    tasks = list(tasks)
    if not tasks:
        return []
    weights = list(weights) if weights is not None else [1.0] * len(tasks)
    client = None if local else active_client()
    if client is not None:
        futures = client.compute(tasks)
        on_done = None
        if bar is not None and bar.enabled:
            index = {f.key: i for i, f in enumerate(futures)}

            def on_done(fut):
                bar.update(weights[index[fut.key]])
        return gather(client, futures, on_done=on_done)
    scheduler = "threads" if local else None
    if bar is None or not bar.enabled:
        return list(dask.compute(*tasks, scheduler=scheduler))

    by_key = {t.key: w for t, w in zip(tasks, weights)}

    def _posttask(key, result, dsk, state, worker_id):
        w = by_key.get(key)
        if w:
            bar.update(w)

    with Callback(posttask=_posttask):
        return list(dask.compute(*tasks, scheduler=scheduler))
