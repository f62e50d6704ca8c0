"""Every registered rule decides both ways (issue 27): on synthetic inputs (tests/core/rule_inputs/) each claim's
rule says reproduced when the claim clearly holds, contradicted when its reverse clearly holds, and inconclusive on
too few units; each sanity check passes on a working setup and fails when its control or its positive side breaks.
A rule with no synthetic inputs fails the test, so a new rule must come with them."""

import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest

from memlab.comparison import RULES, VERDICTS, load_claims, rules_for
from memlab.config import compose

HERE = Path(__file__).parent / "rule_inputs"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"rule_inputs_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODULES = [_load(name) for name in ("pearl", "recap", "trace")]
INPUTS = {k: v for mod in MODULES for k, v in mod.INPUTS.items()}
# config overrides a module's inputs are judged under (its OVERRIDES), by claim id
OVERRIDES = {k: tuple(getattr(mod, "OVERRIDES", ())) for mod in MODULES for k in mod.INPUTS}
for experiment in ("pearl_epochs", "recap_table3", "trace_validation", "memorization_curve"):
    rules_for(experiment)
CLAIMS = {c.id: c for c in load_claims()}
JUDGED = sorted(i for i, c in CLAIMS.items() if c.kind == "claim")
CHECKS = sorted(i for i, c in CLAIMS.items() if c.kind == "sanity")


@lru_cache(maxsize=None)
def run_config(experiment: str, *overrides: str):
    """The composed config of ``experiment`` (the settings a rule judges under: StudyResult.method / params)."""
    return compose(experiment, ["logger=null", *overrides])


def judge(claim_id: str, case: str, *overrides: str):
    res = INPUTS[claim_id](case)
    res.config = run_config(CLAIMS[claim_id].experiment, *OVERRIDES[claim_id], *overrides)
    return RULES[claim_id](res, CLAIMS[claim_id])


def test_every_rule_and_claim_has_synthetic_inputs():
    assert sorted(set(RULES) - set(INPUTS)) == []
    assert sorted(set(CLAIMS) - set(RULES)) == []


@pytest.mark.parametrize("claim_id", JUDGED)
@pytest.mark.parametrize("case, verdict", [("for", "reproduced"), ("against", "contradicted"),
                                           ("unclear", "inconclusive")])
def test_rule_decides_each_way(claim_id, case, verdict):
    f = judge(claim_id, case)
    assert f.verdict == verdict, f"{claim_id} on '{case}' inputs: {f.verdict} ({f.reason})"
    assert f.our_n is not None and f.our_n > 0
    assert f.statistic
    if verdict == "inconclusive":
        assert f.n_needed is None or f.n_needed > f.our_n


@pytest.mark.parametrize("claim_id", JUDGED)
def test_reversing_the_effect_changes_the_verdict(claim_id):
    assert judge(claim_id, "for").verdict != judge(claim_id, "against").verdict


@pytest.mark.parametrize("check_id", CHECKS)
def test_sanity_check_passes_and_fails(check_id):
    ok, broken = judge(check_id, "for"), judge(check_id, "against")
    assert ok.passed is True and broken.passed is False, (ok.reason, broken.reason)
    assert ok.control


# issue 49: RECAP ≥ DSP + Jailbreak ≥ DSP holds per book by construction, so these claims' inputs must respect it
# (rows the pipeline can produce) and what is left to decide either way is DSP vs Prefix-Probing and the gains' size
LADDER_CHECKS = ("recap_t3_feedback_keeps_best", "recap_t3_jailbreak_keeps_dsp")
LADDER_CLAIMS = [i for i in JUDGED if i.startswith(("recap_t3_order", "recap_t3_jailbreak_gain", "recap_gain_over_dsp"))]


@pytest.mark.parametrize("claim_id", LADDER_CLAIMS)
@pytest.mark.parametrize("case", ["for", "against", "unclear"])
def test_recap_ladder_claims_are_decided_on_rows_the_pipeline_can_produce(claim_id, case):
    res = INPUTS[claim_id](case)
    res.config = run_config(CLAIMS[claim_id].experiment, *OVERRIDES[claim_id])
    for check_id in LADDER_CHECKS:
        k = RULES[check_id](res, CLAIMS[check_id])
        assert k.passed is True and k.value == 1.0, (claim_id, case, k.reason)


def test_verdict_vocabulary():
    assert VERDICTS == ("reproduced", "contradicted", "inconclusive", "not testable here")


def test_report_writes_sanity_checks_apart_from_claims(tmp_path):
    import pandas as pd
    from omegaconf import OmegaConf

    from memlab.config import compose
    from memlab.report import Report

    cfg = OmegaConf.to_container(compose("trace_validation", ["logger=null"]), resolve=True)
    cfg["run"] = {"key": "t", "out_dir": str(tmp_path / "run")}
    Report(cfg, experiment="trace_validation").save(INPUTS["propme_t5_pass_rate"]("for"))
    tables = tmp_path / "run" / "tables"
    sanity = pd.read_csv(tables / "sanity.csv")
    assert set(sanity.check_id) == {"propme_t5_pass_rate", "propme_t5_retrieval"} and sanity.passed.all()
    assert not (tables / "comparison.csv").exists()     # tracer validation is no claim of the paper's to count
