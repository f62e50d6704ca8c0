"""The PEARL rules judge a run under the settings it used (issue 30): a document is flagged iff the run's
``method.decision_score`` exceeds the run's ``method.alpha`` (read from its typed config), never a threshold or score
hard-coded in the rules; a result without its config is refused in one line."""

from functools import lru_cache

import pandas as pd
import pytest
from omegaconf import OmegaConf

from memlab.comparison import RULES, load_claims, rules_for
from memlab.config import compose
from memlab.errors import ConfigError
from memlab.results import StudyResult, load_result

rules_for("pearl_epochs")
CLAIMS = {c.id: c for c in load_claims()}
FLAGGING = ("pearl_epochs_members_vs_nonmembers", "pearl_epochs_members_grow", "pearl_calibration_low_fpr")


@lru_cache(maxsize=None)
def run_config(experiment: str, *overrides: str):
    return compose(experiment, ["logger=null", *overrides])


def scores(member: float, nonmember: float, n: int) -> pd.DataFrame:
    """pearl_scores at epochs 0 and 10: members score ``member`` at the last epoch (0.0 before), non-members
    ``nonmember`` throughout (all of them in the evaluation half); gfd is 0 everywhere (a run deciding on gfd flags
    nothing)."""
    rows = [{"kind": "bitflip", "epoch": e, "split": split, "doc_id": f"{split}/{i}",
             "half": "evaluation" if split == "nonmember" else None,
             "sensitivity": (member if e == 10 else 0.0) if split == "member" else nonmember, "gfd": 0.0}
            for e in (0, 10) for split in ("member", "nonmember") for i in range(n)]
    return pd.DataFrame(rows)


def judge(claim_id: str, table: pd.DataFrame, *overrides: str):
    res = StudyResult(tables={"pearl_scores": table}, config=run_config(CLAIMS[claim_id].experiment, *overrides))
    return RULES[claim_id](res, CLAIMS[claim_id])


def test_the_default_run_decides_at_the_papers_tau_b():
    m = run_config("pearl_epochs")
    assert (OmegaConf.select(m, "method.alpha"), OmegaConf.select(m, "method.decision_score")) == (0.2, "sensitivity")


# at 0.3 no member is flagged: 0 of 100 vs 0 of 100 lies below the "far more" gap (contradicted), and no member
# changes between epochs, so a rise cannot be told
@pytest.mark.parametrize("claim_id, none_flagged", [("pearl_epochs_members_vs_nonmembers", "contradicted"),
                                                    ("pearl_epochs_members_grow", "inconclusive")])
def test_members_are_flagged_at_the_runs_own_alpha(claim_id, none_flagged):
    table = scores(member=0.25, nonmember=0.0, n=100)     # above 0.2, below 0.3
    at_02, at_03 = judge(claim_id, table), judge(claim_id, table, "method.alpha=0.3")
    assert (at_02.our_value, at_02.verdict) == (1.0, "reproduced")      # every member flagged (rises 0 → 1)
    assert (at_03.our_value, at_03.verdict) == (0.0, none_flagged)


def test_the_false_positive_rate_is_taken_at_the_runs_alpha():
    table = scores(member=0.0, nonmember=0.25, n=200)     # every non-member above 0.2, none above 0.3
    at_02, at_03 = judge("pearl_calibration_low_fpr", table), judge("pearl_calibration_low_fpr", table,
                                                                   "method.alpha=0.3")
    assert (at_02.our_value, at_02.verdict) == (1.0, "contradicted")
    assert (at_03.our_value, at_03.verdict) == (0.0, "reproduced")
    assert "> 0.3" in at_03.statistic


def test_the_papers_alpha_is_judged_on_every_non_member_and_no_member():
    """τ_b = 0.2 is the paper's, fixed before our data: both non-member halves are out of sample for it; members
    (all flagged here) never count as false positives."""
    table = scores(member=0.25, nonmember=0.0, n=40)
    table = table[table.epoch == 10].copy()
    non = table.split == "nonmember"
    table.loc[non, "half"] = ["calibration" if i % 2 else "evaluation" for i in range(int(non.sum()))]
    f = judge("pearl_calibration_low_fpr", table)
    assert (f.our_value, f.our_n, f.verdict) == (0.0, 40, "reproduced")   # 0 of 40: Wilson bound 0.088 < 0.10
    half = judge("pearl_calibration_low_fpr", table[~non | (table.half == "evaluation")])
    assert (half.our_n, half.verdict) == (20, "inconclusive")             # 0 of 20: bound 0.16, undecided


def test_a_run_deciding_on_gfd_is_judged_on_gfd():
    table = scores(member=0.25, nonmember=0.0, n=100)
    f = judge("pearl_epochs_members_vs_nonmembers", table, "method.decision_score=gfd")
    assert f.our_value == 0.0 and f.verdict != "reproduced"


@pytest.mark.parametrize("claim_id", FLAGGING)
def test_a_result_without_its_config_is_refused_in_one_line(claim_id):
    with pytest.raises(ConfigError) as err:
        RULES[claim_id](StudyResult(tables={"pearl_scores": scores(0.25, 0.0, 10)}), CLAIMS[claim_id])
    assert "no run config" in str(err.value) and "\n" not in str(err.value)


def test_an_old_run_folder_without_config_yaml_is_refused(tmp_path):
    (tmp_path / "tables").mkdir()
    scores(0.25, 0.0, 4).to_csv(tmp_path / "tables" / "pearl_scores.csv", index=False)
    with pytest.raises(ConfigError, match="no config.yaml"):
        load_result(tmp_path)


def test_a_loaded_run_folder_is_judged_at_the_alpha_in_its_config_yaml(tmp_path):
    (tmp_path / "tables").mkdir()
    scores(0.25, 0.0, 100).to_csv(tmp_path / "tables" / "pearl_scores.csv", index=False)
    cfg = OmegaConf.to_container(run_config("pearl_epochs", "method.alpha=0.3"), resolve=True)
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(cfg)))
    res = load_result(tmp_path)
    assert res.method.alpha == 0.3
    c = CLAIMS["pearl_epochs_members_vs_nonmembers"]
    assert RULES[c.id](res, c).our_value == 0.0


def test_report_save_judges_under_the_runs_config(tmp_path):
    from memlab.report import Report

    cfg = OmegaConf.to_container(run_config("pearl_epochs", "method.alpha=0.3"), resolve=True)
    cfg["run"] = {"key": "t", "out_dir": str(tmp_path / "run")}
    Report(cfg, experiment="pearl_epochs").save(StudyResult(tables={"pearl_scores": scores(0.25, 0.0, 100)}))
    cmp = pd.read_csv(tmp_path / "run" / "tables" / "comparison.csv").set_index("claim_id")
    row = cmp.loc["pearl_epochs_members_vs_nonmembers"]
    assert (row.our_value, row.verdict) == (0.0, "contradicted")   # judged at 0.3 (no gap); at 0.2: 1.0, reproduced


@pytest.mark.parametrize("claim_id", FLAGGING)
def test_an_undecided_ground_truth_claim_names_a_bigger_family_not_profile_full(claim_id):
    """profile=full reads the same zoo family: its command would not decide, so the row names the step that would."""
    from memlab.comparison import _with_next_step

    f = judge(claim_id, scores(member=0.25, nonmember=0.0, n=3))
    assert f.verdict == "inconclusive"
    step = _with_next_step(CLAIMS[claim_id].experiment, f)
    assert "method.study.family=<it>" in step and "profile=full adds none" in step
    assert "36 + 66 documents of the family 'pearl'" in step      # the run's own config, not a constant
    assert not step.endswith("profile=full")
