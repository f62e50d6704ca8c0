"""Membership-inference scores from TokenScores (mimir conventions)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from memlab.backends.base import TokenScores
from memlab.metrics.mia import loss, member_scores, min_k, min_k_pp, perplexity, score_names, zlib_ratio

NAN = float("nan")


def _ts(lp, mu=None, sd=None) -> TokenScores:
    return TokenScores(token_ids=list(range(len(lp))), logprobs=list(lp), vocab_mean=mu, vocab_std=sd)


def test_values_by_hand() -> None:
    ts = _ts([NAN, -1.0, -2.0, -3.0, -4.0, -10.0])
    assert loss(ts) == pytest.approx(4.0)  # first position (no context) excluded
    assert perplexity(ts) == pytest.approx(math.exp(4.0))
    text = "some scored text"
    assert zlib_ratio(ts, text) == pytest.approx(4.0 / len(zlib.compress(text.encode())))
    assert min_k(ts, k=0.2) == pytest.approx(10.0)  # floor(0.2*5) = 1 lowest: -10
    assert min_k(ts, k=0.4) == pytest.approx(7.0)  # lowest two: -10, -4
    assert min_k(ts, k=1.0) == pytest.approx(loss(ts))
    assert min_k(_ts([NAN, -1.0, -2.0]), k=0.2) == pytest.approx(2.0)  # |K| >= 1 (mimir would give NaN)


def test_min_k_pp_against_full_distributions() -> None:
    rng = np.random.default_rng(0)
    vocab, n = 50, 30
    logits = rng.normal(size=(n, vocab)) * 2
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    p = np.exp(logp)
    ids = rng.integers(0, vocab, n)
    tok_lp = logp[np.arange(n), ids]
    mu = (p * logp).sum(1)
    sigma = np.sqrt((p * logp**2).sum(1) - mu**2)
    ts = TokenScores(token_ids=ids.tolist(), logprobs=[NAN] + tok_lp[1:].tolist(),
                     vocab_mean=mu.tolist(), vocab_std=sigma.tolist())
    z = ((tok_lp - mu) / sigma)[1:]
    m = int(0.2 * (n - 1))
    assert min_k_pp(ts, k=0.2) == pytest.approx(-np.sort(z)[:m].mean())
    assert min_k_pp(ts, k=0.5) > min_k_pp(ts, k=1.0)  # lowest half is worse than the mean


def test_member_scores_sign_convention() -> None:
    member = _ts([NAN, -0.1, -0.2, -0.1, -0.3], mu=[0.0, -0.5] * 2 + [-0.5], sd=[1.0] * 5)
    nonmember = _ts([NAN, -3.0, -4.0, -2.5, -5.0], mu=[0.0, -0.5] * 2 + [-0.5], sd=[1.0] * 5)
    a, b = member_scores(member, "same text", {"min_k": 0.2}), member_scores(nonmember, "same text", {"min_k": 0.2})
    for name in score_names():  # higher = more likely member, for every score
        assert a.get(name) > b.get(name), name
    assert a["loss"] == -loss(member)
    assert member_scores(_ts([NAN, -1.0]), "x", {"min_k": 0.2})["min_k_pp"] is None  # no vocab stats -> None
    with pytest.raises(ValueError):
        a.get("auc")


def test_edge_cases() -> None:
    ident = _ts([NAN, -1.0, -1.0, -1.0])
    assert loss(ident) == min_k(ident, k=0.5) == 1.0  # identical log-probs: every subset has the same mean
    with pytest.raises(ValueError):
        loss(_ts([NAN]))  # no conditional token
    with pytest.raises(ValueError):
        loss(_ts([]))
    with pytest.raises(ValueError):
        loss(_ts([NAN, NAN, -1.0]))
    with pytest.raises(TypeError):
        loss(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        zlib_ratio(_ts([NAN, -1.0]), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        zlib_ratio(_ts([NAN, -1.0]), "")
    with pytest.raises(ValueError):
        min_k(_ts([NAN, -1.0]), k=0.0)
    with pytest.raises(ValueError):
        min_k_pp(_ts([NAN, -1.0]), k=0.2)  # no vocab stats
    z0 = _ts([NAN, -1.0, -2.0], mu=[0.0, -1.0, -1.0], sd=[1.0, 0.0, 1.0])
    assert min_k_pp(z0, k=1.0) == pytest.approx(0.5)  # sigma = 0 position counts as z = 0
