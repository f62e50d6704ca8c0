"""The study helpers behind the notebooks, on the micro model and on hand-made frames."""

import numpy as np
import pandas as pd
import pytest

from memlab.backends.factory import build_backend
from memlab.config import compose
from memlab.errors import MemlabError
from memlab.data.sampling import sample_docs
from memlab.methods.pearl import tables as st
from memlab.methods.pearl.engine import PearlConfig
from memlab.report import Report

PEARL_EXPERIMENTS = ["pearl_calibration", "pearl_epochs", "pearl_sizes", "pearl_mia", "pearl_wild"]


@pytest.mark.parametrize("name", PEARL_EXPERIMENTS)
@pytest.mark.parametrize("profile", ["embedded", "full"])
def test_experiment_params_build_a_valid_pearl_config(name, profile):
    cfg = compose(name, [f"profile={profile}"])
    pc = Report.typed_node(cfg, "method")
    assert isinstance(pc, PearlConfig) and pc.seed == cfg.seed
    assert pc.perturbation.levels == (0, 1, 2, 3, 4, 5) and pc.samples >= 1
    assert (cfg.paths.root and pc.task.prompts_dir.endswith("prompts/pearl"))


def test_sample_docs_is_seeded_and_filters(micro_family):
    docs = micro_family.members + micro_family.nonmembers
    a = sample_docs(docs, 3, seed=1, min_words=10)
    assert [d.id for d in a] == [d.id for d in sample_docs(docs, 3, seed=1, min_words=10)]
    assert all(d.split in ("member", "nonmember") for d in a)
    with pytest.raises(MemlabError):
        sample_docs(docs, 100, seed=0)
    with pytest.raises(MemlabError):
        sample_docs(docs, 1, seed=0, min_words=10**6)


def _frame():
    return pd.DataFrame({
        "split": ["member"] * 4 + ["nonmember"] * 4,
        "kind": ["bitflip"] * 8,
        "sensitivity": [0.5, 0.3, 0.1, 0.05, 0.2, 0.02, 0.01, 0.0],
        "gfd": [0.6, 0.4, 0.2, 0.0, 0.2, 0.0, 0.0, 0.0],
    })


def test_tables_from_a_known_frame():
    df = _frame()
    f = st.flag_table(df, [0.1, 0.25], by=["split"], score="sensitivity")
    got = {(r.split, r.alpha): r.flagged for r in f.itertuples()}
    assert got == {("member", 0.1): 2, ("member", 0.25): 2, ("nonmember", 0.1): 1, ("nonmember", 0.25): 0}
    fpr = st.fpr_table(df[df.split == "nonmember"], [0.0, 0.1], by=["kind"])
    assert fpr[(fpr.score == "sensitivity")].fpr.tolist() == [0.75, 0.25]
    # held-out calibration: α fitted on the calibration half (0.2, 0.01), FPR reported on the evaluation half
    df["half"] = ["member"] * 4 + ["calibration", "evaluation", "calibration", "evaluation"]
    cal = st.calibration_table(df, [0.5], by=["kind"], scores=["sensitivity"])
    r = cal.iloc[0]
    assert r.alpha == pytest.approx(0.01) and r.fpr_calibration == 0.5 and r.n_calibration == 2
    assert r.fpr_evaluation == 0.5 and r.n_evaluation == 2  # 0.02 > 0.01, 0.0 is not
    assert r.others_flagged_share == 1.0 and r.n_others == 4
    halves = st.split_halves(["d3", "d1", "d2", "d4", "d5"], "0:halves")
    assert sorted(halves.values()).count("calibration") == 3 and halves == st.split_halves(["d5", "d4", "d3", "d2", "d1"], "0:halves")
    df["member"] = (df.split == "member").astype(int)
    det = st.detection_table(df, "member", ["sensitivity"], {"sensitivity": 0.1})
    assert det.auc.iloc[0] == pytest.approx(14 / 16) and det.precision.iloc[0] == pytest.approx(2 / 3)
    assert det.recall.iloc[0] == pytest.approx(0.5)
    df["a"], df["b"] = df.sensitivity > 0.1, df.gfd > 0.1
    ov = st.overlap_table(df, "a", "b", by=["split"])
    assert ov[ov.split == "member"].both_pct.iloc[0] == 50.0
    assert list(st.thresholds({"start": 0, "stop": 0.1, "step": 0.05})) == [0.0, 0.05, 0.1]


def test_mia_frame_on_micro_model(micro_family):
    be = build_backend(micro_family.model_cfg, None)
    df = st.mia_frame(be, micro_family.members + micro_family.nonmembers, settings={"min_k": 0.2}, max_words=60,
                      epoch=3)
    assert len(df) == 8 and (df.epoch == 3).all()
    assert "perplexity" not in df and np.allclose(df.ppl, -df.neg_perplexity)  # named for what it holds
    mem, non = df[df.split == "member"], df[df.split == "nonmember"]
    assert mem.loss.mean() > non.loss.mean()  # higher = more likely member: training text has lower NLL
