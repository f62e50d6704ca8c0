"""The one narrow, batched interface every method talks to.

A backend turns a list of :class:`GenerationRequest` into a list of :class:`Generation` (same order), and,
where it can, scores texts with per-token log-probs (:meth:`Backend.score`). What a backend cannot do raises
``NotImplementedError`` saying why. Adding a backend = one module in ``backends/kinds/`` (registering its kind:
backends/registry.py) + one YAML in ``conf/model/``.

Sampling contract: sample ``i`` of a request is a pure function of (model, request fields, ``seed``, ``i``),
never of the batch it was computed in, so a cache keyed by sample index is exact and a resumed run gives the
same outputs as an uninterrupted one.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, asdict
from typing import Sequence


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt. Exactly one of ``prompt``, ``messages`` or ``prompt_token_ids`` is set.

    ``prompt``: plain text, sent as-is (base-model style). ``messages``: a chat; rendered with the model's
    chat template, or the plain-text fallback for models without one (see :func:`render_plain_chat`).
    ``prompt_token_ids``: exact token ids (HF backends; used where re-tokenizing text would shift BPE
    boundaries, e.g. 32-token prefixes of training documents).
    ``temperature == 0`` means greedy decoding; then all ``n`` samples are identical by definition.
    """

    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # requests rebuilt from JSON carry lists; keep every field hashable
        if self.messages is not None and not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(
                m if isinstance(m, Message) else Message(*m) if isinstance(m, (list, tuple)) else Message(**m)
                for m in self.messages))
        if self.prompt_token_ids is not None and not isinstance(self.prompt_token_ids, tuple):
            object.__setattr__(self, "prompt_token_ids", tuple(int(t) for t in self.prompt_token_ids))
        if not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop or ()))
        given = sum(x is not None for x in (self.prompt, self.messages, self.prompt_token_ids))
        if given != 1:
            raise ValueError("GenerationRequest needs exactly one of prompt, messages, prompt_token_ids")
        if self.n < 1:
            raise ValueError(f"GenerationRequest.n must be >= 1, got {self.n}")
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if self.temperature < 0 or not (0 < self.top_p <= 1):
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")

    def to_key_dict(self) -> dict:
        """Every field, JSON-ready; the cache key is built from this (plus model id/revision/sample)."""
        d = asdict(self)
        if self.messages is not None:
            d["messages"] = [[m.role, m.content] for m in self.messages]
        return d

    def with_n(self, n: int) -> "GenerationRequest":
        return GenerationRequest(**{**self.__dict__, "n": n})


@dataclass
class Sample:
    """One sampled continuation (text only: the prompt is never included)."""

    text: str
    token_ids: list[int] | None = None
    finish_reason: str = "length"  # "length" | "stop" | "eos"


@dataclass
class Generation:
    """The ``n`` samples for one request, plus token usage for cost accounting."""

    samples: list[Sample]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.samples]

    @property
    def text(self) -> str:
        return self.samples[0].text


@dataclass
class TokenScores:
    """Per-token log-probs of a text under the model (teacher forcing).

    ``token_ids[j]`` is the j-th token of the text; ``logprobs[j]`` = log p(token_ids[j] | tokens < j) for
    j >= 1 (``logprobs[0]`` is NaN: the first token has no context; under ``model.score_bos: prepend`` it is
    log p(token_ids[0] | BOS) where the backend can compute it — see backends/score_bos.py).
    ``vocab_mean[j]`` / ``vocab_std[j]``: mean and std of log p(v | tokens < j) over v ~ p (expected
    log-prob and its spread under the model's own distribution) — what Min-K%++ normalizes with; ``None``
    when the backend can't return full distributions.
    """

    token_ids: list[int]
    logprobs: list[float]
    vocab_mean: list[float] | None = None
    vocab_std: list[float] | None = None


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: "Usage") -> None:
        self.requests += other.requests
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd


class Backend(abc.ABC):
    """Abstract batched model interface.

    ``model_id`` names the model; ``revision`` pins the weights (a hash of the weight files for local
    models, the provider's model string for APIs). Both go into cache keys, and so does ``numerics`` when a
    backend sets it: how it computes where that changes outputs (the HF weight dtype: bf16 and fp32 answers differ).
    ``has_chat_template``: the model renders chats with its own template; ``chat_only``: the model only speaks chat
    (a chat-only endpoint: a plain prompt is sent as one user message). Either makes methods prompt it in chat style.
    ``weights_key``, when set, stands for model id and revision in cache keys: the content of what the backend
    computes with (a local folder's hash and whether a chat template renders its prompts), so one checkpoint reached
    under two names (a zoo family's epoch 0 is its parent's final model) shares its cached answers.
    """

    model_id: str
    revision: str
    numerics: str | None = None
    weights_key: str | None = None
    has_chat_template: bool = False
    chat_only: bool = False

    def __init__(self) -> None:
        self.usage = Usage()

    @abc.abstractmethod
    def generate(self, requests: Sequence[GenerationRequest], *, progress: bool = False) -> list[Generation]:
        """Generate for every request, in order. Batched internally."""

    def score(self, texts: Sequence[str], *, progress: bool = False, vocab: bool = True) -> list[TokenScores]:
        """Per-token log-probs of each text. ``vocab=False``: only the log-probs are wanted (a reference model's
        loss), so a backend may leave out ``vocab_mean``/``vocab_std`` (None) and what they cost. Raises
        NotImplementedError where the backend can't."""
        raise NotImplementedError(f"{type(self).__name__} cannot return per-token log-probs")

    def render_chat(self, messages: Sequence[Message]) -> str:
        """The text the model sees for a chat: the model's template, else :func:`render_plain_chat`."""
        return render_plain_chat(messages)

    def close(self) -> None:
        """Release resources (servers, threads, sqlite handles)."""


def render_plain_chat(messages: Sequence[Message]) -> str:
    """Plain-text chat fallback for base models without a template.

    Renders system text first, then ``User: ...`` / ``Assistant: ...`` turns, ending with ``Assistant:`` so a
    base model continues as the assistant.
    """
    parts: list[str] = []
    for m in messages:
        if m.role == "system":
            parts.append(m.content.strip())
        elif m.role == "user":
            parts.append(f"User: {m.content.strip()}")
        else:
            parts.append(f"Assistant: {m.content.strip()}")
    parts.append("Assistant:")
    return "\n\n".join(parts)


def as_messages(pairs: Sequence[tuple[str, str]] | Sequence[dict]) -> tuple[Message, ...]:
    """Convenience: [("user", "hi")] or [{"role": "user", "content": "hi"}] -> tuple[Message, ...]."""
    out = []
    for p in pairs:
        if isinstance(p, dict):
            out.append(Message(p["role"], p["content"]))
        else:
            out.append(Message(*p))
    return tuple(out)
