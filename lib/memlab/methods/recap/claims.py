"""Paper vs ours for RECAP (seed 000): one rule per claim of conf/paper/000_recap.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``recap_table3`` / ``recap_feedback`` (its
tables and metrics), restricted to the targets of its claim's scope (:func:`~memlab.methods.recap.claim_panels.scoped`),
and returns a :class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring. How the tables are
read (panels, intervals, settings): :mod:`memlab.methods.recap.claim_panels`.
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import ALPHA, Claim, Finding, combine, decide, full_command, guard, untestable
from memlab.methods.recap.claim_panels import (FLOOR, FLOOR_NAMES, METHODS, NAMES, NO_BOOKS, agents_used, boot_ci,
                                               copyright_panel, n_if_open, nonmember_rows, panel, paired_p, run_seed,
                                               scoped_rule, scores, setting_text, units_per_target, with_tables)
from memlab.methods.recap.evaluate import filter_tradeoff, filtered_rouge
from memlab.metrics.bootstrap import resample_indices
from memlab.metrics.intervals import bonferroni_level, permutation_diff, wilson, wilson_n_to_decide


# -- Table 3 -----------------------------------------------------------------------------------------------------
@scoped_rule("recap_t3_order", "recap_t3_order_aligned")
def t3_order(res, claim: Claim) -> Finding:
    """Hypothesis: on the copyright category, RECAP > DSP + Jailbreak > DSP > Prefix-Probing in Table 3's average
    ROUGE-L. Three paired book-level bootstrap intervals of the adjacent differences, each at 1 − 0.05/3: reproduced
    iff all lie above 0, contradicted iff one lies below. Our value: RECAP's average, with its interval."""
    got = copyright_panel(res)
    if isinstance(got, Finding):
        return got
    point, draws, targets, n = got
    level = bonferroni_level(3, ALPHA)
    steps = [(a, b, point[a] - point[b], boot_ci(draws[a] - draws[b], level, units_per_target(n, targets)))
             for a, b in (("recap", "dsp_jb"), ("dsp_jb", "dsp"), ("dsp", "prefix"))]
    ps = [paired_p(res, "copyrighted", a, b, members_only=True) for a, b, *_ in steps]
    verdicts = [guard(decide(ci), p, level) for (*_, ci), p in zip(steps, ps)]
    seen = " vs ".join(f"{NAMES[m]} {point[m]:.3f}" for m in reversed(METHODS))
    why = seen + "; " + "; ".join(f"{NAMES[a]} − {NAMES[b]} {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"
                                  for a, b, d, ci in steps)
    needs = [n_if_open(d, ci, n, v, level) for (_, _, d, ci), v in zip(steps, verdicts)]
    return Finding(point["recap"], boot_ci(draws["recap"], units=units_per_target(n, targets)),
                   setting_text(res, targets, "copyrighted", n),
                   combine(verdicts), why, statistic="RECAP's copyright-category average ROUGE-L (bootstrap mean)",
                   p_value=max(ps), our_n=n, n_needed=max((x for x in needs if x), default=None))


def _blocked_share(res) -> float | None:
    """Share of the copyright category's DSP outputs that were blocked (the jailbreaker's trigger), or None when the
    run has no refusals table."""
    ref = res.tables.get("refusals")
    if ref is None or not len(ref):
        return None
    r = ref[(ref.category == "copyrighted") & (ref.method == "dsp")]
    return float((r.blocked * r.events).sum() / r.events.sum()) if r.events.sum() else 0.0


def _gain(res, got, a: str, b: str, setting: str, prefix: str = "") -> Finding:
    """The gain of ``a`` over ``b`` on the copyright category, judged above the floor (issue 29): two paired
    intervals at 1 − 0.05/2, of ``a`` − ``b`` and of ``a`` − its echo floor (what its hints alone score). Reproduced
    iff both lie above 0; contradicted iff the gain's lies below 0; a gain whose method does not clear its floor is
    inconclusive (the hints could explain it). Our value: the relative gain (a − b) / b."""
    point, draws, targets, n = got
    level, units = bonferroni_level(2, ALPHA), units_per_target(n, targets)
    floor = panel(res, "copyrighted", (a, FLOOR[a]), members_only=True)
    if floor is None:
        return untestable(setting, f"the run measured no echo floor of {NAMES[a]} on the copyright category",
                          full_command("recap_table3"))
    d, ci = point[a] - point[b], boot_ci(draws[a] - draws[b], level, units)
    fdraws = floor[0][:, 0] - floor[0][:, 1]
    fd, fci = float(fdraws.mean()), boot_ci(fdraws, level, units)
    p = paired_p(res, "copyrighted", a, b, members_only=True)   # the books copyright_panel reads
    v = v_gain = guard(decide(ci), p, level)
    seen = (f"{prefix}{NAMES[b]} {point[b]:.3f} → {NAMES[a]} {point[a]:.3f} (difference {d:+.3f} [{ci[0]:+.3f}, "
            f"{ci[1]:+.3f}]); {NAMES[a]} − its floor ({FLOOR_NAMES[FLOOR[a]]}) {fd:+.3f} "
            f"[{fci[0]:+.3f}, {fci[1]:+.3f}]")
    if v == "reproduced" and decide(fci) != "reproduced":
        v, seen = "inconclusive", seen + ": the gain does not clear what the hints alone score"
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (draws[a] - draws[b]) / draws[b]
    needs = [x for x in (n_if_open(d, ci, n, v_gain, level), n_if_open(fd, fci, n, decide(fci))) if x]   # open tests only
    rel_ci = boot_ci(rel, units=units) if np.isfinite(rel).any() else None
    return Finding(d / point[b] if point[b] > 0 else None, rel_ci,
                   setting, v, seen, statistic=f"relative gain ({NAMES[a]} − {NAMES[b]}) / {NAMES[b]}; decided on the "
                   "paired difference and on the gainer's margin over its echo floor", p_value=p, our_n=n,
                   n_needed=max(needs, default=None))


@scoped_rule("recap_t3_jailbreak_gain", "recap_t3_jailbreak_gain_aligned")
def t3_jailbreak_gain(res, claim: Claim) -> Finding:
    """Hypothesis: DSP + Jailbreak's copyright-category average exceeds DSP's and clears its own echo floor (the
    metadata echo); two paired intervals at 1 − 0.05/2: reproduced iff both lie above 0, contradicted iff the
    gain's lies below 0 (the paper's 42 % is for strongly aligned API models, its App. K reports 10 % for small
    ones, so only the direction is tested). Not testable when no DSP output was blocked: the jailbreaker only
    rewrites blocked prompts. Our value: the relative gain (DSP + JB − DSP) / DSP."""
    got = copyright_panel(res)
    if isinstance(got, Finding):
        return got
    point, _, targets, n = got
    blocked = _blocked_share(res)
    setting = setting_text(res, targets, "copyrighted", n,
                           f"DSP outputs blocked {blocked:.0%}" if blocked is not None else "")
    if blocked == 0.0:
        return untestable(setting, f"no DSP output of these targets was blocked, so the jailbreak never fires (DSP "
                          f"{point['dsp']:.3f}, DSP + Jailbreak {point['dsp_jb']:.3f})", "python -m memlab.run "
                          "experiment=recap_table3 with a target that refuses (an aligned chat model, e.g. "
                          "model=<served chat preset>)")
    return _gain(res, got, "dsp_jb", "dsp", setting)


@scoped_rule("recap_t3_public_vs_copyrighted", "recap_t3_public_vs_copyrighted_aligned")
def t3_public_vs_copyrighted(res, claim: Claim) -> Finding:
    """Hypothesis: for each target that may have seen both categories, RECAP's public-domain average exceeds its
    copyright-category average (book-level bootstrap interval of the difference per target, at a Bonferroni level
    over targets): reproduced iff every target's lies above 0, contradicted iff one lies below. A target with known
    membership is judged on its member books of both categories (the aligned tiny target: KJV members vs licence
    members); one whose training set is known to hold one category only (the base tiny model: public-domain
    members, never the licence texts) is left out: its difference is true by construction. Our value: the mean
    difference over the judged targets (the paper: 0.621 − 0.460)."""
    books = res.tables.get("book_scores")
    if books is None or books.empty:
        return untestable("no books", NO_BOOKS.format("public-domain"), full_command("recap_table3"))
    known = set(books.loc[nonmember_rows(books), "target"])
    members = books[books["split"].astype(str) == "member"] if "split" in books.columns else books.iloc[:0]
    both = {t for t, g in members.groupby("target") if {"public_domain", "copyrighted"} <= set(g.category)}
    known -= both
    targets = [t for t in dict.fromkeys(books.target) if t not in known]
    if not targets:
        return untestable("only targets trained on one category", "no target may have seen both categories",
                          full_command("recap_table3"))
    level, out = bonferroni_level(len(targets), ALPHA), {}
    for t in targets:
        pub = panel(res, "public_domain", ("recap",), target=t, members_only=True)
        cop = panel(res, "copyrighted", ("recap",), seed_offset=1, target=t, members_only=True)
        if pub is not None and cop is not None:
            d = pub[0][:, 0] - cop[0][:, 0]
            seed, B = run_seed(res)
            p = permutation_diff(*(scores(res, c, ("recap",), target=t, members_only=True)["recap"]
                                   for c in ("public_domain", "copyrighted")), n_resamples=B, seed=seed)
            out[t] = (float(d.mean()), boot_ci(d, level, min(pub[2], cop[2])), pub[2] + cop[2], p)
    if not out:
        return untestable("missing a category", NO_BOOKS.format("public-domain or copyright"),
                          full_command("recap_table3"))
    verdicts = [guard(decide(ci), p, level) for _, ci, _, p in out.values()]
    n = sum(k for _, _, k, _ in out.values())
    why = "; ".join(f"{t}: public − copyright {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}], permutation p {p:.3g}"
                    for t, (d, ci, _, p) in out.items())
    why += f"; left out (one category in training): {', '.join(sorted(known))}" if known else ""
    needs = [n_if_open(d, ci, k, v) for (d, ci, k, _), v in zip(out.values(), verdicts)]
    return Finding(float(np.mean([d for d, *_ in out.values()])), None,
                   setting_text(res, list(out), "public_domain", n, "vs copyright category (stand-in: licence texts)"),
                   combine(verdicts), why, statistic="RECAP public-domain − copyright-category average ROUGE-L, mean "
                   "over judged targets; decided per target", p_value=max(p for *_, p in out.values()), our_n=n,
                   n_needed=max((x for x in needs if x), default=None))


@scoped_rule("recap_gain_over_dsp", "recap_gain_over_dsp_aligned")
def gain_over_dsp(res, claim: Claim) -> Finding:
    """Hypothesis: RECAP's copyright-category average exceeds DSP's (the single-iteration baseline) and clears its
    own echo floor (the metadata + feedback echo: what its prompt and feedback hints alone score); two paired
    intervals at 1 − 0.05/2: reproduced iff both lie above 0, contradicted iff the gain's lies below 0. GPT-4.1 is
    not among our targets. Our value: the relative gain (RECAP − DSP) / DSP (the paper: +24 %)."""
    got = copyright_panel(res)
    if isinstance(got, Finding):
        return got
    _, _, targets, n = got
    return _gain(res, got, "recap", "dsp", setting_text(res, targets, "copyrighted", n), prefix="not GPT-4.1: ")


# -- the feedback loop -------------------------------------------------------------------------------------------
def _member_events(res):
    """Events below the stop score of books in their target's training set (the tiny model's non-member events
    left out) as a (target, event) × round table of gains, and the number left out."""
    g = res.tables.get("feedback_gains_events")
    if g is None or not len(g):
        return None, 0
    held = (g["split"].astype(str) == "nonmember") if "split" in g.columns else np.zeros(len(g), bool)
    dropped = len(g[held].drop_duplicates(["target", "event"]))
    g = g[~held]
    if g.empty:
        return None, dropped
    wide = g.pivot_table(index=["target", "event"], columns="round", values="gain", aggfunc="first")
    return wide.ffill(axis=1), dropped   # an event that stopped after round r keeps its round-r gain


@scoped_rule("recap_feedback_one_round", "recap_feedback_one_round_aligned")
def feedback_one_round(res, claim: Claim) -> Finding:
    """Hypothesis: fewer than ``threshold`` (20 %) of the events below the stop score improve after round 1
    (Fig. 6); decided on the 95 % Wilson interval of that share. Not testable when the run allowed one round, the
    loop improved no event, or too few events went on past round 1 for the share to exceed the threshold. Member
    events only. Our value: that share."""
    wide, dropped = _member_events(res)
    cmd = "python -m memlab.run experiment=recap_feedback method.recap.max_rounds=5 profile=full"
    if wide is None:
        return untestable("no member event below the stop score", "no event entered the feedback loop", cmd)
    max_round = int(wide.columns.max())
    allowed = res.method.recap.max_rounds
    setting = (f"targets: {', '.join(dict.fromkeys(wide.index.get_level_values('target')))}; up to {allowed} "
               f"rounds ({max_round} run); {dropped} non-member events left out; "
               f"{agents_used(res)} agents")
    g1, gf = wide[1].to_numpy(float), wide[max_round].to_numpy(float)
    if allowed < 2 or not (gf > 0).any():
        return untestable(setting, "the run allowed one feedback round" if allowed < 2 else
                          "the feedback loop improved no event", cmd)
    k, n = int((gf > g1 + 1e-12).sum()), len(wide)
    went_on = int((g1 > 0).sum())     # later rounds run only after a round-1 gain: the most that could improve later
    if went_on / n <= claim.threshold:
        return untestable(setting, f"only {went_on} of {n} events gained in round 1 and could go on, so the share "
                          f"improving later can't exceed {went_on / n:.0%} by construction", cmd)
    ci = wilson(k, n)
    v = decide(ci, claim.threshold, "below")
    first = float(g1.sum() / gf.sum()) if gf.sum() > 0 else float("nan")
    return Finding(k / n, ci, setting, v, f"{k} of {n} events improve after round 1; {(gf > 0).mean():.0%} improve "
                   f"at all; round 1 brings {first:.0%} of the total gain", statistic="share of events improving "
                   "after round 1 (Wilson 95 %)", our_n=n,
                   n_needed=wilson_n_to_decide(k / n, claim.threshold) if v == "inconclusive" else None)


def _unseen_as_non_training(res):
    """``res`` with every book a target is known never to have seen (:func:`nonmember_rows`: held-out KJV books and
    licences of the tiny targets) counted in the non-training category, beside the post-cutoff release notes."""
    books = res.tables.get("book_scores")
    if books is None or books.empty:
        return res
    held = nonmember_rows(books)
    return with_tables(res, {**res.tables, "book_scores": books.assign(
        category=np.where(held, "non_training", books.category.astype(object)))})


@scoped_rule("recap_feedback_no_contamination", "recap_feedback_no_contamination_aligned")
def feedback_no_contamination(res, claim: Claim) -> Finding:
    """Hypothesis: the feedback loop does not raise extraction from books the target never saw. Two tests at
    1 − 0.05/2: the loop's gain (RECAP − DSP + Jailbreak) is larger on training books than on non-training books
    (independent book-level bootstraps of training gain − non-training gain, above 0), and RECAP on non-training
    books does not clear its floor, the metadata + feedback echo (any gain above the floor there is contamination;
    interval of RECAP − floor below 0). Reproduced iff both hold, contradicted iff either interval lies on the other
    side. Non-training books: the post-cutoff release notes and every book known to be outside the target's
    training set. Not testable without a positive control: when the loop gains nothing on training books there is
    no contamination to miss. Our value: the most RECAP passages on any non-training book and target (the paper:
    at most 1)."""
    res = _unseen_as_non_training(res)
    books = res.tables.get("book_scores")
    tol = res.method.passage_tolerance
    train = [c for c in ("public_domain", "copyrighted") if books is not None and c in set(books.category)]
    nt = panel(res, "non_training", ("dsp_jb", "recap", "echo_fb"), seed_offset=2)
    tr = [p for c in train if (p := panel(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    if nt is None or not tr:
        return untestable("no non-training or training books", NO_BOOKS.format("non-training or training"),
                          full_command("recap_feedback"))
    level = bonferroni_level(2, ALPHA)
    g_tr = np.mean([p[0][:, 1] - p[0][:, 0] for p in tr], axis=0)
    g_nt, over = nt[0][:, 1] - nt[0][:, 0], nt[0][:, 1] - nt[0][:, 2]
    setting = setting_text(res, nt[1], "non_training", nt[2], f"passages: 40 tokens, ≤ {tol} mismatches")
    worst = int(books[(books.category == "non_training") & (books.method == "recap")][f"passages_m{tol}"].max())
    units = min([units_per_target(p[2], p[1]) for p in tr] + [units_per_target(nt[2], nt[1])])
    tr_ci = boot_ci(g_tr, units=units)
    if tr_ci[0] <= 0:
        return untestable(setting, f"no positive control: the loop's gain on training books {g_tr.mean():+.3f} "
                          f"[{tr_ci[0]:+.3f}, {tr_ci[1]:+.3f}] is not above 0 (RECAP − its floor on non-training "
                          f"books {over.mean():+.3f})", full_command("recap_feedback"))
    d = g_tr - g_nt
    ci, over_ci = boot_ci(d, level, units), boot_ci(over, level, units_per_target(nt[2], nt[1]))
    per_book = [w["recap"] - w["dsp_jb"] for c in train
                if (w := scores(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    w_nt = scores(res, "non_training", ("dsp_jb", "recap"))
    seed, B = run_seed(res)
    p = permutation_diff(np.concatenate([x.to_numpy(float) for x in per_book]),
                         (w_nt["recap"] - w_nt["dsp_jb"]).to_numpy(float), n_resamples=B, seed=seed)
    tests = [guard(decide(ci), p, level), decide(over_ci, direction="below")]
    v, n = combine(tests), nt[2] + sum(p[2] for p in tr)
    needs = [x for x in (n_if_open(float(d.mean()), ci, n, tests[0]),
                         n_if_open(float(over.mean()), over_ci, n, tests[1])) if x]
    return Finding(float(worst), None, setting, v,
                   f"gain on training books {g_tr.mean():+.3f}, on non-training books {g_nt.mean():+.3f}; difference "
                   f"{d.mean():+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; RECAP − its floor on non-training books "
                   f"{over.mean():+.3f} [{over_ci[0]:+.3f}, {over_ci[1]:+.3f}]; at most {worst} RECAP passage(s) per "
                   f"non-training book", statistic="most RECAP passages on a non-training book and target; decided on "
                   "training gain − non-training gain and on RECAP's margin over its floor on non-training books",
                   p_value=p, our_n=n, n_needed=max(needs, default=None))


def _frontier_areas(ev, thresholds, idx) -> dict[str, np.ndarray]:
    """Per signal, the frontier area (mean over savings levels 0–1 of the best filtered ROUGE-L reachable while
    saving at least that share) for each resample of events ``idx`` (B × n)."""
    grid = np.linspace(0, 1, 201)
    calls, full = (ev[c].to_numpy(float)[idx] for c in ("feedback_calls", "recap"))
    total = calls.sum(axis=1)
    out = {}
    for sig in ("hybrid", "rouge_l", "cosine"):
        s = ev[sig].to_numpy(float)[idx]
        pts_q, pts_r = [np.zeros(len(idx))], [full.mean(axis=1)]
        for t in thresholds:
            keep = s >= t
            with np.errstate(invalid="ignore", divide="ignore"):
                pts_q.append(np.where(total > 0, (calls * ~keep).sum(axis=1) / total, 0.0))
            pts_r.append(filtered_rouge(ev, sig, t, idx).mean(axis=1))
        q, r = np.stack(pts_q, 1), np.stack(pts_r, 1)                     # B × points
        ok = q[:, :, None] >= grid[None, None, :] - 1e-12                   # B × points × grid
        best = np.where(ok, r[:, :, None], -np.inf).max(axis=1)
        best = np.where(np.isfinite(best), best, r.min(axis=1, keepdims=True))
        out[sig] = best.mean(axis=1)
    return out


@scoped_rule("recap_filter_hybrid", "recap_filter_hybrid_aligned")
def filter_hybrid(res, claim: Claim) -> Finding:
    """Hypothesis: the hybrid memorization score is the best filter: its frontier area (filtered ROUGE-L over the
    share of feedback queries saved) exceeds both ROUGE-L's and cosine's; 95 % event-level bootstrap interval of
    hybrid − the better other above 0. Not testable when the run computed no memorization scores. Our value: the
    hybrid's filtered ROUGE-L at the threshold saving closest to half the queries (the paper: 0.44, unfiltered 0.53)."""
    tr, ev = res.tables.get("filter_tradeoff"), res.tables.get("filter_events")
    if tr is None or tr.empty or ev is None or ev.empty:
        return untestable("no memorization scores", "the run computed no memorization scores per event",
                          full_command("recap_feedback"))
    seed, B = run_seed(res)
    thresholds = sorted(tr.threshold.unique())
    tr = filter_tradeoff(ev, thresholds)          # of the claim's targets' events (tr: every target's)
    point = _frontier_areas(ev, thresholds, np.arange(len(ev))[None, :])
    draws = _frontier_areas(ev, thresholds, np.concatenate(list(resample_indices(len(ev), B, seed))))
    d = draws["hybrid"] - np.maximum(draws["rouge_l"], draws["cosine"])
    est = float(point["hybrid"][0] - max(point["rouge_l"][0], point["cosine"][0]))
    ci = boot_ci(d, units=len(ev))
    v = decide(ci)
    h = tr[tr.signal == "hybrid"]
    mid = h.iloc[(h.queries_saved - 0.5).abs().argmin()]
    return Finding(float(mid.rouge_l_filtered), None, f"targets: {', '.join(dict.fromkeys(ev.target))}; oracle "
                   f"filter on {len(ev)} RECAP events; thresholds "
                   f"{', '.join(f'{t:g}' for t in thresholds)}", v,
                   "frontier area " + ", ".join(f"{s} {a[0]:.3f}" for s, a in point.items())
                   + f"; hybrid − best other {est:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; unfiltered "
                   f"{float(tr.rouge_l_unfiltered.iloc[0]):.3f}; hybrid at {mid.threshold:g} saves "
                   f"{mid.queries_saved:.0%}",
                   statistic="hybrid-filtered ROUGE-L at ~50 % queries saved; decided on the frontier-area difference",
                   our_n=len(ev), n_needed=n_if_open(est, ci, len(ev), v))
