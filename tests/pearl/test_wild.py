"""The wild study's per-domain calibration: each domain's α from its own known-unseen source (hand-made frames), and
the experiment's params naming one calibration source per domain."""

import pandas as pd
import pytest

from memlab.config import compose
from memlab.errors import ConfigError
from memlab.methods.pearl import tables as T
from memlab.report import Report

CAL = {"text": "release_notes", "code": "post_cutoff_code"}
# (source, domain, half, sensitivity); "half" as study.with_halves writes it
ROWS = [("post_cutoff_code", "code", "calibration", 0.30), ("post_cutoff_code", "code", "calibration", 0.10),
        ("post_cutoff_code", "code", "evaluation", 0.05), ("post_cutoff_code", "code", "evaluation", 0.40),
        ("humaneval", "code", "member", 0.50), ("humaneval", "code", "member", 0.35),
        ("humaneval", "code", "member", 0.20),
        ("release_notes", "text", "calibration", 0.02), ("release_notes", "text", "calibration", 0.01),
        ("release_notes", "text", "evaluation", 0.00), ("release_notes", "text", "evaluation", 0.03),
        ("kjv", "text", "member", 0.50), ("kjv", "text", "member", 0.025), ("kjv", "text", "member", 0.0),
        ("fortunes", "text", "member", 0.015)]


def _frame():
    df = pd.DataFrame(ROWS, columns=["source", "domain", "half", "sensitivity"])
    df["split"] = ["nonmember" if s in CAL.values() else "unknown" for s in df.source]
    df["model"], df["task_kind"] = "m", "completion"
    return df


def test_each_domain_is_calibrated_on_its_own_unseen_source():
    df = _frame()
    cal = T.domain_calibration_table(df, [0.0], CAL, "sensitivity")
    by = {r.domain: r for r in cal.itertuples()}
    assert by["code"].calibration_source == "post_cutoff_code" and by["text"].calibration_source == "release_notes"
    # α at FPR 0 = the largest score of the domain's calibration half (not of the other domain's, nor of all)
    assert by["code"].alpha == pytest.approx(0.30) and by["text"].alpha == pytest.approx(0.02)
    assert by["code"].fpr_evaluation == 0.5 and by["code"].n_evaluation == 2 and by["code"].n_calibration == 2
    assert by["code"].n_others == 3 and by["code"].others_flagged_share == pytest.approx(2 / 3)  # humaneval only
    assert by["text"].n_others == 4  # kjv + fortunes

    flags = T.calibrated_flags_table(df, cal, "sensitivity")
    got = {(r.domain, r.source): (r.flagged, r.n) for r in flags.itertuples()}
    assert got == {("code", "humaneval"): (2, 3), ("code", "post_cutoff_code"): (1, 2),  # evaluation half only
                   ("text", "fortunes"): (0, 1), ("text", "kjv"): (2, 3), ("text", "release_notes"): (1, 2)}
    assert set(flags.calibration_source[flags.domain == "code"]) == {"post_cutoff_code"}


def test_mann_whitney_compares_each_source_with_its_domains_unseen_set():
    mw = T.mann_whitney_table(_frame(), CAL, "sensitivity")
    got = {r.source: (r.domain, r.unseen_source, r.n_seen, r.n_unseen) for r in mw.itertuples()}
    assert got == {"humaneval": ("code", "post_cutoff_code", 3, 4), "kjv": ("text", "release_notes", 3, 4),
                   "fortunes": ("text", "release_notes", 1, 4)}
    he = mw[mw.source == "humaneval"].iloc[0]
    assert he.median_unseen == pytest.approx(0.2) and he.median_seen == pytest.approx(0.35)


def test_a_calibration_source_without_rows_is_refused():
    df = _frame()
    with pytest.raises(ConfigError, match="domain 'code' has no rows"):
        T.domain_calibration_table(df[df.source != "post_cutoff_code"], [0.1], CAL, "sensitivity")


@pytest.mark.parametrize("profile", ["embedded", "full"])
def test_wild_params_name_one_calibration_source_per_domain(profile):
    cfg = compose("pearl_wild", [f"profile={profile}"])
    p = Report.typed_node(cfg, "params")
    assert p.calibration_sources == CAL
    assert p.sources["post_cutoff_code"].domain == "code" and p.sources["post_cutoff_code"].corpus == "post_cutoff_code"
    assert p.sources["post_cutoff_code"].n == (10 if profile == "embedded" else 100)
    with pytest.raises(ConfigError, match="calibration_sources.code must name a source of domain 'code'"):
        Report.typed_node(compose("pearl_wild", ["params.calibration_sources.code=release_notes"]), "params")


def test_the_decision_score_is_the_one_every_wild_table_thresholds():
    """method.decision_score=gfd: flag counts, calibration and completion-vs-summarization all read ``gfd``."""
    from memlab.methods.pearl.study import completion_vs_summarization

    df = _frame()
    df["gfd"] = 1.0 - df.sensitivity  # the opposite order: any table still reading sensitivity disagrees
    flags = T.flag_table(df, [0.5], by=["source"], score="gfd").set_index("source")
    assert flags.loc["kjv", "flagged"] == 2 and flags.loc["humaneval", "flagged"] == 2
    cal = T.domain_calibration_table(df, [0.0], CAL, "gfd")
    assert set(cal.score) == {"gfd"}
    both = pd.concat([df, df.assign(task_kind="summarization")], ignore_index=True)
    both["doc_id"] = list(range(len(df))) * 2
    row = completion_vs_summarization(both, 0.5, "gfd").set_index("source").loc["kjv"]
    assert (row.completion, row.summarization, row.both) == (2, 2, 2)
