"""Accuracy on the real LIBSVM benchmark sets in ../shared/data."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from dsvm import NystroemSVC

pytestmark = pytest.mark.data


def test_a9a_accuracy_matches_exact_rbf_svm(a9a):
    Xtr, ytr, Xte, yte = a9a
    clf = NystroemSVC(kernel="rbf", gamma=0.05, C=10.0, n_components=500, random_state=0).fit(Xtr, ytr)
    acc = clf.score(Xte, yte)
    # LIBSVM's exact RBF SVM reaches 0.848 with these parameters.
    assert acc >= 0.845, acc
    assert set(clf.classes_) == {-1.0, 1.0}


def test_ijcnn1_kernel_clearly_beats_linear(ijcnn1):
    Xtr, ytr, Xte, yte = ijcnn1
    majority = max(np.mean(yte == 1), np.mean(yte == -1))
    assert majority == pytest.approx(0.905, abs=0.002)
    lin = LinearSVC(C=10.0, dual=False).fit(Xtr.toarray(), ytr).score(Xte.toarray(), yte)
    clf = NystroemSVC(gamma=1.0, C=10.0, n_components=300, random_state=0).fit(Xtr, ytr)
    acc = clf.score(Xte, yte)
    assert acc >= 0.975, acc
    assert acc >= lin + 0.04, (acc, lin)


# --------------------------------------------------------------- Pegasos at its defaults
def _newton_then_pegasos(Xtr, ytr, Xte, yte, **params):
    """Test accuracies of Newton and of Pegasos at its defaults, Pegasos's model and the warnings of its fit."""
    newton = NystroemSVC(**params).fit(Xtr, ytr).score(Xte, yte)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        peg = NystroemSVC(solver="pegasos", **params).fit(Xtr, ytr)
    return newton, peg, peg.score(Xte, yte), caught


def test_pegasos_at_its_defaults_reaches_newtons_accuracy_on_splice(splice):
    """Ten epochs of 1/(λt) steps returned a chance-level model (52.97 %) that said converged=True."""
    newton, peg, acc, caught = _newton_then_pegasos(*splice, gamma=0.01, C=10.0, n_components=300, random_state=0)
    stats = peg.solver_stats_["problems"][0]
    assert stats["converged"] and stats["stop_reason"] == "progress", stats["stop_reason"]
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert acc >= newton - 0.02, (acc, newton)


def test_pegasos_at_its_defaults_reaches_newtons_accuracy_on_a9a(a9a):
    """On an 8,000-row sample of a9a's training rows (k = 200; the full set takes ~10x longer with
    Pegasos's hundreds of passes), scored on the whole test set."""
    Xtr, ytr, Xte, yte = a9a
    rows = np.random.default_rng(0).permutation(Xtr.shape[0])[:8000]
    newton, peg, acc, _ = _newton_then_pegasos(Xtr[rows], ytr[rows], Xte, yte, gamma=0.05, C=10.0,
                                               n_components=200, random_state=0)
    assert peg.solver_stats_["problems"][0]["converged"]
    assert acc >= newton - 0.02, (acc, newton)


def test_pegasos_says_so_when_its_epoch_budget_runs_out(splice):
    Xtr, ytr, _, _ = splice
    with pytest.warns(ConvergenceWarning, match="budget of 10 epochs"):
        peg = NystroemSVC(solver="pegasos", gamma=0.01, C=10.0, n_components=300, random_state=0,
                          solver_options={"epochs": 10}).fit(Xtr, ytr)
    stats = peg.solver_stats_["problems"][0]
    assert not stats["converged"] and stats["stop_reason"] == "epochs"
    assert len(stats["history"]) == 10
