"""Book-level bootstrap: seeded, vectorized, correct statistics."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.metrics import bootstrap as bs
from memlab.metrics.bootstrap import bootstrap_mean, paired_bootstrap


def _loop_reference(x: np.ndarray, n: int, seed: int) -> np.ndarray:
    """A plain loop with the same generator: what the vectorized code must reproduce."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n, x.size))
    return np.array([x[row].mean() for row in idx])


def test_matches_plain_loop_and_is_seeded() -> None:
    x = np.random.default_rng(0).random(35)
    r = bootstrap_mean(x, n_resamples=1000, seed=11)
    ref = _loop_reference(x, 1000, 11)
    assert r.mean == pytest.approx(ref.mean(), abs=1e-12)
    assert r.sd == pytest.approx(ref.std(ddof=1), abs=1e-12)
    assert (r.ci_low, r.ci_high) == pytest.approx(tuple(np.quantile(ref, [0.025, 0.975])), abs=1e-12)
    assert r.estimate == pytest.approx(x.mean())
    assert r.n_resamples == 1000 and r.n_units == 35
    assert bootstrap_mean(x, n_resamples=1000, seed=11) == r  # same seed -> identical
    assert bootstrap_mean(x, n_resamples=1000, seed=12) != r
    # sd of bootstrap means ~ sd(x)/sqrt(n)
    assert r.sd == pytest.approx(x.std() / np.sqrt(35), rel=0.15)


def test_chunking_does_not_change_draws(monkeypatch) -> None:
    x = np.arange(35, dtype=float)
    full = bootstrap_mean(x, n_resamples=500, seed=3)
    monkeypatch.setattr(bs, "_CHUNK_ELEMENTS", 35 * 7)  # 7 rows per chunk
    assert bootstrap_mean(x, n_resamples=500, seed=3) == full


def test_weighted_mean() -> None:
    x, w = np.array([1.0, 0.0]), np.array([3.0, 1.0])
    r = bootstrap_mean(x, weights=w, n_resamples=2000, seed=0)
    assert r.estimate == pytest.approx(0.75)
    assert 0.5 < r.mean < 0.9
    with pytest.raises(ValueError):
        bootstrap_mean(x, weights=[1.0], n_resamples=10)
    with pytest.raises(ValueError):
        bootstrap_mean(x, weights=[0.0, 0.0], n_resamples=10)


def test_paired() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(35)
    a, b = base + 0.05, base  # A better on every book by exactly 0.05
    r = paired_bootstrap(a, b, n_resamples=1000, seed=2)
    assert r.diff.mean == pytest.approx(0.05) and r.diff.sd < 1e-12
    assert r.p_le_zero == 0.0
    assert r.a.mean - r.b.mean == pytest.approx(0.05)
    # same draws as the unpaired bootstrap with the same seed
    assert r.a == bootstrap_mean(a, n_resamples=1000, seed=2)
    rev = paired_bootstrap(b, a, n_resamples=1000, seed=2)
    assert rev.p_le_zero == 1.0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0, 2.0], [1.0], n_resamples=10)


def test_edge_cases() -> None:
    one = bootstrap_mean([0.3], n_resamples=10)
    assert (one.mean, one.sd, one.ci_low, one.ci_high) == pytest.approx((0.3, 0.0, 0.3, 0.3))
    same = bootstrap_mean([0.5] * 10, n_resamples=10)
    assert same.sd == 0.0 and same.mean == pytest.approx(0.5)
    for bad in (None, "abc"):
        with pytest.raises(TypeError):
            bootstrap_mean(bad, n_resamples=10)  # type: ignore[arg-type]
    for bad_vals in ([], [np.nan, 1.0], [[1.0, 2.0]]):
        with pytest.raises(ValueError):
            bootstrap_mean(bad_vals, n_resamples=10)
    with pytest.raises(ValueError):
        bootstrap_mean([1.0, 2.0], n_resamples=1)
    with pytest.raises(ValueError):
        bootstrap_mean([1.0, 2.0], n_resamples=10, ci=1.5)
