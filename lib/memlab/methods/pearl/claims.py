"""Rules that judge PEARL's published claims (conf/paper/003_pearl.yaml) from a study's tables.

Each rule's docstring states the hypothesis (direction, and the paper's magnitude where it gives one) and the
interval it decides on (:func:`memlab.comparison.decide`). Shares are per document: Wilson intervals for one
share, MOVER/Newcombe intervals for a contrast of two independent shares, exact sign (McNemar) intervals for the
same documents under two conditions (:mod:`memlab.metrics.intervals`), and an unconditional exact interval of the
change in a share on the same documents where a claim says it stays stable (:mod:`memlab.metrics.paired`, against
the claim's equivalence margin); several tests in one claim share a family-wise 0.05 (Bonferroni). Thresholds and
margins are the claims' ``threshold`` in conf/paper/003_pearl.yaml, never constants here.

A document counts as flagged as the run decided it: its decision score (``method.decision_score``) above the run's
threshold (``method.alpha``), both read from the run's typed config (:attr:`memlab.results.StudyResult.method`) —
the papers' τ_b = 0.2 is the default of conf/method/pearl.yaml, not a constant here.
"""

from __future__ import annotations

from memlab.comparison import (Check, Claim, Finding, claim_level, combine, decide, full_command, guard, rule,
                               untestable)
from memlab.methods.pearl import tables as T
from memlab.metrics.intervals import (fisher_p, mover_contrast, n_to_decide, paired_sign, wilson,
                                      wilson_n_to_decide)
from memlab.metrics.paired import equivalence, paired_change, paired_n_for_margin

PAPER_TAU_B = 0.2  # the papers' τ_b for every Pythia table: where the papers' numbers were measured (a figure's paper
                  # mark) — never a rule's threshold: rules flag at the run's method.alpha
TINY = "tiny GPT-NeoX 'pearl'"


def _decision(res) -> tuple[str, float]:
    """The score the run thresholds and its threshold: (``method.decision_score``, ``method.alpha``)."""
    m = res.method
    return m.decision_score, m.alpha


def _bigger_family(res, c: Claim) -> str:
    """The next step of an undecided ground-truth claim: the study already reads every document of its zoo family
    and profile=full adds none, so more data means a family trained on more documents."""
    st = res.method.study
    return (f"the study reads all {st.n_members} + {st.n_nonmembers} documents of the family '{st.family}' and "
            "profile=full adds none: train a conf/zoo family on more, then python -m memlab.run "
            f"experiment={c.experiment} method.study.family=<it> method.study.n_members=<m> "
            "method.study.n_nonmembers=<k>")


def _paired_rise(before, after, level: float):
    """Documents flagged before / after (boolean arrays, same documents): (rise in the flagged share, its interval
    conditional on the discordant pairs, the sign test's p, verdict of 'rises', n_needed)."""
    up, down, n = int((~before & after).sum()), int((before & ~after).sum()), len(before)
    s, lo, hi, p = paired_sign(up, down, level)
    k = (up + down) / n if n else 0.0
    rise, ci = (up - down) / n if n else 0.0, (k * (2 * lo - 1), k * (2 * hi - 1))
    return rise, ci, p, decide((lo, hi), 0.5), _docs(wilson_n_to_decide(s, 0.5, level, exact=True), n, up + down)


def _docs(discordant_needed: int | None, n: int, discordant: int) -> int | None:
    """Discordant pairs needed → documents needed, at the observed share of discordant documents."""
    return -(-discordant_needed * n // discordant) if discordant_needed and discordant else None


@rule("pearl_epochs_members_vs_nonmembers")
def members_vs_nonmembers(res, c: Claim) -> Finding:
    """Hypothesis: at the last epoch (bit flips, the run's threshold: the papers' τ_b = 0.2) PEARL flags far more
    members than non-members (the paper: > 20 % vs ≃ 2 %). Decided on the 95 % Newcombe interval (MOVER from Wilson
    limits) of member share − non-member share against ``threshold`` (our reading of "far more", a gap of 0.10,
    conf/paper/003_pearl.yaml): reproduced iff it lies above the gap (and Fisher's exact test of no difference agrees,
    p < 0.05: on few documents Wilson limits exclude too readily), contradicted iff it lies below the gap (members
    flagged no more, or only slightly more, than non-members), inconclusive otherwise, with the n that would decide.
    The paper's own 225 / 1000 vs 20 / 1000 (+0.205 [+0.18, +0.23]) reproduces. Its "order of magnitude" (a ratio
    of 10) is reported, not tested: at n = 1000 the paper's own numbers could not show a ratio above 10, and one
    flagged non-member of our 66 would flip such a test. Our 66 non-members were sized after seeing 0 of 40 flagged
    (conf/zoo/pearl_base.yaml), so our n is not preregistered. Our value: the member share."""
    score, alpha = _decision(res)
    df = res.tables["pearl_scores"]
    last = df[(df.kind == "bitflip") & (df.epoch == df.epoch.max())]
    m = (last[last.split == "member"][score] > alpha).to_numpy()
    n = (last[last.split == "nonmember"][score] > alpha).to_numpy()
    km, kn, gap = int(m.sum()), int(n.sum()), float(c.threshold)
    est, lo, hi = mover_contrast(km, len(m), kn, len(n), level=claim_level(c))
    ratio = f"{(km / len(m)) / (kn / len(n)):.1f}" if kn and len(m) else "undefined (no non-member flagged)"
    p = fisher_p(km, len(m), kn, len(n))
    v = decide((lo, hi), gap)
    v = guard(v, p, claim_level(c)) if v == "reproduced" else v   # Fisher tests no difference: it guards "far more", not "no gap"
    return Finding(float(m.mean()), wilson(km, len(m)), f"{TINY}, epoch {int(last.epoch.max())}, bit flips", v,
                   f"members {km}/{len(m)} vs non-members {kn}/{len(n)} flagged; member − non-member share "
                   f"{est:+.2f} [{lo:+.2f}, {hi:+.2f}] against a gap of {gap:g}; ratio {ratio} (the paper's ≃ 11, "
                   "not tested); the non-members' n was set after seeing the data (deviation pearl_n_docs)",
                   statistic="share of members flagged (Wilson 95 %); decided on member − non-member share "
                   f"(Newcombe 95 %) against {gap:g}", p_value=p, our_n=len(m) + len(n),
                   n_needed=n_to_decide(est, (lo, hi), len(m) + len(n), gap) if v == "inconclusive" else None,
                   more_data=_bigger_family(res, c))


@rule("pearl_epochs_members_grow")
def members_grow(res, c: Claim) -> Finding:
    """Hypothesis, both halves of the paper's sentence: from the first to the last epoch (bit flips, the run's
    threshold) more members become flagged than stop being flagged (exact sign test on the same members), at the last
    epoch members are flagged more often than non-members (MOVER interval of the difference above 0: "low"), and the
    non-members' flagged share stays stable: its change on the same non-members lies within ± ``threshold`` (the
    equivalence margin, conf/paper/003_pearl.yaml; an exact interval of the change that does not collapse when no
    non-member changes, :func:`memlab.metrics.paired.paired_change`). Three tests, each at a Bonferroni 98.3 %:
    reproduced iff all three hold; contradicted iff the members' rise lies below 0, the member − non-member interval
    lies below 0, or the non-members' change lies wholly beyond the margin; inconclusive otherwise. Our value: the
    rise in the members' flagged share."""
    score, alpha = _decision(res)
    df = res.tables["pearl_scores"]
    df = df[df.kind == "bitflip"]
    first, last = df.epoch.min(), df.epoch.max()
    wide = df.pivot_table(index=["doc_id", "split"], columns="epoch", values=score).reset_index()
    mem, non = wide[wide.split == "member"], wide[wide.split == "nonmember"]
    level = claim_level(c, 3)
    rise, ci, p, v1, need = _paired_rise((mem[first] > alpha).to_numpy(), (mem[last] > alpha).to_numpy(), level)
    km, kn = int((mem[last] > alpha).sum()), int((non[last] > alpha).sum())
    est, lo, hi = mover_contrast(km, len(mem), kn, len(non), level=level)
    stable, v3, n_need = _stays_stable((non[first] > alpha).to_numpy(), (non[last] > alpha).to_numpy(),
                                       float(c.threshold), level)
    verdicts = [v1, decide((lo, hi)), v3]
    needs = [x for x, v in zip((need, n_to_decide(est, (lo, hi), len(mem) + len(non), 0.0), n_need), verdicts)
             if v == "inconclusive" and x]
    return Finding(rise, ci, f"{TINY}, epochs {first}→{last}, bit flips, {len(non)} non-members", combine(verdicts),
                   f"members flagged {float((mem[first] > alpha).mean()):.2f} → {km / max(len(mem), 1):.2f}; "
                   f"non-members {int((non[first] > alpha).sum())}/{len(non)} → {kn}/{len(non)} (change "
                   f"{stable[0]:+.2f} [{stable[1]:+.2f}, {stable[2]:+.2f}], stable within ±{float(c.threshold):g}: "
                   f"{v3}); member − non-member at the last epoch {est:+.2f} [{lo:+.2f}, {hi:+.2f}]",
                   statistic="change in the share of members flagged, first → last epoch (exact, 98.3 %)",
                   p_value=p, our_n=len(mem), n_needed=max(needs) if needs else None,
                   more_data=_bigger_family(res, c))


@rule("pearl_epochs_tau04_false_positives")
def tau04_false_positives(res, c: Claim) -> Finding:
    """Hypothesis: at the paper's higher threshold (``stated_at``, τ_b = 0.4; bit flips, the last epoch) the share
    of non-members flagged lies below ``threshold`` (0.02: our reading of "nearly eliminated", the paper's ≃ 2 % at
    τ_b = 0.2). A higher threshold flags a subset of what a lower one flags, so "fewer than at the run's own α" holds
    by construction and is reported, not tested; what can fail is the level. Decided on the 95 % Wilson interval:
    reproduced iff it lies below the bound, contradicted iff above. Our value: that share."""
    score, alpha = _decision(res)
    df = res.tables["pearl_scores"]
    last = df[(df.kind == "bitflip") & (df.epoch == df.epoch.max())]
    tau, bound = float(c.stated_at), float(c.threshold)
    non, mem = last[last.split == "nonmember"][score], last[last.split == "member"][score]
    k, n = int((non > tau).sum()), len(non)
    ci = wilson(k, n)
    v = decide(ci, bound, "below")
    return Finding(k / n if n else None, ci, f"{TINY}, epoch {int(last.epoch.max())}, bit flips, {score} > {tau:g}",
                   v, f"non-members flagged at {tau:g}: {k}/{n} (at the run's {alpha:g}: {int((non > alpha).sum())}/{n});"
                   f" members flagged at {tau:g}: {int((mem > tau).sum())}/{len(mem)} (at {alpha:g}: "
                   f"{int((mem > alpha).sum())}/{len(mem)}), the stricter cutoff the paper names",
                   statistic=f"share of non-members flagged at {score} > {tau:g} (Wilson 95 %)", our_n=n,
                   n_needed=wilson_n_to_decide(k / n, bound) if v == "inconclusive" and n else None,
                   more_data=_bigger_family(res, c))


def _stays_stable(before, after, margin: float, level: float):
    """The same documents flagged before / after (boolean arrays): ((change in the flagged share, low, high), the
    verdict of "stays within ±margin", the documents that would bound it within the margin)."""
    up, down, n = int((~before & after).sum()), int((before & ~after).sum()), len(before)
    change = paired_change(up, down, n, level)
    verdict = equivalence(change[1:], margin)
    return change, verdict, paired_n_for_margin(up, down, n, margin, level) if verdict == "inconclusive" else None


@rule("pearl_sizes_grow_with_size")
def grows_with_size(res, c: Claim) -> Finding:
    """Hypothesis: each larger size (more weights outside the embeddings) flags more members than the next smaller
    one ("increases consistently"; the same members, exact sign test per step at a Bonferroni level over the steps). Reproduced iff every step's
    interval is above no change, contradicted iff some step's interval is below (a significant decrease); ties
    never pass; flagged at the run's threshold. Our value: members flagged by the largest / the smallest size
    (Table 2: 259 / 110 = 2.35)."""
    score, alpha = _decision(res)
    df = res.tables["pearl_scores"]
    df = df[df.kind == "bitflip"] if "kind" in df.columns else df
    sizes = _by_weights(list(dict.fromkeys(df["size"])), res.tables.get("flagged_counts_by_size"))
    if len(sizes) < 2:
        return untestable(f"{TINY} size {', '.join(sizes)}", f"the run scored one size only ({', '.join(sizes)}: "
                          "params.sizes); a trend needs two or more", full_command("pearl_sizes"))
    mem = df[df.split == "member"].pivot_table(index="doc_id", columns="size", values=score)
    flags = {s: (mem[s] > alpha).to_numpy() for s in sizes}
    level = claim_level(c, max(1, len(sizes) - 1))
    steps = [_paired_rise(flags[a], flags[b], level) for a, b in zip(sizes, sizes[1:])]
    counts = [int(flags[s].sum()) for s in sizes]
    needs = [s[4] for s in steps if s[3] == "inconclusive" and s[4]]
    why = "; ".join(f"{a}→{b}: {st[0]:+.2f} [{st[1][0]:+.2f}, {st[1][1]:+.2f}]"
                    for (a, b), st in zip(zip(sizes, sizes[1:]), steps))
    why += _unequal_training(res.tables.get("flagged_counts_by_size"), sizes)
    return Finding(counts[-1] / counts[0] if counts[0] else None, None, f"{TINY} sizes {', '.join(sizes)}",
                   combine([s[3] for s in steps]), "members flagged per size: " + ", ".join(
                       f"{s} {k}" for s, k in zip(sizes, counts)) + f"; change in share per step {why}",
                   statistic="members flagged, largest / smallest size (empty when the smallest flags none); "
                   "decided per step on exact intervals", p_value=max(s[2] for s in steps), our_n=len(mem),
                   n_needed=max(needs) if needs else None, more_data=_bigger_family(res, c))


def _by_weights(sizes: list[str], by_size) -> list[str]:
    """``sizes`` from the fewest to the most weights outside the embeddings (the run's table of sizes), whatever
    order params.sizes listed them in; as listed when the table has no weights (older runs)."""
    if by_size is None or "non_embedding_params" not in by_size:
        return sizes
    weights = by_size.drop_duplicates("size").set_index("size").non_embedding_params
    return sorted(sizes, key=lambda s: (weights.get(s, float("inf")), sizes.index(s)))


def _unequal_training(by_size, sizes: list[str]) -> str:
    """A sentence for each step to a larger size that trained to a higher final loss than the smaller one: that step
    compares models trained unequally, not sizes alone ("" when every larger size reached a lower loss)."""
    if by_size is None or "final_train_loss" not in by_size:
        return ""
    loss = by_size.drop_duplicates("size").set_index("size").final_train_loss
    bad = [f"{b} ended at training loss {loss[b]:.3f} above {a}'s {loss[a]:.3f}" for a, b in zip(sizes, sizes[1:])
           if a in loss and b in loss and loss[b] > loss[a]]
    return f"; unequal training: {', '.join(bad)}, so that step is not a size effect alone" if bad else ""


@rule("pearl_calibration_low_fpr")
def low_fpr(res, c: Claim) -> Finding:
    """Hypothesis: at the run's threshold (the papers' τ_b = 0.2; bit flips) the false positive rate on known
    non-members is below ``threshold`` (0.10, our reading of the paper's "low", 0.04). The threshold is the paper's,
    fixed before our data, so every non-member is held out from it: both halves count (the calibration half fits
    only our own α at the target FPR, whose FPR the study reports on the evaluation half). Decided on the 95 %
    Wilson interval. Our value: that FPR."""
    score, alpha = _decision(res)
    df = res.tables["pearl_scores"]
    ev = (df[(df.kind == "bitflip") & (df.split == "nonmember")][score] > alpha).to_numpy()
    k, n = int(ev.sum()), len(ev)
    ci = wilson(k, n)
    v = decide(ci, c.threshold, "below")
    return Finding(k / n if n else None, ci, f"{TINY}, one checkpoint, bit flips", v,
                   f"{k} of {n} non-members flagged (both halves: α is the paper's, not fitted here); the paper's own "
                   f"{c.value:g} would need n ≥ {wilson_n_to_decide(c.value, c.threshold)} to lie below "
                   f"{c.threshold:g} (the non-members are pearl_epochs' too: the two claims share their scores)",
                   statistic=f"false positive rate at {score} > {alpha:g} (Wilson 95 %)", our_n=n,
                   n_needed=wilson_n_to_decide(k / n, c.threshold) if v == "inconclusive" and n else None,
                   more_data=_bigger_family(res, c))


@rule("pearl_mia_memo_subset")
def mia_epoch0(res, c: Claim) -> Check:
    """Sanity: at the first epoch the perplexity MIA flags more members (already in the tiny model's training data)
    than non-members (the control); passes iff the MOVER 95 % interval of the difference lies above 0."""
    t = res.tables["mia_vs_memorization"].sort_values("epoch")
    r = t.iloc[0]
    km, kn = round(r.member_mia_pct / 100 * r.member_n), round(r.nonmember_mia_pct / 100 * r.nonmember_n)
    est, lo, hi = mover_contrast(int(km), int(r.member_n), int(kn), int(r.nonmember_n))
    return Check(float(r.member_mia_pct), "% of non-members the MIA flags at the same epoch",
                 float(r.nonmember_mia_pct), lo > 0, f"epoch {int(r.epoch)}: members {int(km)}/{int(r.member_n)}, "
                 f"non-members {int(kn)}/{int(r.nonmember_n)}; difference {est:+.2f} [{lo:+.2f}, {hi:+.2f}]")


@rule("pearl_mia_not_all_members_memorized")
def not_all_members_memorized(res, c: Claim) -> Finding:
    """Hypothesis: at the last epoch, of the members the perplexity MIA flags (its threshold fixed on the calibration
    half at the first epoch), more than ``threshold`` (0.10, our reading of "not all") are not flagged by PEARL (the
    run's threshold): membership is not memorization. Decided on the 95 % Wilson interval of that share among the
    MIA-flagged members: reproduced iff it lies above the bound, contradicted iff below (PEARL flags nearly every
    member the MIA flags: memorization ≈ membership). Not testable when the MIA flags no member. Our value: that
    share (the paper, Table 4 at epoch 10: (83.8 − 18.9) / 83.8 = 0.77)."""
    r = res.tables["mia_vs_memorization"].sort_values("epoch").iloc[-1]
    n_mem = int(r.member_n)
    mia, both = round(r.member_mia_pct / 100 * n_mem), round(r.member_both_pct / 100 * n_mem)
    setting = f"{TINY}, epoch {int(r.epoch)}, {n_mem} members"
    if mia == 0:
        return untestable(setting, "the MIA flags no member at the last epoch", full_command(c.experiment))
    k, bound = mia - both, float(c.threshold)
    ci = wilson(k, mia)
    v = decide(ci, bound)
    return Finding(k / mia, ci, setting, v,
                   f"the MIA flags {mia}/{n_mem} members, PEARL {round(r.member_memo_pct / 100 * n_mem)}/{n_mem}, "
                   f"both {both}: {k} of the {mia} MIA-flagged members are not flagged by PEARL",
                   statistic="share of MIA-flagged members PEARL does not flag, last epoch (Wilson 95 %)", our_n=mia,
                   n_needed=wilson_n_to_decide(k / mia, bound) if v == "inconclusive" else None,
                   more_data=_bigger_family(res, c))


@rule("pearl_mia_nonmember_rate_falls")
def nonmember_rate_falls(res, c: Claim) -> Finding:
    """Hypothesis (our reading of Table 4): with the perplexity threshold fixed at the first epoch, the share of
    held-out non-members the MIA flags is lower at the last epoch than at the first. The same documents at both
    epochs: decided on the exact sign test of the documents that change (flagged first and not last vs the
    reverse), 95 %. Our value: that fall, in percentage points (its interval conditional on the documents that
    change)."""
    t = res.tables["mia_vs_memorization"].sort_values("epoch")
    a, b = t.iloc[0], t.iloc[-1]
    scores, fixed = res.tables["scores_by_epoch"], res.tables["fixed_thresholds"].set_index("score").threshold
    non = scores[(scores.split == "nonmember") & (scores.half != "calibration")]
    wide = non.pivot_table(index="doc_id", columns="epoch", values="neg_perplexity")
    first, last = wide[a.epoch] > fixed["neg_perplexity"], wide[b.epoch] > fixed["neg_perplexity"]
    fall, ci, p, verdict, need = _paired_rise(last.to_numpy(), first.to_numpy(), claim_level(c))
    return Finding(100 * fall, (100 * ci[0], 100 * ci[1]), f"{TINY}, epochs {int(a.epoch)}→{int(b.epoch)}, "
                   f"{len(wide)} held-out non-members", verdict,
                   f"MIA on non-members {int(first.sum())}/{len(wide)} → {int(last.sum())}/{len(wide)} "
                   f"({a.nonmember_mia_pct:.1f} % → {b.nonmember_mia_pct:.1f} %); flagged first only "
                   f"{int((first & ~last).sum())}, last only {int((~first & last).sum())}"
                   + _calibration_cap(res, int(first.sum()), len(wide), int(a.epoch), c),
                   statistic="fall in % of non-members flagged by the MIA, first → last epoch (exact sign test on "
                   "the same documents, 95 %)", p_value=p, our_n=len(wide), n_needed=need,
                   more_data=_bigger_family(res, c))


def _calibration_cap(res, k: int, n: int, epoch: int, c: Claim) -> str:
    """What the threshold's calibration does to the start: fitted at ``params.target_fpr`` on the other half of the
    non-members at the first epoch, it holds the held-out half's start near that FPR; when the start's Wilson
    interval covers it, the sentence says the start (and so any fall) is capped there, unlike the paper's."""
    fpr = res.params.target_fpr
    lo, hi = wilson(k, n)
    said = (f"; the fixed threshold is fitted at FPR {fpr:g} on the other half of the non-members at epoch {epoch}, "
            f"so the held-out start is {k}/{n}")
    if not lo <= fpr <= hi:
        return said
    return said + (f", as that calibration sets it: it caps the start near {100 * fpr:g} % and so any fall at "
                   f"about {100 * fpr:g} points, where the paper's fall is {c.value:g}")


@rule("pearl_wild_code_over_unseen")
def code_over_unseen(res, c: Claim) -> Finding:
    """Hypothesis: on completion, at the paper's τ_b = 0.14, each model flags a larger share of HumanEval than of
    code released after it (our LBPP stand-in). One MOVER interval of the difference per model, at a Bonferroni
    level over the models: reproduced iff every model's lies above 0, contradicted iff one lies below. Our value:
    the share of HumanEval flagged, over all models (the paper: 60 of 100, GPT-4o)."""
    t, mw = res.tables["flagged_counts_fixed_thresholds"], res.tables["seen_vs_unseen_mann_whitney"]
    col = f"flagged_{res.method.decision_score}>{min(res.params.alphas)}"   # the paper's lowest fixed threshold
    if not (mw.source == "humaneval").any():
        return untestable("no HumanEval source", "the run scored no HumanEval documents", full_command("pearl_wild"))
    unseen = mw[mw.source == "humaneval"].unseen_source.iloc[0]
    comp = t[t.task_kind == "completion"].set_index(["model", "source"])
    models = sorted({m for m, s in comp.index if s == "humaneval"})
    if not models:   # params.tasks without completion: the claim is about completion
        return untestable("no completion of HumanEval", "the run did not complete code (params.tasks)",
                          full_command("pearl_wild"))
    level = claim_level(c, len(models))
    out = {m: mover_contrast(int(comp.loc[(m, "humaneval"), col]), int(comp.loc[(m, "humaneval"), "n"]),
                             int(comp.loc[(m, unseen), col]), int(comp.loc[(m, unseen), "n"]), level=level)
           for m in models}
    k = int(sum(comp.loc[(m, "humaneval"), col] for m in models))
    n = int(sum(comp.loc[(m, "humaneval"), "n"] for m in models))
    verdicts = {m: decide((lo, hi)) for m, (_, lo, hi) in out.items()}
    worst = min(out, key=lambda m: out[m][0])   # every model must show it: the smallest difference binds (at 0: no n)
    return Finding(k / n, wilson(k, n), f"{', '.join(models)}; completion, {col.split('>')[1]}",
                   combine(list(verdicts.values())),
                   "; ".join(f"{m}: HumanEval − {unseen} {e:+.2f} [{lo:+.2f}, {hi:+.2f}]" for m, (e, lo, hi) in out.items()),
                   statistic="share of HumanEval flagged, all models (Wilson 95 %); decided per model on HumanEval − "
                   "post-cutoff code; n = documents per source and model", our_n=n // len(models),
                   n_needed=n_to_decide(out[worst][0], out[worst][1:], n // len(models), 0.0)
                   if combine(list(verdicts.values())) == "inconclusive" else None)


@rule("pearl_wild_task_dependence")
def task_dependence(res, c: Claim) -> Finding:
    """Hypothesis: on the same documents, more are flagged under completion only than under summarization only
    (summarization flags fewer). The two tasks score on different scales (completion and summarization outputs
    compared by different similarities), so each (model, task, domain) is thresholded at its own α, calibrated at
    the strictest nonzero target FPR of ``params.target_fprs`` on the calibration half of the domain's known-unseen
    source; the calibration documents are left out. One exact sign test per model (a document is one unit within
    a model; the models are separate tests at a Bonferroni level): reproduced iff every model's interval of the
    completion-only share among discordant documents lies above 0.5, contradicted iff one lies below. Not testable
    when a task did not run or no document is flagged under one task only. Our value: documents flagged under both,
    all models (the paper: 6, GPT-4o)."""
    scores, cal = res.tables.get("pearl_scores"), res.tables.get("alpha_calibrated_per_domain")
    t = res.tables["completion_vs_summarization"]
    off = [task for task in ("completion", "summarization") if t.empty or t[task].isna().all()]
    if off:  # a task switched off (params.tasks): never judged on flags it did not measure
        return untestable("completion vs summarization", f"{' and '.join(off)} did not run (params.tasks)",
                          full_command("pearl_wild"))
    if scores is None or not {"completion", "summarization"} <= set(scores.task_kind):
        return untestable("no completion/summarization pairs", "the run did not score both tasks",
                          full_command("pearl_wild"))
    at = T.calibrated_alphas(cal, res.params.target_fprs, res.method.decision_score)
    if at is None:
        return untestable("completion vs summarization", "no nonzero target FPR to calibrate each task at "
                          "(params.target_fprs)", full_command("pearl_wild"))
    fpr, alpha = at
    wide = T.task_flags(scores, alpha, res.method.decision_score).fillna(False)
    models = sorted(set(wide.index.get_level_values("model")))
    level = claim_level(c, len(models))
    per, both = {}, 0
    for m in models:
        w = wide.loc[m]
        comp, summ = w.completion.to_numpy(bool), w.summarization.to_numpy(bool)
        per[m] = (int((comp & ~summ).sum()), int((~comp & summ).sum()), len(w))
        both += int((comp & summ).sum())
    setting = (f"{', '.join(models)}; {sum(n for _, _, n in per.values())} (model, document) pairs; each task at "
               f"its α for FPR {fpr:g} on the known-unseen calibration half")
    if all(a + b == 0 for a, b, _ in per.values()):
        return untestable(setting, f"no document is flagged under one task and not the other (both: {both})",
                          full_command("pearl_wild"))
    tests = {m: paired_sign(a, b, level) for m, (a, b, _) in per.items()}
    verdicts = [decide((lo, hi), 0.5) for _, lo, hi, _ in tests.values()]
    verdict = combine(verdicts)
    needs = [_docs(wilson_n_to_decide(s, 0.5, level, exact=True), per[m][2], per[m][0] + per[m][1])
             for m, (s, _, _, _) in tests.items() if per[m][0] + per[m][1]]
    return Finding(float(both), None, setting, verdict,
                   "; ".join(f"{m}: completion only {per[m][0]}, summarization only {per[m][1]}, share "
                             f"completion-only among discordant {s:.2f} [{lo:.2f}, {hi:.2f}]"
                             for m, (s, lo, hi, _) in tests.items()),
                   statistic="documents flagged under both tasks; decided per model on the exact sign test "
                   f"({level:.4g} each)", p_value=min(p for *_, p in tests.values()),
                   our_n=sum(n for _, _, n in per.values()),
                   n_needed=max((n for n in needs if n), default=None) if verdict == "inconclusive" else None)


@rule("pearl_acr_overlap")
def acr_overlap(res, c: Claim) -> Finding:
    """Hypothesis (our reading of "half of them the same"): ACR (> 1) flags the documents PEARL flags (bit flips,
    the run's threshold, ACR's last epoch) more often than the documents PEARL does not flag. Decided on the 95 % MOVER
    interval of that difference against 0; not testable when the run computed no ACR or PEARL flags none or all.
    Our value: the share of PEARL's flags ACR also flags (the paper: 8 of 16)."""
    acr = res.tables.get("acr_scores")
    if acr is None or not len(acr):
        return untestable(TINY, "this run computed no ACR (params.acr)", full_command("pearl_epochs"))
    score, alpha = _decision(res)
    last = int(acr.epoch.max())
    pe = res.tables["pearl_scores"]
    pe = pe[(pe.kind == "bitflip") & (pe.epoch == last)][["doc_id", score]]
    df = acr[acr.epoch == last].merge(pe, on="doc_id")
    a, p = df.compressible.astype(bool).to_numpy(), (df[score] > alpha).to_numpy()
    setting = f"{TINY}, epoch {last}, ACR of a {int(acr.target_tokens.iloc[0])}-token window"
    if p.all() or not p.any():
        return untestable(setting, f"PEARL flags {int(p.sum())} of {len(p)} documents: no contrast",
                          full_command("pearl_epochs"))
    both, n_p = int((a & p).sum()), int(p.sum())
    est, lo, hi = mover_contrast(both, n_p, int((a & ~p).sum()), int((~p).sum()))
    return Finding(both / n_p, wilson(both, n_p), setting, decide((lo, hi)),
                   f"PEARL flags {n_p}, ACR {int(a.sum())}, both {both}; ACR rate on PEARL's − on the rest "
                   f"{est:+.2f} [{lo:+.2f}, {hi:+.2f}]",
                   statistic="share of PEARL's flagged documents ACR also flags (Wilson 95 %)", our_n=len(df),
                   n_needed=n_to_decide(est, (lo, hi), len(df), 0.0))
from memlab.methods.pearl import claims_ranks  # noqa: F401,E402  (registers the rule judged on whole distributions)
