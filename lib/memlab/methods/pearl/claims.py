"""Rules that judge PEARL's published claims (conf/paper/003_pearl.yaml) from a study's tables.

Each rule states its test in its docstring; intervals are 95 % percentile bootstraps over documents (seed 0, 1000
resamples; independent groups are resampled independently, paired quantities by document).
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import VERDICTS, Claim, Finding, rule
from memlab.metrics.bootstrap import bootstrap_mean

TAU = 0.2          # the papers' τ_b for every Pythia table
B, SEED = 1000, 0
# a claim whose data this run did not produce (the verdicts helper adds "not testable here" to VERDICTS)
NOT_TESTABLE = "not testable here" if "not testable here" in VERDICTS else "not comparable"
MIN_WILD_N = 10    # documents per source below which the wild study can't test a distributional claim


def _diff_ci(a, b) -> tuple[float, float]:
    """95 % interval of mean(a) − mean(b), a and b resampled independently."""
    rng = np.random.default_rng(SEED)
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = [a[rng.integers(0, len(a), len(a))].mean() - b[rng.integers(0, len(b), len(b))].mean() for _ in range(B)]
    return float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))


def _verdict(ok: bool) -> str:
    return "reproduced" if ok else "not reproduced"


@rule("pearl_epochs_members_vs_nonmembers")
def members_vs_nonmembers(res, c: Claim) -> Finding:
    """Bit flips, last epoch, sensitivity > τ_b = 0.2: reproduced iff the 95 % interval of (member share −
    non-member share) lies above 0. Our value: the member share."""
    df = res.tables["pearl_scores"]
    last = df[(df.kind == "bitflip") & (df.epoch == df.epoch.max())]
    m = (last[last.split == "member"].sensitivity > TAU).astype(float).to_numpy()
    n = (last[last.split == "nonmember"].sensitivity > TAU).astype(float).to_numpy()
    lo, hi = _diff_ci(m, n)
    return Finding(float(m.mean()), (lo, hi), f"tiny GPT-NeoX 'pearl', epoch {int(last.epoch.max())}, bit flips, "
                   f"{len(m)} members / {len(n)} non-members", _verdict(lo > 0),
                   f"members {m.mean():.2f} vs non-members {n.mean():.2f} flagged; interval of the difference "
                   f"[{lo:.2f}, {hi:.2f}]")


@rule("pearl_epochs_members_grow")
def members_grow(res, c: Claim) -> Finding:
    """Bit flips, τ_b = 0.2: reproduced iff the members' flagged share rises from the first to the last epoch (95 %
    interval of the paired per-document difference above 0) and the non-members' share at the last epoch is at most
    half the members'. Our value: the members' rise."""
    df = res.tables["pearl_scores"]
    df = df[df.kind == "bitflip"]
    first, last = df.epoch.min(), df.epoch.max()
    wide = df.pivot_table(index=["doc_id", "split"], columns="epoch", values="sensitivity").reset_index()
    mem = wide[wide.split == "member"]
    rise = ((mem[last] > TAU).astype(float) - (mem[first] > TAU).astype(float)).to_numpy()
    r = bootstrap_mean(rise, n_resamples=B, seed=SEED)
    non_last = float((wide[wide.split == "nonmember"][last] > TAU).mean())
    mem_last = float((mem[last] > TAU).mean())
    ok = r.ci_low > 0 and non_last <= mem_last / 2
    return Finding(float(rise.mean()), (r.ci_low, r.ci_high), f"tiny GPT-NeoX 'pearl', epochs {first}→{last}, "
                   f"{len(mem)} members", _verdict(ok),
                   f"members flagged {float((mem[first] > TAU).mean()):.2f} → {mem_last:.2f}; non-members at the "
                   f"last epoch {non_last:.2f}")


@rule("pearl_sizes_grow_with_size")
def grows_with_size(res, c: Claim) -> Finding:
    """Members flagged at τ_b = 0.2 per size (in the configured size order, small → large): reproduced iff the count
    never decreases with size and the largest model flags more than the smallest. Our value: largest / smallest."""
    df = res.tables["pearl_scores"]
    sizes = list(dict.fromkeys(df["size"]))
    counts = [int((df[(df["size"] == s) & (df.split == "member")].sensitivity > TAU).sum()) for s in sizes]
    ok = all(a <= b for a, b in zip(counts, counts[1:])) and counts[-1] > counts[0]
    ratio = counts[-1] / counts[0] if counts[0] else None
    n = int((df[df["size"] == sizes[0]].split == "member").sum())
    return Finding(ratio, None, f"tiny GPT-NeoX 'pearl' sizes {', '.join(sizes)}, {n} members", _verdict(ok),
                   "members flagged per size: " + ", ".join(f"{s} {k}" for s, k in zip(sizes, counts)))


@rule("pearl_calibration_low_fpr")
def low_fpr(res, c: Claim) -> Finding:
    """Bit flips, evaluation half of the non-members (never used for a fit), τ_b = 0.2: reproduced iff the FPR is
    ≤ 0.1. Our value: that FPR with its bootstrap interval."""
    df = res.tables["pearl_scores"]
    ev = (df[(df.kind == "bitflip") & (df.half == "evaluation")].sensitivity > TAU).astype(float).to_numpy()
    r = bootstrap_mean(ev, n_resamples=B, seed=SEED)
    return Finding(float(ev.mean()), (r.ci_low, r.ci_high), f"tiny GPT-NeoX 'pearl', one checkpoint, {len(ev)} "
                   "held-out non-members", _verdict(ev.mean() <= 0.1), f"{int(ev.sum())} of {len(ev)} flagged")


@rule("pearl_mia_memo_subset")
def memo_subset(res, c: Claim) -> Finding:
    """Last epoch, members, thresholds fixed once: reproduced iff the MIA flags more members than PEARL and at least
    half of the members PEARL flags are also MIA-flagged. Our value: % of members PEARL flags."""
    t = res.tables["mia_vs_memorization"]
    r = t[t.epoch == t.epoch.max()].iloc[0]
    memo, mia, both = float(r.member_memo_pct), float(r.member_mia_pct), float(r.member_both_pct)
    ok = mia > memo and memo > 0 and both >= memo / 2
    return Finding(memo, None, f"tiny GPT-NeoX 'pearl', epoch {int(r.epoch)}, {int(r.member_n)} members",
                   _verdict(ok), f"MIA {mia:.1f} %, PEARL {memo:.1f} %, both {both:.1f} %"
                   + ("; PEARL flags no member" if memo == 0 else ""))


@rule("pearl_mia_nonmember_rate_falls")
def nonmember_rate_falls(res, c: Claim) -> Finding:
    """Evaluation-half non-members, one perplexity threshold fixed at the first epoch: reproduced iff the MIA's rate
    at the last epoch is below its rate at the first. Our value: the rate at the last epoch (%)."""
    t = res.tables["mia_vs_memorization"].sort_values("epoch")
    first, last = t.iloc[0], t.iloc[-1]
    return Finding(float(last.nonmember_mia_pct), None, f"tiny GPT-NeoX 'pearl', epochs {int(first.epoch)}→"
                   f"{int(last.epoch)}, {int(last.nonmember_n)} held-out non-members",
                   _verdict(last.nonmember_mia_pct < first.nonmember_mia_pct),
                   f"MIA on non-members {first.nonmember_mia_pct:.1f} % → {last.nonmember_mia_pct:.1f} %")


@rule("pearl_wild_code_over_unseen")
def code_over_unseen(res, c: Claim) -> Finding:
    """Completion task, one-sided Mann–Whitney U of each likely-seen source vs its domain's post-cutoff set (HumanEval
    vs post-cutoff code, KJV vs post-2024 release notes): reproduced iff HumanEval or KJV is significantly higher
    for some model, at family-wise 0.05 over the tests made (Bonferroni: the smallest p times their number — the
    claim is "some likely-seen source, some model", so each test is a chance to pass); not comparable below 10
    documents per source. Our value: the Bonferroni-adjusted smallest p."""
    mw = res.tables["seen_vs_unseen_mann_whitney"]
    mw = mw[(mw.task_kind == "completion") & mw.source.isin(["humaneval", "kjv"])]
    if not len(mw):
        return Finding(None, None, "completion on HumanEval / KJV", NOT_TESTABLE,
                       "the completion task or the HumanEval and KJV sources did not run "
                       "(params.tasks, params.sources)")
    n = int(min(mw.n_seen.min(), mw.n_unseen.min())) if len(mw) else 0
    setting = f"{', '.join(sorted(set(mw.model)))}; {n} documents per source"
    if n < MIN_WILD_N:
        return Finding(None, None, setting, "not comparable", f"{n} documents per source (profile=full runs 100): "
                       "too few for a test of medians; GPT-4o in the paper, 135M–270M models here")
    p, tests = float(mw.p_one_sided.min()), len(mw)
    adjusted = min(1.0, p * tests)
    return Finding(adjusted, None, setting, _verdict(adjusted < 0.05),
                   f"smallest one-sided p = {p:.3g}, × {tests} tests (Bonferroni) = {adjusted:.3g}")


@rule("pearl_wild_task_dependence")
def task_dependence(res, c: Claim) -> Finding:
    """Documents flagged at the smallest paper threshold under completion vs summarization, summed over models and
    sources: reproduced iff summarization flags fewer; not comparable below 10 documents per source or when
    completion flags nothing. Our value: summarization / completion flags."""
    t = res.tables["completion_vs_summarization"]
    n = int(t.n.min()) if len(t) else 0
    setting = f"{', '.join(sorted(set(t.model)))}; {n} documents per source"
    off = [task for task in ("completion", "summarization") if not len(t) or t[task].isna().all()]
    if off:  # a task switched off (params.tasks): its flags were never measured, so never judged as zeros
        return Finding(None, None, setting, NOT_TESTABLE, f"{' and '.join(off)} did not run (params.tasks)")
    comp, summ = int(t.completion.sum()), int(t.summarization.sum())
    if n < MIN_WILD_N or comp == 0:
        return Finding(None, None, setting, "not comparable", f"completion flags {comp}, summarization {summ}; "
                       f"{n} documents per source is too few (profile=full runs 100)")
    return Finding(summ / comp, None, setting, _verdict(summ < comp), f"completion {comp}, summarization {summ}")


@rule("pearl_acr_overlap")
def acr_overlap(res, c: Claim) -> Finding:
    """The documents ACR searched (table ``acr_scores``, :mod:`memlab.methods.pearl.acr`) at its last epoch: PEARL
    flags sensitivity > τ_b = 0.2 under bit flips, ACR flags ACR > 1. Reproduced iff both flag at least one document,
    their counts are within a factor 2 of each other and ACR also flags at least half of PEARL's (003 Fig. 7: 16 vs
    15, 50 % overlap); not comparable when the run computed no ACR. Our value: share of PEARL's flags ACR shares."""
    acr = res.tables.get("acr_scores")
    if acr is None or not len(acr):
        return Finding(None, None, "tiny GPT-NeoX 'pearl'", "not comparable", "this run computed no ACR (params.acr)")
    last = int(acr.epoch.max())
    pe = res.tables["pearl_scores"]
    pe = pe[(pe.kind == "bitflip") & (pe.epoch == last)][["doc_id", "sensitivity"]]
    df = acr[acr.epoch == last].merge(pe, on="doc_id")
    setting = (f"tiny GPT-NeoX 'pearl', epoch {last}, {len(df)} documents ({int((df.split == 'member').sum())} "
               f"members), ACR of a {int(acr.target_tokens.iloc[0])}-token window")
    if not len(df):
        return Finding(None, None, setting, "not comparable", f"PEARL has no bit-flip scores at epoch {last}")
    a, p = df.compressible.astype(bool), df.sensitivity > TAU
    n_a, n_p, both = int(a.sum()), int(p.sum()), int((a & p).sum())
    ok = n_a > 0 and n_p > 0 and max(n_a, n_p) <= 2 * min(n_a, n_p) and both >= n_p / 2
    mem = df.split == "member"
    return Finding(both / n_p if n_p else None, None, setting, _verdict(ok),
                   f"PEARL flags {n_p} ({int((p & mem).sum())} members), ACR {n_a} ({int((a & mem).sum())} members), "
                   f"both {both}")
