"""
Choosing the number of landmarks
================================

``n_components`` (k) trades accuracy for time: the Nyström features approximate the kernel better
with more landmarks, while the feature map costs time linear in k and the Newton system grows as
k².  Past the point where the approximation is good enough, accuracy stops improving and only the
time grows.  :class:`dsvm.NystroemSVCCV` chooses k (with C and γ) by cross-validation.
"""

import time

import matplotlib.pyplot as plt
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

import dsvm

X, y = make_classification(n_samples=20_000, n_features=20, n_informative=5, n_clusters_per_class=2,
                           class_sep=1.0, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

ks = [10, 25, 50, 100, 200, 400, 800, 1600]
accuracy, seconds = [], []
for k in ks:
    start = time.perf_counter()
    clf = dsvm.NystroemSVC(C=10.0, n_components=k, random_state=0)
    clf.fit(X_train, y_train)
    seconds.append(time.perf_counter() - start)
    accuracy.append(clf.score(X_test, y_test))
    print(f"k={k:4d}: test accuracy {accuracy[-1]:.4f}, fit {seconds[-1]:.2f} s")

# %%
# Accuracy and fit time against k (log scale).

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogx(ks, accuracy, "o-", color="C0")
ax.set_xlabel("n_components (k)")
ax.set_ylabel("test accuracy", color="C0")
ax2 = ax.twinx()
ax2.semilogx(ks, seconds, "s--", color="C1")
ax2.set_ylabel("fit seconds", color="C1")
fig.tight_layout()
plt.show()

# %%
# Cross-validation picks k among the values given, reusing one kernel matrix for every smaller k
# (the landmarks are nested: those for a smaller k are the first of those for a larger one).

grid = {"C": [1.0, 10.0], "gamma": [0.05], "n_components": [50, 200, 400]}
search = dsvm.NystroemSVCCV(param_grid=grid, cv=3, random_state=0)
search.fit(X_train, y_train)
print("best parameters:", search.best_params_)
print(f"test accuracy of the refitted model: {search.score(X_test, y_test):.4f}")
