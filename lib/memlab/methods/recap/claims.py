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

import functools

import numpy as np

from memlab.comparison import ALPHA, Claim, Finding, combine, decide, full_command, guard, rule, untestable
from memlab.errors import ConfigError
from memlab.methods.recap.agents import agents_label
from memlab.methods.recap.config import TARGET_GROUPS
from memlab.methods.recap.evaluate import filter_tradeoff, filtered_rouge
from memlab.results import StudyResult
from memlab.metrics.bootstrap import resample_indices
from memlab.metrics.intervals import (bonferroni_level, expanded_level, n_to_decide, permutation_diff, quantile_ci,
                                      sign_flip_p, wilson, wilson_n_to_decide)

METHODS = ("prefix", "dsp", "dsp_jb", "recap")
NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP"}
CATEGORY = {"public_domain": "public-domain", "copyrighted": "copyright-category (stand-in)",
            "non_training": "non-training"}
# each method's echo floor (book_scores methods): what its hints alone score against the gold
FLOOR = {"dsp": "echo", "dsp_jb": "echo", "recap": "echo_fb"}
FLOOR_NAMES = {"echo": "metadata echo", "echo_fb": "metadata + feedback echo"}
# the tables the rules read per target: each must carry a target column to be scoped
PER_TARGET = ("book_scores", "refusals", "feedback_gains_events", "filter_events")


# -- scope: the targets a claim judges ----------------------------------------------------------------------------
def scoped(res, claim: Claim):
    """``res`` restricted to the targets of ``claim.scope`` (a target group, ``method.targets.<t>.group``): every
    table with a ``target`` column keeps those targets' rows only, so off-the-shelf models and the aligned
    ground-truth target are judged apart (issue 29). A claim without a scope judges every target."""
    if claim.scope is None:
        return res
    if claim.scope not in TARGET_GROUPS:
        raise ConfigError(f"claim {claim.id!r}: scope must be one of {TARGET_GROUPS}, got {claim.scope!r}")
    method = res.method
    keep = {name for name, t in method.targets.items() if t.group == claim.scope}
    unscoped = [k for k in PER_TARGET if k in res.tables and "target" not in res.tables[k].columns]
    if unscoped:
        raise ValueError(f"claim {claim.id!r} judges the {claim.scope} targets, but table(s) {', '.join(unscoped)} "
                         "have no target column: rerun the study")
    tables = {k: v[v["target"].isin(keep)] if "target" in getattr(v, "columns", ()) else v
              for k, v in res.tables.items()}
    out = StudyResult(tables=tables, metrics=res.metrics)
    out.attach(res.config, {"method": method})
    return out


def scoped_rule(*claim_ids: str):
    """Register a rule for ``claim_ids``; each judges the targets of its own claim's scope (:func:`scoped`)."""
    def register(fn):
        @functools.wraps(fn)
        def judge(res, claim: Claim) -> Finding:
            return fn(scoped(res, claim), claim)
        return rule(*claim_ids)(judge)
    return register


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
@scoped_rule("recap_t3_order", "recap_t3_order_aligned")
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
    point, draws, targets, n, _ = got
    level, units = bonferroni_level(2, ALPHA), _units(n, targets)
    floor = _panel(res, "copyrighted", (a, FLOOR[a]), members_only=True)
    if floor is None:
        return untestable(setting, f"the run measured no echo floor of {NAMES[a]} on the copyright category",
                          full_command("recap_table3"))
    d, ci = point[a] - point[b], _ci(draws[a] - draws[b], level, units)
    fdraws = floor[0][:, 0] - floor[0][:, 1]
    fd, fci = float(fdraws.mean()), _ci(fdraws, level, units)
    p = _paired_p(res, "copyrighted", a, b)
    v = guard(decide(ci), p, level)
    seen = (f"{prefix}{NAMES[b]} {point[b]:.3f} → {NAMES[a]} {point[a]:.3f} (difference {d:+.3f} [{ci[0]:+.3f}, "
            f"{ci[1]:+.3f}]); {NAMES[a]} − its floor ({FLOOR_NAMES[FLOOR[a]]}) {fd:+.3f} [{fci[0]:+.3f}, {fci[1]:+.3f}]")
    if v == "reproduced" and decide(fci) != "reproduced":
        v, seen = "inconclusive", seen + ": the gain does not clear what the hints alone score"
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (draws[a] - draws[b]) / draws[b]
    needs = [x for x in (_need(d, ci, n, v), _need(fd, fci, n, v)) if x]
    return Finding(d / point[b] if point[b] > 0 else None, _ci(rel, units=units) if np.isfinite(rel).any() else None,
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
    got = _copyright_pair(res, "dsp_jb", "dsp")
    if isinstance(got, Finding):
        return got
    point, _, targets, n, _ = got
    blocked = _blocked_share(res)
    setting = _setting(res, targets, "copyrighted", n, f"DSP outputs blocked {blocked:.0%}" if blocked is not None else "")
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
        pub = _panel(res, "public_domain", ("recap",), target=t, members_only=True)
        cop = _panel(res, "copyrighted", ("recap",), seed_offset=1, target=t, members_only=True)
        if pub is not None and cop is not None:
            d = pub[0][:, 0] - cop[0][:, 0]
            seed, B = _seed(res)
            p = permutation_diff(*(_scores(res, c, ("recap",), target=t, members_only=True)["recap"]
                                   for c in ("public_domain", "copyrighted")), n_resamples=B, seed=seed)
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


@scoped_rule("recap_gain_over_dsp", "recap_gain_over_dsp_aligned")
def gain_over_dsp(res, claim: Claim) -> Finding:
    """Hypothesis: RECAP's copyright-category average exceeds DSP's (the single-iteration baseline) and clears its
    own echo floor (the metadata + feedback echo: what its prompt and feedback hints alone score); two paired
    intervals at 1 − 0.05/2: reproduced iff both lie above 0, contradicted iff the gain's lies below 0. GPT-4.1 is
    not among our targets. Our value: the relative gain (RECAP − DSP) / DSP (the paper: +24 %)."""
    got = _copyright_pair(res, "recap", "dsp")
    if isinstance(got, Finding):
        return got
    _, _, targets, n, _ = got
    return _gain(res, got, "recap", "dsp", _setting(res, targets, "copyrighted", n), prefix="not GPT-4.1: ")


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


def _unseen_as_non_training(res):
    """``res`` with every book a target is known never to have seen (:func:`nonmember_rows`: held-out KJV books and
    licences of the tiny targets) counted in the non-training category, beside the post-cutoff release notes."""
    books = res.tables.get("book_scores")
    if books is None or books.empty:
        return res
    held = nonmember_rows(books)
    out = StudyResult(tables={**res.tables, "book_scores": books.assign(
        category=np.where(held, "non_training", books.category.astype(object)))}, metrics=res.metrics)
    out.attach(res.config, {"method": res.method})
    return out


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
    nt = _panel(res, "non_training", ("dsp_jb", "recap", "echo_fb"), seed_offset=2)
    tr = [p for c in train if (p := _panel(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    if nt is None or not tr:
        return untestable("no non-training or training books", NO_BOOKS.format("non-training or training"),
                          full_command("recap_feedback"))
    level = bonferroni_level(2, ALPHA)
    g_tr = np.mean([p[0][:, 1] - p[0][:, 0] for p in tr], axis=0)
    g_nt, over = nt[0][:, 1] - nt[0][:, 0], nt[0][:, 1] - nt[0][:, 2]
    setting = _setting(res, nt[1], "non_training", nt[2], f"passages: 40 tokens, ≤ {tol} mismatches")
    worst = int(books[(books.category == "non_training") & (books.method == "recap")][f"passages_m{tol}"].max())
    units = min([_units(p[2], p[1]) for p in tr] + [_units(nt[2], nt[1])])
    tr_ci = _ci(g_tr, units=units)
    if tr_ci[0] <= 0:
        return untestable(setting, f"no positive control: the loop's gain on training books {g_tr.mean():+.3f} "
                          f"[{tr_ci[0]:+.3f}, {tr_ci[1]:+.3f}] is not above 0 (RECAP − its floor on non-training "
                          f"books {over.mean():+.3f})", full_command("recap_feedback"))
    d = g_tr - g_nt
    ci, over_ci = _ci(d, level, units), _ci(over, level, _units(nt[2], nt[1]))
    per_book = [w["recap"] - w["dsp_jb"] for c in train
                if (w := _scores(res, c, ("dsp_jb", "recap"), members_only=True)) is not None]
    w_nt = _scores(res, "non_training", ("dsp_jb", "recap"))
    seed, B = _seed(res)
    p = permutation_diff(np.concatenate([x.to_numpy(float) for x in per_book]),
                         (w_nt["recap"] - w_nt["dsp_jb"]).to_numpy(float), n_resamples=B, seed=seed)
    v = combine([guard(decide(ci), p, level), decide(over_ci, direction="below")])
    n = nt[2] + sum(p[2] for p in tr)
    needs = [x for x in (_need(float(d.mean()), ci, n, v), _need(float(over.mean()), over_ci, n, v)) if x]
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
    seed, B = _seed(res)
    thresholds = sorted(tr.threshold.unique())
    tr = filter_tradeoff(ev, thresholds)          # of the claim's targets' events (tr: every target's)
    point = _frontier_areas(ev, thresholds, np.arange(len(ev))[None, :])
    draws = _frontier_areas(ev, thresholds, np.concatenate(list(resample_indices(len(ev), B, seed))))
    d = draws["hybrid"] - np.maximum(draws["rouge_l"], draws["cosine"])
    est = float(point["hybrid"][0] - max(point["rouge_l"][0], point["cosine"][0]))
    ci = _ci(d, units=len(ev))
    v = decide(ci)
    h = tr[tr.signal == "hybrid"]
    mid = h.iloc[(h.queries_saved - 0.5).abs().argmin()]
    return Finding(float(mid.rouge_l_filtered), None, f"targets: {', '.join(dict.fromkeys(ev.target))}; oracle "
                   f"filter on {len(ev)} RECAP events; thresholds "
                   f"{', '.join(f'{t:g}' for t in thresholds)}", v,
                   "frontier area " + ", ".join(f"{s} {a[0]:.3f}" for s, a in point.items())
                   + f"; hybrid − best other {est:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; unfiltered "
                   f"{float(tr.rouge_l_unfiltered.iloc[0]):.3f}; hybrid at {mid.threshold:g} saves {mid.queries_saved:.0%}",
                   statistic="hybrid-filtered ROUGE-L at ~50 % queries saved; decided on the frontier-area difference",
                   our_n=len(ev), n_needed=_need(est, ci, len(ev), v))
