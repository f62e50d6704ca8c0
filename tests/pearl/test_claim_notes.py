"""What the PEARL rules say beside their verdicts (issue 49): a size step between unequally trained models is named
as such, and each task of the task-dependence claim is thresholded on its own scale."""

import pandas as pd

from memlab.comparison import RULES, load_claims, rules_for
from memlab.config import compose
from memlab.results import StudyResult

rules_for("pearl_epochs")
CLAIMS = {c.id: c for c in load_claims()}


def _sizes(losses: dict[str, float]) -> StudyResult:
    rows = [{"size": s, "split": "member", "doc_id": f"m{i}", "sensitivity": 0.5 if i < k else 0.05}
            for s, k in zip(("s", "m", "l"), (5, 20, 35)) for i in range(40)]
    by_size = pd.DataFrame([{"split": "member", "size": s, "final_train_loss": v} for s, v in losses.items()])
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows), "flagged_counts_by_size": by_size})
    res.config = compose("pearl_sizes", ["logger=null"])
    return res


def test_a_size_step_to_a_worse_trained_model_is_named():
    claim = CLAIMS["pearl_sizes_grow_with_size"]
    worse = RULES[claim.id](_sizes({"s": 1.2, "m": 0.32, "l": 0.47}), claim)
    assert "unequal training: l ended at training loss 0.470 above m's 0.320" in worse.reason
    better = RULES[claim.id](_sizes({"s": 1.2, "m": 0.32, "l": 0.25}), claim)
    assert "unequal training" not in better.reason


def test_sizes_are_ordered_by_their_weights_not_by_how_params_sizes_lists_them():
    """params.sizes=[l,s,m]: the table lists l first; the rule still steps s → m → l by weights (the family's own
    shapes, conf/zoo/pearl_base.yaml), so a consistent rise is reproduced, and listed order alone would have made
    the first step a fall."""
    from memlab.models.zoo import load_family
    from memlab.config import CONF_DIR, repo_root

    fam = load_family("pearl", CONF_DIR / "zoo", repo_root() / "models")
    weights = {s: fam.non_embedding_params(s) for s in ("s", "m", "l")}
    assert weights["s"] < weights["m"] < weights["l"]
    rows = [{"size": s, "split": "member", "doc_id": f"m{i}", "sensitivity": 0.5 if i < k else 0.05}
            for s, k in (("l", 35), ("s", 5), ("m", 20)) for i in range(40)]
    by_size = pd.DataFrame([{"split": "member", "size": s, "non_embedding_params": weights[s],
                             "final_train_loss": 0.3} for s in ("l", "s", "m")])
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows), "flagged_counts_by_size": by_size})
    res.config = compose("pearl_sizes", ["logger=null"])
    claim = CLAIMS["pearl_sizes_grow_with_size"]
    f = RULES[claim.id](res, claim)
    assert f.verdict == "reproduced" and f.our_value == 35 / 5, f.reason
    assert "s→m" in f.reason and "m→l" in f.reason
    listed = RULES[claim.id](StudyResult(tables={"pearl_scores": pd.DataFrame(rows)}, config=res.config), claim)
    assert listed.verdict == "contradicted"   # the control: l → s in listed order is a significant fall


def test_each_task_is_judged_at_its_own_calibrated_threshold():
    """Summarization scores 10× completion's scale: with completion's α for both tasks every document would be
    flagged under summarization; at each task's own α the completion-only documents are the majority."""
    rows, cal = [], []
    for task, scale in (("completion", 1.0), ("summarization", 10.0)):
        cal.append({"model": "a", "task_kind": task, "domain": "text", "score": "sensitivity", "target_fpr": 0.1,
                    "alpha": 0.1 * scale})
        for i in range(60):
            on = i < 40 if task == "completion" else i < 5
            rows.append({"model": "a", "task_kind": task, "domain": "text", "source": "s", "doc_id": f"d{i}",
                         "half": "member", "sensitivity": (0.2 if on else 0.05) * scale})
    t = pd.DataFrame([{"model": "a", "source": "s", "alpha": 0.14, "completion": 40, "summarization": 5, "both": 5,
                       "n": 60}])
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows), "alpha_calibrated_per_domain": pd.DataFrame(cal),
                              "completion_vs_summarization": t})
    res.config = compose("pearl_wild", ["logger=null"])
    f = RULES["pearl_wild_task_dependence"](res, CLAIMS["pearl_wild_task_dependence"])
    assert f.verdict == "reproduced", f.reason
    assert "completion only 35, summarization only 0" in f.reason and f.our_value == 5


def test_members_grow_is_contradicted_when_non_members_rise_too():
    """Members rise and beat non-members at the last epoch, but the non-members' share rises significantly as well:
    the claim's "non-members stay stable" fails."""
    rows = []
    for split, (first, last) in (("member", (0, 90)), ("nonmember", (0, 40))):
        for e, k in ((0, first), (10, last)):
            rows += [{"kind": "bitflip", "epoch": e, "split": split, "doc_id": f"{split}{i}",
                      "sensitivity": 0.5 if i < k else 0.05, "half": "evaluation"} for i in range(100)]
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows)})
    res.config = compose("pearl_epochs", ["logger=null"])
    f = RULES["pearl_epochs_members_grow"](res, CLAIMS["pearl_epochs_members_grow"])
    assert f.verdict == "contradicted", f.reason
    assert "non-members 0/100 → 40/100" in f.reason


def _last_epoch(members: tuple[int, int], nonmembers: tuple[int, int]) -> StudyResult:
    """pearl_scores at epochs 0 and 10 with (flagged, n) members and non-members at epoch 10 (none flagged at 0)."""
    rows = []
    for split, (k, n) in (("member", members), ("nonmember", nonmembers)):
        rows += [{"kind": "bitflip", "epoch": e, "split": split, "doc_id": f"{split}{i}", "half": "evaluation",
                  "sensitivity": 0.5 if e == 10 and i < k else 0.05} for e in (0, 10) for i in range(n)]
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows)})
    res.config = compose("pearl_epochs", ["logger=null"])
    return res


def test_members_vs_nonmembers_reproduces_the_papers_own_numbers():
    """Issue 49: the paper's Fig. 4 (a) at its n (22.5 % of 1000 members vs 2.0 % of 1000 non-members) reproduces;
    the member − 10 × non-member test it replaces left these very numbers undecided."""
    claim = CLAIMS["pearl_epochs_members_vs_nonmembers"]
    f = RULES[claim.id](_last_epoch((225, 1000), (20, 1000)), claim)
    assert f.verdict == "reproduced", f.reason
    assert "member − non-member share +0.21 [+0.18, +0.23]" in f.reason and f.n_needed is None
    assert "sized after seeing 0 of 40" in " ".join(RULES[claim.id].__doc__.split())


def test_members_vs_nonmembers_reversed_contradicts_and_few_documents_stay_open():
    claim = CLAIMS["pearl_epochs_members_vs_nonmembers"]
    reversed_ = RULES[claim.id](_last_epoch((20, 1000), (225, 1000)), claim)
    assert reversed_.verdict == "contradicted", reversed_.reason
    few = RULES[claim.id](_last_epoch((2, 8), (0, 8)), claim)
    assert few.verdict == "inconclusive" and few.n_needed > few.our_n, few.reason
    # ours: 25 of 36 members, 0 of 66 non-members; one flagged non-member no longer flips the verdict
    assert RULES[claim.id](_last_epoch((25, 36), (1, 66)), claim).verdict == "reproduced"
