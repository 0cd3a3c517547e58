"""``dsvm.cluster``: the cluster specs under their earlier module name (see :mod:`dsvm.app.cluster`).

Kept because cluster spec files and batch scripts users copy name it (e.g.
``dsvm.cluster.WORKER_MALLOC_ENV``).
"""

from .app.cluster import (
    ALLOWED_MODULES,
    WORKER_MALLOC_ENV,
    WORKER_NUMPY_ENV,
    ClusterSpecError,
    cluster_class,
    connect,
    load_cluster_spec,
    local_cluster_kwargs,
    make_cluster,
    validate_cluster_spec,
    worker_environment_config,
)

__all__ = ["ALLOWED_MODULES", "WORKER_MALLOC_ENV", "WORKER_NUMPY_ENV", "ClusterSpecError", "cluster_class", "connect",
           "load_cluster_spec", "local_cluster_kwargs", "make_cluster", "validate_cluster_spec",
           "worker_environment_config"]
