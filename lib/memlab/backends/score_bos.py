"""The BOS policy of scoring, ``model.score_bos``: one meaning for every backend (issue 33, item 6).

- ``tokenizer``: the text's ids exactly as the model's tokenizer gives them for a plain prompt (its own special
  tokens, nothing added by the scorer). Position 0 has no context: ``logprobs[0]`` is NaN. A tokenizer that adds
  a BOS itself (Gemma-3) lists it as position 0, and position 1 is then log p(x_0 | BOS). The HF presets' value:
  it is what ``score()`` always did.
- ``prepend``: the text's own tokens (no special tokens), each scored after the tokenizer's BOS:
  ``logprobs[j]`` = log p(x_j | BOS, x_<j), so ``logprobs[0]`` is a real number; ``token_ids`` are the text's
  tokens (the BOS is not listed). A tokenizer without a BOS token is refused in one line. A served model
  (llama-cpp-python's echo) must show that its server prepended the BOS, and reports no log-prob for x_0
  (the OpenAI echo convention nulls the first entry): there ``logprobs[0]`` stays NaN.

No default in code: a model node without the key is refused in one line (:func:`score_bos_of`).
"""

from __future__ import annotations

from typing import Any, Mapping

from memlab.backends.base import TokenScores
from memlab.errors import ConfigError

SCORE_BOS = ("tokenizer", "prepend")


def check_score_bos(value: Any, model: str) -> str:
    if value not in SCORE_BOS:
        what = "is not set" if value is None else f"must be one of {', '.join(SCORE_BOS)}, got {value!r}"
        raise ConfigError(f"model {model}: model.score_bos {what} (tokenizer = the tokenizer's own special tokens, "
                          "what the HF presets use; prepend = score after a BOS, as a llama.cpp server does; "
                          "see conf/model/*.yaml)")
    return str(value)


def score_bos_of(cfg: Mapping[str, Any]) -> str:
    """``cfg["score_bos"]``, checked; a missing key is a one-line ConfigError."""
    return check_score_bos(cfg.get("score_bos"), str(cfg.get("name") or cfg.get("path") or "?"))


def without_lead(ts: TokenScores) -> TokenScores:
    """The scores of ``[BOS] + ids`` as scores of ``ids``: position j + 1 becomes position j."""
    cut = (lambda xs: None if xs is None else list(xs[1:]))
    return TokenScores(list(ts.token_ids[1:]), list(ts.logprobs[1:]), cut(ts.vocab_mean), cut(ts.vocab_std))
