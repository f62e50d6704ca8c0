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

**The registry.** Every score above is registered with :func:`mia_score` (its name, its raw function of
(TokenScores, text, settings), whether LOWER or HIGHER raw values mean member, whether it needs the backend's
vocabulary statistics, whether the audit and pearl_mia judge it, and the keys of the run's MIA settings it reads:
``min_k`` is k of Min-K% / Min-K%++, ``params.min_k`` of pearl_mia and ``params.mia.min_k`` of the audit, never a
default here). A new score is one new module in :mod:`memlab.metrics.mia_scores` that registers itself with the
same decorator: :func:`registered` imports every module of that package, and the per-document tables
(:func:`memlab.methods.pearl.tables.mia_frame`), pearl_mia and the audit take their scores from it, in registration
order (the built-ins below first, then that package's modules by name).

For detection (:mod:`memlab.metrics.detection`, which expects HIGHER = more likely member) use
:func:`member_scores`, which orients every registered score so: the five above are negated (−loss, −perplexity,
−zlib_ratio, −min_k, −min_k_pp). Keep this one sign flip here; never flip elsewhere.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memlab.backends.base import TokenScores
from memlab.plugins import import_all

__all__ = ["MiaScore", "MiaScores", "mia_score", "registered", "score_names", "judged_names", "member_scores",
           "loss", "perplexity", "zlib_ratio", "min_k", "min_k_pp", "nll_per_byte", "ReferenceScore",
           "reference_score", "reference_scores", "reference_loss_ratio", "reference_loss_difference"]

SCORE_PACKAGE = "memlab.metrics.mia_scores"   # every module in it is imported by registered()


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


def nll_per_byte(ts: TokenScores, text: str) -> float:
    """−Σ_{j≥1} ℓ_j / (UTF-8 bytes of ``text``): the text's loss in nats per byte, a unit two models with different
    tokenizers share (the reference attacks across tokenizers)."""
    if not text:
        raise ValueError("nll_per_byte needs the non-empty scored text")
    return float(-np.sum(_logprobs(ts)) / len(text.encode("utf-8")))


# ---- reference attacks: the target's loss against a reference model's on the same text ---------------------------

@dataclass(frozen=True)
class ReferenceScore:
    """One registered reference attack: ``raw(loss_target, loss_reference)`` (higher = more likely member), both
    losses of one text in one unit; ``across_tokenizers``: the score is the same number in nats per byte
    (:func:`nll_per_byte`, what two tokenizers share) as in mean nats per token of one tokenizer, so a reference with
    another tokenizer (the audit's) may be used."""

    name: str
    raw: Callable[[float, float], float]
    across_tokenizers: bool


_REFERENCE: dict[str, ReferenceScore] = {}


def reference_score(name: str, *, across_tokenizers: bool) -> Callable:
    """Register the decorated ``raw(loss_target, loss_reference) -> float`` as the reference attack ``name``."""
    def add(raw):
        if name in _REFERENCE:
            raise ValueError(f"reference attack {name!r} is registered twice")
        _REFERENCE[name] = ReferenceScore(name, raw, across_tokenizers)
        return raw
    return add


def reference_scores(*, across_tokenizers: bool = False) -> tuple[ReferenceScore, ...]:
    """The registered reference attacks in registration order (``across_tokenizers``: only those that hold across
    tokenizers), after importing :data:`SCORE_PACKAGE`'s modules (a new attack is one module there, as a score is)."""
    import_all(SCORE_PACKAGE)
    return tuple(s for s in _REFERENCE.values() if s.across_tokenizers or not across_tokenizers)


@reference_score("ref_loss_difference", across_tokenizers=False)
def reference_loss_difference(loss_target: float, loss_reference: float) -> float:
    """loss_reference − loss_target (higher = more likely member), both in mean nats per token of one tokenizer."""
    return loss_reference - loss_target


@reference_score("ref_loss_ratio", across_tokenizers=True)
def reference_loss_ratio(loss_target: float, loss_reference: float) -> float:
    """−loss_target / loss_reference (higher = more likely member; Carlini et al. 2021's comparison with a reference
    model): mean nats per token under one tokenizer, or :func:`nll_per_byte` across two (the same number: the
    token count cancels)."""
    return -loss_target / loss_reference


# ---- the registry ---------------------------------------------------------------------------------------------

RawScore = Callable[[TokenScores, str, Mapping[str, Any]], float]


@dataclass(frozen=True)
class MiaScore:
    """One registered score: ``raw(ts, text, settings)`` is its raw value; ``lower_is_member`` its direction (True:
    mimir's loss-like convention); ``needs_vocab``: None without ``TokenScores.vocab_mean``/``vocab_std``;
    ``judged``: the audit and pearl_mia decide with it; ``settings``: the keys of the run's MIA settings it reads."""

    name: str
    raw: RawScore
    lower_is_member: bool
    needs_vocab: bool
    judged: bool
    settings: tuple[str, ...]


_REGISTRY: dict[str, MiaScore] = {}


def mia_score(name: str, *, lower_is_member: bool, needs_vocab: bool, judged: bool,
              settings: tuple[str, ...]) -> Callable[[RawScore], RawScore]:
    """Register the decorated ``raw(ts, text, settings) -> float`` as the MIA score ``name`` (see :class:`MiaScore`)."""
    def add(raw: RawScore) -> RawScore:
        if name in _REGISTRY:
            raise ValueError(f"MIA score {name!r} is registered twice")
        _REGISTRY[name] = MiaScore(name, raw, lower_is_member, needs_vocab, judged, tuple(settings))
        return raw
    return add


def unregister(name: str) -> None:
    """Drop the score ``name`` from the registry (tests that register a score of their own)."""
    del _REGISTRY[name]


def registered() -> tuple[MiaScore, ...]:
    """Every registered score, in registration order, after importing every module of :data:`SCORE_PACKAGE` (once
    per process: :func:`memlab.plugins.import_all`)."""
    import_all(SCORE_PACKAGE)
    return tuple(_REGISTRY.values())


def score_names() -> tuple[str, ...]:
    """The names of every registered score, in registration order."""
    return tuple(s.name for s in registered())


def judged_names() -> tuple[str, ...]:
    """The scores the audit and pearl_mia decide with (``judged=True``), in registration order."""
    return tuple(s.name for s in registered() if s.judged)


mia_score("loss", lower_is_member=True, needs_vocab=False, judged=True, settings=())(
    lambda ts, text, settings: loss(ts))
mia_score("perplexity", lower_is_member=True, needs_vocab=False, judged=False, settings=())(
    lambda ts, text, settings: perplexity(ts))
mia_score("zlib_ratio", lower_is_member=True, needs_vocab=False, judged=True, settings=())(
    lambda ts, text, settings: zlib_ratio(ts, text))
mia_score("min_k", lower_is_member=True, needs_vocab=False, judged=True, settings=("min_k",))(
    lambda ts, text, settings: min_k(ts, settings["min_k"]))
mia_score("min_k_pp", lower_is_member=True, needs_vocab=True, judged=True, settings=("min_k",))(
    lambda ts, text, settings: min_k_pp(ts, settings["min_k"]))


class MiaScores(Mapping):
    """Every registered score for one text, {name: value} in registration order, oriented HIGHER = more likely
    member (−raw for a ``lower_is_member`` score). A ``needs_vocab`` score is None when the backend gave no
    vocabulary statistics. ``get(name)`` of an unregistered name raises ValueError."""

    def __init__(self, values: Mapping[str, float | None]):
        self._values = dict(values)

    def __getitem__(self, name: str) -> float | None:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, name: str) -> float | None:  # type: ignore[override]
        if name not in self._values:
            raise ValueError(f"unknown MIA score {name!r}; choose from {tuple(self._values)}")
        return self._values[name]

    def __repr__(self) -> str:
        return f"MiaScores({self._values!r})"


def member_scores(ts: TokenScores, text: str, settings: Mapping[str, Any]) -> MiaScores:
    """Every registered MIA score for one scored text, oriented so that higher = more likely member. ``settings``
    are the run's MIA settings (``params`` of pearl_mia, ``params.mia`` of the audit: ``min_k`` is k of Min-K% /
    Min-K%++), never a default here; a score whose key is missing raises ValueError."""
    has_vocab = ts.vocab_mean is not None and ts.vocab_std is not None
    values: dict[str, float | None] = {}
    for s in registered():
        missing = [key for key in s.settings if key not in settings]
        if missing:
            raise ValueError(f"MIA score {s.name!r} needs the setting(s) {missing} (the run's MIA settings)")
        if s.needs_vocab and not has_vocab:
            values[s.name] = None
            continue
        raw = float(s.raw(ts, text, settings))
        values[s.name] = -raw if s.lower_is_member else raw
    return MiaScores(values)
