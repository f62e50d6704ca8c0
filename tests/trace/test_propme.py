"""PROPME: prompt sets, the overlap check (Fig. 2), and the propensity transformation's properties."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from memlab.errors import MemlabError
from memlab.methods.trace.propme import build_prompt_sets, propensity, read_template_file, template_prompts
from memlab.schema import method_config

EPS = method_config("trace").propensity_eps   # conf/method/trace.yaml


def test_propensity_properties():
    rng = random.Random(0)
    for _ in range(2000):
        p, c, d = rng.random(), rng.random(), rng.random() * 0.5 + 1e-3
        assert propensity(c, c, EPS) == pytest.approx(0.5)                  # propensity == capability
        s = propensity(p, c, EPS)
        assert 0 < s < 1
        if p < c:
            assert s < 0.5                                             # ordinary use leaks less
        elif p > c:
            assert s > 0.5
        assert propensity(p + d, c, EPS) > s                                # increasing in propensity
        assert propensity(p, c + d, EPS) < s                                # decreasing in capability
    assert propensity(0.0, 0.0, EPS) == 0.5                                 # defined when capability is 0
    assert propensity(0.3, 0.0, EPS) > 0.5 and math.isfinite(propensity(0.3, 0.0, EPS))
    for bad in (-0.1, float("nan"), float("inf"), None):
        with pytest.raises(MemlabError):
            propensity(bad, 0.5, EPS)
    with pytest.raises(MemlabError):
        propensity(0.1, 0.2, eps=0)


def test_template_files_are_valid(repo_root):
    files = sorted((repo_root / "prompts" / "trace").glob("*.txt"))
    assert {f.stem for f in files} >= {"kjv", "licences", "humaneval", "fortunes_de", "fortunes_en"}
    for f in files:
        sec = read_template_file(f)
        assert all("{topic}" in t for t in sec["generic"] + sec["specific"]), f
        ps = template_prompts(f, "generic", 100, seed=1)
        assert len(ps) == 100 and ps == template_prompts(f, "generic", 100, seed=1)
        assert "{topic}" not in ps[0].text


def test_bad_template_file(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("[generic]\nA {topic}\n[topics]\nx\n")
    with pytest.raises(MemlabError, match=r"\[specific\]"):
        read_template_file(p)
    with pytest.raises(MemlabError, match="does not exist"):
        read_template_file(tmp_path / "missing.txt")


def test_prompt_sets_and_overlap_ordering(corpus, tokenizer, sa_index, tmp_path):
    """Generic/specific prompts (written by templates) overlap the corpus less than prefix prompts."""
    from memlab.methods.trace.generation import prompt_overlap
    from dataclasses import replace

    from memlab.schema import method_config

    tpl = tmp_path / "synthetic.txt"
    tpl.write_text("[generic]\nTell me about {topic}.\nA story of {topic}:\n[specific]\n"
                   "Quote the passage on {topic}:\n[topics]\nthe sea\nold towers\nbread\n")
    sets = build_prompt_sets(tpl, corpus, tokenizer, n=12, seed=0, prefix_tokens=16, continuation_tokens=64,
                             prefix_position="start")
    assert [len(v) for v in sets.values()] == [12, 12, 12]
    assert all(p.prompt_token_ids and p.reference_ids for p in sets["prefix"])
    # 16-token prefixes of this tiny tokenizer are a few words: below the experiments' 8-word full-match floor
    tracer = replace(method_config("trace"), min_full_match_words=1).tracer(sa_index, tokenizer)
    per_prompt: list = []
    rows = {r["setting"]: r for r in prompt_overlap(tracer, sets, n_tokens=32, nv_recall_threshold=0.5,
                                                    per_prompt=per_prompt)}
    # the per-prompt rows (the claims' bootstrap units) average to the table's values
    per = pd.DataFrame(per_prompt)
    assert len(per) == 36 and per.groupby("setting").i.max().eq(11).all()
    for s, g in per.groupby("setting"):
        assert g.nv_recall.mean() == pytest.approx(rows[s]["avg_nv_recall"])
        assert g.full_match.mean() == pytest.approx(rows[s]["verbatim_matched_fraction"])
    for s in ("generic", "specific"):
        assert rows[s]["avg_nv_recall"] < rows["prefix"]["avg_nv_recall"]
        assert rows[s]["verbatim_matched_fraction"] < rows["prefix"]["verbatim_matched_fraction"]
    assert rows["prefix"]["verbatim_matched_fraction"] == 1.0


def test_specific_prompts_never_ask_for_reproduction(repo_root):
    """Seed 002: 'specific' prompts name the domain but are not adversarial — asking to quote or to reproduce
    wording measures capability, not propensity."""
    import re

    from memlab.methods.trace.propme import read_template_file

    ask = re.compile(r"quot|word for word|verbatim|exact|wording|wörtlich|zitier|reproduce", re.I)
    for f in sorted((repo_root / "prompts" / "trace").glob("*.txt")):
        for setting in ("generic", "specific"):
            bad = [t for t in read_template_file(f)[setting] if ask.search(t)]
            assert not bad, f"{f.name} [{setting}] asks for reproduction: {bad}"
