"""Probabilistic extraction (Hayes et al. 2024, "Measuring memorization in language models via probabilistic
extraction"): the exact probability p_z that a sampler emits a target suffix z after its prefix, and the
(n, p)-discoverable extraction rates built on it.

One sampling step, given the model's logits ℓ ∈ R^V at a position (the order of Hugging Face's warpers in
``generate(do_sample=True)``: temperature → top-k → top-p, then sampling from the renormalized softmax):

1. temperature T > 0: ℓ' = ℓ / T (T = 0 is greedy, below);
2. top-k (k ≥ 1, or None = off): keep token v iff ℓ'_v ≥ the k-th largest ℓ' — as ``TopKLogitsWarper``, every
   token tied with the k-th value stays, so more than k tokens can stay on exact ties;
3. top-p (0 < p ≤ 1, or None = off; p = 1 is off): q = softmax of ℓ' over the tokens top-k kept; rank them by q
   descending, exact ties by lower token id first; keep v iff the mass of the tokens ranked before v is < p, i.e. the
   smallest prefix of that ranking whose mass is ≥ p (the token that reaches p stays; the first token always stays).
   ``TopPLogitsWarper`` keeps the same set up to rounding, except that it leaves the order among exactly tied
   probabilities to ``torch.sort``;
4. P(v) = q_v / Σ_{kept} q for a kept v, 0 for a dropped v.

Greedy (T = 0): P(v) = 1 for v = argmax ℓ (lowest id among tied maxima, as ``argmax``), else 0; top-k and top-p
never drop the argmax, so they do not matter.

For a suffix z = (z_1 … z_m) after a prefix x, with ℓ_t the logits at the position predicting z_t under teacher
forcing on x ⊕ z: log p_z = Σ_t log P_t(z_t), summed in float64 (−inf when any z_t is dropped).

(n, p)-discoverable extraction: the probability of emitting z at least once in n independent samples is
1 − (1 − p_z)^n (computed as −expm1(n·log1p(−p_z))); z is (n, p)-discoverable iff that is ≥ p.

Hugging Face's default generation config sets ``top_k = 50``: to model a plain ``generate(do_sample=True)``, pass
the config's top_k and top_p, not None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from memlab.schema import check

__all__ = ["Sampler", "GREEDY", "sampler_log_probs", "sampler_log_prob", "log_p_z", "sampler_and_greedy",
           "discoverable_rate", "discoverable_share", "rate_rows"]

_SAMPLER_KEYS = ("temperature", "top_k", "top_p")   # one sampler of log_p_z: the arguments of sampler_log_prob


@dataclass(frozen=True)
class Sampler:
    """A sampler's settings as an experiment's config gives them (``params.sampler``); greedy is :data:`GREEDY`."""

    temperature: float = field(metadata=check(gt=0))   # > 0: a sampler (greedy is reported beside it)
    top_k: int | None = field(metadata=check(ge=1))     # None = off (HF's generate(do_sample=True) default is 50)
    top_p: float | None = field(metadata=check(gt=0, le=1))  # None = off

    def label(self) -> str:
        return f"T={self.temperature:g}, top_k={self.top_k}, top_p={self.top_p}"

    def settings(self) -> dict:
        """The mapping :func:`log_p_z` takes for this sampler."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def columns(self) -> dict:
        """The sampler as a table row names it: its label, then its settings."""
        return {"sampler": self.label(), **self.settings()}


GREEDY = {"temperature": 0.0, "top_k": None, "top_p": None}   # greedy decoding as a :func:`log_p_z` sampler


def _check_sampler(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if not (np.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or int(top_k) != top_k or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p}")


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def sampler_log_probs(logits, *, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """log P(v) of the sampler of the module docstring for every token v at every step: ``logits`` is (steps, V)
    (or (V,) for one step); returns float64 of the same shape, −inf for dropped tokens."""
    _check_sampler(temperature, top_k, top_p)
    x = np.array(logits, dtype=np.float64)
    one = x.ndim == 1
    x = np.atleast_2d(x)
    if x.ndim != 2 or x.shape[-1] == 0 or np.isnan(x).any():
        raise ValueError(f"logits must be (steps, vocab) without NaN, got shape {np.shape(logits)}")
    rows = np.arange(x.shape[0])
    if temperature == 0:
        out = np.full_like(x, -np.inf)
        out[rows, np.argmax(x, axis=-1)] = 0.0
        return out[0] if one else out
    x = x / temperature
    vocab = x.shape[-1]
    if top_k is not None and top_k < vocab:
        kth = np.partition(x, vocab - int(top_k), axis=-1)[:, vocab - int(top_k)][:, None]
        x = np.where(x >= kth, x, -np.inf)
    lp = _log_softmax(x)
    if top_p is not None and top_p < 1:
        order = np.argsort(-lp, axis=-1, kind="stable")  # probability descending, ties: lower id first
        q = np.exp(np.take_along_axis(lp, order, axis=-1))
        before = np.concatenate([np.zeros((q.shape[0], 1)), np.cumsum(q, axis=-1)[:, :-1]], axis=-1)
        keep = np.empty_like(before, dtype=bool)
        np.put_along_axis(keep, order, before < top_p, axis=-1)
        lp = _log_softmax(np.where(keep, lp, -np.inf))
    return lp[0] if one else lp


def sampler_log_prob(logits_per_step, target_ids: Sequence[int], *, temperature: float, top_k: int | None,
                     top_p: float | None) -> float:
    """log p_z: Σ_t log P_t(z_t) (float64) of the target ids z under the sampler of the module docstring, where
    ``logits_per_step[t]`` are the model's logits at the position predicting z_t (teacher-forced on prefix ⊕ z);
    −inf when a target token falls outside a step's kept set (for T = 0: is not that step's argmax)."""
    z = np.asarray(target_ids, dtype=np.int64)
    lp = sampler_log_probs(np.atleast_2d(np.asarray(logits_per_step, dtype=np.float64)), temperature=temperature,
                           top_k=top_k, top_p=top_p)
    if z.ndim != 1 or z.size != lp.shape[0]:
        raise ValueError(f"{z.size} target ids for {lp.shape[0]} steps of logits")
    if z.size and (z.min() < 0 or z.max() >= lp.shape[1]):
        raise ValueError("target id outside the vocabulary")
    return float(np.sum(lp[np.arange(z.size), z]))


def log_p_z(model, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *,
            samplers: Sequence[Mapping[str, Any]], batch_size: int, pad_token_id: int) -> list[np.ndarray]:
    """log p_z of every (prefix_ids, suffix_ids) pair under a Hugging Face causal LM ``model`` (e.g.
    ``HFBackend.model``) for each sampler of ``samplers`` (each a mapping ``{temperature, top_k, top_p}`` of the
    module docstring; T = 0 is greedy): one float64 array per sampler, in the samplers' order, each in the pairs'
    order (p_z = ``np.exp`` of it). One forward pass per ``batch_size`` pairs, shared by every sampler: each row is
    prefix ⊕ suffix[:-1], right-padded with ``pad_token_id`` (masked out; a causal model never attends to padding
    after a row's last token); the logits at positions len(prefix) − 1 … len(prefix) + len(suffix) − 2 predict the
    suffix, and go to :func:`sampler_log_prob` in float64, once per sampler. Both parts of a pair must be non-empty;
    ``samplers`` must be non-empty."""
    import torch

    samplers = [dict(s) for s in samplers]
    if not samplers:
        raise ValueError("log_p_z needs at least one sampler")
    for s in samplers:
        if set(s) != set(_SAMPLER_KEYS):
            raise ValueError(f"a sampler is a mapping of exactly {_SAMPLER_KEYS}, got {sorted(s)}")
        _check_sampler(**s)
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    pairs = [(list(map(int, p)), list(map(int, s))) for p, s in pairs]
    if any(not p or not s for p, s in pairs):
        raise ValueError("every pair needs a non-empty prefix and a non-empty suffix")
    device = next(model.parameters()).device
    out = [np.full(len(pairs), np.nan) for _ in samplers]
    for start in range(0, len(pairs), int(batch_size)):
        chunk = pairs[start:start + int(batch_size)]
        rows = [p + s[:-1] for p, s in chunk]
        width = max(len(r) for r in rows)
        x = torch.full((len(rows), width), int(pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            x[r, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[r, :len(row)] = 1
        with torch.inference_mode():
            logits = model(input_ids=x.to(device), attention_mask=mask.to(device)).logits
        for r, (prefix, suffix) in enumerate(chunk):
            steps = logits[r, len(prefix) - 1:len(prefix) - 1 + len(suffix)].double().cpu().numpy()
            for lp, s in zip(out, samplers):
                lp[start + r] = sampler_log_prob(steps, suffix, **s)
    return out


def sampler_and_greedy(backend, pairs, sampler: Sampler, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """log p_z of every pair under ``sampler`` and under greedy decoding, from one forward pass per batch of the
    backend's Hugging Face model (``backend.model``, padded with ``backend.pad_token_id``)."""
    lpz, lpz_greedy = log_p_z(backend.model, pairs, samplers=[sampler.settings(), GREEDY], batch_size=batch_size,
                              pad_token_id=backend.pad_token_id)
    return lpz, lpz_greedy


def discoverable_rate(p_z, n) -> np.ndarray | float:
    """1 − (1 − p_z)^n, the probability of emitting the suffix at least once in n independent samples, as
    −expm1(n · log1p(−p_z)) (exact for tiny p_z, where the plain form rounds to 0); broadcasts p_z against n.
    p_z in [0, 1], n ≥ 1."""
    p = np.asarray(p_z, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_z must be in [0, 1]")
    if np.isnan(m).any() or (m < 1).any():
        raise ValueError("n must be >= 1")
    with np.errstate(divide="ignore"):
        rate = -np.expm1(m * np.log1p(-p))
    return float(rate) if rate.ndim == 0 else rate


def discoverable_share(p_z: Sequence[float], ns: Sequence[float], p: float) -> np.ndarray:
    """For each n in ``ns``: the share of the pairs (one p_z each) that are (n, p)-discoverable, i.e. whose
    :func:`discoverable_rate` at n is ≥ ``p`` (0 < p ≤ 1). Returns float64 of len(ns)."""
    z = np.asarray(p_z, dtype=np.float64).ravel()
    if z.size == 0:
        raise ValueError("no p_z values")
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    rates = discoverable_rate(z[None, :], np.asarray(ns, dtype=np.float64).ravel()[:, None])
    return np.mean(rates >= p, axis=1)


def rate_rows(log_p_z, greedy, ns: Sequence[int], p: float, level: float) -> list[dict]:
    """One group of pairs (``log_p_z`` under the sampler, ``greedy`` 0/1 each) read at every n of ``ns``: the
    (n, p)-discoverable count and share (:func:`discoverable_rate` ≥ ``p``) beside the greedy extraction count and
    rate, each with an exact Clopper–Pearson interval at ``level``, and the median log10 p_z; one row per n."""
    from memlab.metrics.intervals import clopper_pearson

    lpz = np.asarray(log_p_z, dtype=np.float64)
    pz, n_docs, extracted = np.exp(lpz), len(lpz), int(np.sum(greedy))
    glo, ghi = clopper_pearson(extracted, n_docs, level)
    rows = []
    for n in ns:
        k = int(np.sum(discoverable_rate(pz, n) >= p))
        lo, hi = clopper_pearson(k, n_docs, level)
        rows.append({"n": int(n), "p": p, "n_docs": n_docs, "discoverable": k, "discoverable_share": k / n_docs,
                     "discoverable_ci_low": lo, "discoverable_ci_high": hi, "greedy_extracted": extracted,
                     "greedy_rate": extracted / n_docs, "greedy_ci_low": glo, "greedy_ci_high": ghi,
                     "median_log10_p_z": float(np.median(lpz) / np.log(10)), "level": level})
    return rows
