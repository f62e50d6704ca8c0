"""Perturbations σ(k): exact intensity, nesting, seeding, bad input (seed 001 §3.1, seed 003 §3)."""

import pytest

from memlab.errors import ConfigError, MemlabError, MissingSourceError
from memlab.methods.pearl.perturb import (Perturber, bit_flip_all, derive_seed, n_flips,
                                          synonym_substitute_all)

TEXT = ("Then Naomi her mother in law said unto her, My daughter, shall I not seek rest for thee, "
        "that it may be well with thee? And now is not Boaz of our kindred, with whose maidens thou wast?")

import dataclasses

from memlab.schema import method_config

PEARL = method_config("pearl")  # conf/method/pearl.yaml: the single source of every default


def pert(**changes):
    return dataclasses.replace(PEARL.perturbation, **changes)


def task(**changes):
    return dataclasses.replace(PEARL.task, **changes)




class FakeSynonyms:
    table = {"daughter": ("girl",), "rest": ("ease", "quiet"), "seek": ("search",), "well": ("good",),
             "kindred": ("kin", "family"), "maidens": ("girls",), "mother": ("parent",)}

    def synonyms(self, word):
        return self.table.get(word.lower(), ())


def _diff_bytes(a: str, b: str) -> int:
    x, y = a.encode(), b.encode()
    assert len(x) == len(y)
    return sum(p != q for p, q in zip(x, y))


def test_bitflip_token_unit_flips_one_bit_in_k_percent_of_the_words():
    cfg = pert(kind="bitflip", unit="token", rate=0.01)
    out = bit_flip_all(TEXT * 3, cfg, seed=7)
    words = (TEXT * 3).split()
    assert out[0].text == TEXT * 3 and out[0].n_changed == 0
    for p in out[1:]:
        m = max(1, int(p.level * 0.01 * len(words) + 0.5))
        assert p.n_changed == m
        got = p.text.split()
        assert len(got) == len(words)
        changed = [(a, b) for a, b in zip(words, got) if a != b]
        assert len(changed) == m and all(_diff_bytes(a, b) == 1 for a, b in changed)
    for lo, hi in zip(out[1:], out[2:]):  # nested: a word changed at level k stays changed at k+1
        assert {i for i, (a, b) in enumerate(zip(lo.text.split(), words)) if a != b} <= \
               {i for i, (a, b) in enumerate(zip(hi.text.split(), words)) if a != b}


def test_distinct_levels_variant_gives_each_level_one_more_flipped_word_on_short_inputs():
    text = " ".join((TEXT * 2).split()[:51])  # pearl_wild's input length: 51 words
    words = text.split()
    paper = bit_flip_all(text, pert(unit="token", rate=0.01), seed=3)
    assert [p.n_changed for p in paper] == [0, 1, 1, 2, 2, 3]  # round(k · 0.51), at least 1
    assert paper[1].text == paper[2].text and paper[3].text == paper[4].text  # the collapse the variant removes
    distinct = bit_flip_all(text, pert(unit="token", rate=0.01, distinct_levels=True), seed=3)
    assert [p.n_changed for p in distinct] == [0, 1, 2, 3, 4, 5]
    assert len({p.text for p in distinct}) == 6
    for p in distinct[1:]:
        assert sum(a != b for a, b in zip(words, p.text.split())) == p.n_changed
    assert [p.text for p in paper[:2]] == [p.text for p in distinct[:2]]  # same seeded order: nested, same first flip
    # long inputs, where the papers' m grows by >= 1 per level anyway: the variant changes nothing
    long = " ".join((TEXT * 12).split()[:300])
    assert [p.text for p in bit_flip_all(long, pert(unit="token", rate=0.01), seed=3)] == \
           [p.text for p in bit_flip_all(long, pert(unit="token", rate=0.01, distinct_levels=True), seed=3)]
    # capped at the candidates: a 3-word text cannot have 5 distinct levels
    assert [p.n_changed for p in bit_flip_all("one two three", pert(distinct_levels=True), seed=0)] == [0, 1, 2, 3, 3, 3]


def test_bitflip_changes_exactly_m_bytes_one_bit_each():
    cfg = pert(kind="bitflip", unit="byte", rate=0.01)
    out = bit_flip_all(TEXT, cfg, seed=7)
    n = len(TEXT.encode())
    assert out[0].text == TEXT and out[0].n_changed == 0
    for p in out[1:]:
        m = max(1, int(p.level * 0.01 * n + 0.5))
        assert p.n_changed == m == n_flips(n, p.level, cfg)
        assert _diff_bytes(TEXT, p.text) == m
        for a, b in zip(TEXT.encode(), p.text.encode()):
            assert bin(a ^ b).count("1") in (0, 1)
        assert all(0x20 <= c <= 0x7E for c in p.text.encode() if c not in TEXT.encode())


def test_bit_unit_flips_k_percent_of_bits():
    cfg = pert(kind="bitflip", unit="bit", rate=0.01)
    n = len(TEXT.encode())
    out = bit_flip_all(TEXT, cfg, seed=1)
    assert [p.n_changed for p in out] == [0] + [int(k * 0.01 * 8 * n + 0.5) for k in range(1, 6)]


def test_levels_are_nested_and_monotone():
    for p_all in (bit_flip_all(TEXT, pert(), seed=3),
                  synonym_substitute_all(TEXT, pert(kind="synonym"), 3, FakeSynonyms())):
        changed = [p.n_changed for p in p_all]
        assert changed == sorted(changed)
    # nesting for bit flips: every byte changed at level k is changed the same way at level k+1
    out = bit_flip_all(TEXT, pert(), seed=3)
    for lo, hi in zip(out, out[1:]):
        for o, a, b in zip(TEXT.encode(), lo.text.encode(), hi.text.encode()):
            if a != o:
                assert b == a


def test_seeded_and_seed_sensitive():
    cfg = pert()
    a, b, c = (bit_flip_all(TEXT, cfg, s) for s in (5, 5, 6))
    assert [p.text for p in a] == [p.text for p in b]
    assert [p.text for p in a] != [p.text for p in c]
    assert derive_seed(0, "x") == derive_seed(0, "x") != derive_seed(1, "x")


def test_synonym_substitution_replaces_k_words_keeping_case():
    cfg = pert(kind="synonym")
    out = synonym_substitute_all(TEXT, cfg, 11, FakeSynonyms())
    for p in out:
        assert p.n_changed == p.level
        changed = [(a, b) for a, b in zip(TEXT.split(), p.text.split()) if a != b]
        assert len(changed) == p.level or len(TEXT.split()) != len(p.text.split())
    cap = synonym_substitute_all("Daughter REST well", pert(kind="synonym"), 0, FakeSynonyms())
    assert cap[-1].n_changed == 3  # capped at the number of candidate words
    assert cap[-1].text.split()[0] == "Girl" and cap[-1].text.split()[1] in ("EASE", "QUIET")


def test_bad_input_is_one_line():
    p = Perturber(pert())
    with pytest.raises(MemlabError) as e:
        p(TEXT, 6, seed=0)
    assert "\n" not in str(e.value) and "levels" in str(e.value)
    with pytest.raises(MemlabError):
        p("   ", 1, seed=0)
    with pytest.raises(ConfigError):
        pert(levels=(1, 2, 3))
    with pytest.raises(ConfigError):
        pert(kind="shuffle")


def test_wordnet_missing_is_one_line(tmp_path):
    p = Perturber(pert(kind="synonym", nltk_data=str(tmp_path / "nltk"),
                                     wordnet_source=str(tmp_path / "nowhere")))
    with pytest.raises(MissingSourceError) as e:
        p(TEXT, 1, seed=0)
    assert "\n" not in str(e.value) and "wordnet-base" in str(e.value)


def test_real_wordnet_synonyms(tmp_path_factory, repo_root):
    p = Perturber(pert(kind="synonym", nltk_data=str(repo_root / ".cache" / "nltk_data")))
    syn = p.synonyms.synonyms("silence")
    assert "quiet" in syn and "silence" not in syn
    assert "enemy" not in p.synonyms.synonyms("enemies")  # inflections are not synonyms
    out = p.all_levels(TEXT, seed=0)
    assert [q.n_changed for q in out] == [0, 1, 2, 3, 4, 5]
    assert out[0].text == TEXT and out[5].text != TEXT
