"""The duality gap (``duality_gap_``): the bound checked against dual objectives written here from the
textbook dual, and against the optimum found by an independent optimiser (scipy's L-BFGS)."""

import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.datasets import make_classification, make_regression

from dsvm import NystroemSVC, NystroemSVR
from dsvm.blocks import aligned_vector, as_row_blocks
from dsvm.problems import SquaredEpsilonOperator, SquaredHingeOperator

N, R = 300, 12


def _data(seed=0):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(N, R))
    y = np.where(F[:, 0] + 0.7 * F[:, 1] + rng.normal(scale=0.8, size=N) > 0.3, 1.0, -1.0)
    sw = rng.uniform(0.5, 2.0, size=N)
    sw[rng.random(N) < 0.1] = 0.0  # rows of zero cost (held-out folds) have no dual variable
    return F, y, sw


def _hinge_operator(F, y, sw, fit_intercept=True):
    rb = as_row_blocks(F, 70)
    codes = aligned_vector((y > 0).astype(np.int64), rb)
    class_cost = np.array([1.5, 0.8])
    c = class_cost[(y > 0).astype(int)] * sw
    return SquaredHingeOperator(rb, codes, 1, class_cost, aligned_vector(sw, rb), fit_intercept), c


def _primal(F, target, c, x, eps=None):
    m = F @ x[:-1] + x[-1]
    rho = np.maximum(0.0, 1.0 - target * m) if eps is None else np.maximum(0.0, np.abs(m - target) - eps)
    return 0.5 * x[:-1] @ x[:-1] + c @ rho**2


def _optimum(F, target, c, eps=None, fit_intercept=True):
    """The primal optimum by L-BFGS (the objective is once differentiable): an oracle independent of dsvm."""
    def fun(x):
        x = x if fit_intercept else np.append(x, 0.0)
        m = F @ x[:-1] + x[-1]
        if eps is None:
            rho = np.maximum(0.0, 1.0 - target * m)
            dm = -2.0 * c * target * rho
        else:
            rho = np.maximum(0.0, np.abs(m - target) - eps)
            dm = 2.0 * c * np.sign(m - target) * rho
        g = np.append(x[:-1] + F.T @ dm, dm.sum())
        return 0.5 * x[:-1] @ x[:-1] + c @ rho**2, g if fit_intercept else g[:-1]

    x0 = np.zeros(F.shape[1] + 1 if fit_intercept else F.shape[1])
    res = scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15,
                                                                                  "maxiter": 20000})
    return res.fun


def _over_cost(a, c):
    """``Σ a_i² / (4 c_i)`` over rows of positive cost (a row of zero cost has ``a_i = 0``)."""
    costed = c > 0
    assert not np.any(a[~costed])
    return float(a[costed] @ (a[costed] / (4.0 * c[costed])))


def _best_over_scale(value, t_max=4.0):
    """``max_t value(t)`` for a concave function of one variable on ``[0, t_max]``."""
    res = scipy.optimize.minimize_scalar(lambda t: -value(t), bounds=(0.0, t_max), method="bounded",
                                         options={"xatol": 1e-12})
    return max(-res.fun, value(0.0))


def _textbook_hinge_dual(F, y, c, x, fit_intercept=True):
    """LIBSVM's form of the L2-SVM dual, ``Σ a − Σ a²/(4c) − ½‖Σ a y f‖²`` with ``a ≥ 0``, ``Σ a y = 0``, at
    ``a = 2 c ρ`` with each class's part scaled to meet the constraint, best over the common scale."""
    rho = np.maximum(0.0, 1.0 - y * (F @ x[:-1] + x[-1]))
    a = 2.0 * c * rho
    if fit_intercept:
        pos, neg = a[y > 0].sum(), a[y < 0].sum()
        a = np.where(y > 0, a, a * pos / neg)

    def dual(t):
        at = t * a
        u = F.T @ (at * y)
        return at.sum() - _over_cost(at, c) - 0.5 * u @ u

    return _best_over_scale(dual)


def _textbook_svr_dual(F, target, c, eps, x, fit_intercept=True):
    """The L2-SVR dual ``Σ β y − ε Σ |β| − Σ β²/(4c) − ½‖Σ β f‖²`` with ``Σ β = 0``, at ``β = −ℓ'(m)`` with each
    sign's part scaled to meet the constraint, best over the common scale."""
    m = F @ x[:-1] + x[-1]
    beta = 2.0 * c * np.sign(target - m) * np.maximum(0.0, np.abs(m - target) - eps)
    if fit_intercept:
        up, down = beta[beta > 0].sum(), -beta[beta < 0].sum()
        beta = np.where(beta > 0, beta, beta * up / down)

    def dual(t):
        b = t * beta
        u = F.T @ b
        return b @ target - eps * np.abs(b).sum() - _over_cost(b, c) - 0.5 * u @ u

    return _best_over_scale(dual)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_hinge_bound_is_the_textbook_dual_and_never_above_the_optimum(fit_intercept):
    F, y, sw = _data()
    op, c = _hinge_operator(F, y, sw, fit_intercept)
    optimum = _optimum(F, y, c, fit_intercept=fit_intercept)
    rng = np.random.default_rng(3)
    for scale in (0.0, 0.05, 0.3, 1.0):
        x = rng.normal(size=R + 1) * scale
        if not fit_intercept:
            x[-1] = 0.0
        res = op.evaluate(x, x)
        bound = res.dual_bound(x, fit_intercept)
        np.testing.assert_allclose(bound, _textbook_hinge_dual(F, y, c, x, fit_intercept), rtol=1e-7, atol=1e-9)
        assert bound <= optimum * (1 + 1e-10) <= _primal(F, y, c, x) * (1 + 1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_svr_bound_is_the_textbook_dual_and_never_above_the_optimum(fit_intercept):
    F, _, sw = _data()
    rng = np.random.default_rng(4)
    target = F @ rng.normal(size=R) + rng.normal(scale=0.3, size=N)
    rb = as_row_blocks(F, 70)
    op = SquaredEpsilonOperator(rb, aligned_vector(target, rb), 2.0, 0.2, aligned_vector(sw, rb), fit_intercept)
    c = 2.0 * sw
    optimum = _optimum(F, target, c, eps=0.2, fit_intercept=fit_intercept)
    for scale in (0.0, 0.1, 0.5):
        x = rng.normal(size=R + 1) * scale
        if not fit_intercept:
            x[-1] = 0.0
        bound = op.evaluate(x, x).dual_bound(x, fit_intercept)
        expected = _textbook_svr_dual(F, target, c, 0.2, x, fit_intercept)
        np.testing.assert_allclose(bound, expected, rtol=1e-7, atol=1e-9)
        assert bound <= optimum * (1 + 1e-10)


def test_one_sided_active_set_bounds_by_zero_and_exchanged_passes_keep_the_sums():
    F, y, sw = _data()
    op, c = _hinge_operator(F, y, sw)
    x = np.zeros(R + 1)
    x[-1] = 50.0  # every positive row far outside the margin: only negative rows are active
    res = op.evaluate(x, x)
    assert res.dual_bound(x) == 0.0 < _primal(F, y, c, x)
    x = np.random.default_rng(5).normal(size=R + 1) * 0.2
    whole = op.evaluate(x, x)
    swapped = whole.exchanged(whole.scaled(0.5), whole.scaled(0.5))
    np.testing.assert_allclose(swapped.dual_bound(x), whole.dual_bound(x), rtol=1e-12)
    np.testing.assert_allclose(whole.scaled(2.0).dual_bound(x), _hinge_operator(F, y, 2.0 * sw)[0].evaluate(
        x, x).dual_bound(x), rtol=1e-10)


def test_dcd_bound_is_the_textbook_dual_of_liblinears_problem():
    """LIBLINEAR's problem, ``½‖w‖² + ½(b/s)² + Σ c ρ²``: the dual over features ``[f, s]`` with no constraint."""
    from dsvm.solvers._dcd import _dual_bound

    F, y, sw = _data()
    c, s = 1.3 * sw, 2.0
    rng = np.random.default_rng(6)
    Fa = np.hstack([F, np.full((N, 1), s)])
    optimum = _optimum(Fa, y, c, fit_intercept=False)
    for scale in (0.05, 0.3):
        x = rng.normal(size=R + 1) * scale
        m = F @ x[:-1] + x[-1]
        rho = np.maximum(0.0, 1.0 - y * m)
        a = 2.0 * c * rho

        def dual(t, a=a):
            u = Fa.T @ (t * a * y)
            return t * a.sum() - _over_cost(t * a, c) - 0.5 * u @ u

        bound = _dual_bound(F, y, c, rho, m, s)
        np.testing.assert_allclose(bound, _best_over_scale(dual), rtol=1e-7)
        assert bound <= optimum * (1 + 1e-10)


def _dense_problem(model, X, y):
    """The fitted model's features, signs and costs in float64, for an independent optimum."""
    F = model.feature_map_.transform_block(model.scaling_.transform(X) if model.scaling_ is not None else X)
    return np.asarray(F, dtype=np.float64), np.where(y == model.classes_[1], 1.0, -1.0)


@pytest.mark.parametrize("solver,hessian", [("newton", "gram"), ("newton", "cg"), ("tron", "auto"), ("dcd", "auto")])
def test_gap_bounds_the_suboptimality_and_falls_below_tol(solver, hessian):
    X, y = make_classification(600, 8, random_state=0)
    common = dict(C=5.0, n_components=40, solver=solver, hessian=hessian, dtype="float64", random_state=0)
    tight = NystroemSVC(tol=1e-10, max_iter=2000, **common).fit(X, y)
    assert tight.duality_gap_ <= 1e-7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose = NystroemSVC(tol=0.3, max_iter=2, **common).fit(X, y)
    # the same features (same seed): the tight fit's objective is the optimum of the loose one's problem
    suboptimality = (loose.objective_ - tight.objective_) / loose.objective_
    assert loose.duality_gap_ >= suboptimality - 1e-12
    if solver != "dcd":  # DCD solves LIBLINEAR's problem (bias penalised): its optimum is another number
        F, s = _dense_problem(tight, X, y)
        optimum = _optimum(F, s, np.full(len(y), 5.0))
        assert tight.objective_ - optimum <= tight.duality_gap_ * tight.objective_ + 1e-9 * optimum


def test_every_problem_of_a_multiclass_and_a_regression_fit_is_certified():
    X, y = make_classification(600, 8, n_informative=5, n_classes=3, random_state=1)
    clf = NystroemSVC(C=3.0, n_components=40, tol=1e-9, dtype="float64", random_state=0).fit(X, y)
    assert clf.duality_gap_.shape == (3,) and np.all(clf.duality_gap_ <= 1e-7)
    Xr, yr = make_regression(600, 6, noise=3.0, random_state=0)
    reg = NystroemSVR(C=1.0, epsilon=1.0, n_components=40, tol=1e-9, dtype="float64", random_state=0).fit(Xr, yr)
    assert 0.0 <= reg.duality_gap_ <= 1e-7


def test_implicit_features_give_the_same_gap():
    X, y = make_classification(800, 8, random_state=2)
    common = dict(C=5.0, n_components=60, tol=0.05, max_iter=2, dtype="float64", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gaps = [NystroemSVC(feature_store=store, **common).fit(X, y).duality_gap_ for store in ("memory", "implicit")]
    assert gaps[0] > 1e-6
    np.testing.assert_allclose(gaps[1], gaps[0], rtol=1e-6)


def test_an_early_stop_warns_with_the_gap_reached():
    X, y = make_classification(600, 8, random_state=0)
    with pytest.warns(UserWarning, match=r"relative duality gap \d\.\d\de[-+]\d\d"):
        model = NystroemSVC(C=5.0, n_components=40, tol=1e-12, max_iter=1, random_state=0).fit(X, y)
    assert model.duality_gap_ > 0.0


def test_gap_tol_stops_newton_once_the_gap_is_small_enough():
    X, y = make_classification(5000, 10, random_state=0)
    common = dict(n_components=60, tol=1e-12, dtype="float64", random_state=0)
    full = NystroemSVC(**common).fit(X, y)
    early = NystroemSVC(solver_options={"gap_tol": 1e-2}, **common).fit(X, y)
    stats = early.solver_stats_["problems"][0]
    assert stats["stop_reason"] == "gap" and stats["converged"]
    assert early.duality_gap_ <= 1e-2 and early.n_iter_ < full.n_iter_
    assert (early.objective_ - full.objective_) / early.objective_ <= early.duality_gap_
    assert NystroemSVC(solver_options={"gap_tol": np.float32(1e-2)}, **common).fit(X, y).duality_gap_ <= 1e-2
    with pytest.raises(ValueError, match="gap_tol must be a number between 0 and 1"):
        NystroemSVC(n_components=10, solver_options={"gap_tol": 0.0}).fit(X[:100], y[:100])
