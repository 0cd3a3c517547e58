"""
Training from a zarr dataset on a local Dask cluster
=====================================================

Data larger than memory lives in a zarr dataset: :func:`dsvm.make_classification_zarr` writes a
generated one (:func:`dsvm.ingest` converts LIBSVM, CSV, Parquet or ``.npy`` files), and
:func:`dsvm.open_dataset` opens it as row-chunked Dask arrays.  The fit then runs block by block on
whatever Dask cluster is active; here a small one in this process.
"""

import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from distributed import Client, LocalCluster

import dsvm

workdir = Path(tempfile.mkdtemp())
train = dsvm.make_classification_zarr(workdir / "train.zarr", n_samples=40_000, n_features=10,
                                      chunk_rows=5_000, random_state=0)
test = dsvm.make_classification_zarr(workdir / "test.zarr", n_samples=10_000, n_features=10,
                                     chunk_rows=5_000, random_state=1)
print(f"{train.n_samples} rows x {train.n_features} features, classes {train.classes}")
print("X is a Dask array of chunks", train.X.chunksize)

# %%
# Fit on the cluster.  ``predict`` on a dataset returns a lazy Dask array; ``score`` computes it.

cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
with cluster, Client(cluster):
    clf = dsvm.NystroemSVC(n_components=300, C=10.0, random_state=0)
    clf.fit(train)
    print(f"test accuracy {clf.score(test):.3f}")
    print("Newton iterations:", clf.n_iter_)

# %%
# What the fit recorded in ``solver_stats_``: the seconds of its stages (landmarks, the feature
# map, the solve) and where the feature blocks were kept.

stats = clf.solver_stats_
stages = {stage: stats[f"{stage}_seconds"] for stage in ("landmark", "feature", "solve")}
print("seconds per stage:", {stage: round(seconds, 3) for stage, seconds in stages.items()})
print("feature store:", stats["feature_store"])
fig, ax = plt.subplots(figsize=(5, 3))
ax.barh(list(stages), list(stages.values()))
ax.set_xlabel("seconds")
ax.set_title("where the fit's time went")
fig.tight_layout()
plt.show()

# %%
# The datasets are plain folders; remove them when done.

shutil.rmtree(workdir)
