"""The OpenAI-compatible wire format: what a completion answer must hold, Retry-After, vLLM's log-prob entries,
and the named top-k approximation of Min-K%++'s statistics (used by openai_compat.py)."""

from __future__ import annotations

import math
import re
from typing import Any, Sequence


def _first_line(err: BaseException, limit: int = 200) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:limit]


class _BadAnswer(Exception):
    """The server answered 200 with something that is not a usable completion (never cached)."""


def _answer(kind: str, resp: Any) -> tuple[Any, str]:
    """(choice, text) of a completion response, or _BadAnswer saying what the server sent instead."""
    if isinstance(resp, (str, bytes)):  # the SDK hands back the raw body when it is not JSON (e.g. an HTML page)
        body = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp
        raise _BadAnswer(f"a non-JSON body ({' '.join(body.split())[:60]!r})")
    choices = getattr(resp, "choices", None)
    if not choices:
        raise _BadAnswer("a response with no choices")
    choice = choices[0]
    text = getattr(getattr(choice, "message", None), "content", None) if kind == "chat" else getattr(choice, "text", None)
    if not isinstance(text, str):
        raise _BadAnswer(f"a choice whose {'message.content' if kind == 'chat' else 'text'} is {text!r}")
    return choice, text


_TOKEN_ID = re.compile(r"token_id:(\d+)")


def _logprob_value(v: Any) -> float:
    """vLLM's prompt_logprobs entries are {logprob, rank, decoded_token} (older versions: a bare float)."""
    return float(v["logprob"] if isinstance(v, dict) else v)


def topk_renormalized_stats(logprobs: Sequence[float]) -> tuple[float, float]:
    """The NAMED approximation ``vocab_stats: top_k_renormalized`` of Min-K%++'s (μ, σ) at one position:
    mean and std of log p(v) under p renormalized over the returned set S (top-k plus the text's token).
    Exact iff S carries all the mass; otherwise μ̂ ≥ μ (the unseen tail has log p ≤ min_S log p)."""
    a = [x for x in logprobs if math.isfinite(x)]
    if not a:
        return math.nan, math.nan
    top = max(a)
    w = [math.exp(x - top) for x in a]
    z = sum(w)
    mu = sum(wi * x for wi, x in zip(w, a)) / z
    var = sum(wi * (x - mu) ** 2 for wi, x in zip(w, a)) / z
    return mu, math.sqrt(max(var, 0.0))


def _retry_after(err) -> float | None:
    try:
        value = err.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None
