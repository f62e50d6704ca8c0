"""Reference-free membership-inference scores from per-token log-probs (the baselines PEARL is compared with).

Input: :class:`memlab.backends.base.TokenScores`. Only positions j ≥ 1 are used (``logprobs[0]`` has no
context and is NaN by contract); let ℓ_j = log p(x_j | x_<j) for those N positions.

Raw scores, **mimir conventions** (github.com/iamgroot42/mimir; all are loss-like: LOWER = more likely
member)::

    loss        = −(1/N) Σ_j ℓ_j                                  (mean NLL; Yeom et al. 2018)
    perplexity  = exp(loss)
    zlib_ratio  = loss / len(zlib.compress(text.encode("utf-8")))  (Carlini et al. 2021; mimir's ZLIB
                                                                    attack: loss / zlib entropy, default
                                                                    zlib level)
    min_k       = −(1/|K|) Σ_{j∈K} ℓ_j,   K = the ⌊k·N⌋ positions with the lowest ℓ_j   (Shi et al. 2024,
                                                                    Min-K% Prob; mimir default k = 0.2)
    min_k_pp    = −(1/|K|) Σ_{j∈K} z_j,   z_j = (ℓ_j − μ_j) / σ_j, K = the ⌊k·N⌋ lowest z_j
                  μ_j = E_{v~p(·|x_<j)} log p(v|x_<j),  σ_j² = E[(log p)²] − μ_j²     (Zhang et al. 2024,
                                                                    Min-K%++, eq. 3 of that paper)

Deviation from mimir, documented: |K| = max(1, ⌊k·N⌋) (mimir's ``int(N·k)`` gives an empty set and NaN
for short texts).

For detection (:mod:`memlab.metrics.detection`, which expects HIGHER = more likely member) use
:func:`member_scores`, which returns every score negated: −loss, −perplexity, −zlib_ratio, −min_k,
−min_k_pp. Keep this one sign flip here; never flip elsewhere.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from memlab.backends.base import TokenScores

__all__ = ["MiaScores", "loss", "perplexity", "zlib_ratio", "min_k", "min_k_pp", "member_scores", "SCORE_NAMES"]

SCORE_NAMES = ("loss", "perplexity", "zlib_ratio", "min_k", "min_k_pp")


def _logprobs(ts: TokenScores) -> np.ndarray:
    if not isinstance(ts, TokenScores):
        raise TypeError(f"expected TokenScores, got {type(ts).__name__}")
    lp = np.asarray(ts.logprobs, dtype=float)[1:]
    if lp.size == 0:
        raise ValueError("TokenScores has < 2 tokens: no conditional log-prob to score")
    if not np.all(np.isfinite(lp)):
        raise ValueError("TokenScores.logprobs[1:] contain NaN or inf")
    return lp


def _lowest_k_mean(x: np.ndarray, k: float) -> float:
    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1], got {k}")
    m = max(1, int(math.floor(k * x.size + 1e-9)))
    return float(np.mean(np.partition(x, m - 1)[:m]))


def loss(ts: TokenScores) -> float:
    """Mean negative log-likelihood over positions j ≥ 1 (lower = more likely member)."""
    return float(-np.mean(_logprobs(ts)))


def perplexity(ts: TokenScores) -> float:
    """exp(loss) (lower = more likely member)."""
    return float(math.exp(loss(ts)))


def zlib_ratio(ts: TokenScores, text: str) -> float:
    """loss / len(zlib.compress(text bytes)) (mimir's ZLIB attack; lower = more likely member).

    ``text`` must be the scored text. Empty text → ValueError (zlib length of b"" is not the signal).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    if not text:
        raise ValueError("zlib_ratio needs the non-empty scored text")
    return loss(ts) / len(zlib.compress(text.encode("utf-8")))


def min_k(ts: TokenScores, k: float) -> float:
    """Min-K% Prob: −mean of the lowest ⌊k·N⌋ (≥ 1) token log-probs (lower = more likely member)."""
    return -_lowest_k_mean(_logprobs(ts), k)


def min_k_pp(ts: TokenScores, k: float) -> float:
    """Min-K%++: −mean of the lowest ⌊k·N⌋ (≥ 1) of z_j = (ℓ_j − μ_j)/σ_j (lower = more likely member).

    Needs ``vocab_mean``/``vocab_std`` (raises ValueError when the backend could not provide them).
    Positions with σ_j = 0 (a one-hot next-token distribution) get z_j = 0.
    """
    lp = _logprobs(ts)
    if ts.vocab_mean is None or ts.vocab_std is None:
        raise ValueError("Min-K%++ needs TokenScores.vocab_mean/vocab_std (use a backend with full distributions)")
    mu = np.asarray(ts.vocab_mean, dtype=float)[1:]
    sd = np.asarray(ts.vocab_std, dtype=float)[1:]
    if mu.shape != lp.shape or sd.shape != lp.shape:
        raise ValueError("vocab_mean/vocab_std must have one entry per token")
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, (lp - mu) / sd, 0.0)
    if not np.all(np.isfinite(z)):
        raise ValueError("vocab_mean/vocab_std contain NaN or inf")
    return -_lowest_k_mean(z, k)


@dataclass(frozen=True)
class MiaScores:
    """All scores for one text, oriented HIGHER = more likely member (each is −(raw mimir score)).

    ``min_k_pp`` is None when the backend gave no vocabulary statistics.
    """

    loss: float
    perplexity: float
    zlib_ratio: float
    min_k: float
    min_k_pp: float | None

    def get(self, name: str) -> float | None:
        if name not in SCORE_NAMES:
            raise ValueError(f"unknown MIA score {name!r}; choose from {SCORE_NAMES}")
        return getattr(self, name)


def member_scores(ts: TokenScores, text: str, *, k: float) -> MiaScores:
    """Every MIA score for one scored text, sign-flipped so that higher = more likely member; ``k`` of Min-K% /
    Min-K%++ is the run's (``params.min_k`` of pearl_mia, ``params.mia.min_k`` of the audit), never a default here."""
    has_pp = ts.vocab_mean is not None and ts.vocab_std is not None
    return MiaScores(
        loss=-loss(ts),
        perplexity=-perplexity(ts),
        zlib_ratio=-zlib_ratio(ts, text),
        min_k=-min_k(ts, k),
        min_k_pp=-min_k_pp(ts, k) if has_pp else None,
    )
