"""Synthetic study results for the PEARL rules and the demo check: ``INPUTS[claim_id](case)`` with case "for" (the
claim holds, clearly), "against" (the reverse holds, clearly) or "unclear" (too few documents to tell)."""

import numpy as np
import pandas as pd

from memlab.results import StudyResult

INPUTS = {}


def inputs(claim_id):
    def register(fn):
        INPUTS[claim_id] = fn
        return fn
    return register


def _flags(n: int, share: float) -> np.ndarray:
    return np.arange(n) < round(share * n)


def _scores(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["kind", "epoch", "split", "doc_id", "sensitivity", "half"])


def _epochs(mem: dict, non: dict, n_mem: int, n_non: int) -> pd.DataFrame:
    """pearl_scores: {epoch: flagged share} of members and non-members (flagged = sensitivity 0.5, else 0.05)."""
    rows = []
    for split, shares, n in (("member", mem, n_mem), ("nonmember", non, n_non)):
        for e, share in shares.items():
            rows += [("bitflip", e, split, f"{split}/{i}", 0.5 if f else 0.05, "evaluation")
                     for i, f in enumerate(_flags(n, share))]
    return _scores(rows)


@inputs("pearl_epochs_members_vs_nonmembers")
def members_vs_nonmembers(case):
    m, non, n = {"for": (0.6, 0.0, 200), "against": (0.05, 0.4, 200), "unclear": (2 / 6, 0.0, 6)}[case]
    return StudyResult(tables={"pearl_scores": _epochs({0: 0, 10: m}, {0: 0, 10: non}, n, n)})


@inputs("pearl_epochs_members_grow")
def members_grow(case):
    first, last, n = {"for": (0.1, 0.6, 100), "against": (0.6, 0.1, 100), "unclear": (0.0, 2 / 6, 6)}[case]
    return StudyResult(tables={"pearl_scores": _epochs({0: first, 10: last}, {0: 0.0, 10: 0.0}, n, n)})


@inputs("pearl_sizes_grow_with_size")
def sizes(case):
    shares, n = {"for": ((0.1, 0.4, 0.7), 200), "against": ((0.7, 0.4, 0.1), 200),
                 "unclear": ((0.0, 2 / 6, 2 / 6), 6)}[case]
    rows = [{"size": s, "split": "member", "doc_id": f"m{i}", "sensitivity": 0.5 if f else 0.05}
            for s, share in zip(("s", "m", "l"), shares) for i, f in enumerate(_flags(n, share))]
    return StudyResult(tables={"pearl_scores": pd.DataFrame(rows)})



@inputs("pearl_epochs_tau04_false_positives")
def tau04(case):
    """Non-members at the last epoch: none above τ_b = 0.4 on many ("for"), a quarter above it ("against"), none of
    three ("unclear"); flagged documents score 0.5, the rest 0.05."""
    share, n = {"for": (0.0, 400), "against": (0.25, 200), "unclear": (0.0, 3)}[case]
    return StudyResult(tables={"pearl_scores": _epochs({0: 0.0, 10: 0.5}, {0: 0.0, 10: share}, n, n)})

@inputs("pearl_calibration_low_fpr")
def calibration(case):
    share, n = {"for": (0.0, 200), "against": (0.5, 200), "unclear": (0.0, 3)}[case]
    rows = [("bitflip", 0, "nonmember", f"n{i}", 0.5 if f else 0.05, "evaluation") for i, f in enumerate(_flags(n, share))]
    return StudyResult(tables={"pearl_scores": _scores(rows)})


def _mia(first_non: float, last_non: float, n: int, member_first: float = 99.0) -> pd.DataFrame:
    return pd.DataFrame([{"epoch": e, "member_mia_pct": mm, "member_memo_pct": 10.0, "member_both_pct": 5.0,
                          "member_n": n, "nonmember_mia_pct": nm, "nonmember_n": n}
                         for e, mm, nm in ((0, member_first, first_non), (10, 80.0, last_non))])


@inputs("pearl_mia_nonmember_rate_falls")
def mia_falls(case):
    """The same held-out non-members at epochs 0 and 10: a share flagged at each (−perplexity above the fixed
    threshold −50), plus calibration-half documents that must be left out."""
    a, b, n = {"for": (70.0, 5.0, 100), "against": (5.0, 70.0, 100), "unclear": (100 / 3, 0.0, 3)}[case]
    rows = [{"doc_id": f"n{i}", "split": "nonmember", "half": "evaluation", "epoch": e,
             "neg_perplexity": -10.0 if f else -90.0}
            for e, share in ((0, a), (10, b)) for i, f in enumerate(_flags(n, share / 100))]
    rows += [{"doc_id": f"c{i}", "split": "nonmember", "half": "calibration", "epoch": e, "neg_perplexity": -10.0}
             for e in (0, 10) for i in range(50)]
    fixed = pd.DataFrame([{"score": "neg_perplexity", "threshold": -50.0, "fitted_on": "calibration half"}])
    return StudyResult(tables={"mia_vs_memorization": _mia(a, b, n), "scores_by_epoch": pd.DataFrame(rows),
                               "fixed_thresholds": fixed})



@inputs("pearl_mia_not_all_members_memorized")
def not_all_memorized(case):
    """At the last epoch the MIA flags 80 % of n members; PEARL flags 10 % of them ("for": most MIA-flagged members
    not memorized), all of them ("against"), or n = 3 ("unclear")."""
    both, n = {"for": (8.0, 200), "against": (80.0, 200), "unclear": (200 / 3, 3)}[case]
    t = _mia(10.0, 5.0, n)
    t.loc[t.epoch == 10, ["member_mia_pct", "member_memo_pct", "member_both_pct"]] = (
        (80.0, both, both) if n > 3 else (100.0, both, both))
    return StudyResult(tables={"mia_vs_memorization": t})

@inputs("pearl_mia_memo_subset")
def mia_epoch0(case):
    member = {"for": 99.0, "against": 10.0}[case]
    return StudyResult(tables={"mia_vs_memorization": _mia(10.0, 5.0, 100, member_first=member)})


@inputs("pearl_wild_code_over_unseen")
def wild_code(case):
    he, post, n = {"for": (60, 5, 100), "against": (5, 60, 100), "unclear": (2, 1, 5)}[case]
    rows = [{"model": m, "task_kind": t, "domain": "code", "source": s, "flagged_sensitivity>0.14": k,
             "flagged_sensitivity>0.24": 0, "n": n}
            for m in ("a", "b") for t in ("completion", "summarization") for s, k in (("humaneval", he), ("post", post))]
    mw = pd.DataFrame([{"model": "a", "task_kind": "completion", "domain": "code", "source": "humaneval",
                        "unseen_source": "post", "p_one_sided": 0.5}])
    return StudyResult(tables={"flagged_counts_fixed_thresholds": pd.DataFrame(rows), "seen_vs_unseen_mann_whitney": mw})


@inputs("pearl_wild_task_dependence")
def task_dependence(case):
    """Two models, each task on its own score scale (summarization's scores are 10× completion's) and its own
    calibrated α: per model ``comp`` documents flagged under completion only, ``summ`` under summarization only,
    ``both`` under both, the rest under neither; plus calibration-half documents (flagged under every task: they must
    be left out)."""
    comp, summ, both, n = {"for": (50, 10, 6, 100), "against": (10, 50, 6, 100), "unclear": (3, 2, 1, 10)}[case]
    rows, cal = [], []
    for m in ("a", "b"):
        for task, scale, flagged in (("completion", 1.0, comp), ("summarization", 10.0, summ)):
            cal += [{"model": m, "task_kind": task, "domain": "code", "score": "sensitivity", "target_fpr": f,
                     "alpha": 0.1 * scale} for f in (0.2, 0.1, 0.0)]
            for i in range(n):
                on = i < both or (both <= i < both + flagged if task == "completion" else
                                  both + comp <= i < both + comp + flagged)
                rows.append({"model": m, "task_kind": task, "domain": "code", "source": "humaneval",
                             "doc_id": f"d{i}", "half": "member", "sensitivity": (0.2 if on else 0.05) * scale})
            rows += [{"model": m, "task_kind": task, "domain": "code", "source": "post", "doc_id": f"c{i}",
                      "half": "calibration", "sensitivity": 0.9 * scale} for i in range(20)]
    t = pd.DataFrame([{"model": m, "source": "humaneval", "alpha": 0.14, "completion": comp + both,
                       "summarization": summ + both, "both": both, "n": n} for m in ("a", "b")])
    return StudyResult(tables={"completion_vs_summarization": t, "pearl_scores": pd.DataFrame(rows),
                               "alpha_calibrated_per_domain": pd.DataFrame(cal)})


@inputs("pearl_wild_code_median_difference")
def wild_ranks(case):
    """pearl_scores of two models, both tasks: HumanEval vs the code domain's known-unseen source (post_cutoff_code,
    as the experiment's params name it), ``n`` documents each; "for": HumanEval's scores all above, "against": all
    below, "unclear": 3 + 3 interleaved."""
    n, he, post = {"for": (30, 0.5, 0.05), "against": (30, 0.05, 0.5), "unclear": (3, 0.2, 0.2)}[case]
    rows = [{"model": m, "task_kind": t, "domain": "code", "source": s, "doc_id": f"{s}/{i}", "half": "member",
             "sensitivity": base + 0.01 * i * (1 if s == "humaneval" else -1) + (0.005 if case == "unclear" else 0)}
            for m in ("a", "b") for t in ("completion", "summarization")
            for s, base in (("humaneval", he), ("post_cutoff_code", post)) for i in range(n)]
    return StudyResult(tables={"pearl_scores": pd.DataFrame(rows)})


@inputs("pearl_acr_overlap")
def acr_overlap(case):
    n, n_p, acr_on_p, acr_rest = {"for": (100, 30, 25, 5), "against": (100, 30, 0, 30), "unclear": (10, 3, 1, 2)}[case]
    pe = _flags(n, n_p / n)
    acr = np.array([i < acr_on_p for i in range(n_p)] + [i < acr_rest for i in range(n - n_p)])
    ids = [f"d{i}" for i in range(n)]
    scores = _scores([("bitflip", 10, "member", d, 0.5 if f else 0.05, "evaluation") for d, f in zip(ids, pe)])
    acr_t = pd.DataFrame({"epoch": 10, "doc_id": ids, "split": "member", "compressible": acr, "target_tokens": 32})
    return StudyResult(tables={"pearl_scores": scores, "acr_scores": acr_t})


@inputs("demo_members_extractable")
def demo(case):
    exact = {"for": 10, "against": 0}[case]
    rows = [{"epoch": 3, "size": "s", "split": sp, "exact": k, "n": 16, "rate": k / 16}
            for sp, k in (("member", exact), ("nonmember", 0))]
    return StudyResult(tables={"continuation_rate": pd.DataFrame(rows)})
