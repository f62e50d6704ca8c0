"""PEARL's tasks b and their performance measures m_b (seed 001 §3.5, seed 003 §4).

Tasks (name = ``<domain>_<kind>``): ``text_completion``, ``code_completion``, ``text_summarization``,
``code_summarization``.

Completion: the document is split at a word boundary; the input X is the first ⌊split · W⌋ of its W
whitespace-separated words (default split 0.8), the reference output Y is the rest. The split keeps the
original characters (indentation and newlines survive, which code needs). Per-sample performance is
``1 − NCD_zlib(output, Y)`` (:func:`memlab.metrics.ncd.completion_score`). With
``truncate_to_reference`` (default) the output is first cut to as many words as Y has, so text generated
beyond the reference's length does not count against it.

Summarization: the input X is the whole document; the reference Y is the model's own **greedy** output on
the unperturbed X (seed 001 §3: "the reference output is obtained by applying the model to the input
without any perturbations"). Per-sample performance is ROUGE-L (word tokens, no stemming;
``rouge_variant`` picks F1 (default), recall or precision) of the output against Y
(:func:`memlab.metrics.rouge.rouge_l`).

Prompts live in ``prompts/pearl/<task>_<style>.txt`` with one ``{input}`` placeholder. Style ``raw`` sends the
rendered text as a plain prompt (base models: the completion prompt is the input itself); ``chat`` sends it as
one user message (instruction-tuned models; rendered with the model's chat template by the backend).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from memlab.backends.base import GenerationRequest, Message
from memlab.errors import ConfigError, MemlabError
from memlab.schema import check

TASKS = ("text_completion", "code_completion", "text_summarization", "code_summarization")
STYLES = ("raw", "chat")
_WORDS = re.compile(r"\S+")


@dataclass(frozen=True)
class TaskConfig:
    """``method.task``: what PEARL asks the model (values in conf/method/pearl.yaml only)."""

    name: str = field(metadata=check(choices=TASKS))
    split: float = field(metadata=check(gt=0, lt=1))
    style: str = field(metadata=check(choices=STYLES))
    max_new_tokens: int = field(metadata=check(ge=1))
    truncate_to_reference: bool
    rouge_variant: str = field(metadata=check(choices=("f1", "recall", "precision")))
    prompts_dir: str
    max_input_words: int | None = field(metadata=check(ge=1))  # keep only the first N words (None = all)

    def __post_init__(self) -> None:
        if self.name not in TASKS:
            raise ConfigError(f"task.name must be one of {TASKS}, got {self.name!r}")
        if self.style not in STYLES:
            raise ConfigError(f"task.style must be one of {STYLES}, got {self.style!r}")

    @property
    def kind(self) -> str:
        return self.name.split("_", 1)[1]

    @property
    def is_completion(self) -> bool:
        return self.kind == "completion"


def first_words(text: str, n: int | None) -> str:
    """``text`` up to the end of its n-th whitespace-separated word (all of it when n is None)."""
    if n is None:
        return text
    ends = [m.end() for m in _WORDS.finditer(text)]
    return text if len(ends) <= n else text[: ends[n - 1]]


def split_completion(text: str, split: float) -> tuple[str, str]:
    """(input X, reference Y): X = the first ⌊split·W⌋ words (original characters), Y = the rest, stripped."""
    if not isinstance(text, str) or not text.strip():
        raise MemlabError("PEARL got an empty text; drop empty documents before running the completion task")
    words = list(_WORDS.finditer(text))
    n_in = int(split * len(words))
    if n_in < 1 or n_in >= len(words):
        need = next(w for w in range(2, 10_000) if 1 <= int(split * w) <= w - 1)
        raise MemlabError(f"text of {len(words)} words is shorter than the {split:.0%}/{1 - split:.0%} split "
                          f"(needs ≥ {need} words); use longer documents or another task.split")
    cut = words[n_in - 1].end()
    return text[:cut], text[cut:].strip()


def load_prompt(task: TaskConfig) -> str:
    path = Path(task.prompts_dir) / f"{task.name}_{task.style}.txt"
    if not path.is_file():
        raise ConfigError(f"prompt file {path} not found; set task.prompts_dir to the prompts/pearl folder")
    template = path.read_text(encoding="utf-8")
    if "{input}" not in template:
        raise ConfigError(f"prompt file {path} has no {{input}} placeholder")
    return template


def build_request(template: str, task: TaskConfig, x: str, *, n: int, temperature: float, top_p: float,
                  seed: int) -> GenerationRequest:
    """The request for input ``x`` (``str.replace``, not ``format``: code inputs contain braces)."""
    body = template.replace("{input}", x)
    common = dict(max_new_tokens=task.max_new_tokens, temperature=temperature, top_p=top_p, n=n, seed=seed)
    if task.style == "chat":
        return GenerationRequest(messages=(Message("user", body),), **common)
    return GenerationRequest(prompt=body, **common)


def truncate_words(text: str, n: int) -> str:
    return first_words(text.strip(), max(n, 1))


def performance(task: TaskConfig, output: str, reference: str) -> float:
    """m_b for one sample: 1 − NCD (completion) or ROUGE-L (summarization); see the module docstring."""
    from memlab.metrics.ncd import completion_score
    from memlab.metrics.rouge import rouge_l

    if task.is_completion:
        out = output.strip()
        if task.truncate_to_reference:
            out = truncate_words(out, len(reference.split()))
        return completion_score(out, reference.strip())
    return rouge_l(reference, output).get(task.rouge_variant)
