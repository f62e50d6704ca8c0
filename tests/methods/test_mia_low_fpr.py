"""Experiment mia_low_fpr's study (issue 51) end to end on a micro family continued from a micro parent: every
registered MIA score and the reference attacks, thresholds fitted on the calibration half and read on the other, exact
intervals, the ROC figure, and p_z / greedy extraction checked against the model's own teacher-forced log-probs."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from memlab.methods.mia_low_fpr import REFERENCE_ATTACKS, LowFprParams, Sampler, study
from memlab.metrics.mia import score_names
from memlab.models.catalog import Catalog
from memlab.study_run import StudyRun

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
MEMBERS = ["kjv/chapter/Ruth/2", "kjv/chapter/Ruth/3", "kjv/chapter/Ruth/4", "kjv/chapter/Jonah/1"]
NONMEMBERS = ["kjv/chapter/Jonah/2", "kjv/chapter/Jonah/3", "kjv/chapter/Jonah/4", "kjv/chapter/Joel/1",
              "kjv/chapter/Joel/2", "kjv/chapter/Obadiah/1"]


def _params(**over) -> LowFprParams:
    p = dict(family="child", size="xs", epoch="final", score_tokens=48, min_k=0.2, target_fprs=[0.5, 0.01],
             level=0.95, n_resamples=50, prefix_tokens=8, suffix_tokens=8,
             sampler=Sampler(temperature=1.0, top_k=None, top_p=None), ns=[1, 100, 10**6], discoverable_p=0.5,
             batch_size=4)
    return LowFprParams(**{**p, **over})


@pytest.fixture(scope="module")
def micro_zoo(tmp_path_factory, zoo_builder, one_chapter_family):
    root = tmp_path_factory.mktemp("lowfpr")
    zoo_builder(root, {**one_chapter_family, "name": "base"})
    child = {k: v for k, v in one_chapter_family.items() if k not in ("sizes", "tokenizer")}
    child.update(name="child", init_from={"family": "base", "epoch": "final"}, train={"epochs": 3},
                 members=[{**KJV, "ids": MEMBERS}], nonmembers=[{**KJV, "ids": NONMEMBERS}])
    zoo_builder(root, child)
    return root


def _run(root, tmp_path, p: LowFprParams, seed=0):
    from memlab.config import CONF_DIR

    template = yaml.safe_load((CONF_DIR / "model" / "tiny-neox.yaml").read_text())
    catalog = Catalog({**template, "threads": 1}, None, {"models": str(root / "models"), "zoo": str(root / "conf")})
    run = StudyRun(cfg=None, catalog=catalog, seed=seed, out_dir=tmp_path, results_root=tmp_path, progress=False)
    return study(None, p, run), catalog


def test_study_end_to_end_on_a_micro_family(micro_zoo, tmp_path):
    p = _params()
    res, catalog = _run(micro_zoo, tmp_path, p)
    df, low, ext = res.tables["scores"], res.tables["low_fpr"], res.tables["extraction"]
    assert len(df) == len(MEMBERS) + len(NONMEMBERS)
    assert (df.half == "calibration").sum() == len(NONMEMBERS) // 2 and (df.half == "evaluation").sum() == 3
    attacks = [*score_names(), *REFERENCE_ATTACKS]
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


def test_sampler_and_seed_are_read_from_params(micro_zoo, tmp_path):
    a, _ = _run(micro_zoo, tmp_path, _params(sampler=Sampler(temperature=0.7, top_k=5, top_p=0.9), n_resamples=20))
    ext = a.tables["extraction"]
    assert (ext.sampler == "T=0.7, top_k=5, top_p=0.9").all() and (ext.top_k == 5).all()
    b, _ = _run(micro_zoo, tmp_path, _params(n_resamples=20), seed=1)
    for res, seed in ((a, 0), (b, 1)):   # the calibration half: the run's seed, as the module docstring says
        non = res.tables["scores"][res.tables["scores"].split == "nonmember"].reset_index(drop=True)
        assert set(non.index[non.half == "calibration"]) == set(np.random.default_rng(seed).permutation(6)[:3])
