"""
NystroemSVC against scikit-learn's SVC on two moons
====================================================

:class:`dsvm.NystroemSVC` approximates the RBF kernel with ``n_components`` Nyström landmarks and
solves the squared-hinge SVM on those features by semismooth Newton.  On a small non-linear problem
its decision boundary is close to the exact kernel SVM's (:class:`sklearn.svm.SVC`).
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

import dsvm

X, y = make_moons(n_samples=4000, noise=0.25, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

nystroem = dsvm.NystroemSVC(gamma=2.0, C=10.0, n_components=100, random_state=0)
models = {
    "dsvm.NystroemSVC (k=100)": nystroem,
    "sklearn SVC (exact kernel)": SVC(gamma=2.0, C=10.0),
}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    print(f"{name}: test accuracy {model.score(X_test, y_test):.3f}, fit {seconds:.2f} s")

# %%
# The two decision functions on a grid: the zero level is the boundary, the dashed lines the
# margins.  The black dots of the left panel are the landmarks (``components_``).

xx, yy = np.meshgrid(np.linspace(-1.5, 2.5, 200), np.linspace(-1.0, 1.5, 200))
grid = np.c_[xx.ravel(), yy.ravel()]
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, (name, model) in zip(axes, models.items(), strict=True):
    z = model.decision_function(grid).reshape(xx.shape)
    ax.contourf(xx, yy, z, levels=20, cmap="RdBu", alpha=0.6)
    ax.contour(xx, yy, z, levels=[-1, 0, 1], colors="k", linestyles=["--", "-", "--"], linewidths=1)
    ax.scatter(X_test[:, 0], X_test[:, 1], c=y_test, cmap="RdBu", s=6, edgecolors="none")
    ax.set_title(name)
landmarks = nystroem.components_
axes[0].scatter(landmarks[:, 0], landmarks[:, 1], c="k", s=8)
fig.tight_layout()
plt.show()
