"""Split hygiene: how much of a held-out document already occurs in a model's training text.

The one metric, **shared word n-gram fraction**: the share of a document's word n-grams that occur anywhere
in a reference text set (for a zoo family: its whole training text, ancestors included).

- Words: the text lower-cased, apostrophes (``'`` and ``’``) deleted (``LORD's`` -> ``lords``), every other
  character that is not a letter, digit or ``_`` (Unicode ``\\w``) replaced by a space, then split on
  whitespace. So punctuation, verse line breaks and capitalisation never hide a copy.
- N-grams: every window of ``n`` consecutive words, counted by position (a phrase repeated inside the
  document counts each time). A document shorter than ``n`` words has no n-grams: fraction 0.0.
- Fraction: (n-gram positions of the document whose n-gram occurs in the reference set) / (all its n-gram
  positions), in [0, 1].

The closest reference document of a held-out document is the one sharing the most of its 8-gram positions
(ties: most shared 6-gram positions, then reference order); ``None`` when it shares no 6-gram with any.

API::

    idx = NgramIndex(training_docs)             # any objects with .id and .text (memlab Document)
    r = idx.overlap(doc)                        # Overlap(ngram6=.., ngram8=.., closest=id | None)
    shared_ngram_fraction(text, ref_texts, 8)   # the bare metric
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

NS = (6, 8)  # the n-gram lengths recorded for every held-out document
METRIC = "shared word n-gram fraction"

_APOS = re.compile(r"['\u2019]")
_NONWORD = re.compile(r"[^\w\s]|_")


def words(text: str) -> list[str]:
    """The word sequence the metric counts (see module docstring)."""
    return _NONWORD.sub(" ", _APOS.sub("", text.lower())).split()


def ngrams(ws: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]


def shared_ngram_fraction(text: str, ref_texts: Iterable[str], n: int) -> float:
    """Share of ``text``'s word n-grams found anywhere in ``ref_texts``."""
    grams = ngrams(words(text), n)
    if not grams:
        return 0.0
    ref = {g for t in ref_texts for g in ngrams(words(t), n)}
    return sum(g in ref for g in grams) / len(grams)


@dataclass(frozen=True)
class Overlap:
    ngram6: float
    ngram8: float
    closest: str | None  # id of the reference document sharing the most n-grams

    def fraction(self, n: int) -> float:
        return {6: self.ngram6, 8: self.ngram8}[n]


class NgramIndex:
    """Word 6- and 8-grams of a reference document set -> which documents hold them."""

    def __init__(self, docs: Sequence) -> None:
        self.ids = [d.id for d in docs]
        self._where: dict[int, dict[tuple[str, ...], set[int]]] = {n: {} for n in NS}
        for i, d in enumerate(docs):
            ws = words(d.text)
            for n in NS:
                where = self._where[n]
                for g in set(ngrams(ws, n)):
                    where.setdefault(g, set()).add(i)

    def overlap(self, doc) -> Overlap:
        ws = words(doc.text)
        frac: dict[int, float] = {}
        per_doc: dict[int, Counter] = {}
        for n in NS:
            grams = ngrams(ws, n)
            where = self._where[n]
            hits = [where[g] for g in grams if g in where]
            frac[n] = len(hits) / len(grams) if grams else 0.0
            per_doc[n] = Counter(i for h in hits for i in h)
        closest = None
        if per_doc[6]:
            best = max(per_doc[6], key=lambda i: (per_doc[8][i], per_doc[6][i], -i))
            closest = self.ids[best]
        return Overlap(ngram6=frac[6], ngram8=frac[8], closest=closest)
