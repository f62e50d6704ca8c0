"""ROUGE-L (Lin, 2004): longest-common-subsequence precision, recall and F1.

Definition (one reference ``r`` of ``|r|`` tokens, one candidate ``c`` of ``|c|`` tokens)::

    LCS       = length of the longest common subsequence of r and c
    precision = LCS / |c|
    recall    = LCS / |r|
    F1        = 2·P·R / (P + R)       (0 when P + R = 0)

If either side has no tokens, P = R = F1 = 0 (rouge-score's convention). This is the sentence-level
``rougeL`` of the ``rouge-score`` package, reproduced bit for bit (same tokens, same float operations),
not ``rougeLsum`` and not LCS normalised by max(|r|, |c|) (rapidfuzz's normalized similarity).

RECAP (seed 000, §4.1) scores each event with ROUGE-L and, in the authors' code, uses the **recall**
(stemmed word tokens); PEARL (seeds 001/003) uses ROUGE-L for summarization tasks. Name which field
you report: "ROUGE-L recall (stemmed, word tokens)" is not "ROUGE-L F1".

Word tokenizer (:func:`word_tokens`, identical to ``rouge_score.tokenize.tokenize``):
  1. ``text.lower()`` (Python's Unicode lower-casing);
  2. every run of characters outside ``[a-z0-9]`` becomes one space (so non-ASCII letters and all
     punctuation are separators; "don't" → "don", "t");
  3. split on whitespace;
  4. with ``stem=True``: NLTK's Porter stemmer (default NLTK_EXTENSIONS mode), applied only to tokens
     longer than 3 characters; stems are cached per process;
  5. drop tokens that are empty or not ``[a-z0-9]+``.

Token-id variant (:func:`rouge_l_ids`): the same formulas on sequences of model token ids (any
hashable items), no normalisation.

Book-level score (seed 000, eq. 2), :func:`weighted_rouge_l`::

    R_book = Σ_i ROUGE-L_i · |gold_i| / Σ_i |gold_i|

with |gold_i| the number of tokens of event i's gold passage.

The LCS length comes from rapidfuzz's bit-parallel C++ ``LCSseq.similarity`` on the token sequences
re-coded as strings of private code points (one character per distinct token), which is exact.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

from rapidfuzz.distance import LCSseq

__all__ = [
    "RougeL",
    "word_tokens",
    "lcs_length",
    "rouge_l",
    "rouge_l_ids",
    "rouge_l_tokens",
    "rouge_l_batch",
    "weighted_rouge_l",
]

# Tokens are the maximal runs of [a-z0-9] in text.lower(): the same as rouge-score's "replace
# [^a-z0-9]+ by a space, split on whitespace", in one C-level pass.
_WORD = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
_STEMS: dict[str, str] = {}


@dataclass(frozen=True)
class RougeL:
    """ROUGE-L of one (reference, candidate) pair: LCS/|candidate|, LCS/|reference|, their F1."""

    precision: float
    recall: float
    f1: float

    def get(self, variant: str) -> float:
        """``variant`` in {"precision", "recall", "f1"}; raises ValueError otherwise."""
        if variant not in ("precision", "recall", "f1"):
            raise ValueError(f"ROUGE-L variant must be 'precision', 'recall' or 'f1', got {variant!r}")
        return getattr(self, variant)


@functools.lru_cache(maxsize=None)
def _stemmer():
    from nltk.stem import porter  # imported lazily: only needed with stem=True

    return porter.PorterStemmer()


def _stem_miss(word: str) -> str:
    # rouge-score stems only tokens longer than 3 characters. The dict cache makes stemming ~free on
    # natural text (Zipf: a few thousand distinct words cover most tokens); bounded to keep memory flat.
    if len(_STEMS) > 1_000_000:
        _STEMS.clear()
    stem = _stemmer().stem(word) if len(word) > 3 else word
    # rouge-score's final filter (drop tokens not [a-z0-9]+) is applied once per word here: "" = dropped
    stem = _STEMS[word] = stem if _VALID.match(stem) else ""
    return stem


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, got {type(value).__name__}")
    return value


def word_tokens(text: str, *, stem: bool = False) -> list[str]:
    """rouge-score's default word tokenization (see module docstring); raises TypeError for non-str."""
    _check_text("text", text)
    tokens = _WORD.findall(text.lower())
    if stem:
        stems = _STEMS
        tokens = [stems[t] if t in stems else _stem_miss(t) for t in tokens]
        return [t for t in tokens if t]
    return tokens  # findall yields only non-empty [a-z0-9]+ runs


def _encode_pair(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[str, str]:
    """Re-code two token sequences as strings, one code point per distinct token (exact, no hashing)."""
    codes: dict[Hashable, str] = {}
    get = codes.get
    out = []
    for seq in (a, b):
        chars = []
        for tok in seq:
            ch = get(tok)
            if ch is None:
                ch = codes[tok] = chr(len(codes))
            chars.append(ch)
        out.append("".join(chars))
    if len(codes) > 0x10FFFF:  # pragma: no cover - > 1.1 M distinct tokens in one pair
        raise ValueError("too many distinct tokens for one ROUGE-L pair (> 1,114,111)")
    return out[0], out[1]


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of two token sequences (exact, C speed)."""
    if not a or not b:
        return 0
    sa, sb = _encode_pair(a, b)
    return int(LCSseq.similarity(sa, sb))


def _from_lcs(lcs: int, n_ref: int, n_cand: int) -> RougeL:
    if n_ref == 0 or n_cand == 0:
        return RougeL(0.0, 0.0, 0.0)
    # same operations in the same order as rouge_score.rouge_scorer._score_lcs -> identical floats
    precision = lcs / n_cand
    recall = lcs / n_ref
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return RougeL(precision, recall, f1)


def rouge_l_tokens(reference: Sequence[Hashable], candidate: Sequence[Hashable]) -> RougeL:
    """ROUGE-L on two already-tokenized sequences (reference first). Empty side → (0, 0, 0)."""
    for name, seq in (("reference", reference), ("candidate", candidate)):
        if seq is None or isinstance(seq, (str, bytes)):
            raise TypeError(f"{name} must be a sequence of tokens, got {type(seq).__name__}")
    return _from_lcs(lcs_length(reference, candidate), len(reference), len(candidate))


def rouge_l(reference: str, candidate: str, *, stem: bool = False, tokens: str = "words") -> RougeL:
    """ROUGE-L of ``candidate`` against ``reference`` on rouge-score word tokens.

    Equals ``rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem).score(reference, candidate)["rougeL"]``
    (precision, recall, fmeasure) exactly. Texts with no word tokens (e.g. "" or "!!!") score (0, 0, 0).
    Raises TypeError if either argument is not a str. ``tokens`` is "words" (the only text tokenization);
    for model token ids call :func:`rouge_l_ids`.
    """
    if tokens != "words":
        raise ValueError(f"rouge_l tokens must be 'words', got {tokens!r}; for token ids use rouge_l_ids")
    _check_text("reference", reference)
    _check_text("candidate", candidate)
    return rouge_l_tokens(word_tokens(reference, stem=stem), word_tokens(candidate, stem=stem))


def rouge_l_ids(reference_ids: Sequence[int], candidate_ids: Sequence[int]) -> RougeL:
    """ROUGE-L on model token ids (reference first): same formulas, tokens compared by equality."""
    return rouge_l_tokens(reference_ids, candidate_ids)


def rouge_l_batch(
    references: Sequence[str], candidates: Sequence[str], *, stem: bool = False
) -> list[RougeL]:
    """:func:`rouge_l` for each (reference, candidate) pair; the two lists must have equal length."""
    if isinstance(references, str) or isinstance(candidates, str):
        raise TypeError("rouge_l_batch takes lists of strings; use rouge_l for one pair")
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
    return [rouge_l(r, c, stem=stem) for r, c in zip(references, candidates)]


def weighted_rouge_l(scores: Iterable[float], gold_lengths: Iterable[int]) -> float:
    """Token-weighted book ROUGE-L, seed 000 eq. 2: Σ_i s_i·|gold_i| / Σ_i |gold_i|.

    ``scores``: per-event ROUGE-L (whichever variant you report, e.g. recall); ``gold_lengths``: gold
    passage lengths in tokens. Raises ValueError on length mismatch, negative lengths, or Σ|gold| = 0.
    """
    s = [float(x) for x in scores]
    w = [int(x) for x in gold_lengths]
    if len(s) != len(w):
        raise ValueError(f"{len(s)} scores but {len(w)} gold lengths")
    if any(x < 0 for x in w):
        raise ValueError("gold lengths must be >= 0")
    total = sum(w)
    if total == 0:
        raise ValueError("weighted ROUGE-L needs at least one gold passage with > 0 tokens")
    return sum(si * wi for si, wi in zip(s, w)) / total
