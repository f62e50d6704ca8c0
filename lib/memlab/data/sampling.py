"""Seeded corpus sampling — the one sampler every study uses.

:func:`sample_docs` filters a corpus (length in words or characters, metadata values, excluded ids), sorts the pool
by document id (so the draw does not depend on the order a corpus is read in) and draws ``n`` documents without
replacement with ``random.Random(seed)``; the result keeps the drawn order. ``seed`` may be an int or a string
naming a stream (``f"{seed}:prompts"``), so two draws from one corpus in one run can be independent.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping, Sequence

from memlab.data.records import Document
from memlab.errors import MemlabError


def sample_docs(docs: Sequence[Document], n: int | None, seed: int | str, *, min_words: int = 0,
                min_chars: int = 0, meta: Mapping[str, Sequence[Any]] | None = None, exclude: Sequence[str] = (),
                split: str | None = None) -> list[Document]:
    """``n`` documents (None = every match, in id order); ``split`` sets the membership label of the copies."""
    ex = set(exclude)
    pool = [d for d in docs if d.text.strip() and len(d.text.split()) >= min_words
            and len(d.text.strip()) >= min_chars and d.id not in ex]
    for key, allowed in (meta or {}).items():
        allowed = set(allowed)
        pool = [d for d in pool if d.meta.get(key) in allowed]
    pool.sort(key=lambda d: d.id)
    what = f"≥ {min_words} words, ≥ {min_chars} characters" + (f" and {dict(meta)}" if meta else "")
    if not pool:
        raise MemlabError(f"no document has {what}; relax the filter")
    if n is not None:
        if n > len(pool):
            raise MemlabError(f"asked for {n} documents with {what} but only {len(pool)} match; lower n")
        pool = random.Random(seed).sample(pool, n)
    return [dataclasses.replace(d, split=split) if split is not None else d for d in pool]


def load_sample(corpus: str, options: Mapping[str, Any] | None, n: int | None, seed: int | str, **filters: Any):
    """:func:`sample_docs` over ``load_corpus(corpus, **options)``."""
    from memlab.data.corpora import load_corpus

    return sample_docs(load_corpus(corpus, **dict(options or {})), n, seed, **filters)


def load_spec(spec: Mapping[str, Any]) -> list[Document]:
    """Documents of a corpus spec ``{name, options, n_docs?, min_chars?, seed?}`` (other keys, e.g. ``label``, are
    the caller's): with ``n_docs``, a seeded sample (stream ``"<seed>:take"``) returned in id order; else every
    non-empty document with ≥ ``min_chars`` characters."""
    from memlab.data.corpora import load_corpus

    docs = load_corpus(spec["name"], **dict(spec.get("options") or {}))
    min_chars = int(spec.get("min_chars") or 0)
    if spec.get("n_docs"):
        picked = sample_docs(docs, int(spec["n_docs"]), f"{int(spec.get('seed') or 0)}:take", min_chars=min_chars)
        return sorted(picked, key=lambda d: d.id)
    return [d for d in docs if d.text.strip() and len(d.text.strip()) >= min_chars]
