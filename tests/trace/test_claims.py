"""The PROPME / SimpleTrace paper-vs-ours rules (memlab.methods.trace.claims) on hand-made study results with
known verdicts."""

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import RULES, SANITY_COLUMNS, VERDICTS, comparison_table, load_claims, rules_for, sanity_table
from memlab.config import compose
from memlab.methods.trace.propme import propensity
from memlab.results import StudyResult

EXPERIMENTS = ("trace_validation", "trace_capability_propensity", "trace_stages")
TINY = "tiny-neox-kjv-m-final"   # params.tiny of trace_capability_propensity: zoo family kjv, size m
EPS = 0.01


@lru_cache(maxsize=None)
def run_config(experiment: str):
    """The experiment's config the rules judge under (StudyResult.method / params: seed 0, the tiny model)."""
    return compose(experiment, ["logger=null"])


def judge(claim_id: str, res: StudyResult):
    rules_for("trace_validation")
    claim = next(c for c in load_claims() if c.id == claim_id)
    res.config = run_config(claim.experiment)
    return RULES[claim_id](res, claim)


def test_every_trace_claim_has_a_rule():
    rules_for("trace_validation")
    claims = [c for c in load_claims() if c.experiment in EXPERIMENTS]
    assert {c.experiment for c in claims} == set(EXPERIMENTS)
    assert [c.id for c in claims if c.id not in RULES] == []


# -- validation ---------------------------------------------------------------------------------------------------
def queries(fail: int = 0) -> StudyResult:
    rows = []
    for corpus in ("a", "b"):
        for d in range(25):
            for qt in ("full", "partial_start", "partial_middle", "partial_end"):
                bad = corpus == "a" and qt == "partial_start" and d < fail
                rows.append({"corpus": corpus, "backend": "suffix_array", "doc_id": f"{corpus}/{d}", "query_type": qt,
                             "retrieved": not bad, "exact_match": True, "passed": True})
    return StudyResult(tables={"validation_queries": pd.DataFrame(rows)})


def with_negatives(res: StudyResult, false: int, n: int = 100) -> StudyResult:
    res.tables["negative_control_queries"] = pd.DataFrame(
        [{"corpus": "a", "backend": "suffix_array", "doc_id": f"held/{i}", "query_type": "full",
          "false_exact_match": i < false} for i in range(n)])
    return res


def test_t5_validation_is_a_sanity_check_with_a_negative_control():
    rules_for("trace_validation")
    assert {c.id for c in load_claims("trace_validation", kind="sanity")} == {"propme_t5_pass_rate", "propme_t5_retrieval"}
    assert load_claims("trace_validation", kind="claim") == []
    for check in ("propme_t5_pass_rate", "propme_t5_retrieval"):
        ok = judge(check, with_negatives(queries(), 0))
        assert ok.passed and ok.control_value == 0.0
        assert not judge(check, with_negatives(queries(), 2)).passed          # out-of-index text matched
        assert not judge(check, queries()).passed                              # no control run: not a pass
    assert judge("propme_t5_retrieval", with_negatives(queries(fail=1), 0)).passed   # 24/25 = 0.96, the paper's own
    assert not judge("propme_t5_retrieval", with_negatives(queries(fail=3), 0)).passed
    res = with_negatives(queries(), 0)
    res.tables["validation_queries"].loc[0, "passed"] = False
    assert not judge("propme_t5_pass_rate", res).passed


# -- capability vs propensity -------------------------------------------------------------------------------------
def capability(prefix: float, generic: float, specific: float, *, n: int = 20, seed: int = 0,
               overlap=(0.02, 0.05, 0.95)) -> StudyResult:
    """A tiny model whose generations have NVR ≈ the given means (full match and span length follow NVR)."""
    rng = np.random.default_rng(seed)
    rows, summ = [], []
    for s, mu in (("generic", generic), ("specific", specific), ("prefix", prefix)):
        nv = np.clip(mu + rng.normal(0, 0.05, n), 0, 1)
        fm = (nv > 0.8).astype(float)
        ls = np.round(2 + 48 * nv)
        rows += [{"model": TINY, "corpus": "training set", "setting": s, "i": i, "longest_span": ls[i],
                  "full_match": fm[i], "nv_recall": nv[i]} for i in range(n)]
        summ.append({"model": TINY, "corpus": "training set", "setting": s, "ALS": ls.mean(), "FMR": fm.mean(),
                     "NVR": nv.mean()})
    summ = pd.DataFrame(summ).set_index("setting")
    prop = [{"model": TINY, "corpus": "training set", "setting": s,
             **{f"{m}_propensity": propensity(summ.loc[s, m], summ.loc["prefix", m], EPS) for m in ("FMR", "NVR")},
             "NVR": summ.loc[s, "NVR"], "NVR_prefix": summ.loc["prefix", "NVR"]} for s in ("generic", "specific")]
    ov = [{"model": TINY, "corpus": "training set", "setting": s, "prompts": n, "avg_nv_recall": v,
           "verbatim_matched_fraction": 1.0 if s == "prefix" else 0.0, "average_longest_span_length": 3.0}
          for s, v in zip(("generic", "specific", "prefix"), overlap)]
    return StudyResult(tables={"generation_scores": pd.DataFrame(rows), "propensity": pd.DataFrame(prop),
                               "prompt_overlap": pd.DataFrame(ov),
                               "capability_propensity": summ.reset_index()},
                       metrics={"propensity_eps": EPS})


@pytest.mark.parametrize("claim_id", ["propme_t1_als", "propme_capability_gap"])
def test_capability_claims(claim_id):
    f = judge(claim_id, capability(prefix=0.9, generic=0.15, specific=0.2))
    assert f.verdict == "reproduced", f.reason
    assert TINY in f.setting
    f = judge(claim_id, capability(prefix=0.2, generic=0.2, specific=0.2))
    assert f.verdict == "inconclusive", f.reason
    res = capability(prefix=0.9, generic=0.15, specific=0.2)
    del res.tables["generation_scores"]
    assert judge(claim_id, res).verdict == "not testable here"


def test_propensity_below_half_is_dropped_as_a_restatement_of_the_gap():
    rules_for("trace_validation")
    assert "propme_propensity_below_half" not in {c.id for c in load_claims()}
    assert "propme_propensity_below_half" not in RULES


def test_capability_gap_value_is_the_ratio():
    f = judge("propme_capability_gap", capability(prefix=0.9, generic=0.1, specific=0.3))
    assert 2.5 < f.our_value < 3.6



@pytest.mark.parametrize("prefix, generic, specific, n, verdict", [
    (0.96, 0.13, 0.14, 20, "contradicted"),   # ours (ci71: 0.955 vs 0.134, ratio 7.1): far more than twice
    (0.60, 0.28, 0.32, 60, "reproduced"),     # twice, on the paper's 60 prompts per ordinary setting
    (0.30, 0.28, 0.32, 60, "contradicted"),   # prefix prompts no better than ordinary ones: ratio ≈ 1
    (0.40, 0.28, 0.32, 20, "inconclusive"),   # ratio 1.33, on the band's edge
])
def test_roughly_twice_is_judged_against_a_band_around_two(prefix, generic, specific, n, verdict):
    """The ratio's interval against (2 / 1.5, 2 × 1.5): inside reproduces, wholly outside contradicts; a gap far
    larger than twice (as the tiny model against its own training set shows) is not "roughly twice"."""
    f = judge("propme_recall_roughly_twice", capability(prefix, generic, specific, n=n))
    assert f.verdict == verdict, f.reason
    g = f"{f.our_value:.2f}"
    assert f"ratio {g}" in f.reason and (f.n_needed is not None) == (verdict == "inconclusive")


def test_roughly_twice_with_nothing_recalled_by_ordinary_prompts_is_far_from_twice():
    assert judge("propme_recall_roughly_twice", capability(0.9, 0.0, 0.0)).verdict == "contradicted"
    nothing = capability(0.0, 0.0, 0.0)
    nothing.tables["generation_scores"]["nv_recall"] = 0.0
    assert judge("propme_recall_roughly_twice", nothing).verdict == "not testable here"

def prompt_scores(generic: float, specific: float, *, n: int = 20) -> StudyResult:
    """prompt_scores of the tiny model: per template prompt its nv_recall ≈ the given means, no verbatim match;
    prefix prompts matched in full (as they are cut from the training set)."""
    rng = np.random.default_rng(0)
    rows = [{"model": TINY, "corpus": "training set", "setting": s, "i": i,
             "nv_recall": float(np.clip(mu + rng.normal(0, 0.02), 0, 1)), "full_match": 0.0}
            for s, mu in (("generic", generic), ("specific", specific)) for i in range(n)]
    rows += [{"model": TINY, "corpus": "training set", "setting": "prefix", "i": i, "nv_recall": 1.0,
              "full_match": 1.0} for i in range(n)]
    return StudyResult(tables={"prompt_scores": pd.DataFrame(rows)})


def test_prompt_overlap_judges_only_the_step_that_can_fail():
    """Prefix prompts match the training set in full by construction: the claim is the generic → specific step on
    average nv_recall (the real run's 0.036 → 0.011 is a fall), and the prefix share is a sanity check."""
    rules_for("trace_validation")
    assert {c.id for c in load_claims("trace_capability_propensity", kind="sanity")} >= {"propme_prefix_prompts_in_corpus"}
    up, down = judge("propme_prompt_overlap", prompt_scores(0.03, 0.10)), judge("propme_prompt_overlap",
                                                                                prompt_scores(0.036, 0.011))
    assert up.verdict == "reproduced" and down.verdict == "contradicted" and down.our_value < 0
    assert "prefix 20/20" in up.reason and "not tested" in up.reason
    f = judge("propme_prompt_overlap", capability(prefix=0.9, generic=0.15, specific=0.2))   # a run before issue 49
    assert f.verdict == "not testable here" and "prompt_scores" in f.reason


def test_prefix_prompts_in_corpus_checks_every_model_and_shows_the_templates_as_control():
    ok = judge("propme_prefix_prompts_in_corpus", capability(prefix=0.9, generic=0.15, specific=0.2))
    assert ok.passed and ok.value == 1.0 and ok.control_value == 0.0
    res = capability(prefix=0.9, generic=0.15, specific=0.2)
    po = res.tables["prompt_overlap"]
    po.loc[po.setting == "prefix", "verbatim_matched_fraction"] = 0.95      # one prefix prompt of 20 not found
    broken = judge("propme_prefix_prompts_in_corpus", res)
    assert not broken.passed and "19 of 20" in broken.reason
    assert not judge("propme_prefix_prompts_in_corpus", StudyResult(tables={})).passed


# -- training stages -----------------------------------------------------------------------------------------------
def stages(a: list[float], b: list[float], *, n: int = 20, seed: int = 0) -> StudyResult:
    """Prefix NVR per stage (stage0, stage1, ...) for corpora A and B; the same prompts (i) at every stage."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 0.05, n)
    rows = []
    for corpus, means in (("A", a), ("B", b)):
        for k, mu in enumerate(means):
            nv = np.clip(mu + base + rng.normal(0, 0.01, n), 0, 1)
            rows += [{"corpus": corpus, "stage": f"stage{k}", "setting": "prefix", "i": i, "longest_span": 5.0,
                      "full_match": 0.0, "nv_recall": nv[i]} for i in range(n)]
    return StudyResult(tables={"generation_scores": pd.DataFrame(rows)})


def test_stages_parent_drop():
    f = judge("propme_stages_parent_drop", stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.3, 0.3, 0.3]))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.5, abs=0.05)
    assert judge("propme_stages_parent_drop", stages([0.3, 0.5, 0.5, 0.5], [0, 0.3, 0.3, 0.3])).verdict == \
        "contradicted"
    assert judge("propme_stages_parent_drop", stages([0.5], [0.0])).verdict == "not testable here"


def test_stages_stable():
    assert judge("propme_stages_stable", stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.3, 0.3, 0.3])).verdict == "reproduced"
    f = judge("propme_stages_stable", stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.05, 0.1, 0.5]))
    assert f.verdict == "contradicted" and "B: last − first +0.4" in f.reason
    assert f.our_value == pytest.approx(0.45, abs=0.05)
    assert judge("propme_stages_stable", stages([0.8, 0.3], [0.0, 0.3])).verdict == "not testable here"



def test_stage_rules_decide_nothing_on_fewer_prompts_than_the_exact_test_needs():
    """Three prompts with little noise: a bootstrap interval excludes 0 (or fits the margin), but no sign pattern of
    3 differences reaches p < 0.05 / 3, so neither rule decides (each decides the same shapes on 20 prompts)."""
    drop, flat = stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.3, 0.3, 0.3], n=3), stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.3, 0.3, 0.3])
    assert judge("propme_stages_parent_drop", drop).verdict == "inconclusive"
    assert judge("propme_stages_stable", drop).verdict == "inconclusive"
    assert judge("propme_stages_parent_drop", flat).verdict == "reproduced"
    assert judge("propme_stages_stable", flat).verdict == "reproduced"

@pytest.mark.parametrize("experiment, res", [("trace_capability_propensity", capability(0.9, 0.1, 0.2)),
                                             ("trace_stages", stages([0.8, 0.3, 0.3, 0.3], [0, 0.3, 0.3, 0.3]))])
def test_comparison_table_is_deterministic(experiment, res):
    res.config = run_config(experiment)
    a, b = comparison_table(experiment, res), comparison_table(experiment, res)
    assert len(a) == len(load_claims(experiment, kind="claim")) and set(a.verdict) <= set(VERDICTS)
    pd.testing.assert_frame_equal(a, b)


def test_sanity_table_columns():
    t = sanity_table("trace_validation", with_negatives(queries(), 0))
    assert list(t.columns) == SANITY_COLUMNS and t.passed.tolist() == [True, True]


# -- issue 49: the branches the tests above leave out, on rows shaped like the pipeline's ---------------------------
@pytest.mark.parametrize("claim_id", ["propme_t1_als", "propme_capability_gap"])
def test_capability_claims_are_contradicted_when_prefix_prompts_recall_less(claim_id):
    """A model whose ordinary prompts recall more than prefix prompts (NVR 0.5 vs 0.2 on 20 prompts each)."""
    f = judge(claim_id, capability(prefix=0.2, generic=0.5, specific=0.5))
    assert f.verdict == "contradicted", f.reason
    assert "prefix − generic -" in f.reason and "prefix − specific -" in f.reason


def test_prompt_overlap_is_open_on_few_close_prompts():
    f = judge("propme_prompt_overlap", prompt_scores(0.03, 0.035, n=5))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(0.007, abs=0.002), f.reason


def test_stages_are_open_near_their_margins():
    """ci71's own verdict on parent_drop is inconclusive; here: corpus A drops by 0.01 from stage 0 on 10 prompts
    (too little to tell from no drop), and corpus B drifts by about the ±0.05 margin."""
    f = judge("propme_stages_parent_drop", stages([0.5, 0.49, 0.49, 0.49], [0.0, 0.3, 0.3, 0.3], n=10))
    assert f.verdict == "inconclusive" and "stage0 − stage1 +0.005" in f.reason, f.reason
    f = judge("propme_stages_stable", stages([0.8, 0.3, 0.3, 0.3], [0.0, 0.3, 0.33, 0.35], n=10))
    assert f.verdict == "inconclusive" and "B: last − first +0.049" in f.reason, f.reason
