"""Paper vs ours for RECAP (seed 000): one rule per claim of conf/paper/000_recap.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``recap_table3`` / ``recap_feedback`` (its
tables and metrics), restricted to the targets of its claim's scope (:func:`~memlab.methods.recap.claim_panels.scoped`),
and returns a :class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring. How the tables are
read (panels, intervals, settings): :mod:`memlab.methods.recap.claim_panels`.
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import (Check, Claim, Finding, claim_level, combine, decide, full_command, guard, rule,
                               untestable)
from memlab.errors import ConfigError
from memlab.methods.recap.claim_panels import (FLOOR, FLOOR_NAMES, METHODS, NAMES, NO_BOOKS, agents_used, boot_ci,
                                               copyright_panel, member_events, n_if_open, nonmember_rows, panel,
                                               paired_p, resampled, run_seed, scoped_rule, scores, setting_text,
                                               units_per_target, with_tables)
from memlab.methods.recap import claims_shares  # noqa: F401  (registers the rules judged on shares of events)
from memlab.methods.recap.evaluate import filter_tradeoff
from memlab.methods.recap.frontier import book_weights, frontier_areas
from memlab.metrics.intervals import (permutation_diff, permutation_min_n, sign_flip_min_n, sign_flip_p, wilson,
                                      wilson_n_to_decide)


# -- Table 3 -----------------------------------------------------------------------------------------------------
# the steps of Table 3's order the pipeline guarantees per book (sanity checks below): ≥ 0 by construction
BY_CONSTRUCTION = (("recap", "dsp_jb"), ("dsp_jb", "dsp"))


@scoped_rule("recap_t3_order", "recap_t3_order_aligned")
def t3_order(res, claim: Claim) -> Finding:
    """Hypothesis: on the copyright category, RECAP > DSP + Jailbreak > DSP > Prefix-Probing in Table 3's average
    ROUGE-L. Three paired book-level bootstrap intervals of the adjacent differences, each at 1 − α/3 and guarded
    by the exact sign-flip test of the same member books (α: the claim's ``alpha``, 0.05). The
    pipeline makes RECAP ≥ DSP + Jailbreak ≥ DSP per book (sanity checks recap_t3_feedback_keeps_best and
    recap_t3_jailbreak_keeps_dsp), so those two steps can hold strictly or stay open, never fail; the step that can
    fail is DSP > Prefix-Probing. Reproduced iff all three intervals lie above 0; contradicted iff DSP −
    Prefix-Probing's lies below 0; how large the two guaranteed gains are is judged by recap_t3_jailbreak_gain and
    recap_gain_over_dsp. Our value: RECAP's average, with its interval."""
    got = copyright_panel(res)
    if isinstance(got, Finding):
        return got
    point, draws, targets, n = got
    lv = claim_level(claim, 3)
    steps = [(a, b, point[a] - point[b], boot_ci(draws[a] - draws[b], lv, units_per_target(n, targets)))
             for a, b in BY_CONSTRUCTION + (("dsp", "prefix"),)]
    ps = [paired_p(res, a, b) for a, b, *_ in steps]
    verdicts = [guard(decide(ci), p, lv) for (*_, ci), p in zip(steps, ps)]
    # a guaranteed step below 0 is a broken pipeline (the sanity checks fail), never a verdict on the paper
    verdicts = ["inconclusive" if (a, b) in BY_CONSTRUCTION and v == "contradicted" else v
                for (a, b, *_), v in zip(steps, verdicts)]
    seen = " vs ".join(f"{NAMES[m]} {point[m]:.3f}" for m in reversed(METHODS))
    why = seen + "; " + "; ".join(f"{NAMES[a]} − {NAMES[b]} {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] (sign-flip p "
                                  f"{p:.3g} vs {1 - lv:.3g}" + ("; ≥ 0 by construction)" if (a, b) in BY_CONSTRUCTION
                                                                else ")") for (a, b, d, ci), p in zip(steps, ps))
    needs = [n_if_open(d, ci, n, v, sign_flip_min_n(lv)) for (_, _, d, ci), v in zip(steps, verdicts)]
    return Finding(point["recap"], boot_ci(draws["recap"], claim_level(claim), units_per_target(n, targets)),
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


def _gain(res, got, a: str, b: str, setting: str, claim: Claim, prefix: str = "") -> Finding:
    """The gain of ``a`` over ``b`` on the copyright category, where ``a`` ≥ ``b`` per book by construction (so its
    direction cannot fail): judged on its size and above the floor (issue 29). Two paired intervals at 1 − α/2,
    of ``a`` − (1 + ``least``) · ``b`` (above 0 iff the relative gain exceeds ``least``, the claim's ``threshold``;
    guarded by the exact sign-flip test of the same member books) and of ``a`` − its echo
    floor (what its hints alone score). Reproduced iff both lie above 0; contradicted iff the first lies below 0 (a
    gain smaller than ``least``); a gain whose method does not clear its floor is inconclusive (the hints could
    explain it). Our value: the relative gain (a − b) / b."""
    point, draws, targets, n = got
    least = _least(claim)
    lv, units, k = claim_level(claim, 2), units_per_target(n, targets), 1 + least
    floor = panel(res, "copyrighted", (a, FLOOR[a]), members_only=True)
    if floor is None:
        return untestable(setting, f"the run measured no echo floor of {NAMES[a]} on the copyright category",
                          full_command("recap_table3"))
    d, ci = point[a] - k * point[b], boot_ci(draws[a] - k * draws[b], lv, units)
    fdraws = floor[0][:, 0] - floor[0][:, 1]
    fd, fci = float(fdraws.mean()), boot_ci(fdraws, lv, units)
    p = paired_p(res, a, b, scale=k)   # the books copyright_panel reads
    v = v_size = guard(decide(ci), p, lv)
    rel = (point[a] - point[b]) / point[b] if point[b] > 0 else None
    seen = (f"{prefix}{NAMES[b]} {point[b]:.3f} → {NAMES[a]} {point[a]:.3f} (relative gain "
            f"{f'{rel:+.0%}' if rel is not None else 'undefined'}; {NAMES[a]} − {k:g} × {NAMES[b]} {d:+.3f} "
            f"[{ci[0]:+.3f}, {ci[1]:+.3f}], above 0 iff the gain exceeds {least:.0%}; sign-flip p {p:.3g} vs "
            f"{1 - lv:.3g}); {NAMES[a]} − its floor "
            f"({FLOOR_NAMES[FLOOR[a]]}) {fd:+.3f} [{fci[0]:+.3f}, {fci[1]:+.3f}]")
    if v == "reproduced" and decide(fci) != "reproduced":
        v, seen = "inconclusive", seen + ": the gain does not clear what the hints alone score"
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_draws = (draws[a] - draws[b]) / draws[b]
    needs = [x for x in (n_if_open(d, ci, n, v_size, sign_flip_min_n(lv)), n_if_open(fd, fci, n, decide(fci)))
             if x]   # open tests only
    rel_ci = boot_ci(rel_draws, claim_level(claim), units) if np.isfinite(rel_draws).any() else None
    return Finding(rel, rel_ci, setting, v, seen, statistic=f"relative gain ({NAMES[a]} − {NAMES[b]}) / {NAMES[b]}; "
                   f"decided on {NAMES[a]} − {k:g} × {NAMES[b]} (a gain of at least {least:.0%}) and on the "
                   "gainer's margin over its echo floor", p_value=p, our_n=n, n_needed=max(needs, default=None))


def _least(claim: Claim) -> float:
    """The smallest relative gain a gain claim calls reproduced (its ``threshold`` in conf/paper/000_recap.yaml)."""
    if claim.threshold is None:
        raise ConfigError(f"claim {claim.id!r}: a gain claim needs a threshold (the least relative gain it tests)")
    return float(claim.threshold)


@scoped_rule("recap_t3_jailbreak_gain", "recap_t3_jailbreak_gain_aligned")
def t3_jailbreak_gain(res, claim: Claim) -> Finding:
    """Hypothesis: jailbreaking raises the copyright-category average by at least ``threshold`` (10 %, relative:
    the smallest jailbreak gain the paper reports, App. K's smaller models; Table 3's 42 % is for strongly aligned
    API models), and DSP + Jailbreak clears its own echo floor (the metadata echo). DSP + Jailbreak ≥ DSP per book
    holds by construction (sanity check recap_t3_jailbreak_keeps_dsp), so only the gain's size can fail. Two
    paired intervals at 1 − α/2, of DSP + JB − (1 + threshold) × DSP and of DSP + JB − its floor: reproduced
    iff both lie above 0, contradicted iff the first lies below 0 (a gain below the threshold). Not testable when
    no DSP output was blocked: the jailbreaker only rewrites blocked prompts. Our value: the relative gain
    (DSP + JB − DSP) / DSP."""
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
    return _gain(res, got, "dsp_jb", "dsp", setting, claim)


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
    lv, out = claim_level(claim, len(targets)), {}
    for t in targets:
        pub = panel(res, "public_domain", ("recap",), target=t, members_only=True)
        cop = panel(res, "copyrighted", ("recap",), seed_offset=1, target=t, members_only=True)
        if pub is not None and cop is not None:
            d = pub[0][:, 0] - cop[0][:, 0]
            seed, B = run_seed(res)
            p = permutation_diff(*(scores(res, c, ("recap",), target=t, members_only=True)["recap"]
                                   for c in ("public_domain", "copyrighted")), n_resamples=B, seed=seed)
            out[t] = (float(d.mean()), boot_ci(d, lv, min(pub[2], cop[2])), pub[2] + cop[2], p)
    if not out:
        return untestable("missing a category", NO_BOOKS.format("public-domain or copyright"),
                          full_command("recap_table3"))
    verdicts = [guard(decide(ci), p, lv) for _, ci, _, p in out.values()]
    n = sum(k for _, _, k, _ in out.values())
    why = "; ".join(f"{t}: public − copyright {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}], permutation p {p:.3g}"
                    for t, (d, ci, _, p) in out.items())
    why += f"; left out (one category in training): {', '.join(sorted(known))}" if known else ""
    needs = [n_if_open(d, ci, k, v, permutation_min_n(lv)) for (d, ci, k, _), v in zip(out.values(), verdicts)]
    return Finding(float(np.mean([d for d, *_ in out.values()])), None,
                   setting_text(res, list(out), "public_domain", n, "vs copyright category (stand-in: licence texts)"),
                   combine(verdicts), why, statistic="RECAP public-domain − copyright-category average ROUGE-L, mean "
                   "over judged targets; decided per target", p_value=max(p for *_, p in out.values()), our_n=n,
                   n_needed=max((x for x in needs if x), default=0) * len(out) or None)   # each target's, as our_n


@scoped_rule("recap_gain_over_dsp", "recap_gain_over_dsp_aligned")
def gain_over_dsp(res, claim: Claim) -> Finding:
    """Hypothesis: RECAP raises the copyright-category average over DSP (the single-iteration baseline) by at
    least ``threshold`` (10 %, relative: the smallest gain the paper calls relevant, App. K; its GPT-4.1 gain is
    24 %, not among our targets), and RECAP clears its own echo floor (the metadata + feedback echo: what its prompt
    and feedback hints alone score). RECAP ≥ DSP + Jailbreak ≥ DSP per book holds by construction (sanity checks
    recap_t3_feedback_keeps_best, recap_t3_jailbreak_keeps_dsp), so only the gain's size can fail. Two paired
    intervals at 1 − α/2, of RECAP − (1 + threshold) × DSP and of RECAP − its floor: reproduced iff both lie
    above 0, contradicted iff the first lies below 0 (a gain below the threshold). Our value: the relative gain
    (RECAP − DSP) / DSP."""
    got = copyright_panel(res)
    if isinstance(got, Finding):
        return got
    _, _, targets, n = got
    return _gain(res, got, "recap", "dsp", setting_text(res, targets, "copyrighted", n), claim,
                 prefix="not GPT-4.1: ")


# -- sanity: what the pipeline guarantees per book ---------------------------------------------------------------
def _keeps(res, a: str, b: str, why: str) -> Check:
    """Sanity: ``a`` ≥ ``b`` on every (target, category, book) of ``book_scores`` (up to float rounding), ``why``
    the pipeline guarantees it; the control is the same comparison for DSP vs Prefix-Probing, a pair the pipeline
    does not order (the share of books where DSP ≥ Prefix-Probing may take any value)."""
    books = res.tables.get("book_scores")
    control = "share of books where DSP ≥ Prefix-Probing (not ordered by the pipeline)"
    wide = None if books is None or books.empty else books.pivot_table(
        index=["target", "category", "book"], columns="method", values="rouge_l", aggfunc="mean")
    if wide is None or not {a, b} <= set(wide.columns) or wide[[a, b]].dropna().empty:
        return Check(None, control, None, False, f"no book scored by both {NAMES[a]} and {NAMES[b]}: nothing checked")
    pair = wide[[a, b]].dropna()
    gap = pair[a] - pair[b]
    ok = gap >= -1e-9
    ctl = wide[["dsp", "prefix"]].dropna() if {"dsp", "prefix"} <= set(wide.columns) else None
    ctl_value = float((ctl.dsp >= ctl.prefix).mean()) if ctl is not None and len(ctl) else None
    worst = gap.idxmin()
    return Check(float(ok.mean()), control, ctl_value, bool(ok.all()),
                 f"{int(ok.sum())} of {len(ok)} (target, category, book) have {NAMES[a]} ≥ {NAMES[b]} ({why}); "
                 f"smallest {NAMES[a]} − {NAMES[b]} {gap.min():+.3f} ({', '.join(map(str, worst))})")


@rule("recap_t3_feedback_keeps_best")
def feedback_keeps_best(res, claim: Claim) -> Check:
    """Sanity: RECAP ≥ DSP + Jailbreak on every book: the feedback loop starts from DSP + Jailbreak and accepts a
    re-attempt only when it raises the score (pipeline ``_feedback_round``), so a book below is a broken pipeline."""
    return _keeps(res, "recap", "dsp_jb", "the loop keeps its best attempt")


@rule("recap_t3_jailbreak_keeps_dsp")
def jailbreak_keeps_dsp(res, claim: Claim) -> Check:
    """Sanity: DSP + Jailbreak ≥ DSP on every book: the jailbreak replaces only blocked DSP outputs, which score 0
    (``method.recap.blocked_score: zero``). Under ``blocked_score: keep`` a blocked output keeps its score and the
    jailbreak may lower it: shown, not checked."""
    k = _keeps(res, "dsp_jb", "dsp", "the jailbreak replaces only blocked outputs, which score 0")
    if res.method.recap.blocked_score != "zero":
        return Check(k.value, k.control, k.control_value, True, k.reason + "; not guaranteed under blocked_score="
                     f"{res.method.recap.blocked_score} (a blocked DSP output keeps its score): not checked")
    return k


# -- the feedback loop -------------------------------------------------------------------------------------------
@scoped_rule("recap_feedback_one_round", "recap_feedback_one_round_aligned")
def feedback_one_round(res, claim: Claim) -> Finding:
    """Hypothesis: fewer than ``threshold`` (20 %) of the events below the stop score improve after round 1
    (Fig. 6); decided on the 95 % Wilson interval of that share. Not testable when the run allowed one round, the
    loop improved no event, or too few events went on past round 1 for the share to exceed the threshold. Member
    events only. Our value: that share."""
    wide, dropped = member_events(res)
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
    ci = wilson(k, n, claim_level(claim))
    v = decide(ci, claim.threshold, "below")
    first = float(g1.sum() / gf.sum()) if gf.sum() > 0 else float("nan")
    return Finding(k / n, ci, setting, v, f"{k} of {n} events improve after round 1; {(gf > 0).mean():.0%} improve "
                   f"at all; round 1 brings {first:.0%} of the total gain", statistic="share of events improving "
                   "after round 1 (Wilson 95 %)", our_n=n,
                   n_needed=wilson_n_to_decide(k / n, claim.threshold, claim_level(claim)) if v == "inconclusive" else None)


# -- §5.6: non-training books (the paper's passages per book) ------------------------------------------------------------------------------------
def _unseen_as_non_training(res):
    """``res`` with every book a target is known never to have seen (:func:`nonmember_rows`: held-out KJV books and
    licences of the tiny targets) counted in the non-training category, beside the post-cutoff release notes."""
    books = res.tables.get("book_scores")
    if books is None or books.empty:
        return res
    held = nonmember_rows(books)
    return with_tables(res, {**res.tables, "book_scores": books.assign(
        category=np.where(held, "non_training", books.category.astype(object)))})


def _recap_passages(books, col: str, training: bool):
    """RECAP's passages per (target, book): of the training books (public domain and copyright category, members
    only) or of the non-training books."""
    r = books[books.method == "recap"]
    r = r[r.category.isin(("public_domain", "copyrighted"))] if training else r[r.category == "non_training"]
    return r.groupby(["target", "book"])[col].sum()


def _boot_means(x: np.ndarray, seed: int, B: int) -> np.ndarray:
    return resampled(x[:, None], None, seed, B)[:, 0]


@scoped_rule("recap_feedback_no_contamination", "recap_feedback_no_contamination_aligned")
def feedback_no_contamination(res, claim: Claim) -> Finding:
    """Hypothesis: RECAP (feedback loop included) extracts next to nothing from books the target never saw, on the
    paper's quantity, passages per book (40 tokens, ≤ m mismatches, m = ``passage_tolerance``). Two tests at
    1 − α/2 (α: the claim's ``alpha``, 0.05) on (target, book) units: (1) RECAP's mean passages per non-training
    book lie below ``threshold`` (1, the paper's "at most a single passage per book and model"): book-level
    bootstrap interval of the mean below 1, guarded by the exact sign-flip test of passages − 1; (2) RECAP finds
    more passages per training book than per non-training book (the paper's "negligible compared to the thousands
    in the other categories"): independent book-level bootstraps of the difference above 0, guarded by a
    permutation test (an open test's n to decide: at least what its exact test needs at α/2, 7 non-training books,
    9 books in all). Reproduced iff both hold,
    contradicted iff either interval lies on the other side. Non-training books: the post-cutoff release notes and
    every book known to be outside the target's training set. Not testable without a positive control (RECAP found
    no passage on any training book: a run that extracts nothing would pass trivially). Our value: the most RECAP
    passages on any non-training book and target (the paper: at most 1)."""
    res = _unseen_as_non_training(res)
    books, tol, margin = res.tables.get("book_scores"), res.method.passage_tolerance, float(claim.threshold)
    col = f"passages_m{tol}"
    if books is None or books.empty or col not in books.columns:
        return untestable("no books", NO_BOOKS.format("non-training or training"), full_command("recap_feedback"))
    nt, tr = _recap_passages(books, col, False), _recap_passages(books, col, True)
    if nt.empty or tr.empty:
        return untestable("no non-training or training books", NO_BOOKS.format("non-training or training"),
                          full_command("recap_feedback"))
    targets = list(dict.fromkeys(nt.index.get_level_values("target")))
    setting = setting_text(res, targets, "non_training", len(nt), f"vs {len(tr)} training (target, book) pairs; "
                           f"passages: 40 tokens, ≤ {tol} mismatches")
    x_nt, x_tr = nt.to_numpy(float), tr.to_numpy(float)
    worst = float(x_nt.max())
    if x_tr.sum() == 0:
        return untestable(setting, f"no positive control: RECAP found no passage on the {len(tr)} training books "
                          f"(and {int(x_nt.sum())} on the {len(nt)} non-training ones), so finding none on non-training "
                          "books says nothing", full_command("recap_feedback"))
    lv, (seed, B) = claim_level(claim, 2), run_seed(res)
    ci_nt = boot_ci(_boot_means(x_nt, seed, B), lv, len(x_nt))
    p_nt = sign_flip_p(x_nt - margin, n_resamples=B, seed=seed)
    d = _boot_means(x_tr, seed + 1, B) - _boot_means(x_nt, seed + 2, B)
    ci_d = boot_ci(d, lv, min(len(x_tr), len(x_nt)))
    p_d = permutation_diff(x_tr, x_nt, n_resamples=B, seed=seed)
    tests = [guard(decide(ci_nt, margin, "below"), p_nt, lv), guard(decide(ci_d), p_d, lv)]
    est_d = float(x_tr.mean() - x_nt.mean())
    needs = [n_if_open(float(x_nt.mean()) - margin, (ci_nt[0] - margin, ci_nt[1] - margin), len(x_nt), tests[0],
                       sign_flip_min_n(lv)),
             n_if_open(est_d, ci_d, len(x_nt) + len(x_tr), tests[1], permutation_min_n(lv))]
    why = (f"RECAP passages per non-training book {x_nt.mean():.2f} [{ci_nt[0]:.2f}, {ci_nt[1]:.2f}] vs margin "
           f"{margin:g} (sign-flip p {p_nt:.3g}; {int(x_nt.sum())} passages on {len(x_nt)} books, at most {worst:g} on "
           f"one); per training book {x_tr.mean():.2f} ({int(x_tr.sum())} on {len(x_tr)} books), training − "
           f"non-training {est_d:+.2f} [{ci_d[0]:+.2f}, {ci_d[1]:+.2f}] (permutation p {p_d:.3g})")
    if len(x_nt) < sign_flip_min_n(lv):
        why += f"; {len(x_nt)} non-training books cannot reach the sign-flip level (needs {sign_flip_min_n(lv)})"
    return Finding(worst, None, setting, combine(tests), why,
                   statistic="most RECAP passages on a non-training book and target; decided on the mean passages per "
                   "non-training book (below 1) and on training − non-training passages per book",
                   p_value=max(p_nt, p_d), our_n=len(x_nt) + len(x_tr), n_needed=max([x for x in needs if x], default=None))


# -- §5.7: the memorization-score filter --------------------------------------------------------------------------
@scoped_rule("recap_filter_hybrid", "recap_filter_hybrid_aligned")
def filter_hybrid(res, claim: Claim) -> Finding:
    """Hypothesis: the hybrid memorization score is the best of the three filters: its frontier area (filtered
    ROUGE-L averaged over the share of feedback calls saved, 0–1) exceeds both ROUGE-L's and cosine's by at least
    ``threshold`` δ = 0.02 (our reading of "best": a smaller difference is a tie, and three tied filters have no best
    one; δ is about a fifth of the 0.09 ROUGE-L the paper's hybrid filter gives up, 0.53 → 0.44). Paired (the same
    draws for every filter), book-clustered bootstrap ((target, book) pairs resampled, expanded percentile intervals)
    of hybrid − ROUGE-L and hybrid − cosine, each at 1 − α/2: reproduced iff both lie above δ, contradicted iff
    one lies below δ (another filter is as good or better), inconclusive otherwise and on fewer (target, book) pairs
    than the exact sign-flip test needs at that level (7: a bootstrap of 2 books has 3 distinct draws). Not testable
    when the run computed no memorization scores. Our value: the hybrid's filtered ROUGE-L at the threshold saving
    closest to half the calls (the paper: 0.44, unfiltered 0.53)."""
    tr, ev = res.tables.get("filter_tradeoff"), res.tables.get("filter_events")
    cmd = full_command("recap_feedback")
    if tr is None or tr.empty or ev is None or ev.empty:
        return untestable("no memorization scores", "the run computed no memorization scores per event", cmd)
    if "book" not in ev.columns:
        return untestable("filter_events without books", "filter_events has no book column (a run before issue 49), "
                          "so events cannot be resampled by book", cmd)
    seed, B = run_seed(res)
    delta, lv = float(claim.threshold), claim_level(claim, 2)
    thresholds = sorted(tr.threshold.unique())
    tr = filter_tradeoff(ev, thresholds)          # of the claim's targets' events (tr: every target's)
    point = {s: float(v[0]) for s, v in frontier_areas(ev, thresholds, np.ones((1, len(ev)))).items()}
    w, n_books = book_weights(ev, seed, B)
    draws = frontier_areas(ev, thresholds, w)
    tests = {o: (point["hybrid"] - point[o], boot_ci(draws["hybrid"] - draws[o], lv, n_books))
             for o in ("rouge_l", "cosine")}
    least = sign_flip_min_n(lv)   # as the sign-flip-guarded rules: fewer books than any exact test needs
    verdicts = [decide(ci, delta) if n_books >= least else "inconclusive" for _, ci in tests.values()]
    h = tr[tr.signal == "hybrid"]
    mid = h.iloc[(h.queries_saved - 0.5).abs().argmin()]
    needs = [n_if_open(d - delta, (ci[0] - delta, ci[1] - delta), n_books, v, least)
             for (d, ci), v in zip(tests.values(), verdicts)]
    few = f"; {n_books} (target, book) pairs cannot decide (needs ≥ {least})" if n_books < least else ""
    return Finding(float(mid.rouge_l_filtered), None, f"targets: {', '.join(dict.fromkeys(ev.target))}; oracle "
                   f"filter on {len(ev)} RECAP events of {n_books} (target, book) pairs; thresholds "
                   f"{', '.join(f'{t:g}' for t in thresholds)}", combine(verdicts),
                   "frontier area " + ", ".join(f"{s} {a:.3f}" for s, a in point.items()) + "; "
                   + "; ".join(f"hybrid − {o} {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]" for o, (d, ci) in tests.items())
                   + f" (margin +{delta:g}); unfiltered {float(tr.rouge_l_unfiltered.iloc[0]):.3f}; hybrid at "
                   f"{mid.threshold:g} saves {mid.queries_saved:.0%}{few}",
                   statistic="hybrid-filtered ROUGE-L at ~50 % queries saved; decided on hybrid − each other filter's "
                   "frontier area against the margin", our_n=n_books, n_needed=max([x for x in needs if x], default=None))
