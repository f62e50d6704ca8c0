"""Each verdict branch of five PEARL rules (issue 49) on tables a pipeline run really produced: the ci71 run's
tables (tests/pearl/ci71/, cut to the columns the rules read; see its README.md), judged as ci71 judged them (a rule
ci71 did not have: as the rule judges ci71's rows), and perturbed only per document, in ways the pipeline can
produce (a score in its observed range, an ACR search result), with every table the rule reads rebuilt from the perturbed per-document rows by the pipeline's own functions
(:mod:`memlab.methods.pearl.tables`, :func:`memlab.methods.pearl.study.completion_vs_summarization`): flagged counts
stay the per-document flags' counts, calibrated α stay fitted on the calibration half only, and every task, size and
epoch keeps the same documents.

- pearl_sizes_grow_with_size: inconclusive (ci71 itself; reproduced / contradicted also from ci71's rows);
- pearl_wild_task_dependence: inconclusive (ci71), contradicted;
- pearl_wild_code_over_unseen: inconclusive (ci71), reproduced, contradicted;
- pearl_acr_overlap: inconclusive (ci71), reproduced, contradicted at the profile=full ACR shape (20 + 20
  documents), not testable at an ACR epoch where PEARL flags nothing;
- pearl_wild_code_median_difference: inconclusive (ci71), reproduced, contradicted.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import RULES, load_claims, rules_for
from memlab.config import compose
from memlab.methods.pearl import tables as T
from memlab.methods.pearl.study import completion_vs_summarization
from memlab.results import StudyResult

rules_for("pearl_epochs")
CLAIMS = {c.id: c for c in load_claims()}
CI71 = Path(__file__).parent / "ci71"
RUN = pd.read_csv(CI71 / "comparison.csv").set_index("claim_id")   # what ci71 judged (its comparison.csv)


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(CI71 / f"{name}.csv")


def _judge(claim_id: str, res: StudyResult):
    return RULES[claim_id](res, CLAIMS[claim_id])


def _as_ci71(claim_id: str, f) -> None:
    """The finding is the one ci71's comparison.csv records: verdict, our value, n and the n that would decide."""
    run = RUN.loc[claim_id]
    assert f.verdict == run.verdict, f.reason
    assert f.our_n == run.our_n
    assert (f.our_value is None) if pd.isna(run.our_value) else f.our_value == pytest.approx(run.our_value)
    assert (f.n_needed is None) if pd.isna(run.n_needed) else f.n_needed == run.n_needed


# -- pearl_sizes: pearl_scores per size (the same 36 + 66 documents), flagged_counts_by_size rebuilt from them ---

def _sizes(scores: pd.DataFrame) -> StudyResult:
    """The tables pearl_sizes writes from its per-document rows (study.sizes): Table 2's flagged counts at
    params.alphas per (split, size), with each size's weights and final training loss (the family's, from ci71)."""
    res = StudyResult(config=compose("pearl_sizes", ["logger=null"]))
    score = res.method.decision_score
    flags = T.flag_table(scores, res.params.alphas, by=["size", "split"], score=score)
    table2 = flags.pivot_table(index=["split", "size"], columns="alpha", values="flagged").reset_index()
    table2.columns = [c if isinstance(c, str) else f"flagged_{score}>{c}" for c in table2.columns]
    family = _csv("pearl_sizes__flagged_counts_by_size").drop_duplicates("size")
    table2 = table2.merge(family[["size", "non_embedding_params", "final_train_loss"]], on="size")
    res.tables = {"pearl_scores": scores, "flagged_counts_by_size": table2}
    return res


def _member_flags(scores: pd.DataFrame, size: str, alpha: float = 0.2) -> pd.Series:
    m = scores[(scores["size"] == size) & (scores.split == "member")].set_index("doc_id").sensitivity
    return m > alpha


def test_sizes_rebuilt_tables_are_ci71s():
    """The rebuild is the pipeline's: from ci71's per-document rows it gives ci71's Table 2."""
    real = _csv("pearl_sizes__flagged_counts_by_size")
    rebuilt = _sizes(_csv("pearl_sizes__pearl_scores")).tables["flagged_counts_by_size"]
    pd.testing.assert_frame_equal(rebuilt.sort_values(["split", "size"]).reset_index(drop=True),
                                  real.sort_values(["split", "size"]).reset_index(drop=True), check_dtype=False)


def test_sizes_inconclusive_on_ci71():
    """ci71: s flags 0, m 25, l 25 of 36 members. s→m rises significantly; m→l flags 5 members m does not and
    drops 5 m flags (a sign test of 5 vs 5), so not every step rises and none falls: inconclusive; our value (l / s)
    is empty as s flags none."""
    scores = _csv("pearl_sizes__pearl_scores")
    m, l = _member_flags(scores, "m"), _member_flags(scores, "l")
    assert ((~m & l).sum(), (m & ~l).sum()) == (5, 5)
    f = _judge("pearl_sizes_grow_with_size", _sizes(scores))
    _as_ci71("pearl_sizes_grow_with_size", f)
    assert "members flagged per size: s 0, m 25, l 25" in f.reason
    assert "s→m: +0.69" in f.reason and "m→l: +0.00 [-0.19, +0.19]" in f.reason, f.reason


def _lift(scores: pd.DataFrame, mask, value: float) -> pd.DataFrame:
    out = scores.copy()
    out.loc[mask, "sensitivity"] = value
    return out


def test_sizes_reproduced_and_contradicted_from_ci71():
    """Only l's member scores move (its own checkpoint; s and m untouched), to a value inside the run's range: the
    11 members l leaves unflagged scored 0.3 (l memorized them too) → every step rises: reproduced, 36 / 0 has no
    ratio; 12 of l's 25 flagged members scored 0.05 (l, trained to a higher loss than m, memorized fewer) → m→l
    falls: contradicted, our value 13 / 0 again empty."""
    scores = _csv("pearl_sizes__pearl_scores")
    l_mem = (scores["size"] == "l") & (scores.split == "member")
    up = _judge("pearl_sizes_grow_with_size", _sizes(_lift(scores, l_mem & (scores.sensitivity <= 0.2), 0.3)))
    assert up.verdict == "reproduced" and up.our_n == 36, up.reason
    assert "s 0, m 25, l 36" in up.reason and "m→l: +0.31" in up.reason, up.reason
    fell = l_mem & (scores.sensitivity > 0.2)
    fell &= scores.doc_id.isin(scores[fell].doc_id.iloc[:12])
    down = _judge("pearl_sizes_grow_with_size", _sizes(_lift(scores, fell, 0.05)))
    assert down.verdict == "contradicted" and down.our_n == 36, down.reason
    assert "s 0, m 25, l 13" in down.reason and "m→l: -0.33" in down.reason, down.reason
    assert "unequal training: l ended at training loss 0.473 above m's 0.319" in down.reason


# -- pearl_wild: pearl_scores per (model, task, source), every table the two rules read rebuilt from them -------

WILD = ["alpha_calibrated_per_domain", "completion_vs_summarization", "flagged_counts_fixed_thresholds",
        "seen_vs_unseen_mann_whitney"]


def _wild(scores: pd.DataFrame) -> StudyResult:
    """The tables pearl_wild writes from its per-document rows (study.wild_models): flagged counts at the paper's
    fixed α, α calibrated per (model, task, domain) on the calibration half of the domain's known-unseen source
    (rounded as written, and the rule reads the written table), completion vs summarization at each task's own α,
    and the seen-vs-unseen Mann–Whitney tests."""
    res = StudyResult(config=compose("pearl_wild", ["logger=null"]))
    p, score = res.params, res.method.decision_score
    keys = ["model", "task_kind", "domain", "source"]
    flags = T.flag_table(scores, list(p.alphas), by=keys, score=score)
    table3 = flags.pivot_table(index=keys, columns="alpha", values="flagged").reset_index()
    table3.columns = [c if isinstance(c, str) else f"flagged_{score}>{c}" for c in table3.columns]
    table3 = table3.merge(flags.groupby(keys).n.first().reset_index(), on=keys)
    cal = T.domain_calibration_table(scores, list(p.target_fprs), p.calibration_sources, score).round(4)
    at = T.calibrated_alphas(cal, p.target_fprs, score)
    res.tables = {"pearl_scores": scores, "flagged_counts_fixed_thresholds": table3,
                  "alpha_calibrated_per_domain": cal,
                  "completion_vs_summarization": completion_vs_summarization(scores, at[1], score),
                  "seen_vs_unseen_mann_whitney": T.mann_whitney_table(scores, p.calibration_sources, score).round(4)}
    return res


def _wild_scores() -> pd.DataFrame:
    """ci71's pearl_wild per-document rows. One written score is 0.24, a paper α: the run's unrounded score lay
    above it (ci71's Table 3 counts the document at 0.24) and rounded to it when written to 4 decimals; it is put
    back just above 0.24 (the next float) so that the rebuild counts what the run counted."""
    scores = _csv("pearl_wild__pearl_scores")
    tie = scores.sensitivity == 0.24
    assert tie.sum() == 1
    scores.loc[tie, "sensitivity"] = np.nextafter(0.24, 1.0)
    return scores


def _rows(scores, model: str, task: str, source: str) -> pd.Series:
    return (scores.model == model) & (scores.task_kind == task) & (scores.source == source)


def test_wild_rebuilt_tables_are_ci71s():
    """From ci71's per-document rows (4 decimals, as written) the rebuild gives ci71's tables; the calibrated α are
    ci71's to the 4 decimals written, up to the rounding of the scores they come from (a median of two
    rounded scores, an α fitted there on unrounded ones: within 2e-4); every count is exact."""
    rebuilt = _wild(_wild_scores()).tables
    for name in WILD:
        real, ours = _csv(f"pearl_wild__{name}"), rebuilt[name]
        assert list(ours.columns) == list(real.columns), name
        pd.testing.assert_frame_equal(ours.reset_index(drop=True), real, check_dtype=False, atol=2e-4, obj=name)


def test_task_dependence_inconclusive_on_ci71():
    """ci71: completion-only vs summarization-only 7 vs 8 (gemma) and 2 vs 7 (smollm) among 40 held-out documents
    per model: neither model's exact interval excludes 0.5; 3 documents flagged under both."""
    f = _judge("pearl_wild_task_dependence", _wild(_wild_scores()))
    _as_ci71("pearl_wild_task_dependence", f)
    assert "gemma-3-270m: completion only 7, summarization only 8" in f.reason
    assert "smollm2-135m-instruct: completion only 2, summarization only 7" in f.reason, f.reason


def test_task_dependence_contradicted_from_ci71():
    """smollm's 2 completion-only documents (held out: neither is in a calibration half, so no α moves) complete at
    sensitivity 0.0, the score 62 of smollm's 100 completions got in ci71 → 0 vs 7 discordant documents: the exact
    97.5 % interval of the completion-only share lies below 0.5 (summarization flags more): contradicted. Both-task
    documents and n are unchanged (3, 80)."""
    scores = _wild_scores()
    res = _wild(scores)
    at = T.calibrated_alphas(res.tables["alpha_calibrated_per_domain"], res.params.target_fprs, "sensitivity")[1]
    wide = T.task_flags(scores, at, "sensitivity").fillna(False).loc["smollm2-135m-instruct"]
    only = wide[wide.completion & ~wide.summarization].index.get_level_values("doc_id")
    assert len(only) == 2
    assert (scores[scores.doc_id.isin(only)].half != "calibration").all()
    smollm = (scores.model == "smollm2-135m-instruct") & (scores.task_kind == "completion")
    assert (scores[smollm].sensitivity == 0).mean() == pytest.approx(0.62)   # 62 of its 100 completions
    mask = (scores.model == "smollm2-135m-instruct") & (scores.task_kind == "completion") & scores.doc_id.isin(only)
    perturbed = _wild(_lift(scores, mask, 0.0))
    assert perturbed.tables["alpha_calibrated_per_domain"].alpha.equals(res.tables["alpha_calibrated_per_domain"].alpha)
    f = _judge("pearl_wild_task_dependence", perturbed)
    assert f.verdict == "contradicted", f.reason
    assert (f.our_value, f.our_n, f.n_needed) == (3.0, 80, None)
    assert "smollm2-135m-instruct: completion only 0, summarization only 7" in f.reason
    assert "gemma-3-270m: completion only 7, summarization only 8" in f.reason, f.reason


def test_code_over_unseen_inconclusive_on_ci71():
    """ci71 at the paper's τ_b = 0.14: HumanEval 2/10 vs post-cutoff code 1/10 (gemma), 0/10 vs 0/10 (smollm):
    both intervals cover 0; our value 2 of the 20 HumanEval completions."""
    f = _judge("pearl_wild_code_over_unseen", _wild(_wild_scores()))
    _as_ci71("pearl_wild_code_over_unseen", f)
    assert f.our_value == pytest.approx(2 / 20)
    assert "gemma-3-270m: HumanEval − post_cutoff_code +0.10 [-0.28, +0.46]" in f.reason
    assert "smollm2-135m-instruct: HumanEval − post_cutoff_code +0.00 [-0.33, +0.33]" in f.reason, f.reason


def _first_docs(scores, model: str, task: str, source: str, k: int) -> pd.Series:
    rows = _rows(scores, model, task, source)
    return rows & scores.doc_id.isin(scores[rows].doc_id.iloc[:k])


def test_code_over_unseen_reproduced_from_ci71():
    """Both models memorized HumanEval: the completion sensitivity of their first 8 HumanEval documents is 0.3
    (inside the run's range, max 0.857; HumanEval is a seen source, so no α moves) → 8/10 or more vs 1/10 and 0/10:
    both Bonferroni intervals above 0: reproduced."""
    scores = _wild_scores()
    mask = (_first_docs(scores, "gemma-3-270m", "completion", "humaneval", 8)
            | _first_docs(scores, "smollm2-135m-instruct", "completion", "humaneval", 8))
    assert 0.3 < scores.sensitivity.max()
    f = _judge("pearl_wild_code_over_unseen", _wild(_lift(scores, mask, 0.3)))
    assert f.verdict == "reproduced", f.reason
    t = _wild(_lift(scores, mask, 0.3)).tables["flagged_counts_fixed_thresholds"]
    he = t[(t.task_kind == "completion") & (t.source == "humaneval")]
    assert f.our_value == pytest.approx(he["flagged_sensitivity>0.14"].sum() / he.n.sum()) and f.our_n == 10
    assert f.our_value == pytest.approx(16 / 20)   # gemma's 2 flagged HumanEval documents are among its first 8
    assert "gemma-3-270m: HumanEval − post_cutoff_code +0.70 [+0.20, +0.87]" in f.reason
    assert "smollm2-135m-instruct: HumanEval − post_cutoff_code +0.80 [+0.31, +0.95]" in f.reason, f.reason


def test_code_over_unseen_contradicted_from_ci71():
    """gemma's training data reached past the assumed cutoff: it completes 9 of the 10 post-cutoff code documents
    (both halves: the paper's fixed τ_b counts every one) at sensitivity 0.3, as it would seen code; its calibrated
    code α refits on the calibration half (rebuilt), the fixed-threshold counts follow the flags → gemma's HumanEval
    2/10 vs 9/10 lies below 0: contradicted; our value (HumanEval) stays ci71's 2/20."""
    scores = _wild_scores()
    mask = _first_docs(scores, "gemma-3-270m", "completion", "post_cutoff_code", 9)
    res = _wild(_lift(scores, mask, 0.3))
    t = res.tables["flagged_counts_fixed_thresholds"].set_index(["model", "task_kind", "source"])
    assert t.loc[("gemma-3-270m", "completion", "post_cutoff_code"), "flagged_sensitivity>0.14"] >= 9
    f = _judge("pearl_wild_code_over_unseen", res)
    assert f.verdict == "contradicted", f.reason
    assert f.our_value == pytest.approx(2 / 20) and f.our_n == 10
    assert "gemma-3-270m: HumanEval − post_cutoff_code -0.70 [-0.87, -0.20]" in f.reason
    assert "smollm2-135m-instruct: HumanEval − post_cutoff_code +0.00 [-0.33, +0.33]" in f.reason, f.reason


def test_code_over_unseen_without_completion_is_not_testable():
    """ci71's rows of the summarization task alone: what pearl_wild writes with params.tasks=[summarization]."""
    scores = _wild_scores()
    res = _wild(scores[scores.task_kind == "summarization"])
    assert _judge("pearl_wild_task_dependence", res).verdict == "not testable here"
    assert _judge("pearl_wild_code_over_unseen", res).verdict == "not testable here"


# -- pearl_acr_overlap: pearl_epochs' scores and ACR rows of the first documents of each split ----------------

def _epochs(acr: pd.DataFrame) -> StudyResult:
    res = StudyResult(config=compose("pearl_epochs", ["logger=null"]))
    res.tables = {"pearl_scores": _csv("pearl_epochs__pearl_scores"), "acr_scores": acr}
    return res


def _acr_full(compressible: set[str], epoch: int = 10) -> pd.DataFrame:
    """ACR rows at profile=full's shape (conf/scale/pearl_epochs_full.yaml: the first 20 members and 20 non-members
    in the study's order, prompt lengths up to 15 for a 16-token window), acr_rows' columns: a document found
    compressible has a prompt of 15 tokens (ACR 16/15 > 1), the rest the bound 16/16 = 1. ci71's own 4 rows (the
    first 2 of each split) are kept as they are."""
    scores = _csv("pearl_epochs__pearl_scores")
    last = scores[scores.epoch == epoch]
    docs = pd.concat([last[last.split == s].head(20) for s in ("member", "nonmember")])
    real = _csv("pearl_epochs__acr_scores").set_index("doc_id")
    rows = []
    for d, split in zip(docs.doc_id, docs.split):
        if d in real.index and epoch == 10:
            rows.append({"doc_id": d, **real.loc[d].to_dict()})
            continue
        found = d in compressible
        rows.append({"doc_id": d, "split": split, "epoch": epoch, "target_offset": 64, "target_tokens": 16,
                     "prompt_len": 15.0 if found else np.nan, "acr": round(16 / 15, 4) if found else 1.0,
                     "acr_is_bound": not found, "compressible": found})
    return pd.DataFrame(rows)


def _pearl_at(epoch: int = 10, alpha: float = 0.2) -> pd.DataFrame:
    s = _csv("pearl_epochs__pearl_scores")
    s = s[s.epoch == epoch]
    return s.assign(flagged=s.sensitivity > alpha)


def test_acr_overlap_inconclusive_on_ci71():
    """ci71's ACR (2 + 2 documents, epoch 10): PEARL flags 1, ACR 2, both 1: 4 documents decide nothing."""
    f = _judge("pearl_acr_overlap", _epochs(_csv("pearl_epochs__acr_scores")))
    _as_ci71("pearl_acr_overlap", f)
    assert "PEARL flags 1, ACR 2, both 1" in f.reason, f.reason


def test_acr_overlap_reproduced_at_full_shape():
    """ACR (full search, 20 + 20 documents) flags the 7 of PEARL's 14 flagged among them with the highest
    sensitivity (the paper's "half of them the same"; ci71's Psalms/49 is one) and, besides ci71's Psalms/55, none of
    the rest → 7/14 vs 1/26 of the rest: reproduced; our value 7/14, n 40."""
    p = _pearl_at()
    docs = pd.concat([p[p.split == s].head(20) for s in ("member", "nonmember")])
    flagged = docs[docs.flagged].sort_values("sensitivity", ascending=False)
    assert len(flagged) == 14 and flagged.doc_id.iloc[0] == "kjv/chapter/Psalms/49"
    f = _judge("pearl_acr_overlap", _epochs(_acr_full(set(flagged.doc_id.iloc[:7]))))
    assert f.verdict == "reproduced", f.reason
    assert (f.our_value, f.our_n) == (0.5, 40)
    assert "PEARL flags 14, ACR 8, both 7" in f.reason, f.reason


def test_acr_overlap_contradicted_at_full_shape():
    """ACR flags what PEARL does not: besides ci71's Psalms/49 (both), none of PEARL's other 13, every member PEARL
    leaves unflagged (ci71's Psalms/55 among them) and the 10 non-members after ci71's two (KJV prose the tiny model
    can be prompted into without having seen it) → 1/14 vs 16/26: contradicted; our value 1/14, n 40."""
    p = _pearl_at()
    docs = pd.concat([p[p.split == s].head(20) for s in ("member", "nonmember")])
    rest = set(docs[(docs.split == "member") & ~docs.flagged].doc_id)
    rest |= set(docs[docs.split == "nonmember"].doc_id.iloc[2:12])
    f = _judge("pearl_acr_overlap", _epochs(_acr_full(rest)))
    assert f.verdict == "contradicted", f.reason
    assert f.our_value == pytest.approx(1 / 14) and f.our_n == 40
    assert "PEARL flags 14, ACR 17, both 1" in f.reason, f.reason


def test_acr_overlap_not_testable_where_pearl_flags_nothing():
    """params.acr.epochs = [0] (a config the schema allows): ACR's last epoch is 0, where ci71's PEARL flags no
    document (members 0.00 → 0.69): no contrast, whatever ACR finds."""
    assert not _pearl_at(0).flagged.any()
    f = _judge("pearl_acr_overlap", _epochs(_acr_full({"kjv/chapter/Psalms/49"}, epoch=0)))
    assert f.verdict == "not testable here", f.reason
    assert "PEARL flags 0 of 40 documents" in f.reason


# -- pearl_wild_code_median_difference: the same per-document rows, completion scores of one source moved ----------

def test_code_median_difference_inconclusive_on_ci71():
    """ci71's completions: HumanEval's sensitivities do not lie above post-cutoff code's on either model (P 0.47 and
    0.45, 10 vs 10 documents): inconclusive, with the n per source at which the observed effect would be significant."""
    f = _judge("pearl_wild_code_median_difference", _wild(_wild_scores()))
    assert f.verdict == "inconclusive" and f.our_n == 10, f.reason
    assert f.our_value == pytest.approx((0.47 + 0.45) / 2)
    assert "gemma-3-270m: completion P(HumanEval > post_cutoff_code) 0.47 (n 10 vs 10)" in f.reason, f.reason
    assert f.n_needed is not None and f.n_needed > 10


def test_code_median_difference_reproduced_and_contradicted_from_ci71():
    """Only HumanEval's completion scores move, to values the run produced: every HumanEval completion at the run's
    highest completion score (above all post-cutoff code on both models) → reproduced; gemma's HumanEval completions
    at 0.0 (the score most of smollm's completions got) → gemma's lie below: contradicted. Summarization is untouched
    and never decides."""
    scores = _wild_scores()
    comp = scores.task_kind == "completion"
    top = scores[comp].sensitivity.max()
    he = comp & (scores.source == "humaneval")
    up = _judge("pearl_wild_code_median_difference", _wild(_lift(scores, he, top)))
    assert up.verdict == "reproduced" and up.our_value == pytest.approx(1.0), up.reason
    gemma = he & (scores.model == "gemma-3-270m")
    down = _judge("pearl_wild_code_median_difference", _wild(_lift(scores, gemma, 0.0)))
    assert down.verdict == "contradicted", down.reason
    assert "smollm2-135m-instruct: completion P(HumanEval > post_cutoff_code) 0.45" in down.reason
