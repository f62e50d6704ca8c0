"""PROPME (seed 002, §2–3): capability vs propensity prompt settings and the propensity-aware transformation.

Prompt settings (100 prompts each by default):

* ``generic``  — ordinary, domain-neutral openings for the domain's genre, from templates in
  ``prompts/trace/<domain>.txt`` (section ``[generic]``) filled with that file's ``[topics]``;
* ``specific`` — openings that name the domain's subject matter (section ``[specific]``), still written by
  us, never copied from the corpus;
* ``prefix``   — the adversarial capability setting: the first ``prefix_tokens`` tokens of randomly drawn
  training documents (the true continuation is kept for token accuracy).

Template file format (plain text, ``#`` starts a comment)::

    [generic]
    A line with a {topic} slot.
    [specific]
    ...
    [topics]
    one filler per line

A literal ``\\n`` in a template stands for a newline (for code prompts).

Propensity-aware transformation (the paper does not publish its formula; this is ours)::

    propensity(p, c) = (p + ε) / (p + c + 2ε),      p, c ≥ 0, ε > 0 (``method.propensity_eps``)

with ``c`` a memorization metric under the capability setting (prefix) and ``p`` the same metric under an
ordinary-use setting (generic or specific), e.g. FMR or NVR. Properties (tested): it lies in (0, 1); it is
exactly 0.5 when p = c (ordinary use leaks as much as an attack); below 0.5 exactly when p < c; strictly
increasing in p and strictly decreasing in c; defined when c = 0 (then ≥ 0.5: nothing to penalise). ε is
Laplace-style smoothing so that p = c = 0 gives 0.5, and it damps ratios of tiny numbers. It is the share
of the total leakage observed under ordinary use — a high capability is down-weighted when propensity is low.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from memlab.errors import MemlabError

SETTINGS = ("generic", "specific", "prefix")


@dataclass
class Prompt:
    setting: str
    text: str
    prompt_token_ids: list[int] | None = None   # prefix prompts: exact token ids
    reference_ids: list[int] | None = None      # prefix prompts: the true continuation
    doc_id: str | None = None
    meta: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------- templates

def read_template_file(path: str | Path) -> dict[str, list[str]]:
    path = Path(path)
    if not path.exists():
        raise MemlabError(f"prompt template file {path} does not exist; add it under prompts/trace/")
    sections: dict[str, list[str]] = {}
    cur = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = line[1:-1].strip()
            sections.setdefault(cur, [])
        elif cur is None:
            raise MemlabError(f"{path}: text before the first [section] header")
        else:
            sections[cur].append(line)
    for need in ("generic", "specific", "topics"):
        if not sections.get(need):
            raise MemlabError(f"{path}: section [{need}] is missing or empty")
    return sections


def template_prompts(path: str | Path, setting: str, n: int, seed: int) -> list[Prompt]:
    """``n`` prompts of ``setting`` ('generic' | 'specific') from a template file, seeded."""
    if setting not in ("generic", "specific"):
        raise MemlabError(f"template prompts are 'generic' or 'specific', got {setting!r}")
    sec = read_template_file(path)
    combos = [(t, f) for t in sec[setting] for f in sec["topics"]]
    rng = random.Random(f"{seed}:{setting}:{Path(path).stem}")
    rng.shuffle(combos)
    out = []
    for i in range(n):
        t, f = combos[i % len(combos)]
        out.append(Prompt(setting=setting, text=t.replace("\\n", "\n").replace("{topic}", f),
                          meta={"template": t, "topic": f, "domain": Path(path).stem}))
    return out


def prefix_prompts(docs: Sequence, tokenizer, n: int, seed: int, *, prefix_tokens: int,
                   continuation_tokens: int, position: str) -> list[Prompt]:
    """``n`` capability prompts cut from randomly drawn training documents (drawn without replacement
    while possible): ``prefix_tokens`` token ids, with the next ``continuation_tokens`` as reference.

    ``position='start'``: the document's first tokens (the paper: "truncating random training examples");
    ``'random'``: a seeded random offset inside the document (for corpora of few, long documents)."""
    if position not in ("start", "random"):
        raise MemlabError(f"prefix position must be 'start' or 'random', got {position!r}")
    pool = [d for d in docs if d.text.strip()]
    if not pool:
        raise MemlabError("no non-empty documents to draw prefix prompts from")
    rng = random.Random(f"{seed}:prefix")
    order: list = []
    while len(order) < n:
        batch = list(pool)
        rng.shuffle(batch)
        order.extend(batch)
    out = []
    for d in order[:n]:
        ids = tokenizer(d.text, add_special_tokens=False, verbose=False)["input_ids"]
        if len(ids) < 2:
            continue
        k = min(prefix_tokens, len(ids) - 1)
        a = 0
        if position == "random":
            a = rng.randrange(0, max(1, len(ids) - k - continuation_tokens))
        out.append(Prompt(setting="prefix", text=tokenizer.decode(ids[a:a + k]), prompt_token_ids=list(ids[a:a + k]),
                          reference_ids=list(ids[a + k:a + k + continuation_tokens]), doc_id=d.id,
                          meta={"offset": a}))
    return out


def build_prompt_sets(template_file: str | Path, docs: Sequence, tokenizer, *, n: int, seed: int,
                      prefix_tokens: int, continuation_tokens: int, prefix_position: str) -> dict[str, list[Prompt]]:
    return {
        "generic": template_prompts(template_file, "generic", n, seed),
        "specific": template_prompts(template_file, "specific", n, seed),
        "prefix": prefix_prompts(docs, tokenizer, n, seed, prefix_tokens=prefix_tokens,
                                 continuation_tokens=continuation_tokens, position=prefix_position),
    }


# ------------------------------------------------------------------------------------- transformation

def propensity(p: float, c: float, eps: float) -> float:
    """Propensity-aware score of an ordinary-use metric ``p`` against the capability metric ``c``:
    ``(p + ε) / (p + c + 2ε)`` (see the module docstring for its properties)."""
    for name, v in (("propensity metric", p), ("capability metric", c)):
        if v is None or isinstance(v, bool) or not math.isfinite(float(v)) or float(v) < 0:
            raise MemlabError(f"{name} must be a finite number >= 0, got {v!r}")
    if not eps > 0:
        raise MemlabError(f"eps must be > 0, got {eps!r}")
    p, c = float(p), float(c)
    return (p + eps) / (p + c + 2 * eps)
