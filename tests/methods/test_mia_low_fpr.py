"""Experiment mia_low_fpr's study (issue 51) end to end on a micro family continued from a micro parent: every
registered MIA score and the reference attacks, thresholds fitted on the calibration half and read on the other, exact
intervals, the ROC figure, and p_z / greedy extraction checked against the model's own teacher-forced log-probs; PEARL
(the method group) as one more attack on its seeded subset, checked against PEARL run directly on those documents."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from memlab.errors import ConfigError
from memlab.methods.mia_low_fpr import FamilyCheckpoint, LowFprParams, MethodSubset, Sampler, _same_curves, study
from memlab.models.reference import ReferenceCheckpoint
from memlab.metrics.blind import zlib_compressibility
from memlab.metrics.mia import score_names
from memlab.models.catalog import Catalog
from memlab.study_run import StudyRun
from memlab.metrics.mia import reference_scores

REFERENCE_ATTACKS = tuple(s.name for s in reference_scores())   # the registered ones

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
MEMBERS = ["kjv/chapter/Ruth/2", "kjv/chapter/Ruth/3", "kjv/chapter/Ruth/4", "kjv/chapter/Jonah/1"]
NONMEMBERS = ["kjv/chapter/Jonah/2", "kjv/chapter/Jonah/3", "kjv/chapter/Jonah/4", "kjv/chapter/Joel/1",
              "kjv/chapter/Joel/2", "kjv/chapter/Obadiah/1"]


def _params(**over) -> LowFprParams:
    p = dict(family="child", size="xs", epoch="final", score_tokens=48, min_k=0.2, target_fprs=[0.5, 0.01],
             level=0.95, n_resamples=50, prefix_tokens=8, suffix_tokens=8,
             sampler=Sampler(temperature=1.0, top_k=None, top_p=None), ns=[1, 100, 10**6], discoverable_p=0.5,
             batch_size=4, method_subset=MethodSubset(members=3, nonmembers=4), families={}, reference=None)
    return LowFprParams(**{**p, **over})


@pytest.fixture(scope="module")
def micro_zoo(tmp_path_factory, zoo_builder, one_chapter_family):
    root = tmp_path_factory.mktemp("lowfpr")
    zoo_builder(root, {**one_chapter_family, "name": "base"})
    child = {k: v for k, v in one_chapter_family.items() if k not in ("sizes", "tokenizer")}
    child.update(name="child", init_from={"family": "base", "epoch": "final"}, train={"epochs": 3},
                 members=[{**KJV, "ids": MEMBERS}], nonmembers=[{**KJV, "ids": NONMEMBERS}])
    zoo_builder(root, child)
    solo = {k: v for k, v in child.items() if k != "init_from"}   # the same split, trained from scratch: no parent
    zoo_builder(root, {**solo, "name": "solo", "tokenizer": one_chapter_family["tokenizer"],
                       "train": {**one_chapter_family["train"], "epochs": 3},
                       "sizes": one_chapter_family["sizes"]})
    return root


def _run(root, tmp_path, p: LowFprParams, seed=0, cfg=None, method=None):
    from memlab.config import CONF_DIR

    template = yaml.safe_load((CONF_DIR / "model" / "tiny-neox.yaml").read_text())
    catalog = Catalog({**template, "threads": 1}, None, {"models": str(root / "models"), "zoo": str(root / "conf")})
    run = StudyRun(cfg=cfg, catalog=catalog, seed=seed, out_dir=tmp_path, results_root=tmp_path, progress=False)
    return study(method, p, run), catalog


def test_study_end_to_end_on_a_micro_family(micro_zoo, tmp_path):
    p = _params()
    res, catalog = _run(micro_zoo, tmp_path, p)
    df, low, ext = res.tables["scores"], res.tables["low_fpr"], res.tables["extraction"]
    assert len(df) == len(MEMBERS) + len(NONMEMBERS)
    assert (df.half == "calibration").sum() == len(NONMEMBERS) // 2 and (df.half == "evaluation").sum() == 3
    attacks = [*score_names(), *REFERENCE_ATTACKS, "blind"]
    assert list(dict.fromkeys(low.attack)) == attacks and len(low) == len(attacks) * len(p.target_fprs)
    assert {"attack", "target_fpr", "threshold", "tpr", "tpr_ci_low", "tpr_ci_high", "fpr_evaluation", "fpr_ci_low",
            "fpr_ci_high", "n_calibration", "n_evaluation", "resolvable", "auc", "auc_ci_low",
            "auc_ci_high"} <= set(low.columns)
    assert (low.tpr_ci_low <= low.tpr).all() and (low.tpr <= low.tpr_ci_high).all()
    assert (low.auc_ci_low <= low.auc).all() and (low.auc <= low.auc_ci_high).all()
    assert low.set_index(["attack", "target_fpr"]).resolvable.xs(0.5, level=1).all()      # 1/3 <= 0.5
    assert not low.set_index(["attack", "target_fpr"]).resolvable.xs(0.01, level=1).any()  # 1/3 > 0.01
    # thresholds are fitted on the calibration half only: re-read one by hand
    mem, cal, ev = df[df.split == "member"], df[df.half == "calibration"], df[df.half == "evaluation"]
    r = low[(low.attack == "loss") & (low.target_fpr == 0.5)].iloc[0]
    t = sorted(cal.loss, reverse=True)[1]      # at most 1 of 3 calibration non-members above t
    assert r.threshold == t and r.tpr == (mem.loss > t).mean() and r.fpr_evaluation == (ev.loss > t).mean()
    # the reference attacks: the parent (epoch 0) is the reference model
    assert np.allclose(df.ref_loss_difference, df.loss_reference - df.loss_target)
    assert np.allclose(df.ref_loss_ratio, -df.loss_target / df.loss_reference)
    assert np.allclose(df["loss"], -df.loss_target)
    assert (df.loss_reference != df.loss_target).all()
    # p_z at T = 1 without truncation = the model's own log-probs of the suffix given the prefix
    fam = catalog.family("child")
    with catalog.checkpoint("child", "xs", "final") as b:
        ids = [list(b.tokenizer(d.text)["input_ids"]) for d in fam.members + fam.nonmembers]
        lp = [np.sum(ts.logprobs[8:]) for ts in b.score_token_ids([i[:16] for i in ids])]
        scored = b.score_token_ids([i[:48] for i in ids])     # the MIA scores read the first score_tokens tokens
    assert np.allclose(df.log_p_z, lp, atol=1e-4)
    assert np.allclose(df.loss_target, [-np.mean(ts.logprobs[1:]) for ts in scored])
    assert df.loss_target.nunique() == len(df)
    # the blind baseline: zlib compressibility of the very text the MIA scores read, whatever the model
    texts = [b.tokenizer.decode(i[:48], skip_special_tokens=True) for i in ids]
    assert df.blind.tolist() == [zlib_compressibility(t) for t in texts] and df.blind.nunique() > 1
    assert (df.log_p_z_greedy.isin([0.0, -np.inf])).all() and df.greedy.tolist() == (df.log_p_z_greedy == 0).astype(
        int).tolist()
    # extraction table: one row per split x n, the sampler in every row, shares monotone in n
    assert len(ext) == 2 * len(p.ns) and (ext.sampler == "T=1, top_k=None, top_p=None").all()
    for split, g in ext.groupby("split"):
        assert g.discoverable_share.is_monotonic_increasing
        assert g.greedy_rate.iloc[0] == df[df.split == split].greedy.mean()
        pz = np.exp(df[df.split == split].log_p_z)
        assert g.discoverable_share.iloc[0] == (pz >= 0.5).mean()   # n = 1: p_z >= p
    assert set(res.figures) == {"roc_low_fpr", "extraction_vs_n"}
    assert res.metrics["n_members"] == 4 and "ref_loss_ratio/fpr_0.01/tpr" in res.metrics
    # loss and perplexity order the documents alike (perplexity = exp(loss)): one curve, and the caption says so
    assert "loss and perplexity draw the same curve (perplexity's, on top)" in res.captions["roc_low_fpr"]
    assert res.captions["roc_low_fpr"].count("draw the same curve") == 1   # every other attack orders otherwise


def test_sampler_and_seed_are_read_from_params(micro_zoo, tmp_path):
    a, _ = _run(micro_zoo, tmp_path, _params(sampler=Sampler(temperature=0.7, top_k=5, top_p=0.9), n_resamples=20))
    ext = a.tables["extraction"]
    assert (ext.sampler == "T=0.7, top_k=5, top_p=0.9").all() and (ext.top_k == 5).all()
    b, _ = _run(micro_zoo, tmp_path, _params(n_resamples=20), seed=1)
    for res, seed in ((a, 0), (b, 1)):   # the calibration half: the run's seed, as the module docstring says
        non = res.tables["scores"][res.tables["scores"].split == "nonmember"].reset_index(drop=True)
        assert set(non.index[non.half == "calibration"]) == set(np.random.default_rng(seed).permutation(6)[:3])


@pytest.fixture(scope="module")
def pearl_cfg():
    """The experiment's composed config, its PEARL group (methods.pearl, conf/method/pearl.yaml) at micro size, with
    flips strong enough (10 % of the words per level) and sampling free enough that the micro model's completions
    move between levels: the scores differ from document to document."""
    from memlab.config import compose

    return compose("mia_low_fpr", [f"methods.pearl.{o}" for o in (
        "samples=2", "task.max_new_tokens=8", "task.max_input_words=40", "perturbation.rate=0.1", "temperature=1.0")])


def test_pearl_is_one_more_attack_read_on_its_seeded_subset(micro_zoo, tmp_path, pearl_cfg):
    """The method group's attack (PEARL's decision score, here sensitivity) on the seeded subset of params.method_subset
    (3 of 4 members; 2 + 2 non-members from the calibration / evaluation halves), equal to PEARL run directly on those
    documents; NaN elsewhere; its low-FPR rows count the subset and fit the threshold on its calibration part."""
    from memlab.data.sampling import sample_docs
    from memlab.methods.pearl.engine import run_pearl
    from memlab.metrics.detection import roc_auc

    from memlab.study_run import typed_node

    p = _params(n_resamples=20)
    res, catalog = _run(micro_zoo, tmp_path, p, cfg=pearl_cfg)
    df, low = res.tables["scores"], res.tables["low_fpr"]
    pearl = typed_node(pearl_cfg, "methods.pearl")
    assert pearl.decision_score == "sensitivity" and pearl.verbatim_words == 0   # the experiment's own override
    sub = df[df.pearl_sensitivity.notna()]
    fam = catalog.family("child")
    docs = {d.id: d for d in fam.members + fam.nonmembers}
    for half, n in (("member", 3), ("calibration", 2), ("evaluation", 2)):   # the documented draw, one stream per half
        drawn = sample_docs([docs[i] for i in df[df.half == half].doc_id], n, f"0:method_subset:{half}")
        assert sorted(sub[sub.half == half].doc_id) == sorted(d.id for d in drawn)
    with catalog.checkpoint("child", "xs", "final") as b:
        direct = run_pearl(b, [docs[i] for i in sub.doc_id], pearl)
    assert np.allclose(sub.pearl_sensitivity, [r.sensitivity for r in direct], rtol=0, atol=1e-12)
    assert sub.pearl_sensitivity.nunique() > 1      # the micro setting separates documents (see the fixture)
    assert df.pearl_sensitivity.isna().sum() == len(df) - 7
    rows = low[low.attack == "pearl_sensitivity"]
    assert len(rows) == len(p.target_fprs) and (rows.documents == "seeded subset").all()
    assert (low[low.attack != "pearl_sensitivity"].documents == "all").all()
    assert (rows.n_members == 3).all() and (rows.n_calibration == 2).all() and (rows.n_evaluation == 2).all()
    assert (rows.n_nonmembers_auc == 4).all()
    mem, cal, ev = sub[sub.split == "member"], sub[sub.half == "calibration"], sub[sub.half == "evaluation"]
    r = rows[rows.target_fpr == 0.5].iloc[0]
    t = sorted(cal.pearl_sensitivity, reverse=True)[1]     # at most 1 of 2 calibration non-members above t
    assert r.threshold == t and r.tpr == (mem.pearl_sensitivity > t).mean()
    assert r.fpr_evaluation == (ev.pearl_sensitivity > t).mean()
    assert np.isclose(r.auc, roc_auc((sub.split == "member").astype(int), sub.pearl_sensitivity), rtol=0, atol=1e-12)
    assert res.metrics["pearl_sensitivity/n_members"] == 3 and res.metrics["pearl_sensitivity/n_nonmembers"] == 4
    assert "pearl_sensitivity/fpr_0.01/tpr" in res.metrics


def test_a_method_subset_larger_than_the_family_or_a_method_that_scores_nothing_is_refused(micro_zoo, tmp_path,
                                                                                            pearl_cfg):
    """One-line ConfigErrors, before any model loads."""
    from memlab.config import compose

    with pytest.raises(ConfigError, match="asks for 5 member documents; the family has 4"):
        _run(micro_zoo, tmp_path, _params(method_subset=MethodSubset(members=5, nonmembers=2)), cfg=pearl_cfg)
    with pytest.raises(ConfigError, match="asks for 4 calibration documents; the family has 3"):
        _run(micro_zoo, tmp_path, _params(method_subset=MethodSubset(members=None, nonmembers=8)), cfg=pearl_cfg)
    with pytest.raises(ConfigError, match="TraceConfig has no member_scores"):
        _run(micro_zoo, tmp_path, _params(), cfg=compose("mia_low_fpr", ["+method@methods.trace=trace"]))
    with pytest.raises(ConfigError, match="no method of its own"):
        _run(micro_zoo, tmp_path, _params(), method=object())


def test_every_other_family_is_read_as_the_main_one_and_one_without_a_parent_has_no_reference_attack(micro_zoo,
                                                                                                    tmp_path):
    """params.families: each checkpoint's rows in low_fpr_by_family / extraction_by_family are what a run with it as
    params.family gives (same thresholds, intervals, AUC); a family trained from scratch gets every MIA score but no
    reference attack, and its ROC caption says why; the main family's rows are its own tables."""
    every = MethodSubset(members=None, nonmembers=None)
    child1, solo = FamilyCheckpoint("child", "xs", 1, every, None), FamilyCheckpoint("solo", "xs", "final", every, None)
    res, _ = _run(micro_zoo, tmp_path, _params(families={"a": child1, "b": solo}, n_resamples=20))
    by, ext = res.tables["low_fpr_by_family"], res.tables["extraction_by_family"]
    assert list(dict.fromkeys(by.family)) == ["child/xs/final", "child/xs/1", "solo/xs/final"]
    assert by.columns[0] == "family" and ext.columns[0] == "family"
    for at in (child1, solo):
        alone, _ = _run(micro_zoo, tmp_path, _params(family=at.family, size=at.size, epoch=at.epoch, n_resamples=20,
                                                     method_subset=every))
        mine = by[by.family == f"{at.family}/{at.size}/{at.epoch}"].drop(columns="family").reset_index(drop=True)
        assert mine.equals(alone.tables["low_fpr"])
        theirs = ext[ext.family == f"{at.family}/{at.size}/{at.epoch}"].drop(columns="family").reset_index(drop=True)
        assert theirs.equals(alone.tables["extraction"])
    main = by[by.family == "child/xs/final"].drop(columns="family").reset_index(drop=True)
    assert main.equals(res.tables["low_fpr"])
    assert set(by[by.family == "child/xs/1"].attack) == {*score_names(), *REFERENCE_ATTACKS, "blind"}
    assert set(by[by.family == "solo/xs/final"].attack) == {*score_names(), "blind"}  # no parent: no reference attack
    assert set(res.figures) == {"roc_low_fpr", "extraction_vs_n", "roc_low_fpr_child_xs_1", "roc_low_fpr_solo_xs_final"}
    assert "trained from scratch" in res.captions["roc_low_fpr_solo_xs_final"]
    assert "parent model" in res.captions["roc_low_fpr_child_xs_1"]
    assert not by[by.target_fpr == 0.01].resolvable.any()             # 3 calibration non-members cannot show 1 %
    assert res.metrics["by_family/solo/xs/final/n_nonmembers"] == len(NONMEMBERS)


def test_a_named_sibling_is_the_reference_of_a_family_and_one_that_saw_its_documents_is_refused(micro_zoo, tmp_path):
    """A family's ``reference``: a zoo checkpoint that never trained on its members or non-members. Named with the
    family's own tokenizer (base for child, which inherits it) the rows are those of the parent it is; with another
    tokenizer (base for solo, trained from scratch) only the attacks that hold across tokenizers are read, on nats per
    byte of the same scored text, which a direct scoring reproduces; one that trained on the family's documents (child
    for solo) is refused in one line."""
    from memlab.metrics.mia import nll_per_byte

    every, base = MethodSubset(members=None, nonmembers=None), ReferenceCheckpoint("base", "xs", "final")
    named = {"c": FamilyCheckpoint("child", "xs", 1, every, base), "s": FamilyCheckpoint("solo", "xs", "final", every,
                                                                                           base)}
    res, catalog = _run(micro_zoo, tmp_path, _params(families=named, n_resamples=20))
    parent, _ = _run(micro_zoo, tmp_path, _params(families={"c": FamilyCheckpoint("child", "xs", 1, every, None)},
                                                  n_resamples=20))
    by, scores = res.tables["low_fpr_by_family"], res.tables["scores_by_family"]
    assert by[by.family == "child/xs/1"].reset_index(drop=True).equals(
        parent.tables["low_fpr_by_family"].query("family == 'child/xs/1'").reset_index(drop=True))
    across = {s.name for s in reference_scores(across_tokenizers=True)}
    assert across and across < set(REFERENCE_ATTACKS)   # the difference is per token only: not read for solo
    assert set(by[by.family == "solo/xs/final"].attack) == {*score_names(), *across, "blind"}
    solo = scores[scores.family == "solo/xs/final"].reset_index(drop=True)
    fam = catalog.family("solo")
    with catalog.checkpoint("solo", "xs", "final") as target:
        texts = [target.tokenizer.decode(target.tokenizer(d.text)["input_ids"][:48], skip_special_tokens=True)
                 for d in fam.members + fam.nonmembers]
    with catalog.checkpoint("base", "xs", "final") as reference:
        per_byte = [nll_per_byte(ts, t) for ts, t in zip(reference.score(texts, vocab=False), texts)]
    assert np.allclose(solo.loss_reference, per_byte, rtol=1e-9, atol=0)
    assert np.allclose(solo.ref_loss_ratio, -solo.loss_target / solo.loss_reference, rtol=1e-12, atol=0)
    assert "base/xs/final, a sibling" in res.captions["roc_low_fpr_solo_xs_final"]
    assert "tokenizes otherwise: ref_loss_ratio only, in nats per byte" in res.captions["roc_low_fpr_solo_xs_final"]
    assert "tokenizes otherwise" not in res.captions["roc_low_fpr_child_xs_1"]
    for bad, error in ((ReferenceCheckpoint("nowhere", "xs", 1), "unknown zoo family 'nowhere'"),
                       (ReferenceCheckpoint("base", "xl", "final"), "zoo family 'base' has no size 'xl'")):
        with pytest.raises(ConfigError, match=error):
            _run(micro_zoo, tmp_path, _params(families={"s": FamilyCheckpoint("solo", "xs", "final", every, bad)}))
    with pytest.raises(ConfigError, match=r"reference child/xs/final trained on 4 of solo's members and non-members"):
        _run(micro_zoo, tmp_path, _params(families={"s": FamilyCheckpoint("solo", "xs", "final", every,
                                                                            ReferenceCheckpoint("child", "xs",
                                                                                                "final"))}))


def test_a_family_listed_twice_or_too_small_to_split_is_refused_in_one_line(micro_zoo, tmp_path):
    every = MethodSubset(members=None, nonmembers=None)
    with pytest.raises(ConfigError, match="lists child/xs/final twice"):
        _run(micro_zoo, tmp_path, _params(families={"c": FamilyCheckpoint("child", "xs", "final", every, None)}))
    with pytest.raises(ConfigError, match="'base' needs members and ≥ 2 non-members"):   # 1 held-out chapter
        _run(micro_zoo, tmp_path, _params(families={"b": FamilyCheckpoint("base", "xs", "final", every, None)}))


def test_pearl_scores_every_document_of_another_family_whose_subset_is_null(micro_zoo, tmp_path, pearl_cfg):
    """The method group's attack on params.families: the family's own method_subset (members and non-members null =
    every document), equal to PEARL run directly on them; a family whose method_subset is null gets rows that say the
    attack was not run (no document counted, no rate) and no PEARL in its ROC or metrics; the main family keeps its
    seeded subset."""
    from memlab.methods.pearl.engine import run_pearl
    from memlab.study_run import typed_node

    solo = FamilyCheckpoint("solo", "xs", "final", MethodSubset(members=None, nonmembers=None), None)
    child1 = FamilyCheckpoint("child", "xs", 1, None, None)
    res, catalog = _run(micro_zoo, tmp_path, _params(families={"s": solo, "c": child1}, n_resamples=20), cfg=pearl_cfg)
    by, scores = res.tables["low_fpr_by_family"], res.tables["scores_by_family"]
    from memlab.methods.mia_low_fpr import NOT_RUN

    skipped = by[(by.family == "child/xs/1") & (by.attack == "pearl_sensitivity")]
    assert len(skipped) == len(_params().target_fprs) and (skipped.documents == NOT_RUN).all()
    assert (skipped.n_members == 0).all() and skipped[["tpr", "auc", "threshold"]].isna().all().all()
    assert not any(k.startswith("by_family/child/xs/1/pearl") for k in res.metrics)
    assert (by[by.documents != NOT_RUN].n_members > 0).all()   # every other row counts the documents it read
    assert scores[scores.family == "child/xs/1"].pearl_sensitivity.isna().all()
    scores = scores[scores.family == "solo/xs/final"]
    rows = by[(by.attack == "pearl_sensitivity")].set_index("family")
    assert (rows.loc["solo/xs/final"].documents == "all").all() and (rows.loc["child/xs/final"].documents ==
                                                                       "seeded subset").all()
    assert (rows.loc["solo/xs/final"].n_members == len(MEMBERS)).all()
    fam = catalog.family("solo")
    with catalog.checkpoint("solo", "xs", "final") as b:
        direct = run_pearl(b, fam.members + fam.nonmembers, typed_node(pearl_cfg, "methods.pearl"))
    assert scores.doc_id.tolist() == [d.id for d in fam.members + fam.nonmembers]
    assert np.allclose(scores.pearl_sensitivity, [r.sensitivity for r in direct], rtol=0, atol=1e-12)
    assert "trained from scratch" in res.captions["roc_low_fpr_solo_xs_final"]


def test_pearl_reads_every_chapter_of_pearl_and_pearl_base_in_every_profile_but_smoke():
    """PEARL beside the other attacks on both PEARL families in the embedded run (their answers mostly cached by
    pearl_calibration and pearl_epochs); kjv's whole books have none. profile=full changes no entry; smoke only the
    two subsets' sizes (each entry is written once, in conf/experiment/mia_low_fpr.yaml)."""
    from memlab.config import compose
    from memlab.study_run import typed_node

    embedded = typed_node(compose("mia_low_fpr", ["profile=embedded"]), "params")
    every = MethodSubset(members=None, nonmembers=None)
    assert {at.family: at.method_subset for at in embedded.families.values()} == {
        "pearl": every, "pearl_base": every, "kjv": None}
    assert typed_node(compose("mia_low_fpr", ["profile=full"]), "params").families == embedded.families
    smoke_cfg = compose("mia_low_fpr", ["profile=smoke"])
    smoke, smoke_pearl = typed_node(smoke_cfg, "params").families, typed_node(smoke_cfg, "methods.pearl")
    for key, at in embedded.families.items():
        small = MethodSubset(members=2, nonmembers=2) if at.method_subset else None
        epoch = smoke_pearl.study.epoch if at.family == "pearl" else at.epoch   # the smoke zoo's last checkpoint
        assert smoke[key] == FamilyCheckpoint(at.family, at.size, epoch, small, at.reference)


def test_pearl_base_m_asks_what_pearl_epochs_asks_at_epoch_0_for_its_pool_chapters():
    """pearl_base/m is pearl/m's epoch 0 (the same folder), which pearl_epochs reads on every one of pearl's 36 + 66
    chapters, all of them pearl_base's too, with mia_low_fpr's PEARL settings but the greedy truth aid; the response
    cache keys a local model by its files (tests/backends/test_backend_cache.py), so in make reproduce
    (requires.after) only pearl_base's other 43 chapters are computed."""
    import dataclasses

    from memlab.config import compose
    from memlab.models.zoo import load_family
    from memlab.study_run import typed_node

    epochs, mia = typed_node(compose("pearl_epochs"), "method"), compose("mia_low_fpr")
    at, pearl = typed_node(mia, "params").families["pearl_base_m"], typed_node(mia, "methods.pearl")
    st = epochs.study
    assert "pearl_epochs" in mia.requires.after and 0 in st.epochs and at.size == st.size
    base, child = load_family(at.family), load_family(st.family)
    # epoch 0 of a continued family is its init_from checkpoint (Family.init_dir); read from the recipes, so a fresh
    # clone, whose models are not built yet, checks it too
    init = child.recipe.init_from
    assert (init.family, init.size or st.size, str(init.epoch)) == (base.name, at.size, str(at.epoch))
    pool = {d.id for d in child.members + child.nonmembers}
    assert (st.n_members, st.n_nonmembers) == (len(child.members), len(child.nonmembers))
    assert pool <= {d.id for d in base.members + base.nonmembers} and len(pool) == 102
    assert at.method_subset == MethodSubset(members=None, nonmembers=None)
    assert epochs.study.kinds == [pearl.perturbation.kind]
    assert dataclasses.replace(pearl, verbatim_words=epochs.verbatim_words, study=st) == epochs


def test_only_curves_of_the_same_points_are_named_as_hiding_each_other():
    from memlab.metrics.low_fpr import roc_curve

    m, n = np.array([3.0, 2.0, 0.5]), np.array([1.0, 0.0, 2.5])
    curves = {"a": roc_curve(m, n), "b": roc_curve(np.exp(m), np.exp(n)), "c": roc_curve(-m, -n),
              "d": roc_curve(2 * m + 1, 2 * n + 1)}
    assert _same_curves(curves) == [["a", "b", "d"]]                 # c orders the documents the other way
    assert _same_curves({"c": curves["c"], "a": curves["a"]}) == []


def test_pearl_m_asks_exactly_what_pearl_calibration_asked(micro_family, tmp_path):
    """params.families.pearl_m is pearl_calibration's checkpoint under the name that study gives it, every document of
    the family (all of which pearl_calibration samples), and the same PEARL settings but the greedy truth aid: so in
    make reproduce (requires.after) its PEARL answers all come from pearl_calibration's cached responses. Shown for
    real on the micro model: the calibration's requests through a response cache, then mia_low_fpr's through the same
    cache: no miss, the same scores, which mia_low_fpr run alone (no cache: plain `dvc repro` may run it first) gives
    too."""
    import dataclasses

    from memlab.backends.factory import build_backend
    from memlab.config import compose
    from memlab.methods.pearl.engine import run_pearl
    from memlab.models.zoo import load_family
    from memlab.study_run import typed_node
    from memlab.zoo_layout import checkpoint_name

    calibration = typed_node(compose("pearl_calibration"), "method")
    mia = compose("mia_low_fpr")
    at, pearl = typed_node(mia, "params").families["pearl_m"], typed_node(mia, "methods.pearl")
    st = calibration.study
    assert "pearl_calibration" in mia.requires.after
    assert checkpoint_name(at.family, at.size, at.epoch) == checkpoint_name(st.family, st.size, st.epoch)
    fam = load_family(st.family)
    assert at.method_subset == MethodSubset(members=None, nonmembers=None)
    assert (st.n_members, st.n_nonmembers) == (len(fam.members), len(fam.nonmembers))
    assert pearl.verbatim_words == 0 < calibration.verbatim_words   # the greedy truth aid: calibration's alone
    assert dataclasses.replace(pearl, verbatim_words=calibration.verbatim_words, study=st) == calibration

    small = {"samples": 2, "task": {"max_new_tokens": 4, "max_input_words": 40}}
    docs = micro_family.members[:2] + micro_family.nonmembers[:2]
    cache = {"name": "sqlite", "path": str(tmp_path / "responses.sqlite")}
    first = build_backend(micro_family.model_cfg, cache)
    before = run_pearl(first, docs, calibration.replace(**small))
    first.close()
    again = build_backend(micro_family.model_cfg, cache)
    after = run_pearl(again, docs, pearl.replace(**small))
    assert again.misses == 0 and again.hits >= len(docs) * len(pearl.perturbation.levels)   # every request answered
    assert [r.score for r in after] == [r.score for r in before]
    fresh = build_backend(micro_family.model_cfg)   # no cache, no greedy rows in its batches: the same answers
    assert [r.score for r in run_pearl(fresh, docs, pearl.replace(**small))] == [r.score for r in before]
