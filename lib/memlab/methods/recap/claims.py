"""Paper vs ours for RECAP (seed 000): one rule per claim of conf/paper/000_recap.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``recap_table3`` / ``recap_feedback`` (its
tables and metrics) and returns a :class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring.

Intervals are book-level bootstraps (:mod:`memlab.metrics.bootstrap`, the paper's §4.1 protocol) seeded with the
run's ``method.seed`` with ``method.bootstrap.n_resamples`` resamples (its typed config,
:attr:`memlab.results.StudyResult.method`), so they are deterministic.
A category's "Avg." is computed exactly as the study's Table 3: each target's books are resampled (the same indices
for every method, so method differences are paired), and each resample's per-target means are averaged over
targets; the mean of these resampled averages is Table 3's "Avg." (a bootstrap mean, as the paper prints).
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import ALPHA, Claim, Finding, combine, decide, full_command, guard, rule, untestable
from memlab.methods.recap.agents import agents_label
from memlab.methods.recap.evaluate import filtered_rouge
from memlab.metrics.bootstrap import resample_indices
from memlab.metrics.intervals import (bonferroni_level, expanded_level, n_to_decide, permutation_diff, quantile_ci,
                                      sign_flip_p, wilson, wilson_n_to_decide)

METHODS = ("prefix", "dsp", "dsp_jb", "recap")
NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP"}
CATEGORY = {"public_domain": "public-domain", "copyrighted": "copyright-category (stand-in)",
            "non_training": "non-training"}


# -- helpers ----------------------------------------------------------------------------------------------------
def _seed(res) -> tuple[int, int]:
    """The run's bootstrap seed and resamples: ``method.seed``, ``method.bootstrap.n_resamples``."""
    m = res.method
    return m.seed, m.bootstrap.n_resamples


def _resampled(x: np.ndarray, w: np.ndarray | None, seed: int, n: int) -> np.ndarray:
    """(n × k) weighted column means of ``x`` (units × k) over ``n`` book-level resamples drawn with ``seed``."""
    out = []
    for idx in resample_indices(len(x), n, seed):
        xs = x[idx]                                        # (b, units, k)
        if w is None:
            out.append(xs.mean(axis=1))
        else:
            ws = w[idx][..., None]
            out.append((ws * xs).sum(axis=1) / ws.sum(axis=1))
    return np.concatenate(out)


def _ci(stats: np.ndarray, level: float = 1 - ALPHA, units: int | None = None) -> tuple[float, float]:
    """Percentile interval of bootstrap draws; with ``units`` (books resampled per target) the expanded percentile
    interval, so that few books give a wide interval rather than a falsely narrow one."""
    return quantile_ci(stats, expanded_level(level, max(2, units)) if units else level)


def _units(n_pairs: int, targets) -> int:
    return max(1, n_pairs // max(1, len(targets)))


def nonmember_rows(books) -> "np.ndarray":
    """Rows of ``book_scores`` known to lie outside their target's training set: the tiny model's held-out KJV
    books (``split`` = nonmember, ``group`` = "<category> (non-members)"). Either column suffices; a table with
    neither cannot tell members from non-members and is refused rather than pooled."""
    if "split" not in books.columns and "group" not in books.columns:
        raise ValueError("book_scores has neither a split nor a group column: members and non-members of the "
                         "tiny model cannot be told apart")
    held = np.zeros(len(books), bool)
    if "split" in books.columns:
        held |= (books["split"].astype(str) == "nonmember").to_numpy()
    if "group" in books.columns:
        held |= books["group"].astype(str).str.endswith("(non-members)").to_numpy()
    return held


def _scores(res, category: str, methods=METHODS, members_only: bool = False, target: str | None = None):
    """(target, book) × method ROUGE-L of ``category`` (books scored by every method), or None."""
    books = res.tables.get("book_scores")
    if books is None or not len(books):
        return None
    sub = books[books.category == category]
    if target is not None:
        sub = sub[sub.target == target]
    if members_only:
        sub = sub[~nonmember_rows(sub)]
    if sub.empty:
        return None
    wide = sub.pivot_table(index=["target", "book"], columns="method", values="rouge_l", aggfunc="mean")
    wide = wide.reindex(columns=list(methods)).dropna()
    return None if wide.empty else wide


def _paired_p(res, category: str, a: str, b: str) -> float:
    """Sign-flip p of the per-(target, book) differences a − b on ``category``."""
    w = _scores(res, category, (a, b))
    seed, B = _seed(res)
    return sign_flip_p((w[a] - w[b]).to_numpy(float), n_resamples=B, seed=seed)


def _panel(res, category: str, methods=METHODS, seed_offset: int = 0, members_only: bool = False,
           target: str | None = None):
    """Table 3 "Avg." of ``methods`` on ``category``, as the study computes it: for each target, its books are
    resampled ``bootstrap_resamples`` times with ``resample_indices(n_books, B, seed)`` (the same indices for every
    method: paired), each resample's per-target means are averaged over targets. Returns the (B × methods) matrix of
    resampled averages — its column means are Table 3's "Avg." row — the targets and the number of (target, book)
    pairs; None when no target has books scored by every method. ``members_only`` drops books known to be outside
    a target's training set (:func:`nonmember_rows`: the tiny model's held-out KJV books), so a target's members
    and non-members are never pooled."""
    wide = _scores(res, category, methods, members_only, target)
    if wide is None:
        return None
    seed, B = _seed(res)
    targets = list(dict.fromkeys(wide.index.get_level_values("target")))
    per_target = [_resampled(wide.xs(t, level="target").to_numpy(float), None, seed + seed_offset, B)
                  for t in targets]
    return np.mean(per_target, axis=0), targets, len(wide)


def _agents(res) -> str:
    """The agents' label: the kind the run configured (``method.agents.llm``), with the fallbacks it measured
    (``agent_fallbacks/<role>`` metrics)."""
    return agents_label("llm" if res.method.agents.llm else "deterministic", res.metrics)


def _setting(res, targets, category: str, n: int, extra: str = "") -> str:
    agents = _agents(res)
    s = (f"targets: {', '.join(targets)}; {CATEGORY.get(category, category)} books, n = {n} (target, book) pairs; "
         f"EchoTrace-mini; {agents} agents")
    return s + (f"; {extra}" if extra else "")


def _copyright_pair(res, a: str, b: str):
    """Table 3 'Avg.' per method on the copyright category (bootstrap means), each method's paired bootstrap draws
    (``{method: draws}``), the targets, n, and the paired 95 % interval of ``a`` − ``b``; a "not testable here"
    :class:`Finding` when no book there was scored by every method. Members only: a target trained here (the aligned
    tiny target) also scores held-out licences, which no claim about extracting training books may pool."""
    p = _panel(res, "copyrighted", members_only=True)
    if p is None:
        return untestable("no copyright-category books", NO_BOOKS.format("copyright"), full_command("recap_table3"))
    stats, targets, n = p
    draws = {m: stats[:, k] for k, m in enumerate(METHODS)}
    return dict(zip(METHODS, stats.mean(axis=0))), draws, targets, n, _ci(draws[a] - draws[b], units=_units(n, targets))


def _need(d: float, ci: tuple[float, float], n: int, verdict: str) -> int | None:
    return n_to_decide(d, ci, n, 0.0) if verdict == "inconclusive" else None


MIN_IMPROVED = 3   # recap_feedback_one_round: events that must improve before the split between rounds is judged
NO_BOOKS = "the run scored no {} books with every method, so the claim cannot be tested"


# -- Table 3 -----------------------------------------------------------------------------------------------------
@rule("recap_t3_order")
def t3_order(res, claim: Claim) -> Finding:
    """Hypothesis: on the copyright category, RECAP > DSP + Jailbreak > DSP > Prefix-Probing in Table 3's average
    ROUGE-L. Three paired book-level bootstrap intervals of the adjacent differences, each at 1 − 0.05/3: reproduced
    iff all lie above 0, contradicted iff one lies below. Our value: RECAP's average, with its interval."""
    got = _copyright_pair(res, "recap", "dsp_jb")
    if isinstance(got, Finding):
        return got
    point, draws, targets, n, _ = got
    level = bonferroni_level(3, ALPHA)
    steps = [(a, b, point[a] - point[b], _ci(draws[a] - draws[b], level, _units(n, targets)))
             for a, b in (("recap", "dsp_jb"), ("dsp_jb", "dsp"), ("dsp", "prefix"))]
    ps = [_paired_p(res, "copyrighted", a, b) for a, b, *_ in steps]
    verdicts = [guard(decide(ci), p, level) for (*_, ci), p in zip(steps, ps)]
    seen = " vs ".join(f"{NAMES[m]} {point[m]:.3f}" for m in reversed(METHODS))
    why = seen + "; " + "; ".join(f"{NAMES[a]} − {NAMES[b]} {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"
                                  for a, b, d, ci in steps)
    needs = [_need(d, ci, n, v) for (_, _, d, ci), v in zip(steps, verdicts)]
    return Finding(point["recap"], _ci(draws["recap"], units=_units(n, targets)), _setting(res, targets, "copyrighted", n),
                   combine(verdicts), why, statistic="RECAP's copyright-category average ROUGE-L (bootstrap mean)",
                   p_value=max(ps), our_n=n, n_needed=max((x for x in needs if x), default=None))


@rule("recap_t3_jailbreak_gain")
def t3_jailbreak_gain(res, claim: Claim) -> Finding:
    """Hypothesis: DSP + Jailbreak's copyright-category average exceeds DSP's (paired 95 % interval of the
    difference above 0; the paper's 42 % is for strongly aligned API models, its App. K reports 10 % for small ones,
    so only the direction is tested). Not testable when no target refused a DSP prompt: the jailbreaker only
    rewrites refused prompts. Our value: the relative gain (DSP + JB − DSP) / DSP."""
    got = _copyright_pair(res, "dsp_jb", "dsp")
    if isinstance(got, Finding):
        return got
    point, draws, targets, n, (d_lo, d_hi) = got
    ref = res.tables.get("refusals")
    refused = None
    if ref is not None and len(ref):
        r = ref[(ref.category == "copyrighted") & (ref.method == "dsp")]
        refused = float((r.blocked * r.events).sum() / r.events.sum()) if r.events.sum() else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (draws["dsp_jb"] - draws["dsp"]) / draws["dsp"]
    gain = (point["dsp_jb"] - point["dsp"]) / point["dsp"] if point["dsp"] > 0 else None
    setting = _setting(res, targets, "copyrighted", n, f"DSP refusal rate {refused:.0%}" if refused is not None else "")
    d = point["dsp_jb"] - point["dsp"]
    seen = f"DSP {point['dsp']:.3f} → DSP + Jailbreak {point['dsp_jb']:.3f} (difference {d:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}])"
    if refused == 0.0:
        return untestable(setting, f"our targets refused none of the DSP prompts, so the jailbreak never fires "
                          f"({seen})", "python -m memlab.run experiment=recap_table3 with a target that refuses "
                          "(an aligned chat model, e.g. model=<served chat preset>)")
    p = _paired_p(res, "copyrighted", "dsp_jb", "dsp")
    v = guard(decide((d_lo, d_hi)), p)
    return Finding(gain, _ci(rel, units=_units(n, targets)) if np.isfinite(rel).any() else None, setting, v, seen,
                   statistic="relative gain (DSP + JB − DSP) / DSP; decided on the paired difference", p_value=p, our_n=n,
                   n_needed=_need(d, (d_lo, d_hi), n, v))


@rule("recap_t3_public_vs_copyrighted")
def t3_public_vs_copyrighted(res, claim: Claim) -> Finding:
    """Hypothesis: for each target that may have seen both categories, RECAP's public-domain average exceeds its
    copyright-category average (book-level bootstrap interval of the difference per target, at a Bonferroni level
    over targets): reproduced iff every target's lies above 0, contradicted iff one lies below. A target whose
    training set is known to hold one category only (the tiny model: public-domain members, never the licence
    texts) is left out: its difference is true by construction. Our value: the mean difference over the judged
    targets (the paper: 0.621 − 0.460)."""
    books = res.tables.get("book_scores")
    if books is None or books.empty:
        return untestable("no books", NO_BOOKS.format("public-domain"), full_command("recap_table3"))
    known = set(books.loc[nonmember_rows(books), "target"])
    targets = [t for t in dict.fromkeys(books.target) if t not in known]
    if not targets:
        return untestable("only targets trained on one category", "no target may have seen both categories",
                          full_command("recap_table3"))
    level, out = bonferroni_level(len(targets), ALPHA), {}
    for t in targets:
        pub = _panel(res, "public_domain", ("recap",), target=t)
        cop = _panel(res, "copyrighted", ("recap",), seed_offset=1, target=t)
        if pub is not None and cop is not None:
            d = pub[0][:, 0] - cop[0][:, 0]
            seed, B = _seed(res)
            p = permutation_diff(_scores(res, "public_domain", ("recap",), target=t)["recap"],
                                 _scores(res, "copyrighted", ("recap",), target=t)["recap"], n_resamples=B, seed=seed)
            out[t] = (float(d.mean()), _ci(d, level, min(pub[2], cop[2])), pub[2] + cop[2], p)
    if not out:
        return untestable("missing a category", NO_BOOKS.format("public-domain or copyright"),
                          full_command("recap_table3"))
    verdicts = [guard(decide(ci), p, level) for _, ci, _, p in out.values()]
    n = sum(k for _, _, k, _ in out.values())
    why = "; ".join(f"{t}: public − copyright {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}], permutation p {p:.3g}"
                    for t, (d, ci, _, p) in out.items())
    why += f"; left out (one category in training): {', '.join(sorted(known))}" if known else ""
    needs = [_need(d, ci, k, v) for (d, ci, k, _), v in zip(out.values(), verdicts)]
    return Finding(float(np.mean([d for d, *_ in out.values()])), None,
                   _setting(res, list(out), "public_domain", n, "vs copyright category (stand-in: licence texts)"),
                   combine(verdicts), why, statistic="RECAP public-domain − copyright-category average ROUGE-L, mean "
                   "over judged targets; decided per target", p_value=max(p for *_, p in out.values()), our_n=n, n_needed=max((x for x in needs if x), default=None))


@rule("recap_gain_over_dsp")
def gain_over_dsp(res, claim: Claim) -> Finding:
    """Hypothesis: RECAP's copyright-category average exceeds DSP's (the single-iteration baseline; paired 95 %
    interval of the difference above 0). GPT-4.1 is not among our targets. Our value: the relative gain
    (RECAP − DSP) / DSP (the paper: +24 %)."""
    got = _copyright_pair(res, "recap", "dsp")
    if isinstance(got, Finding):
        return got
    point, draws, targets, n, (lo, hi) = got
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (draws["recap"] - draws["dsp"]) / draws["dsp"]
    d = point["recap"] - point["dsp"]
    p = _paired_p(res, "copyrighted", "recap", "dsp")
    v = guard(decide((lo, hi)), p)
    return Finding(d / point["dsp"] if point["dsp"] > 0 else None, _ci(rel, units=_units(n, targets)) if np.isfinite(rel).any() else None,
                   _setting(res, targets, "copyrighted", n), v,
                   f"not GPT-4.1: DSP {point['dsp']:.3f} → RECAP {point['recap']:.3f}; difference {d:+.3f} "
                   f"[{lo:+.3f}, {hi:+.3f}]", statistic="relative gain (RECAP − DSP) / DSP; decided on the paired "
                   "difference", p_value=p, our_n=n, n_needed=_need(d, (lo, hi), n, v))


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


@rule("recap_feedback_one_round")
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
               f"{_agents(res)} agents")
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


@rule("recap_feedback_no_contamination")
def feedback_no_contamination(res, claim: Claim) -> Finding:
    """Hypothesis: the feedback loop raises ROUGE-L (RECAP − DSP + Jailbreak) less on non-training books than on
    training books (independent book-level bootstraps; 95 % interval of training gain − non-training gain above 0).
    Not testable without a positive control: when the loop gains nothing on training books there is no
    contamination to miss. Our value: the most RECAP passages on any non-training book and target (the paper: at
    most 1)."""
    books = res.tables.get("book_scores")
    tol = res.method.passage_tolerance
    train = [c for c in ("public_domain", "copyrighted") if books is not None and c in set(books.category)]
    nt = _panel(res, "non_training", ("dsp_jb", "recap"), seed_offset=2)
    tr = [p for c in train if (p := _panel(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    if nt is None or not tr:
        return untestable("no non-training or training books", NO_BOOKS.format("non-training or training"),
                          full_command("recap_feedback"))
    g_tr = np.mean([p[0][:, 1] - p[0][:, 0] for p in tr], axis=0)
    g_nt = nt[0][:, 1] - nt[0][:, 0]
    setting = _setting(res, nt[1], "non_training", nt[2], f"passages: 40 tokens, ≤ {tol} mismatches")
    worst = int(books[(books.category == "non_training") & (books.method == "recap")][f"passages_m{tol}"].max())
    units = min([_units(p[2], p[1]) for p in tr] + [_units(nt[2], nt[1])])
    tr_ci = _ci(g_tr, units=units)
    if tr_ci[0] <= 0:
        return untestable(setting, f"no positive control: the loop's gain on training books {g_tr.mean():+.3f} "
                          f"[{tr_ci[0]:+.3f}, {tr_ci[1]:+.3f}] is not above 0", full_command("recap_feedback"))
    d = g_tr - g_nt
    ci = _ci(d, units=units)
    per_book = [w["recap"] - w["dsp_jb"] for c in train
                if (w := _scores(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    w_nt = _scores(res, "non_training", ("dsp_jb", "recap"))
    seed, B = _seed(res)
    p = permutation_diff(np.concatenate([x.to_numpy(float) for x in per_book]),
                         (w_nt["recap"] - w_nt["dsp_jb"]).to_numpy(float), n_resamples=B, seed=seed)
    v = guard(decide(ci), p)
    n = nt[2] + sum(p[2] for p in tr)
    return Finding(float(worst), None, setting, v,
                   f"gain on training books {g_tr.mean():+.3f}, on non-training books {g_nt.mean():+.3f}; difference "
                   f"{d.mean():+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; at most {worst} RECAP passage(s) per non-training "
                   f"book", statistic="most RECAP passages on a non-training book and target; decided on training "
                   "gain − non-training gain", p_value=p, our_n=n, n_needed=_need(float(d.mean()), ci, n, v))


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


@rule("recap_filter_hybrid")
def filter_hybrid(res, claim: Claim) -> Finding:
    """Hypothesis: the hybrid memorization score is the best filter: its frontier area (filtered ROUGE-L over the
    share of feedback queries saved) exceeds both ROUGE-L's and cosine's; 95 % event-level bootstrap interval of
    hybrid − the better other above 0. Not testable when the run computed no memorization scores. Our value: the
    hybrid's filtered ROUGE-L at the threshold saving closest to half the queries (the paper: 0.44, unfiltered 0.53)."""
    tr, ev = res.tables.get("filter_tradeoff"), res.tables.get("filter_events")
    if tr is None or tr.empty or ev is None or ev.empty:
        return untestable("no memorization scores", "the run computed no memorization scores per event",
                          full_command("recap_feedback"))
    seed, B = _seed(res)
    thresholds = sorted(tr.threshold.unique())
    point = _frontier_areas(ev, thresholds, np.arange(len(ev))[None, :])
    draws = _frontier_areas(ev, thresholds, np.concatenate(list(resample_indices(len(ev), B, seed))))
    d = draws["hybrid"] - np.maximum(draws["rouge_l"], draws["cosine"])
    est = float(point["hybrid"][0] - max(point["rouge_l"][0], point["cosine"][0]))
    ci = _ci(d, units=len(ev))
    v = decide(ci)
    h = tr[tr.signal == "hybrid"]
    mid = h.iloc[(h.queries_saved - 0.5).abs().argmin()]
    return Finding(float(mid.rouge_l_filtered), None, f"oracle filter on {len(ev)} RECAP events; thresholds "
                   f"{', '.join(f'{t:g}' for t in thresholds)}", v,
                   "frontier area " + ", ".join(f"{s} {a[0]:.3f}" for s, a in point.items())
                   + f"; hybrid − best other {est:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; unfiltered "
                   f"{float(tr.rouge_l_unfiltered.iloc[0]):.3f}; hybrid at {mid.threshold:g} saves {mid.queries_saved:.0%}",
                   statistic="hybrid-filtered ROUGE-L at ~50 % queries saved; decided on the frontier-area difference",
                   our_n=len(ev), n_needed=_need(est, ci, len(ev), v))
