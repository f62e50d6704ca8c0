"""ROUGE-L: exact agreement with rouge-score, tokenizer behaviour, edge cases."""

from __future__ import annotations

import random

import pytest
from rouge_score import rouge_scorer, tokenize as rs_tokenize
from nltk.stem import porter

from memlab.metrics.rouge import (
    RougeL,
    lcs_length,
    rouge_l,
    rouge_l_batch,
    rouge_l_ids,
    rouge_l_tokens,
    weighted_rouge_l,
    word_tokens,
)

# A synthetic vocabulary that exercises the tokenizer and the Porter stemmer: inflected stems, short
# words (not stemmed), digits, punctuation, apostrophes, case, non-ASCII letters, the Kelvin sign (its
# lower() is ASCII 'k'), dotted capital I (lower() adds a combining dot), and whitespace variants.
_STEMS = ["run", "connect", "relat", "happi", "generous", "nation", "formal", "hope", "abl", "sky", "agre",
          "cat", "dog", "univers", "condition", "electr", "adjust", "defens", "sens", "probat"]
_SUFFIXES = ["", "s", "es", "ed", "ing", "ly", "ational", "ness", "ful", "ization", "ies", "ement", "er"]
_ODD = ["a", "an", "I", "the", "of", "x9", "2024", "3.14", "don't", "co-op", "naïve", "Straße", "\u212aelvin",
        "\u0130stanbul", "e-mail", "U.S.A.", "--", "!!", "...", "(see)", "[1]", "end.", "Hello,", "ÉCOLE",
        "日本", "ok\tthen", "new\nline", "tab\t", "CAPS", "MiXeD"]


def _random_text(rng: random.Random, n: int) -> str:
    words = []
    for _ in range(n):
        r = rng.random()
        if r < 0.7:
            w = rng.choice(_STEMS) + rng.choice(_SUFFIXES)
            if rng.random() < 0.1:
                w = w.capitalize()
        else:
            w = rng.choice(_ODD)
        words.append(w)
    return " ".join(words)


def _pairs(seed: int, n_pairs: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n_pairs):
        ref = _random_text(rng, rng.randint(0, 60))
        kind = rng.random()
        if kind < 0.5:  # a noisy copy: shares a long subsequence with the reference
            toks = ref.split()
            toks = [t for t in toks if rng.random() > 0.2]
            for _ in range(rng.randint(0, 5)):
                toks.insert(rng.randint(0, len(toks)), _random_text(rng, 1))
            cand = " ".join(toks)
        else:
            cand = _random_text(rng, rng.randint(0, 60))
        pairs.append((ref, cand))
    pairs += [("", ""), ("", "abc"), ("abc", ""), ("!!! ...", "words here"), ("same text", "same text")]
    return pairs


@pytest.mark.parametrize("stem", [False, True])
def test_matches_rouge_score_on_random_pairs(stem: bool) -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    pairs = _pairs(seed=1234 + stem, n_pairs=1200)
    assert len(pairs) >= 1000
    n_nonzero = 0
    for ref, cand in pairs:
        expected = scorer.score(ref, cand)["rougeL"]
        got = rouge_l(ref, cand, stem=stem)
        assert got.precision == pytest.approx(expected.precision, abs=1e-9), (ref, cand)
        assert got.recall == pytest.approx(expected.recall, abs=1e-9), (ref, cand)
        assert got.f1 == pytest.approx(expected.fmeasure, abs=1e-9), (ref, cand)
        n_nonzero += got.f1 > 0
    assert n_nonzero > 500  # the sample is not dominated by trivial zero scores


@pytest.mark.parametrize("stem", [False, True])
def test_tokenizer_matches_rouge_score(stem: bool) -> None:
    stemmer = porter.PorterStemmer() if stem else None
    rng = random.Random(7)
    for _ in range(300):
        text = _random_text(rng, rng.randint(0, 40))
        assert word_tokens(text, stem=stem) == rs_tokenize.tokenize(text, stemmer)


def test_batch_equals_single_and_argument_order() -> None:
    pairs = _pairs(seed=5, n_pairs=50)
    refs, cands = [p[0] for p in pairs], [p[1] for p in pairs]
    batch = rouge_l_batch(refs, cands, stem=True)
    assert batch == [rouge_l(r, c, stem=True) for r, c in pairs]
    # (reference, candidate): recall divides by the reference length, precision by the candidate's
    s = rouge_l("a b c d", "a b")
    assert (s.precision, s.recall) == (1.0, 0.5)
    assert s.f1 == pytest.approx(2 / 3)


def test_edge_cases() -> None:
    assert rouge_l("", "") == RougeL(0.0, 0.0, 0.0)
    assert rouge_l("text", "") == RougeL(0.0, 0.0, 0.0)
    assert rouge_l("?!", "...") == RougeL(0.0, 0.0, 0.0)  # no word tokens at all
    assert rouge_l("The cat sat.", "the CAT sat") == RougeL(1.0, 1.0, 1.0)  # identical after tokenizing
    assert rouge_l("alpha beta", "gamma delta") == RougeL(0.0, 0.0, 0.0)  # no overlap
    for bad in (None, 3, b"bytes", ["a"]):
        with pytest.raises(TypeError):
            rouge_l(bad, "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            rouge_l("x", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rouge_l_batch("a", "b")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rouge_l_batch(["a"], ["b", "c"])
    with pytest.raises(ValueError):
        rouge_l("a", "a").get("rougeL")


def test_stemming_matters() -> None:
    assert rouge_l("running connections", "run connect").f1 == 0.0
    assert rouge_l("running connections", "run connect", stem=True).f1 == 1.0


def test_token_ids_variant() -> None:
    # LCS of [1,2,3,4,5] and [1,3,9,5] is [1,3,5]
    s = rouge_l_ids([1, 2, 3, 4, 5], [1, 3, 9, 5])
    assert (s.precision, s.recall) == (3 / 4, 3 / 5)
    assert rouge_l_ids([], [1]) == RougeL(0.0, 0.0, 0.0)
    assert rouge_l_ids([7, 7], [7, 7]) == RougeL(1.0, 1.0, 1.0)
    assert rouge_l_ids([-1, -2], [-2, -1]).recall == 0.5  # negative ids: no hash collisions (hash(-1) == hash(-2))
    with pytest.raises(TypeError):
        rouge_l_ids(None, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rouge_l_tokens("abc", [1])  # type: ignore[arg-type]


def test_lcs_against_dynamic_programming() -> None:
    rng = random.Random(3)

    def dp(a, b):
        prev = [0] * (len(b) + 1)
        for x in a:
            cur = [0]
            for j, y in enumerate(b):
                cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
            prev = cur
        return prev[-1]

    for _ in range(200):
        a = [rng.randrange(6) for _ in range(rng.randint(0, 150))]
        b = [rng.randrange(6) for _ in range(rng.randint(0, 150))]
        assert lcs_length(a, b) == dp(a, b)


def test_weighted_book_rouge() -> None:
    # seed 000 eq. 2: Σ s·|gold| / Σ |gold|
    assert weighted_rouge_l([1.0, 0.0], [30, 10]) == pytest.approx(0.75)
    assert weighted_rouge_l([0.4], [5]) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        weighted_rouge_l([], [])
    with pytest.raises(ValueError):
        weighted_rouge_l([0.5], [0])
    with pytest.raises(ValueError):
        weighted_rouge_l([0.5, 0.2], [3])
    with pytest.raises(ValueError):
        weighted_rouge_l([0.5], [-3])


def test_tokens_argument() -> None:
    assert rouge_l("a b", "a b", tokens="words") == RougeL(1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        rouge_l("a b", "a b", tokens="ids")
