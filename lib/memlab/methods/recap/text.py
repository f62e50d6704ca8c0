"""Small text helpers shared by the RECAP agents: sentences, names, keywords and the n-gram leak check.

Word tokens everywhere are rouge-score's (:func:`memlab.metrics.rouge.word_tokens`), so "a shared n-gram"
means the same thing for the leak guard as for ROUGE-L.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from memlab.metrics.rouge import word_tokens

# Sentence ends: . ! ? (+ closing quotes/brackets) then space; a line break after : or ; (one KJV verse a
# line); a blank line (paragraph). A single line break elsewhere is hard wrapping, not a boundary.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|(?<=[:;])[ \t]*\n\s*|[ \t]*\n[ \t]*\n\s*")
_NAME = re.compile(r"\b([A-Z][a-z]{2,}|[A-Z]{3,})\b")
STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he
her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves unto thee thou thy thine ye hath shall saith
also upon said came went come go let may might must shalt wilt therefore thereof wherefore behold even every one two
""".split())
_NOT_NAMES = frozenset({"The", "And", "But", "For", "Then", "When", "This", "That", "These", "Those", "There",
                        "Thou", "Thee", "Thy", "Now", "Behold", "What", "Which", "Who", "Why", "How", "Also",
                        "Yet", "Lest", "Neither", "Nor", "Let", "Unto", "With", "From", "Into", "After", "Before",
                        "You", "Your", "Our", "His", "Her", "Their", "They", "She", "Its", "All", "Any", "Each",
                        "Some", "Such", "Not", "Every", "Section", "Version", "License", "Licence", "Copyright"})


@dataclass(frozen=True)
class Sentence:
    text: str
    start: int  # character offsets into the source text
    end: int


def sentences(text: str) -> list[Sentence]:
    """Split at sentence-final punctuation followed by space, at line breaks after ``:``/``;`` and at blank lines."""
    out, pos = [], 0
    for m in _BOUNDARY.finditer(text):
        seg = text[pos:m.start()]
        if seg.strip():
            lead = len(seg) - len(seg.lstrip())
            out.append(Sentence(seg.strip(), pos + lead, pos + lead + len(seg.strip())))
        pos = m.end()
    seg = text[pos:]
    if seg.strip():
        lead = len(seg) - len(seg.lstrip())
        out.append(Sentence(seg.strip(), pos + lead, pos + lead + len(seg.strip())))
    return out


def names(text: str, *, top: int | None = None) -> list[str]:
    """Capitalised words that are not the first word of a sentence nor common function words (by frequency)."""
    counts: Counter[str] = Counter()
    first_pos: dict[str, int] = {}
    for s in sentences(text):
        for k, m in enumerate(_NAME.finditer(s.text)):
            w = m.group(1)
            if (k == 0 and m.start() == 0) or w in _NOT_NAMES or w.lower() in STOPWORDS:
                continue
            counts[w] += 1
            first_pos.setdefault(w, s.start + m.start())
    ranked = sorted(counts, key=lambda w: (-counts[w], first_pos[w]))
    return ranked[:top] if top else ranked


def keywords(text: str, *, top: int = 5, exclude: set[str] = frozenset()) -> list[str]:
    """Most frequent content words (lower-case, > 3 letters, not stopwords/excluded), returned sorted A→Z.

    Sorting alphabetically is deliberate: the list carries topics, never the source's word order.
    """
    toks = [t for t in word_tokens(text) if len(t) > 3 and t not in STOPWORDS and t not in exclude
            and not t.isdigit()]
    counts = Counter(toks)
    order = {t: i for i, t in reversed(list(enumerate(toks)))}
    best = sorted(counts, key=lambda t: (-counts[t], order[t]))[:top]
    return sorted(best)


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def leaked_ngrams(hint: str, reference: str, n: int = 6, *, allowed: list[str] = ()) -> set[tuple[str, ...]]:
    """Word n-grams of ``hint`` that also occur in ``reference`` (the leak guard / no-verbatim check).

    n-grams that occur in any ``allowed`` text (e.g. the boundary sentences the summary may copy) are not
    counted. Empty set = no verbatim copying at length ``n``.
    """
    shared = ngrams(word_tokens(hint), n) & ngrams(word_tokens(reference), n)
    for a in allowed:
        shared -= ngrams(word_tokens(a), n)
    return shared


def content_overlap(hint: str, reference: str, *, known: str = "") -> float:
    """Share of the reference's distinct content words (non-stopword, > 3 letters) that appear in the hint.

    Words that also occur in ``known`` (hints already given, e.g. the metadata) are left out of both counts,
    so the value is what this hint reveals *beyond* them. A coarse "how much of the passage do the hints give
    away" measure used in the App. S analog.
    """
    ref = {t for t in word_tokens(reference) if len(t) > 3 and t not in STOPWORDS} - set(word_tokens(known))
    if not ref:
        return 0.0
    hint_t = set(word_tokens(hint))
    return len(ref & hint_t) / len(ref)
