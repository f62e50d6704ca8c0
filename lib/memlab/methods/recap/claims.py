"""Paper vs ours for RECAP (seed 000): one rule per claim of conf/paper/000_recap.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``recap_table3`` / ``recap_feedback`` (its
tables and metrics) and returns a :class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring.

Intervals are book-level bootstraps (:mod:`memlab.metrics.bootstrap`, the paper's §4.1 protocol) seeded with the
run's ``bootstrap_seed`` metric (the config seed) and ``bootstrap_resamples`` resamples, so they are deterministic.
A category's "Avg." is computed exactly as the study's Table 3: each target's books are resampled (the same indices
for every method, so method differences are paired), and each resample's per-target means are averaged over
targets; the mean of these resampled averages is Table 3's "Avg." (a bootstrap mean, as the paper prints).
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import Claim, Finding, rule
from memlab.metrics.bootstrap import resample_indices

METHODS = ("prefix", "dsp", "dsp_jb", "recap")
NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP"}
CATEGORY = {"public_domain": "public-domain", "copyrighted": "copyright-category (stand-in)",
            "non_training": "non-training"}


# -- helpers ----------------------------------------------------------------------------------------------------
def _seed(res) -> tuple[int, int]:
    m = res.metrics
    return int(m.get("bootstrap_seed", 0) or 0), int(m.get("bootstrap_resamples", 1000) or 1000)


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


def _ci(stats: np.ndarray) -> tuple[float, float]:
    stats = stats[np.isfinite(stats)]
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return float(lo), float(hi)


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


def _panel(res, category: str, methods=METHODS, seed_offset: int = 0, members_only: bool = False):
    """Table 3 "Avg." of ``methods`` on ``category``, as the study computes it: for each target, its books are
    resampled ``bootstrap_resamples`` times with ``resample_indices(n_books, B, seed)`` (the same indices for every
    method: paired), each resample's per-target means are averaged over targets. Returns the (B × methods) matrix of
    resampled averages — its column means are Table 3's "Avg." row — the targets and the number of (target, book)
    pairs; None when no target has books scored by every method. ``members_only`` drops books known to be outside
    a target's training set (:func:`nonmember_rows`: the tiny model's held-out KJV books), so a target's members
    and non-members are never pooled."""
    books = res.tables.get("book_scores")
    if books is None or not len(books):
        return None
    sub = books[books.category == category]
    if members_only:
        sub = sub[~nonmember_rows(sub)]
    if sub.empty:
        return None
    wide = sub.pivot_table(index=["target", "book"], columns="method", values="rouge_l", aggfunc="mean")
    wide = wide.reindex(columns=list(methods)).dropna()
    if wide.empty:
        return None
    seed, B = _seed(res)
    targets = list(dict.fromkeys(wide.index.get_level_values("target")))
    per_target = [_resampled(wide.xs(t, level="target").to_numpy(float), None, seed + seed_offset, B)
                  for t in targets]
    return np.mean(per_target, axis=0), targets, len(wide)


def _setting(res, targets, category: str, n: int, extra: str = "") -> str:
    agents = res.metrics.get("agents", "deterministic")
    s = (f"targets: {', '.join(targets)}; {CATEGORY.get(category, category)} books, n = {n} (target, book) pairs; "
         f"EchoTrace-mini; {agents} agents")
    return s + (f"; {extra}" if extra else "")


def _copyright_pair(res, a: str, b: str):
    """Table 3 'Avg.' per method on the copyright category (bootstrap means), each method's paired bootstrap draws
    (``{method: draws}``), the targets, n, and the paired 95 % interval of ``a`` − ``b``; a "not comparable"
    :class:`Finding` when no book there was scored by every method."""
    p = _panel(res, "copyrighted")
    if p is None:
        return Finding(None, None, "no copyright-category books", "not comparable", NO_BOOKS.format("copyright"))
    stats, targets, n = p
    draws = {m: stats[:, k] for k, m in enumerate(METHODS)}
    return dict(zip(METHODS, stats.mean(axis=0))), draws, targets, n, _ci(draws[a] - draws[b])


MIN_IMPROVED = 3   # recap_feedback_one_round: events that must improve before the split between rounds is judged
NO_BOOKS = "the run scored no {} books with every method, so the claim cannot be tested"


# -- Table 3 -----------------------------------------------------------------------------------------------------
@rule("recap_t3_order")
def t3_order(res, claim: Claim) -> Finding:
    """Reproduced iff, on the copyright category, the Table 3 averages order RECAP > DSP + Jailbreak > DSP >
    Prefix-Probing (point estimates) and the paired 95 % interval of RECAP − DSP + Jailbreak lies above 0.
    Our value: RECAP's average, with its 95 % interval."""
    got = _copyright_pair(res, "recap", "dsp_jb")
    if isinstance(got, Finding):
        return got
    point, draws, targets, n, (d_lo, d_hi) = got
    order = point["recap"] > point["dsp_jb"] > point["dsp"] > point["prefix"]
    seen = " vs ".join(f"{NAMES[m]} {point[m]:.3f}" for m in reversed(METHODS))
    ok = order and d_lo > 0
    why = (f"{seen}; RECAP − DSP + Jailbreak = {point['recap'] - point['dsp_jb']:+.3f} "
           f"[{d_lo:+.3f}, {d_hi:+.3f}]")
    if not ok:
        why += ("; the order fails" if not order else "; the interval of the first difference includes 0")
    return Finding(point["recap"], _ci(draws["recap"]), _setting(res, targets, "copyrighted", n),
                   "reproduced" if ok else "not reproduced", why)


@rule("recap_t3_jailbreak_gain")
def t3_jailbreak_gain(res, claim: Claim) -> Finding:
    """Reproduced iff DSP + Jailbreak's copyright-category average exceeds DSP's with the paired 95 % interval of
    the difference above 0 (the paper's 42 % is for strongly aligned API models; its App. K reports 10 % for small
    ones, so only the direction is tested). Not comparable when no target refused a single DSP prompt on these
    books: the jailbreaker only rewrites refused prompts, so there is nothing for it to gain. Our value: the
    relative gain (DSP + JB − DSP) / DSP, with its interval."""
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
    extra = f"DSP refusal rate {refused:.0%}" if refused is not None else ""
    setting = _setting(res, targets, "copyrighted", n, extra)
    seen = (f"DSP {point['dsp']:.3f} → DSP + Jailbreak {point['dsp_jb']:.3f} (difference "
            f"{point['dsp_jb'] - point['dsp']:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}])")
    ci = _ci(rel) if np.isfinite(rel).any() else None
    if refused == 0.0:
        return Finding(gain, ci, setting, "not comparable",
                       f"our targets refused none of the DSP prompts on these books (small, weakly aligned models), "
                       f"so the jailbreak never fires; {seen}")
    ok = d_lo > 0
    return Finding(gain, ci, setting, "reproduced" if ok else "not reproduced",
                   seen + ("" if ok else "; no gain from jailbreaking: the interval includes 0"))


@rule("recap_t3_public_vs_copyrighted")
def t3_public_vs_copyrighted(res, claim: Claim) -> Finding:
    """Reproduced iff RECAP's public-domain average exceeds its copyright-category average with the 95 % interval
    of the difference above 0 (independent book-level bootstraps of the two categories, seeds s and s + 1). Public
    domain means books in the target's training data, so a target with exact membership (the tiny model) enters
    with its member books only; its held-out (non-member) KJV books are never pooled with them — their RECAP mean
    is reported apart in ``reason``, as a separate setting that is not judged here.
    Our value: RECAP's public-domain average, with its interval."""
    pub = _panel(res, "public_domain", ("recap",), members_only=True)
    cop = _panel(res, "copyrighted", ("recap",), seed_offset=1)
    if pub is None or cop is None:
        return Finding(None, None, "missing a category", "not comparable",
                       NO_BOOKS.format("public-domain" if pub is None else "copyright"))
    (sp, tp, n_p), (sc, tc, n_c) = pub, cop
    sp, sc = sp[:, 0], sc[:, 0]
    mp, mc = float(sp.mean()), float(sc.mean())
    lo, hi = _ci(sp - sc)
    ok = mp > mc and lo > 0
    held = _held_out(res, "public_domain")
    split = (f"{', '.join(held)}: member books only, non-members left out" if held
             else "no target with non-member books")
    setting = (f"targets: {', '.join(dict.fromkeys(tp + tc))}; public-domain n = {n_p} ({split}), "
               f"copyright-category (stand-in: licence texts) n = {n_c} (target, book) pairs; "
               f"{res.metrics.get('agents', 'deterministic')} agents")
    why = f"RECAP public domain {mp:.3f} vs copyright category {mc:.3f}; difference {mp - mc:+.3f} [{lo:+.3f}, {hi:+.3f}]"
    if not ok:
        why += "; the interval includes 0" if mp > mc else "; public domain is not higher"
    for t, (mem, non, n_non) in held.items():
        why += (f"; {t} apart (not judged): members {mem:.3f}, non-members {non:.3f} "
                f"(n = {n_non} held-out books)")
    return Finding(mp, _ci(sp), setting, "reproduced" if ok else "not reproduced", why)


def _held_out(res, category: str) -> dict[str, tuple[float, float, int]]:
    """{target: (RECAP mean over member books, over non-member books, n non-member books)} on ``category`` for the
    targets that have non-member books there (plain means over books)."""
    books = res.tables.get("book_scores")
    if books is None or not len(books):
        return {}
    sub = books[(books.category == category) & (books.method == "recap")]
    held = nonmember_rows(sub)
    out = {}
    for t in dict.fromkeys(sub.loc[held, "target"]):
        mine = (sub.target == t).to_numpy()
        out[t] = (float(sub.loc[mine & ~held, "rouge_l"].mean()), float(sub.loc[mine & held, "rouge_l"].mean()),
                  int(sub.loc[mine & held, "book"].nunique()))
    return out


@rule("recap_gain_over_dsp")
def gain_over_dsp(res, claim: Claim) -> Finding:
    """GPT-4.1 is not among our targets, so this tests the claim's substance on ours: reproduced iff RECAP's
    copyright-category average exceeds DSP's (the single-iteration baseline) with the paired 95 % interval of the
    difference above 0. Our value: RECAP's average, with its interval; the relative gain is in ``reason``."""
    got = _copyright_pair(res, "recap", "dsp")
    if isinstance(got, Finding):
        return got
    point, draws, targets, n, (lo, hi) = got
    rel = f" ({(point['recap'] / point['dsp'] - 1):+.0%})" if point["dsp"] > 0 else ""
    ok = lo > 0
    why = (f"not GPT-4.1: averaged over our targets, DSP {point['dsp']:.3f} → RECAP {point['recap']:.3f}{rel}; "
           f"difference {point['recap'] - point['dsp']:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    if not ok:
        why += "; the interval includes 0: no gain over single-iteration prompting"
    return Finding(point["recap"], _ci(draws["recap"]), _setting(res, targets, "copyrighted", n),
                   "reproduced" if ok else "not reproduced", why)


# -- the feedback loop -------------------------------------------------------------------------------------------
@rule("recap_feedback_one_round")
def feedback_one_round(res, claim: Claim) -> Finding:
    """Fig. 6 (events whose first valid attempt scored below the stop score). Reproduced iff (a) fewer than 20 % of
    these events improve after round 1 (point estimate) and (b) round 1 brings at least 80 % of the total gain
    ("nearly all the progress"). Not comparable when the run allowed a single feedback round (metric
    ``max_rounds``: nothing can come after round 1) or when fewer than ``MIN_IMPROVED`` events improved at all (too
    few to split progress between rounds); not reproduced when no event improved at all. Events that ended after
    round 1 (no gain, or the stop score reached) count with their round-1 gain as their last. Our value: the share
    of events that improve after round 1, with a 95 % event-level bootstrap interval. The paper's events come from
    books the models were trained on, so the tiny model's non-member events (held-out KJV books) are left out, never
    pooled."""
    g = res.tables.get("feedback_gains_events")
    if g is None or not len(g):
        return Finding(None, None, "no events below the stop score", "not comparable",
                       "no event entered the feedback loop, so Fig. 6 has no data")
    held = (g["split"].astype(str) == "nonmember") if "split" in g.columns else np.zeros(len(g), bool)
    dropped = g[held].drop_duplicates(["target", "event"])
    g = g[~held]
    if g.empty:
        return Finding(None, None, "only non-member events below the stop score", "not comparable",
                       "every event that entered the feedback loop is from a book outside its target's training set")
    max_round = int(g["round"].max())
    wide = g.pivot_table(index=["target", "event"], columns="round", values="gain", aggfunc="first")
    targets = list(dict.fromkeys(wide.index.get_level_values("target")))
    left_out = (f" ({len(dropped)} non-member events of {', '.join(dict.fromkeys(dropped.target))} left out: "
                f"members only)" if len(dropped) else "")
    # the run's allowance, not the rounds seen: round 2 runs only after a round-1 gain that stays below the stop score
    allowed = int(res.metrics.get("max_rounds") or max_round)
    setting = (f"targets: {', '.join(targets)}; n = {len(wide)} events below the stop score{left_out}; up to "
               f"{allowed} feedback rounds ({max_round} run); {res.metrics.get('agents', 'deterministic')} agents")
    if allowed < 2:
        return Finding(None, None, setting, "not comparable",
                       "the run allowed one feedback round, so nothing can improve after round 1")
    g1, gf = wide[1].to_numpy(float), wide[max_round].to_numpy(float)
    improved, later = gf > 0, gf > g1 + 1e-12
    seed, B = _seed(res)
    share = float(later.mean())
    ci = _ci(_resampled(later.astype(float)[:, None], None, seed, B)[:, 0])
    if not improved.any():
        return Finding(share, ci, setting, "not reproduced",
                       "the feedback loop improved no event, so there is no progress to split between rounds")
    if improved.sum() < MIN_IMPROVED:
        return Finding(share, ci, setting, "not comparable",
                       f"only {int(improved.sum())} of {len(wide)} events improved at all: too few to tell how the "
                       f"progress splits between rounds (the rule needs {MIN_IMPROVED})")
    first = float(g1.sum() / gf.sum())
    ok = share < 0.20 and first >= 0.80
    why = (f"{improved.mean():.0%} of events improve at all ({1 - improved.mean():.0%} not); {share:.0%} improve "
           f"after round 1; round 1 brings {first:.0%} of the total gain (mean gain {g1.mean():.3f} after round 1, "
           f"{gf.mean():.3f} after round {max_round})")
    if not ok:
        why += ("; later rounds matter more than in the paper" if share >= 0.20 or first < 0.80 else "")
    return Finding(share, ci, setting, "reproduced" if ok else "not reproduced", why)


@rule("recap_feedback_no_contamination")
def feedback_no_contamination(res, claim: Claim) -> Finding:
    """Reproduced iff on non-training books RECAP finds at most one passage (40 tokens, ≤ ``passage_tolerance``
    mismatches) per book and target, and its gain over DSP + Jailbreak there is not clearly positive (the paired
    95 % interval of RECAP − DSP + Jailbreak includes or lies below 0). Our value: the most RECAP passages on any
    non-training book and target (the paper's "at most a single passage"); the gain and its interval in ``reason``."""
    books = res.tables.get("book_scores")
    tol = res.metrics.get("passage_tolerance", 5)
    col = f"passages_m{tol}"
    if books is None or books.empty or "non_training" not in set(books.category):
        return Finding(None, None, "no non-training books", "not comparable",
                       NO_BOOKS.format("non-training"))
    if col not in books.columns:
        return Finding(None, None, "no passage counts", "not comparable",
                       f"book_scores has no {col} column (passages at tolerance {tol})")
    nt = books[(books.category == "non_training") & (books.method == "recap")]
    worst = int(nt[col].max()) if len(nt) else 0
    p = _panel(res, "non_training", ("dsp_jb", "recap"))
    if p is None:
        return Finding(float(worst), None, "no non-training books scored by both methods", "not comparable",
                       NO_BOOKS.format("non-training"))
    st, targets, n = p
    d = float(st[:, 1].mean() - st[:, 0].mean())
    lo, hi = _ci(st[:, 1] - st[:, 0])
    ok = worst <= 1 and lo <= 0
    why = (f"at most {worst} RECAP passage(s) per non-training book and target; RECAP − DSP + Jailbreak on these "
           f"books {d:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    if not ok:
        why += ("; more than one passage on a non-training book" if worst > 1 else
                "; the feedback loop clearly raises ROUGE-L on text the models never saw")
    return Finding(float(worst), None, _setting(res, targets, "non_training", n, f"passages: 40 tokens, ≤ {tol} mismatches"),
                   "reproduced" if ok else "not reproduced", why)


def _frontier_area(rows) -> float:
    """Mean over query-savings levels s ∈ [0, 1] of the best filtered ROUGE-L reachable while saving ≥ s."""
    q = rows.queries_saved.to_numpy(float)
    r = rows.rouge_l_filtered.to_numpy(float)
    q = np.append(q, 0.0)
    r = np.append(r, float(rows.rouge_l_unfiltered.iloc[0]))
    grid = np.linspace(0, 1, 201)
    floor = float(r.min())
    best = [max([rr for qq, rr in zip(q, r) if qq >= s - 1e-12], default=floor) for s in grid]
    return float(np.mean(best))


@rule("recap_filter_hybrid")
def filter_hybrid(res, claim: Claim) -> Finding:
    """Reproduced iff the hybrid memorization score gives the best balance of the three filters: the largest area
    under its frontier of filtered ROUGE-L vs share of feedback queries saved (the mean, over savings levels 0–100 %,
    of the best ROUGE-L a threshold reaches while saving at least that share), strictly above ROUGE-L's and
    cosine's. Our value: the hybrid's area (a ROUGE-L). No interval: the trade-off table is an oracle over all
    events (from unfiltered runs), aggregated in the study."""
    tr = res.tables.get("filter_tradeoff")
    if tr is None or tr.empty:
        return Finding(None, None, "no memorization scores", "not comparable",
                       "the run computed no memorization scores (memscore disabled), so no filter can be compared")
    area = {s: _frontier_area(g) for s, g in tr.groupby("signal")}
    if "hybrid" not in area:
        return Finding(None, None, "no hybrid score", "not comparable", "the run has no hybrid-score rows")
    others = {s: a for s, a in area.items() if s != "hybrid"}
    ok = all(area["hybrid"] > a + 1e-12 for a in others.values())
    unf = float(tr.rouge_l_unfiltered.iloc[0])
    h = tr[tr.signal == "hybrid"].sort_values("threshold")
    mid = h.iloc[(h.queries_saved - 0.5).abs().argmin()]
    setting = (f"oracle filter on {res.metrics.get('agents', 'deterministic')}-agent RECAP events; "
               f"thresholds {', '.join(f'{t:g}' for t in sorted(tr.threshold.unique()))}")
    why = (f"frontier area (mean filtered ROUGE-L over savings 0–100 %): "
           + ", ".join(f"{s} {a:.3f}" for s, a in sorted(area.items(), key=lambda kv: -kv[1]))
           + f"; unfiltered {unf:.3f}; hybrid at threshold {mid.threshold:g} saves {mid.queries_saved:.0%} of "
             f"feedback queries for {mid.rouge_l_filtered:.3f}")
    if not ok:
        why += "; the hybrid score is not the best filter here"
    return Finding(area["hybrid"], None, setting, "reproduced" if ok else "not reproduced", why)
