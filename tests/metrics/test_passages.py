"""RECAP passage matching: planted copies with known edits, invariants on noisy data, edge cases."""

from __future__ import annotations

import random

import pytest

from memlab.metrics.passages import (
    count_passages,
    find_spans,
    mismatch_sweep,
    normalize_tokens,
    seed_length,
)
from memlab.metrics.rouge import lcs_length

REF = [f"w{i}" for i in range(400)]  # all-distinct tokens: the alignment is unambiguous


def _sub(tokens, positions):
    out = list(tokens)
    for p in positions:
        out[p] = f"x{p}"
    return out


def test_exact_copy_positions() -> None:
    (s,) = find_spans(REF, [REF[50:150]])
    assert (s.ref_start, s.ref_end, s.cand_start, s.cand_end) == (50, 150, 0, 100)
    assert (s.matched, s.mismatches, s.passages) == (100, 0, 2)


def test_substitutions_and_mismatch_budget() -> None:
    gen = _sub(REF[:120], [20, 50, 80])  # blocks of 20, 29, 29, 39 tokens
    (s,) = find_spans(REF, [gen], max_mismatch=3)
    assert (s.matched, s.mismatches, s.passages, s.ref_end, s.cand_end) == (117, 3, 2, 120, 120)
    spans2 = find_spans(REF, [gen], max_mismatch=2)  # budget runs out after the 2nd substitution
    assert [(x.ref_start, x.ref_end, x.matched, x.passages) for x in spans2] == [(0, 80, 78, 1)]
    assert find_spans(REF, [gen], max_mismatch=0) == []  # no exact block reaches 40
    assert find_spans(REF, [gen], max_mismatch=0, min_tokens=39)[0].matched == 39


def test_insertion_deletion_and_short_inner_match() -> None:
    ins = REF[:60] + ["extra"] + REF[60:100]
    (s,) = find_spans(REF, [ins], max_mismatch=1)
    assert (s.matched, s.mismatches, s.cand_end, s.ref_end) == (100, 1, 101, 100)
    dele = REF[:60] + REF[61:101]
    (s,) = find_spans(REF, [dele], max_mismatch=1)
    assert (s.matched, s.mismatches, s.ref_end, s.cand_end) == (100, 1, 101, 100)
    # two substitutions 3 tokens apart: the 2-token match between them (shorter than the seed) counts
    gen = _sub(REF[:80], [30, 33])
    (s,) = find_spans(REF, [gen], max_mismatch=2)
    assert (s.matched, s.mismatches) == (78, 2)


def test_spans_do_not_cross_generations() -> None:
    assert find_spans(REF, [REF[0:30], REF[30:60]]) == []
    rep = count_passages(" ".join(REF), [" ".join(REF[0:80]), "unrelated words only", " ".join(REF[40:125])])
    assert rep.per_generation == [2, 0, 2]
    assert rep.n_passages == 4
    assert rep.ref_tokens_covered == 125  # union of [0, 80) and [40, 125)
    assert {s.generation for s in rep.spans} == {0, 2}


def test_seed_length_guarantee() -> None:
    assert seed_length(40, 5) == 7 and seed_length(40, 0) == 40 and seed_length(40, 39) == 1
    # 5 substitutions evenly spread: blocks of ~7 tokens only, still found with m = 5
    gen = _sub(REF[:47], [7, 15, 23, 31, 39])
    (s,) = find_spans(REF, [gen], max_mismatch=5)
    assert (s.matched, s.mismatches) == (42, 5)


def test_invariants_on_noisy_repetitive_text() -> None:
    rng = random.Random(0)
    vocab = [f"v{i}" for i in range(60)]  # small vocabulary: many spurious short matches
    book = [rng.choice(vocab) for _ in range(3000)]
    gens = []
    for _ in range(40):
        a = rng.randrange(2800)
        g = book[a : a + rng.randint(30, 200)]
        g = [t if rng.random() > 0.04 else rng.choice(vocab) for t in g]
        if rng.random() < 0.3:
            g.insert(rng.randrange(len(g)), "ins")
        gens.append(g)
    for m in (0, 2, 5):
        spans = find_spans(book, gens, max_mismatch=m)
        assert spans
        by_gen: dict[int, list] = {}
        for s in spans:
            r, c = book[s.ref_start : s.ref_end], gens[s.generation][s.cand_start : s.cand_end]
            k = seed_length(40, m)
            assert s.matched >= 40 and s.mismatches <= m and s.passages == s.matched // 40
            assert r[:k] == c[:k] and r[-k:] == c[-k:]  # spans start and end with exact blocks
            lcs = lcs_length(r, c)
            assert lcs >= s.matched  # the greedy alignment is a valid alignment
            assert max(len(r), len(c)) - lcs <= s.mismatches
            by_gen.setdefault(s.generation, []).append((s.cand_start, s.cand_end))
        for ranges in by_gen.values():  # no generation token counted twice
            ranges.sort()
            assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))


def test_normalization_and_sweep() -> None:
    book = " ".join(REF)
    noisy = " ".join(t.upper() + ("," if i % 7 == 0 else "") for i, t in enumerate(REF[:100]))
    assert count_passages(book, [noisy], max_mismatch=0).n_passages == 2
    assert normalize_tokens("Don't STOP—now!  ok") == ["dont", "stopnow", "ok"]
    gen = " ".join(_sub(REF[:120], [20, 50, 80]))
    sweep = mismatch_sweep(book, [gen])
    # blocks 20|29|29|39. m=1: spans 0..50 (49) + 51..120 (68) -> 2; m=2: 0..80 (78) + 81..120 (39) -> 1.
    # The accumulated-budget rule (the authors') is not monotone in m; this pins that documented quirk.
    assert sweep == {0: 0, 1: 2, 2: 1, 3: 2, 4: 2, 5: 2}


def test_token_ids_input() -> None:
    ids = list(range(1000, 1300))
    (s,) = find_spans(ids, [[5, 6] + ids[10:90]], max_mismatch=0)
    assert (s.ref_start, s.cand_start, s.matched) == (10, 2, 80)


def test_edge_cases() -> None:
    assert count_passages("", ["some text"]).n_passages == 0
    assert count_passages("some text " * 30, []).n_passages == 0
    assert count_passages("some text " * 30, ["", "!!!"]).n_passages == 0
    same = " ".join(REF[:80])
    assert count_passages(same, [same]).n_passages == 2  # identical
    assert count_passages(same, [" ".join(f"z{i}" for i in range(200))]).n_passages == 0  # no overlap
    for bad in (None, 3):
        with pytest.raises(TypeError):
            count_passages(bad, ["x"])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            normalize_tokens(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        count_passages("x", "a str, not a list")
    with pytest.raises(TypeError):
        count_passages("x", [None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        find_spans("abc", [["a"]])
    with pytest.raises(ValueError):
        count_passages("x", ["x"], max_mismatch=-1)
    with pytest.raises(ValueError):
        count_passages("x", ["x"], min_tokens=0)


def test_too_many_seed_hits_is_a_clear_error(monkeypatch) -> None:
    from memlab.metrics import passages

    monkeypatch.setattr(passages, "_MAX_HITS", 10)
    with pytest.raises(ValueError, match="seed_len"):
        find_spans(["a"] * 50, [["a"] * 50], max_mismatch=39)
