"""One scoring definition across backends (issue 33, item 6): ``model.score_bos`` (backends/score_bos.py).

The comparison: the HF backend with ``score_bos: prepend`` vs llama-cpp-python's server (BOS switched on, as the
llama-cpp preset says) on the same SmolLM2-135M weights (see test_served_scoring.py's docstring: the fp32
conversion of the very GGUF the server loads), on texts with the tokenizer's edge cases. Both now return the
text's own tokens scored after a BOS, position j = log p(x_j | BOS, x_<j): no shifting by hand. The one
difference left is position 0: HF gives log p(x_0 | BOS), the server's echo nulls it (the OpenAI convention).
The MIA scores (metrics/mia.py: loss, zlib, Min-K%, Min-K%++) use positions 1.. on every backend, so they mean
the same thing on both; per-text loss and Min-K% are compared as those functions compute them.

Tolerance. Measured here (2026-11, llama-cpp-python 0.3.36, AVX2; the 12 of 13 texts below whose ids match,
166 scored tokens): max |Δ log p| per token 0.67, mean 0.090; per-text loss (mean NLL) max |Δ| 0.166 (a 6-token
text: the mean of few differences), Min-K% (k = 20 %) max |Δ| 0.163. An earlier 20-text run saw 1.14 on one
token (loss 0.036, Min-K% 0.167). Asserted: 1.5 per token, 0.15 mean, 0.3 loss, 0.35 Min-K% (1.3x the worst
token seen, about 2x the rest). Why so loose for identical weights: llama.cpp rounds the activations to 8 bits
(blocks of 32) before each Q4_1/Q8_0 matmul and keeps K/V in F16, HF computes in fp32; a rare token (log p ≈ -10)
moves most, and Min-K% is the mean of exactly those lowest log-probs, so it moves more than the loss. What the
tolerance must catch: a one-token misalignment moves tokens by several nats, and HF without the BOS (before this
key) was off by 0.10 in loss (inside 0.3) and 0.50 in Min-K% (outside 0.35).

Tokenization: llama.cpp's tokenizer (GGUF) and HF's (tokenizer.json) are different implementations of the same
BPE; they split a newline followed by a space differently after a digit ("1\n 2": llama.cpp one token "\n ",
HF "\n" then " "; the other "\n " texts below agree). Texts whose ids differ are NOT compared (there is no
token-by-token pairing) but are named, and at least MIN_MATCH of them must match.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.backends.factory import build_backend
from memlab.errors import ConfigError
from memlab.metrics.mia import min_k
from tests.backends.test_served_scoring import (ROOT, TEXTS, _FakeScorer, _hf, fake_scorer,  # noqa: F401
                                                hf_smollm, llama_server, served_cfg, smollm_gguf)

EDGE_TEXTS = TEXTS + [
    "a\n b",  # newline followed by a space
    "first line\n second line starts with a space\n\n  and two",
    " leading space",
    "café, naïve façade — Zürich 東京 🙂",
    "1234567890 + 42 = 1234567932; 3.14159",
    "x",  # one token: only position 0, which the server nulls
    "Hi",
    "tab\tseparated\tvalues",
    "Genesis 1\n 2 And the earth",  # digit, newline, space, digit: llama.cpp merges "\n " (HF: "\n", " ")
]
# texts whose ids must match: 1 differs today ("1\n 2"), one more is allowed for another llama.cpp build
MIN_MATCH = len(EDGE_TEXTS) - 2
TOL_MAX, TOL_MEAN, TOL_LOSS, TOL_MIN_K = 1.5, 0.15, 0.3, 0.35


@pytest.fixture(scope="module")
def hf_prepend(smollm_gguf):  # noqa: F811
    return _hf(smollm_gguf, "prepend")


def test_served_and_hf_agree_under_prepend_on_edge_cases(llama_server, hf_prepend):  # noqa: F811
    api = build_backend(served_cfg(llama_server))
    served, local = api.score(EDGE_TEXTS), hf_prepend.score(EDGE_TEXTS)
    mismatched = [t for t, s, h in zip(EDGE_TEXTS, served, local) if s.token_ids != h.token_ids]
    print(f"{len(EDGE_TEXTS) - len(mismatched)}/{len(EDGE_TEXTS)} texts tokenize alike; differ: {mismatched!r}")
    assert len(EDGE_TEXTS) - len(mismatched) >= MIN_MATCH, f"tokenized differently by llama.cpp: {mismatched!r}"
    diffs, loss_d, mink_d = [], [], []
    for text, s, h in zip(EDGE_TEXTS, served, local):
        if text in mismatched:
            continue
        assert hf_prepend.tokenizer.decode(h.token_ids) == text and math.isnan(s.logprobs[0])
        assert math.isfinite(h.logprobs[0])  # prepend: HF scores x_0 after the BOS; the echo does not report it
        if len(s.token_ids) < 2:
            continue
        d = np.abs(np.asarray(s.logprobs[1:]) - np.asarray(h.logprobs[1:]))
        diffs.append(d)
        loss_d.append(abs(float(np.mean(s.logprobs[1:])) - float(np.mean(h.logprobs[1:]))))
        mink_d.append(abs(min_k(s, 0.2) - min_k(h, 0.2)))
        print(f"  {text[:30]!r}: {len(s.token_ids)} tokens, loss Δ {loss_d[-1]:.3f}, Min-K% Δ {mink_d[-1]:.3f}")
    d = np.concatenate(diffs)
    print(f"served vs HF (prepend): {d.size} tokens, max |Δ| {d.max():.3f}, mean |Δ| {d.mean():.3f}; "
          f"loss max |Δ| {max(loss_d):.3f}, Min-K% max |Δ| {max(mink_d):.3f}")
    assert d.max() < TOL_MAX and d.mean() < TOL_MEAN
    assert max(loss_d) < TOL_LOSS and max(mink_d) < TOL_MIN_K


def test_prepend_makes_position_0_finite_and_tokenizer_keeps_nan(hf_smollm, hf_prepend):  # noqa: F811
    texts = ["In the beginning", "x"]
    plain, pre = hf_smollm.score(texts), hf_prepend.score(texts)
    bos = hf_prepend.tokenizer.bos_token_id
    again = hf_prepend.score_token_ids([[bos] + hf_prepend.tokenizer(t, add_special_tokens=False)["input_ids"]
                                        for t in texts])
    for p, q, r in zip(plain, pre, again):
        assert math.isnan(p.logprobs[0]) and math.isfinite(q.logprobs[0])
        assert q.token_ids == p.token_ids == r.token_ids[1:]  # the text's tokens; the BOS is not listed
        assert q.logprobs == r.logprobs[1:] and q.vocab_mean == r.vocab_mean[1:] and q.vocab_std == r.vocab_std[1:]
    assert hf_prepend.score_variant != hf_smollm.score_variant  # cached apart


def test_missing_score_bos_is_one_line(llama_server):  # noqa: F811
    cfg = {"name": "smol", "backend": "hf", "path": str(ROOT / "models" / "smollm2-135m-instruct")}
    with pytest.raises(ConfigError, match="model.score_bos is not set") as err:
        build_backend(cfg)  # refused before any weights load
    assert "\n" not in str(err.value) and "prepend" in str(err.value)
    with pytest.raises(ConfigError, match="must be one of tokenizer, prepend"):
        build_backend({**cfg, "score_bos": "none"})
    with pytest.raises(ConfigError, match="model.score_bos is not set") as err:  # served: refused at build too
        build_backend({k: v for k, v in served_cfg(llama_server).items() if k != "score_bos"})
    assert "\n" not in str(err.value) and "prepend" in str(err.value)


def test_served_bos_contradicting_the_key_is_one_line(llama_server):  # noqa: F811
    """score_bos: tokenizer on a server that prepends a BOS (the HF tokenizer of SmolLM2 adds none): refused."""
    api = build_backend(served_cfg(llama_server, score_bos="tokenizer"))
    with pytest.raises(ConfigError, match="prepends a BOS") as err:
        api.score(TEXTS[:1])
    assert "\n" not in str(err.value) and "score_bos=prepend" in str(err.value)


def test_prepend_with_prompt_logprobs_is_one_line(fake_scorer):  # noqa: F811
    """vLLM's prompt_logprobs give ids with no sign of a BOS the server added: prepend can't be checked there."""
    _FakeScorer.mode = "prompt_logprobs"
    api = build_backend(served_cfg(fake_scorer, can_score="prompt_logprobs", score_bos="prepend"))
    with pytest.raises(ConfigError, match="score_bos: tokenizer") as err:
        api.score(["abc"])
    assert "\n" not in str(err.value) and api.usage.requests == 0
