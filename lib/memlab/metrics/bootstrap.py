"""Book-level (unit-level) bootstrap of a mean, and its paired variant for two methods.

RECAP (seed 000, §4.1): "in each of 1000 bootstrap iterations, we sample (with replacement) the entire
set of books within the group and calculate the average ROUGE-L for the set. We report the mean and
standard deviation of the resulting 1000 bootstrap means." With book scores x_1..x_n and resample b
drawing indices I_b ⊂ {1..n} (|I_b| = n, with replacement)::

    m_b  = (1/n) Σ_{i ∈ I_b} x_i                      (or Σ w_i x_i / Σ w_i with ``weights``)
    mean = (1/B) Σ_b m_b,     sd = std(m_1..m_B, ddof=1)
    CI   = [q_{α/2}(m), q_{1−α/2}(m)]                 (percentile interval, numpy "linear" quantiles)

``estimate`` is the statistic on the original sample (the number to report as the point value; ``mean``
is the bootstrap mean, which is what RECAP's tables print).

Paired variant (:func:`paired_bootstrap`): both methods are scored on the same books; each resample
draws one index set and applies it to both, so the difference d_b = m_b(A) − m_b(B) keeps the pairing.
``p_le_zero`` = fraction of resamples with d_b ≤ 0 (a one-sided bootstrap p-value for "A > B").

Everything is vectorized (one integer index matrix of B × n, in chunks) and seeded with
``np.random.default_rng(seed)``: the same inputs and seed give identical results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["BootstrapResult", "PairedBootstrapResult", "bootstrap_mean", "paired_bootstrap", "resample_indices"]

_CHUNK_ELEMENTS = 4_000_000  # cap on B×n index-matrix elements held at once


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float  # statistic on the original sample
    mean: float  # mean of the bootstrap statistics
    sd: float  # standard deviation (ddof=1) of the bootstrap statistics
    ci_low: float
    ci_high: float
    ci: float  # confidence level, e.g. 0.95
    n_units: int
    n_resamples: int
    seed: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairedBootstrapResult:
    a: BootstrapResult
    b: BootstrapResult
    diff: BootstrapResult  # A − B
    p_le_zero: float  # fraction of resamples with A − B <= 0


def _as_1d(name: str, values: object) -> np.ndarray:
    if values is None or isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: the bootstrap needs at least one unit (book)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _check_params(n_resamples: int, ci: float) -> None:
    if int(n_resamples) < 2:
        raise ValueError(f"n_resamples must be >= 2, got {n_resamples}")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")


def resample_indices(n_units: int, n_resamples: int, seed: int):
    """Yield index matrices (chunks of rows, B×n in total) drawn with ``default_rng(seed)``.

    Chunking keeps memory flat; the draws are identical to one ``rng.integers(0, n, (B, n))`` call
    because numpy's generator fills row-major from one stream.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_units))
    done = 0
    while done < n_resamples:
        k = min(rows, n_resamples - done)
        yield rng.integers(0, n_units, size=(k, n_units))
        done += k


def _stat(x: np.ndarray, w: np.ndarray | None, idx: np.ndarray | None = None) -> np.ndarray | float:
    if idx is None:
        return float(np.mean(x)) if w is None else float(np.sum(w * x) / np.sum(w))
    if w is None:
        return x[idx].mean(axis=1)
    ws = w[idx]
    tot = ws.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ws * x[idx]).sum(axis=1) / tot  # NaN if a resample drew only zero-weight units


def _summarize(estimate: float, stats: np.ndarray, ci: float, n: int, b: int, seed: int) -> BootstrapResult:
    stats = stats[np.isfinite(stats)]
    lo, hi = np.quantile(stats, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return BootstrapResult(
        estimate=float(estimate),
        mean=float(stats.mean()),
        sd=float(stats.std(ddof=1)) if stats.size > 1 else 0.0,
        ci_low=float(lo),
        ci_high=float(hi),
        ci=float(ci),
        n_units=n,
        n_resamples=b,
        seed=seed,
    )


def bootstrap_mean(
    values: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    n_resamples: int,
    seed: int = 0,
    ci: float = 0.95,
) -> BootstrapResult:
    """Bootstrap the mean (or ``weights``-weighted mean) of per-unit values (one value per book).

    Raises TypeError for None/str input, ValueError for empty input, NaN/inf, bad weights or parameters.
    One unit → sd = 0 and a degenerate CI (every resample is that unit).
    """
    _check_params(n_resamples, ci)
    x = _as_1d("values", values)
    w = None
    if weights is not None:
        w = _as_1d("weights", weights)
        if w.shape != x.shape:
            raise ValueError(f"weights has {w.size} entries but values has {x.size}")
        if np.any(w < 0) or w.sum() == 0:
            raise ValueError("weights must be >= 0 with a positive sum")
    stats = np.concatenate([_stat(x, w, idx) for idx in resample_indices(x.size, int(n_resamples), seed)])
    return _summarize(_stat(x, w), stats, ci, x.size, int(n_resamples), seed)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int,
    seed: int = 0,
    ci: float = 0.95,
) -> PairedBootstrapResult:
    """Paired book-level bootstrap of mean(A), mean(B) and mean(A) − mean(B) on the same books.

    ``a[i]`` and ``b[i]`` must be the two methods' scores on book i. See the module docstring.
    """
    _check_params(n_resamples, ci)
    xa, xb = _as_1d("a", a), _as_1d("b", b)
    if xa.shape != xb.shape:
        raise ValueError(f"paired bootstrap needs the same books: a has {xa.size}, b has {xb.size}")
    sa, sb = [], []
    for idx in resample_indices(xa.size, int(n_resamples), seed):
        sa.append(xa[idx].mean(axis=1))
        sb.append(xb[idx].mean(axis=1))
    ma, mb = np.concatenate(sa), np.concatenate(sb)
    d = ma - mb
    n, bb = xa.size, int(n_resamples)
    return PairedBootstrapResult(
        a=_summarize(xa.mean(), ma, ci, n, bb, seed),
        b=_summarize(xb.mean(), mb, ci, n, bb, seed),
        diff=_summarize(xa.mean() - xb.mean(), d, ci, n, bb, seed),
        p_le_zero=float(np.mean(d <= 0)),
    )
