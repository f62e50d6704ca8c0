"""Extraction agent (seed 000 §3.2): builds the target model's requests and runs them, nothing else.

Prompt styles (per target):

* ``chat`` — ``messages`` (system + user), rendered with the model's chat template by the backend. Feedback
  re-attempts continue one growing conversation, as the authors' loop does: the extraction prompt, the first
  valid output (assistant), then per round the reviewer's report (``reattempt.txt``, user) and the re-attempt
  (assistant), and so on.
* ``plain`` — base models (Gemma-3-270M, the tiny GPT-NeoX): one plain-text prompt built from the compact
  ``extraction_plain.txt`` (title, section, characters, summary — no chat instructions a base model cannot
  follow) followed by ``plain_suffix.txt`` that ends with the event's opening line, so the model continues it.
  Prefix-probing uses ``prefix_probe_plain.txt`` (the bare opening line). A re-attempt carries the same
  content as the chat conversation, as text (``reattempt_plain.txt``: each earlier output with the report on
  it, oldest first), placed *before* the extraction prompt so that a cut from the left drops the oldest
  round first and never the latest report or the opening line.

Output budget (per event): ``ceil(budget_factor × gold tokens)`` in the target's own tokenizer (the authors
allow gold words + 1000; the issue: ≥ 2×), capped by ``max_new_tokens`` (null = no cap) and by the context.
When prompt + budget exceed the context (``max_context_tokens``, null: the HF config's
``max_position_embeddings``) the budget yields first, down to ``context − min_prompt_tokens``; then the prompt
is cut from the *left* (sent as token ids), which keeps the opening line. Both are counted
(``budget_capped``, ``truncated``) and reported in the run's notes.

Every prompt ends with the event's opening line, so the gold reference is the event text after it.
"""

from __future__ import annotations

import dataclasses
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


def plain_prompt(prompts: Prompts, user: str, fields: dict, suffix: bool = True) -> str:
    """The text a plain-style (base) target continues: the user turn, then ``plain_suffix.txt`` ("Passage:" and
    the opening line) unless ``suffix`` is false. No trailing space: it would split the next word's BPE token."""
    return (user + ("\n\n" + prompts.fill("plain_suffix", **fields) if suffix else "")).rstrip()


@dataclass(kw_only=True)
class ExtractionAgent:
    """One target's requests; settings from ``method.targets.<name>`` (conf/method/recap.yaml)."""

    backend: Backend
    style: str
    prompts: Prompts
    max_new_tokens: int | None  # cap of the output budget (None: the context is the only cap)
    budget_factor: float  # budget = ceil(budget_factor · gold tokens in this target's tokenizer)
    tokens_per_word: float  # gold tokens ≈ words · tokens_per_word when the backend exposes no tokenizer
    max_context_tokens: int | None  # None: the model's own (HF config max_position_embeddings)
    min_prompt_tokens: int  # prompt room kept when the budget must yield to the context
    seed: int
    truncated: int = 0  # prompts cut from the left to fit the context
    budget_capped: int = 0  # requests whose output budget the context cut below budget_factor × gold

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ConfigError(f"target prompt_style must be one of {', '.join(STYLES)}, got {self.style!r}")
        if self.max_context_tokens is None:
            model = getattr(self.backend, "model", None)
            self.max_context_tokens = getattr(getattr(model, "config", None), "max_position_embeddings", None)

    def gold_tokens(self, reference: str) -> int:
        """Tokens of the gold text in this target's tokenizer (words × tokens_per_word without one)."""
        tok = getattr(self.backend, "tokenizer", None)
        if tok is not None:
            try:
                return len(tok(reference, add_special_tokens=False)["input_ids"])
            except Exception:  # a tokenizer-less or remote backend: the estimate below
                pass
        return int(math.ceil(len(reference.split()) * self.tokens_per_word))

    def budget(self, fields: dict) -> int:
        n = fields.get("gold_tokens") or int(math.ceil(fields["n_words"] * self.tokens_per_word))
        b = int(math.ceil(self.budget_factor * n))
        return max(1, min(b, self.max_new_tokens) if self.max_new_tokens else b)

    # -- prompt construction
    def prefix_request(self, fields: dict) -> GenerationRequest:
        """Prefix-probing. Chat: ``prefix_probe.txt`` (the paper's instruction + opening line). Plain (base
        models): ``prefix_probe_plain.txt`` — by default the bare opening line, the classic discoverable-
        extraction prefix; an instruction in front of it only distracts a base model."""
        return self._request(self.prefix_user(fields), fields, plain_suffix=False)

    def prefix_user(self, fields: dict) -> str:
        """The prefix-probing user turn (``prefix_probe.txt`` or ``prefix_probe_plain.txt``)."""
        return self.prompts.fill("prefix_probe" if self.style == "chat" else "prefix_probe_plain", **fields)

    def dsp_user(self, fields: dict) -> str:
        """The DSP user turn: ``extraction.txt`` (chat) or the compact ``extraction_plain.txt`` (plain)."""
        return self.prompts.fill("extraction" if self.style == "chat" else "extraction_plain", **fields)

    def user_request(self, user: str, fields: dict) -> GenerationRequest:
        """The DSP / jailbreak request for a user turn built from a template."""
        return self._request(user, fields)

    def reattempt_request(self, user: str, turns: list[tuple[str, str]], fields: dict) -> GenerationRequest:
        """A feedback re-attempt: ``turns`` = [(earlier output, the report on it), …], oldest first."""
        if self.style == "chat":
            msgs = [Message("system", self.prompts.fill("system")), Message("user", user)]
            for out, fb in turns:
                msgs += [Message("assistant", out),
                         Message("user", self.prompts.fill("reattempt", feedback=fb, **fields))]
            return self._finish(GenerationRequest(messages=tuple(msgs), max_new_tokens=self.budget(fields),
                                                  temperature=0.0, seed=self.seed))
        history = "\n\n".join(self.prompts.fill("reattempt_plain", attempt=out, feedback=fb, **fields)
                               for out, fb in turns)
        return self._request(history + "\n\n" + user, fields)

    def _request(self, user: str, fields: dict, plain_suffix: bool = True) -> GenerationRequest:
        if self.style == "chat":
            msgs = (Message("system", self.prompts.fill("system")), Message("user", user))
            req = GenerationRequest(messages=msgs, max_new_tokens=self.budget(fields), temperature=0.0, seed=self.seed)
        else:
            req = GenerationRequest(prompt=plain_prompt(self.prompts, user, fields, plain_suffix),
                                    max_new_tokens=self.budget(fields), temperature=0.0, seed=self.seed)
        return self._finish(req)

    def _finish(self, req: GenerationRequest) -> GenerationRequest:
        limit = self.max_context_tokens
        prompt_ids = getattr(self.backend, "prompt_ids", None)
        if not limit or prompt_ids is None:
            return req
        ids = list(prompt_ids(req))
        out = req.max_new_tokens
        if len(ids) + out <= limit:
            return req
        if limit - self.min_prompt_tokens < 16:
            raise ConfigError(f"model context {limit} leaves < 16 new tokens after min_prompt_tokens="
                              f"{self.min_prompt_tokens}; lower method.targets.<name>.min_prompt_tokens")
        # the budget yields first (down to context − min_prompt_tokens), then the prompt is cut from the left
        new_out = max(limit - len(ids), min(out, limit - self.min_prompt_tokens))
        if new_out < out:
            self.budget_capped += 1
        room = limit - new_out
        if len(ids) <= room:
            return dataclasses.replace(req, max_new_tokens=new_out)
        self.truncated += 1
        return GenerationRequest(prompt_token_ids=tuple(ids[-room:]), max_new_tokens=new_out,
                                 temperature=req.temperature, seed=req.seed)

    def run(self, requests: list[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        return self.backend.generate(requests)
