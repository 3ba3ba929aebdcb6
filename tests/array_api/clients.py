"""Real array-API clients on dispatch_jit tensors: scikit-learn and SciPy, case by case against NumPy.

Each case is a function ``case(xp, d)`` that calls the client library on the arrays of ``d`` (made
with ``xp.asarray``) and returns one result (an array or a float) or a tuple of them.  It runs twice,
on NumPy arrays and on dispatch_jit tensors (``dispatch_jit.array_api``), and the two answers are
compared here: same shape, equal within the case's tolerance, and the dispatch_jit answer's arrays
are dispatch_jit tensors (what ``TENSOR`` names), not NumPy arrays the client converted to.

SciPy reads ``SCIPY_ARRAY_API`` once, when it is first imported, and importing dispatch_jit imports
SciPy (Numba binds BLAS through it); scikit-learn refuses ``array_api_dispatch`` without it.  So the
cases run in a child process that sets it before any import:

    python tests/array_api/clients.py sklearn      # one JSON record per case, a line each
    python tests/array_api/clients.py scipy

test_clients_sklearn.py and test_clients_scipy.py start that process once per file and check each
case's record.
"""

from __future__ import annotations

import json
import os
import sys

TENSOR = "dispatch_jit.tensor.Tensor"
MARK = "CLIENT-CASE "          # the records' line prefix: the child's other output (warnings) is not JSON


def _data(xp):
    """The small inputs every case draws from (the same values for NumPy and dispatch_jit)."""
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    y2 = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5]).astype(np.int64)
    yr = X @ np.arange(1.0, 6.0) + 0.1 * rng.normal(size=40)
    A, B, v = rng.normal(size=(6, 8)), rng.normal(size=(6, 8)), rng.normal(size=32)
    arrays = dict(X=X, X32=X.astype(np.float32), y2=y2, y3=y3, yr=yr, A=A, B=B, v=v)
    return {k: xp.asarray(a) for k, a in arrays.items()}


def _attr(package: str, module: str, name: str):
    # imported when a case runs: the tests import this file to list the cases, with or without the client
    import importlib
    return getattr(importlib.import_module(f"{package}.{module}"), name)


def _sk(module: str, name: str):
    return _attr("sklearn", module, name)


def _pca(solver):
    # the components' signs are fixed by scikit-learn's svd_flip, so they compare as they are
    def case(xp, d):
        p = _sk("decomposition", "PCA")(n_components=3, svd_solver=solver, random_state=0).fit(d["X"])
        return p.transform(d["X"]), p.components_, p.explained_variance_
    return case


def _transformer(module, name, key="X", **kw):
    return lambda xp, d: _sk(module, name)(**kw).fit_transform(d[key])


def _metric(name, a, b, **kw):
    return lambda xp, d: _sk("metrics", name)(d[a], d[b], **kw)


def _regression_metric(name):
    return lambda xp, d: _sk("metrics", name)(d["yr"], 4.0 * d["X"][:, 0])


def _pairwise(name):
    return lambda xp, d: _sk("metrics.pairwise", name)(d["X"][:12, :], d["X"][12:20, :])


def _lda(xp, d):
    m = _sk("discriminant_analysis", "LinearDiscriminantAnalysis")().fit(d["X"], d["y3"])
    return m.predict(d["X"]), m.predict_proba(d["X"]), m.coef_


def _ridge(xp, d):
    m = _sk("linear_model", "Ridge")(solver="svd", alpha=1.0).fit(d["X"], d["yr"])
    return m.predict(d["X"]), m.coef_, m.intercept_


def _ridge_cv(xp, d):
    m = _sk("linear_model", "RidgeCV")(alphas=(0.1, 1.0, 10.0)).fit(d["X"], d["yr"])
    return m.predict(d["X"]), m.alpha_


def _ridge_classifier_cv(xp, d):
    return _sk("linear_model", "RidgeClassifierCV")().fit(d["X"], d["y3"]).predict(d["X"])


def _logistic(xp, d):
    m = _sk("linear_model", "LogisticRegression")().fit(d["X"], d["y3"])
    return m.predict(d["X"]), m.predict_proba(d["X"])


def _poisson(xp, d):
    m = _sk("linear_model", "PoissonRegressor")().fit(d["X"], d["y3"])
    return m.predict(d["X"]), m.coef_


def _gaussian_mixture(xp, d):
    # scikit-learn refuses its default init_params="kmeans" under array API dispatch
    m = _sk("mixture", "GaussianMixture")(2, init_params="random_from_data", random_state=0).fit(d["X"])
    return m.predict_proba(d["X"]), m.means_


def _gaussian_nb(xp, d):
    m = _sk("naive_bayes", "GaussianNB")().fit(d["X"], d["y3"])
    return m.predict(d["X"]), m.predict_proba(d["X"])


def _kernel_centerer(xp, d):
    K = d["X"] @ d["X"].T
    return _sk("preprocessing", "KernelCenterer")().fit_transform(K)


def _train_test_split(xp, d):
    return tuple(_sk("model_selection", "train_test_split")(d["X"], d["yr"], random_state=0))


def _pca_float32(xp, d):
    p = _sk("decomposition", "PCA")(n_components=3, svd_solver="full").fit(d["X32"])
    return p.transform(d["X32"])


def _log_loss(xp, d):
    p = _sk("linear_model", "LogisticRegression")().fit(d["X"], d["y2"]).predict_proba(d["X"])
    return _sk("metrics", "log_loss")(d["y2"], p)


# name -> (case, relative tolerance); the target is 1e-5 for float64, 1e-4 for a float32 pipeline.
# Metrics of integer labels (accuracy, f1) average in the namespace's default float dtype, float32
# (PyTorch's and this namespace's default; NumPy's is float64): hence their 1e-6.
SKLEARN = {
    "LinearDiscriminantAnalysis": (_lda, 1e-5),
    "PCA(svd_solver='full')": (_pca("full"), 1e-5),
    "PCA(svd_solver='randomized')": (_pca("randomized"), 1e-5),
    "PCA(svd_solver='covariance_eigh')": (_pca("covariance_eigh"), 1e-5),
    "PCA float32": (_pca_float32, 1e-4),
    "Ridge(solver='svd')": (_ridge, 1e-5),
    "RidgeCV": (_ridge_cv, 1e-5),
    "RidgeClassifierCV": (_ridge_classifier_cv, 1e-5),
    "LogisticRegression": (_logistic, 1e-5),
    "PoissonRegressor": (_poisson, 1e-5),
    "GaussianNB": (_gaussian_nb, 1e-5),
    "GaussianMixture(init_params='random_from_data')": (_gaussian_mixture, 1e-5),
    "StandardScaler": (_transformer("preprocessing", "StandardScaler"), 1e-5),
    "MinMaxScaler": (_transformer("preprocessing", "MinMaxScaler"), 1e-5),
    "MaxAbsScaler": (_transformer("preprocessing", "MaxAbsScaler"), 1e-5),
    "Normalizer": (_transformer("preprocessing", "Normalizer"), 1e-5),
    "Binarizer": (_transformer("preprocessing", "Binarizer"), 1e-5),
    "PolynomialFeatures": (_transformer("preprocessing", "PolynomialFeatures", degree=2), 1e-5),
    "KernelCenterer": (_kernel_centerer, 1e-5),
    "Nystroem": (_transformer("kernel_approximation", "Nystroem", n_components=10, random_state=0), 1e-5),
    "LabelEncoder": (_transformer("preprocessing", "LabelEncoder", key="y3"), 0),
    "LabelBinarizer": (_transformer("preprocessing", "LabelBinarizer", key="y3"), 0),
    "train_test_split": (_train_test_split, 0),
    "accuracy_score": (_metric("accuracy_score", "y3", "y2"), 1e-6),
    "f1_score(average='macro')": (_metric("f1_score", "y3", "y2", average="macro"), 1e-6),
    "confusion_matrix": (_metric("confusion_matrix", "y3", "y2"), 0),
    "r2_score": (_regression_metric("r2_score"), 1e-5),
    "mean_squared_error": (_regression_metric("mean_squared_error"), 1e-5),
    "mean_absolute_error": (_regression_metric("mean_absolute_error"), 1e-5),
    "log_loss": (_log_loss, 1e-5),
    "rbf_kernel": (_pairwise("rbf_kernel"), 1e-5),
    "euclidean_distances": (_pairwise("euclidean_distances"), 1e-5),
    "cosine_similarity": (_pairwise("cosine_similarity"), 1e-5),
    "manhattan_distances": (_pairwise("manhattan_distances"), 1e-5),
}


def _sp(module: str, name: str):
    return _attr("scipy", module, name)


def _on(module, name, key="A", **kw):
    return lambda xp, d: _sp(module, name)(d[key], **kw)


def _on_abs(module, name, *keys, **kw):
    return lambda xp, d: _sp(module, name)(*(abs(d[k]) for k in keys), **kw)


# name -> (case, relative tolerance)
SCIPY = {
    "special.logsumexp": (_on("special", "logsumexp", axis=1), 1e-12),
    "special.softmax": (_on("special", "softmax", axis=1), 1e-12),
    "special.log_softmax": (_on("special", "log_softmax", axis=1), 1e-12),
    "special.erf": (_on("special", "erf"), 1e-12),
    "special.expit": (_on("special", "expit"), 1e-12),
    "special.xlogy": (lambda xp, d: _sp("special", "xlogy")(d["A"], abs(d["B"])), 1e-12),
    "special.entr": (_on_abs("special", "entr", "A"), 1e-12),
    "special.rel_entr": (_on_abs("special", "rel_entr", "A", "B"), 1e-12),
    "stats.moment": (_on("stats", "moment", order=3, axis=1), 1e-12),
    "stats.skew": (_on("stats", "skew", axis=1), 1e-12),
    "stats.kurtosis": (_on("stats", "kurtosis", axis=1), 1e-12),
    "stats.zscore": (_on("stats", "zscore", axis=1), 1e-12),
    "stats.gmean": (_on_abs("stats", "gmean", "A", axis=1), 1e-12),
    "stats.variation": (_on("stats", "variation", axis=1), 1e-12),
    "stats.sem": (_on("stats", "sem", axis=1), 1e-12),
    "stats.entropy": (_on_abs("stats", "entropy", "A", axis=1), 1e-12),
    "stats.ttest_ind": (lambda xp, d: _sp("stats", "ttest_ind")(d["A"], d["B"], axis=1).pvalue, 1e-12),
    "stats.pearsonr": (lambda xp, d: _sp("stats", "pearsonr")(d["A"], d["B"], axis=1).statistic, 1e-12),
    "cluster.vq.whiten": (_on("cluster.vq", "whiten"), 1e-12),
    "fft.fft": (_on("fft", "fft"), 1e-12),
    "fft.irfft(rfft)": (lambda xp, d: _sp("fft", "irfft")(_sp("fft", "rfft")(d["v"])), 1e-12),
    "fft.dct": (_on("fft", "dct", key="v"), 1e-12),
    "signal.fftconvolve": (lambda xp, d: _sp("signal", "fftconvolve")(d["v"], d["v"][:5]), 1e-12),
    "signal.detrend": (_on("signal", "detrend", key="v"), 1e-12),
    "integrate.trapezoid": (_on("integrate", "trapezoid", axis=1), 1e-12),
    "integrate.cumulative_trapezoid": (_on("integrate", "cumulative_trapezoid", axis=1), 1e-12),
    "ndimage.gaussian_filter": (_on("ndimage", "gaussian_filter", sigma=1.0), 1e-12),
}

TABLES = {"sklearn": SKLEARN, "scipy": SCIPY}


def _parts(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


def _type(a) -> str:
    t = type(a)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def compare(got, want, rtol: float) -> dict:
    """The record of one case: the dispatch_jit answer's types, and how far it is from NumPy's."""
    import numpy as np
    g, w = _parts(got), _parts(want)
    rec = {"types": [_type(a) for a in g], "numpy_types": [_type(a) for a in w], "dtypes": [], "numpy_dtypes": [],
           "shapes_match": len(g) == len(w), "max_rel_err": 0.0, "close": True}
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        rec["dtypes"].append(str(a.dtype))
        rec["numpy_dtypes"].append(str(b.dtype))
        a, b = (x.astype(np.int64) if x.dtype == np.bool_ else x for x in (a, b))
        if a.shape != b.shape:
            rec["shapes_match"] = rec["close"] = False
            continue
        if a.size == 0:
            continue
        # relative to the answer's largest magnitude: an element near zero would blow up an elementwise ratio
        err = float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300)
        rec["max_rel_err"] = max(rec["max_rel_err"], err)
        # atol: an exact zero in NumPy's answer may come out as rounding noise here
        rec["close"] &= bool(np.allclose(a, b, rtol=rtol, atol=rtol * float(np.max(np.abs(b)))))
    return rec


def check(rec: dict) -> None:
    """What the tests assert of one case's record."""
    assert "error" not in rec, rec.get("error")
    assert rec["shapes_match"], rec
    # where NumPy's answer is an array or a NumPy scalar (a 0-d answer), ours is a dispatch_jit tensor of the
    # same dtype; a Python float stays one
    assert rec["types"] == [TENSOR if t.startswith("numpy.") else t for t in rec["numpy_types"]], rec
    assert rec["dtypes"] == rec["numpy_dtypes"], rec
    assert rec["close"], f"max relative error {rec['max_rel_err']:.2e}: {rec}"


def run(table: str) -> list[dict]:
    """Run every case of ``table`` in this process (``SCIPY_ARRAY_API=1`` must be set already)."""
    import warnings

    import numpy as np

    from dispatch_jit import array_api as xp
    if table == "sklearn":
        import sklearn
        sklearn.set_config(array_api_dispatch=True)
    records = []
    for name, (case, rtol) in TABLES[table].items():
        rec = {"name": name}
        try:
            with warnings.catch_warnings():
                # the clients' own warnings (convergence, deprecations) are NumPy's too, not ours
                warnings.simplefilter("ignore")
                want = case(np, _data(np))
                got = case(xp, _data(xp))
            rec.update(compare(got, want, rtol))
        except Exception as e:     # a case's failure is its record, the other cases still run
            rec["error"] = f"{type(e).__name__}: {e}"
        records.append(rec)
    return records


def child(table: str, timeout: float = 1200) -> dict[str, dict]:
    """Run ``table``'s cases in a child process with ``SCIPY_ARRAY_API=1``: name -> record."""
    import subprocess
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    p = subprocess.run([sys.executable, __file__, table], env=env, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(ln[len(MARK):]) for ln in p.stdout.splitlines() if ln.startswith(MARK)]
    if p.returncode != 0 or not records:
        raise RuntimeError(f"clients.py {table} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return {r["name"]: r for r in records}


if __name__ == "__main__":
    if os.environ.get("SCIPY_ARRAY_API") != "1":
        sys.exit("set SCIPY_ARRAY_API=1 (before SciPy is imported): SCIPY_ARRAY_API=1 python clients.py sklearn")
    # the repository's copy of dispatch_jit, not an installed one (as pytest's rootdir insertion does)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for record in run(sys.argv[1]):
        print(MARK + json.dumps(record), flush=True)
