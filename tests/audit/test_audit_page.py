"""The audit page as a model owner reads it (issue 50): one readable table (counts as counts, rates rounded, no
"nan"), the figure shown once with its caption under it, the ground truth's absence said in words, and a zoo
checkpoint under test named by family and checkpoint rather than by its folder ``final``. tables/audit.csv stays the
full-precision frame."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from memlab.results import StudyResult  # noqa: E402
from tests.report.recording_report import recording_report  # noqa: E402

NOT_RUN = ("not measured: results/{}/default has no run (make reproduce, or python -m memlab.run "
           "experiment={})")
SAME = "not distinguishable from unseen text of its domain"
CONTROL = "known-unseen control (its FPR)"
NOT_JUDGED = "no same-domain control: not judged"


def _gt(measured: bool, experiment: str, recall=(26, 108), fpr=(7, 336)) -> dict:
    if not measured:
        return {"gt_rule": "the audit's own rule", "gt_recall": None, "gt_recall_low": None, "gt_recall_high": None,
                "gt_fpr": None, "gt_fpr_low": None, "gt_fpr_high": None, "gt_precision": None, "gt_n": None,
                "gt_run": NOT_RUN.format(experiment, experiment)}
    r, f = recall[0] / recall[1], fpr[0] / fpr[1]
    return {"gt_rule": "the audit's own rule", "gt_recall": r, "gt_recall_low": r - 0.07, "gt_recall_high": min(1, r + 0.09),
            "gt_fpr": f, "gt_fpr_low": f - 0.01, "gt_fpr_high": f + 0.02, "gt_precision": 0.79,
            "gt_n": f"{recall[1]} members + {fpr[1]} non-members", "gt_run": f"{experiment} [default] at d8fc0be"}


def _audit_csv(selfcheck: bool = True, trace: bool = True) -> pd.DataFrame:
    """Rows shaped like a real tables/audit.csv (its 27 columns), read back from CSV as the page's input would be:
    a judged row, a not-judged one, a control, an unavailable score, RECAP and SimpleTrace."""
    judged = {"control": "post_cutoff_code", "control_value": 0.0, "control_k": 0, "control_n": 1, "diff": 1.0,
              "diff_low": -0.030547, "diff_high": 1.0}
    rows = [
        {"method": "MIA (loss)", "finding": "humaneval: flagged", "rule": "loss > -3.398", "value": 1.0,
         "ci_low": 0.34238, "ci_high": 1.0, "k": 2, "n": 2, "note": SAME, **_gt(selfcheck, "audit_selfcheck"),
         **judged, "conclusion": SAME},
        {"method": "MIA (loss)", "finding": "kjv: not judged", "rule": "loss > -3.398", "value": None,
         "ci_low": None, "ci_high": None, "k": None, "n": None, "note": NOT_JUDGED,
         **_gt(selfcheck, "audit_selfcheck"), "control": None, "conclusion": NOT_JUDGED},
        {"method": "MIA (loss)", "finding": "post_cutoff_code: known-unseen (FPR)", "rule": "loss > -3.398",
         "value": 0.0, "ci_low": 0.0, "ci_high": 0.793451, "k": 0, "n": 1, "note": CONTROL,
         **_gt(selfcheck, "audit_selfcheck"), "control": "post_cutoff_code", "conclusion": CONTROL},
        {"method": "MIA (min_k_pp)", "finding": "unavailable", "rule": "—", "value": None, "ci_low": None,
         "ci_high": None, "k": None, "n": None, "note": "the backend gives no score for it",
         **_gt(selfcheck, "audit_selfcheck")},
        {"method": "RECAP", "finding": "public_domain: books extracted", "rule": "≥ 1 passage", "value": 0.0,
         "ci_low": 0.0, "ci_high": 0.79, "k": 0, "n": 1, "note": "ROUGE-L 0.260 (metadata-echo floor 0.160)",
         **_gt(selfcheck, "audit_selfcheck", (5, 12), (1, 10)), "control": "non_training", "control_value": 0.0,
         "control_k": 0, "control_n": 1, "diff": 0.0, "diff_low": -0.79, "diff_high": 0.79, "conclusion": SAME},
        {"method": "SimpleTrace", "finding": "kjv, generic prompts: full matches", "rule": "a span found in kjv",
         "value": 0.0, "ci_low": 0.0, "ci_high": 0.65762, "k": 0, "n": 2, "note": "ALS 3.5 tokens",
         **_gt(trace, "trace_validation", (400, 400), (0, 400))},
    ]
    columns = ["method", "finding", "rule", "value", "ci_low", "ci_high", "k", "n", "note", "gt_rule", "gt_recall",
               "gt_recall_low", "gt_recall_high", "gt_fpr", "gt_fpr_low", "gt_fpr_high", "gt_precision", "gt_n",
               "gt_run", "control", "control_value", "control_k", "control_n", "diff", "diff_low", "diff_high",
               "conclusion"]
    return pd.read_csv(io.StringIO(pd.DataFrame(rows, columns=columns).to_csv(index=False)))



def test_a_table_and_a_figure_of_one_name_are_each_shown_once(tmp_path, monkeypatch):
    """The audit (like recap_table3, trace_stages) shows a table and a figure both named ``audit``: the page showed
    the table twice and never the figure."""
    rep, shown = recording_report(tmp_path, monkeypatch)
    res = StudyResult()
    df = pd.DataFrame({"a": [1, 2]})
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0.1, 0.3, 0.2])
    res.table("audit", df)
    res.figure("audit", fig)
    rep.save(res)
    assert len(shown) == 2 and shown[0] is df and isinstance(shown[1], tuple) and shown[1] == ("png", "audit.png")
    plt.close("all")


def test_the_page_shows_one_readable_table_and_the_figure_with_its_caption(tmp_path, monkeypatch):
    from memlab.audit.plots import CAPTION
    from memlab.audit.study import summary_result

    summary = _audit_csv()
    rep, shown = recording_report(tmp_path, monkeypatch)
    rep.save(summary_result(summary, "tiny-neox-kjv-m-final"))
    table, png, caption = shown
    assert png == ("png", "audit.png") and caption[0] == "text" and CAPTION in caption[1]
    html = table._repr_html_()
    assert html.count("<table") == 1 and "nan" not in html.lower() and "NaN" not in repr(table)
    # the CSV is the frame, every column at full precision, whatever the page shows
    assert (tmp_path / "tables" / "audit.csv").read_text() == summary.to_csv(index=False)
    plt.close("all")


def test_the_readable_table_says_counts_rates_controls_and_conclusions_in_words():
    from memlab.audit.page import owner_table

    t = owner_table(_audit_csv()).frame
    judged, not_judged, control, unavailable, recap, trace = t.to_dict("records")
    assert judged["found on this model"] == "2/2 (100 %)"
    assert judged["same-domain control"] == "post_cutoff_code: 0/1 (0 %)"
    assert judged["difference (95 % CI)"] == "+100 pp (−3.1 to +100)"
    assert judged["conclusion"] == SAME
    assert judged["zoo recall (members)"].startswith("24.1 % (") and judged["zoo FPR (non-members)"].startswith("2.1 %")
    assert judged["zoo n / why none"] == "108 members + 336 non-members"
    assert not_judged["found on this model"] == "—" and not_judged["conclusion"] == NOT_JUDGED
    assert control["found on this model"] == "0/1 (0 %)" and control["same-domain control"] == "this row is the control"
    assert unavailable["conclusion"] == "the backend gives no score for it"
    assert recap["conclusion"] == f"{SAME}; ROUGE-L 0.260 (metadata-echo floor 0.160)"
    assert trace["found on this model"] == "0/2 (0 %)" and trace["zoo recall (members)"] == "100 % (93–100 %)"
    text = t.to_string()
    assert "nan" not in text.lower() and ".0/" not in text and "/2.0" not in text


def test_a_missing_ground_truth_is_said_in_full_in_the_table():
    from memlab.audit.page import owner_table

    t = owner_table(_audit_csv(selfcheck=False)).frame
    missing = t[t.method != "SimpleTrace"]
    assert set(missing["zoo recall (members)"]) == set(missing["zoo FPR (non-members)"]) == {"not measured"}
    assert set(missing["zoo n / why none"]) == {NOT_RUN.format("audit_selfcheck", "audit_selfcheck")}
    assert "(make reproduce, or python -m memlab.run experiment=audit_selfcheck)" in owner_table(
        _audit_csv(selfcheck=False))._repr_html_()


def _right_panel_texts(summary) -> list[str]:
    from memlab.audit.plots import findings

    fig = findings(summary, "m")
    texts = [t.get_text() for t in fig.axes[1].texts]
    plt.close(fig)
    return texts


def test_the_figure_says_where_the_ground_truth_was_not_measured():
    # the self-check missing, SimpleTrace's validation present: each row without it says so (it was blank)
    texts = _right_panel_texts(_audit_csv(selfcheck=False))
    assert len(texts) == 5 and all(t == "not measured — run `make reproduce` (audit_selfcheck)" for t in texts)
    # nothing measured: one sentence naming both runs to make
    (whole,) = _right_panel_texts(_audit_csv(selfcheck=False, trace=False))
    assert "not measured" in whole and "(audit_selfcheck)" in whole and "(trace_validation)" in whole
    assert _right_panel_texts(_audit_csv()) == []


@pytest.mark.parametrize("epoch, name", [("final", "tiny-neox-kjv-m-final"), ("epoch-007", "tiny-neox-kjv-m-e7")])
def test_a_zoo_checkpoint_under_test_is_named_by_family_and_checkpoint(tmp_path, epoch, name):
    from memlab.config import compose
    from memlab.model_use import check_model_override, derived_name, target_nodes

    folder = tmp_path / "models" / "tiny-neox" / "kjv" / "m" / epoch
    folder.mkdir(parents=True)
    overrides = [f"model.path={folder}"]
    cfg = compose("audit", overrides)
    check_model_override(cfg, overrides)  # what the runner does before the run
    assert [n["name"] for n in target_nodes(cfg)] == [name]
    # anything else keeps its name: an HF folder (even one called final), a GGUF file, a served id
    (tmp_path / "runs" / "final").mkdir(parents=True)
    assert derived_name({"path": str(tmp_path / "runs" / "final")}) == "final"
    assert derived_name({"path": str(tmp_path / "my-model")}) == "my-model"
    assert derived_name({"path": str(folder.parent), "gguf_file": "x.Q4_1.gguf"}) == "x.Q4_1"
    assert derived_name({"backend": "openai", "model_id": "org/served-7b"}) == "served-7b"
