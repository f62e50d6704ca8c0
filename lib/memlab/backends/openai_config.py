"""The typed settings of the OpenAI-compatible backend: a ``backend: openai`` node of conf/model/*.yaml as a frozen
dataclass.

Every key is required (no defaults in code, as in :mod:`memlab.schema` and :mod:`memlab.backends.hf_config`): a
node missing one, or naming one this class does not know, is refused in one line naming the key. The values'
meaning:

- ``base_url``: the server's OpenAI-compatible root (``.../v1``); ``model_id``: the provider's model string (what
  the server serves); ``name``: the label in results (null = ``model_id``); ``revision``: what the response cache
  keys the weights by (null = ``model_id``; set a dated snapshot, or the served GGUF's sha256, to pin them). It
  is part of every cache key beside what the server reports (backends/identity.py); left null while the server
  names no weights (a hosted API, a server that reports no model file), the run warns once that cached answers
  may come from another model served under the same name.
- ``api_key_env``: the NAME of the environment variable holding the key (null for local servers).
- ``chat``: true = the endpoint only speaks chat (a plain prompt is sent as one user message, token ids are
  refused); false = plain prompts and token ids go to ``/v1/completions``.
- ``concurrency``: parallel calls (≥ 1); ``max_retries``: retries per call (≥ 0); ``timeout``: seconds per call;
  ``backoff_base``/``backoff_max``: the k-th retry waits min(backoff_max, backoff_base·2^k) s (or Retry-After).
- ``price_in_per_mtok``/``price_out_per_mtok``: USD per million tokens (they only feed ``usage.cost_usd``).
- ``max_tokens_param``: max_tokens | max_completion_tokens (for chat APIs that renamed it).
- ``can_score``: echo_logprobs | prompt_logprobs | false; ``score_top_k``: top log-probs per position (only used
  by ``vocab_stats``); ``vocab_stats``: none | top_k_renormalized; ``score_bos``: tokenizer | prepend
  (backends/score_bos.py). What each means: the module docstring of :mod:`memlab.backends.openai_compat`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from memlab.backends.score_bos import score_bos_of
from memlab.errors import ConfigError
from memlab.schema import check, typed

SCORE_MODES = ("echo_logprobs", "prompt_logprobs")
VOCAB_STATS = ("none", "top_k_renormalized")
MAX_TOKENS_PARAMS = ("max_tokens", "max_completion_tokens")


@dataclass(frozen=True)
class OpenAIConfig:
    name: str | None
    backend: str = field(metadata=check(choices=("openai",)))
    base_url: str
    api_key_env: str | None
    model_id: str
    revision: str | None
    chat: bool
    can_score: str | bool | None
    score_top_k: int
    vocab_stats: str
    score_bos: str
    concurrency: int
    max_retries: int
    timeout: float = field(metadata=check(gt=0))
    backoff_base: float = field(metadata=check(ge=0))
    backoff_max: float = field(metadata=check(ge=0))
    max_tokens_param: str
    price_in_per_mtok: float = field(metadata=check(ge=0))
    price_out_per_mtok: float = field(metadata=check(ge=0))


def scoring_mode(can_score: str | bool | None) -> str | None:
    """``can_score`` as one of SCORE_MODES, or None (no scoring: false, null, "false", "none", "no", "off")."""
    if can_score in (None, False) or str(can_score).lower() in ("false", "none", "no", "off"):
        return None
    if can_score in SCORE_MODES:
        return str(can_score)
    raise ConfigError(f"model.can_score must be one of {', '.join(SCORE_MODES)} or false, got {can_score!r}")


def openai_config(node: Mapping[str, Any]) -> OpenAIConfig:
    """``node`` (a model node) as an :class:`OpenAIConfig`; a bad node is one ConfigError line."""
    score_bos_of(node)  # its own message: what each value means
    cfg = typed(OpenAIConfig, node, "model")
    if not cfg.base_url:
        raise ConfigError("model.base_url is required for backend: openai")
    if not cfg.model_id:
        raise ConfigError("model.model_id is required for backend: openai (the provider's model string)")
    if cfg.concurrency < 1 or cfg.max_retries < 0:
        raise ConfigError("model.concurrency must be >= 1 and model.max_retries >= 0")
    if cfg.max_tokens_param not in MAX_TOKENS_PARAMS:
        raise ConfigError("model.max_tokens_param must be max_tokens or max_completion_tokens")
    scoring_mode(cfg.can_score)
    if cfg.vocab_stats not in VOCAB_STATS:
        raise ConfigError(f"model.vocab_stats must be one of {', '.join(VOCAB_STATS)}, got {cfg.vocab_stats!r}")
    if cfg.score_top_k < 0 or (cfg.vocab_stats != "none" and cfg.score_top_k < 1):
        raise ConfigError(f"model.score_top_k must be >= 0 (>= 1 with vocab_stats: {cfg.vocab_stats}), "
                          f"got {cfg.score_top_k}")
    return cfg
