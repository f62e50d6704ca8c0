"""Extraction agent (seed 000 §3.2): builds the target model's requests and runs them, nothing else.

Prompt styles (per target):

* ``chat`` — ``messages`` (system + user), rendered with the model's chat template by the backend; a
  feedback re-attempt is a multi-turn chat: the extraction prompt, the previous attempt as the assistant
  turn, then the reviewer's report (``reattempt.txt``).
* ``plain`` — base models (Gemma-3-270M, the tiny GPT-NeoX): one plain-text prompt, the same instruction
  text followed by ``plain_suffix.txt`` that ends with the event's opening line, so the model continues it.
  Prefix-probing uses ``prefix_probe_plain.txt`` (the bare opening line).
  Feedback goes into the prompt (``reattempt_plain.txt``) before the suffix; the previous attempt is not
  repeated (short contexts).

Every prompt ends with the event's opening line, so the gold reference is the event text after it.
When the rendered prompt plus the generation budget exceeds the model's context (``max_context_tokens``,
null: the HF config's ``max_position_embeddings``), the prompt is cut from the *left* and sent as token
ids, which keeps the opening line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from memlab.backends.base import Backend, Generation, GenerationRequest, Message
from memlab.data.echotrace import Book, Event
from memlab.errors import ConfigError
from memlab.methods.recap.prompts import Prompts

STYLES = ("chat", "plain")


def event_fields(book: Book, event: Event) -> dict:
    """The template fields of one event (metadata = the dynamic soft prompt)."""
    n_words = max(1, len(event.reference.split()))
    return {
        "book_title": book.title,
        "event_title": event.title,
        "characters": ", ".join(event.characters) or "(none named)",
        "characters_list": json.dumps(list(event.characters), ensure_ascii=False),
        "summary_bullets": "\n".join(f"- {b}" for b in event.detailed_summary) or "- (no summary)",
        "summary_list": json.dumps(list(event.detailed_summary), ensure_ascii=False),
        "opening_line": event.first_sentence,
        "n_words": n_words,
    }


@dataclass(kw_only=True)
class ExtractionAgent:
    """One target's requests; settings from ``method.targets.<name>`` (conf/method/recap.yaml)."""

    backend: Backend
    style: str
    prompts: Prompts
    max_new_tokens: int  # cap
    tokens_per_word: float  # budget = ceil(words(reference) · tokens_per_word) + 8, capped
    max_context_tokens: int | None  # None: the model's own (HF config max_position_embeddings)
    seed: int
    truncated: int = 0  # prompts cut from the left to fit the context

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ConfigError(f"target prompt_style must be one of {', '.join(STYLES)}, got {self.style!r}")
        if self.max_context_tokens is None:
            model = getattr(self.backend, "model", None)
            self.max_context_tokens = getattr(getattr(model, "config", None), "max_position_embeddings", None)

    def budget(self, fields: dict) -> int:
        return min(self.max_new_tokens, int(math.ceil(fields["n_words"] * self.tokens_per_word)) + 8)

    # -- prompt construction
    def prefix_request(self, fields: dict) -> GenerationRequest:
        """Prefix-probing. Chat: ``prefix_probe.txt`` (the paper's instruction + opening line). Plain (base
        models): ``prefix_probe_plain.txt`` — by default the bare opening line, the classic discoverable-
        extraction prefix; an instruction in front of it only distracts a base model."""
        name = "prefix_probe" if self.style == "chat" else "prefix_probe_plain"
        return self._request(self.prompts.fill(name, **fields), fields, plain_suffix=False)

    def user_request(self, user: str, fields: dict) -> GenerationRequest:
        """The DSP / jailbreak request for a user turn built from a template."""
        return self._request(user, fields)

    def reattempt_request(self, user: str, attempt: str, feedback: str, fields: dict) -> GenerationRequest:
        if self.style == "chat":
            msgs = (Message("system", self.prompts.fill("system")), Message("user", user),
                    Message("assistant", attempt),
                    Message("user", self.prompts.fill("reattempt", feedback=feedback, **fields)))
            return self._finish(GenerationRequest(messages=msgs, max_new_tokens=self.budget(fields),
                                                  temperature=0.0, seed=self.seed))
        body = user + "\n\n" + self.prompts.fill("reattempt_plain", feedback=feedback, **fields)
        return self._request(body, fields)

    def _request(self, user: str, fields: dict, plain_suffix: bool = True) -> GenerationRequest:
        if self.style == "chat":
            msgs = (Message("system", self.prompts.fill("system")), Message("user", user))
            req = GenerationRequest(messages=msgs, max_new_tokens=self.budget(fields), temperature=0.0, seed=self.seed)
        else:
            text = user + ("\n\n" + self.prompts.fill("plain_suffix", **fields) if plain_suffix else "")
            # a trailing space would split the next word's BPE token; the model adds its own
            req = GenerationRequest(prompt=text.rstrip(), max_new_tokens=self.budget(fields), temperature=0.0,
                                    seed=self.seed)
        return self._finish(req)

    def _finish(self, req: GenerationRequest) -> GenerationRequest:
        limit = self.max_context_tokens
        prompt_ids = getattr(self.backend, "prompt_ids", None)
        if not limit or prompt_ids is None:
            return req
        ids = list(prompt_ids(req))
        room = limit - req.max_new_tokens
        if len(ids) <= room:
            return req
        if room < 16:
            raise ConfigError(f"model context {limit} is too small for {req.max_new_tokens} new tokens; "
                              "lower the target's max_new_tokens (method.targets.<name>)")
        self.truncated += 1
        return GenerationRequest(prompt_token_ids=tuple(ids[-room:]), max_new_tokens=req.max_new_tokens,
                                 temperature=req.temperature, seed=req.seed)

    def run(self, requests: list[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        return self.backend.generate(requests)
