"""Paper vs ours for PROPME / SimpleTrace (seed 002): one rule per claim of conf/paper/002_propme.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``trace_validation``,
``trace_capability_propensity`` or ``trace_stages`` (tables and metrics) and returns a
:class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring.

Intervals are bootstraps (:mod:`memlab.metrics.bootstrap`, ``method.bootstrap.n_resamples`` resamples seeded with
the run's ``method.seed`` — its typed config, :attr:`memlab.results.StudyResult.method`, conf/method/trace.yaml —
so they are deterministic) over the units the metric averages: validation queries, or
generations (``generation_scores``: per generation its longest kept span, full match and best nv_recall, whose
means are ALS, FMR and NVR). Prompt settings use different prompts, so their differences are bootstrapped
independently (seeds s, s + 1, ...); training stages answer the same prompts, so stage differences are paired.
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import (Check, Claim, Finding, claim_level, combine, decide, full_command, guard, rule,
                               untestable)
from memlab.metrics.bootstrap import paired_bootstrap, resample_indices
from memlab.metrics.intervals import (expanded_level, mover_contrast, n_to_decide, quantile_ci, sign_flip_min_n,
                                      sign_flip_p)
from memlab.metrics.paired import equivalence

METRIC = {"ALS": "longest_span", "FMR": "full_match", "NVR": "nv_recall"}
ORDINARY = ("generic", "specific")


def _boot(res) -> tuple[int, int]:
    """The run's bootstrap seed and resamples: ``method.seed``, ``method.bootstrap.n_resamples``."""
    m = res.method
    return m.seed, m.bootstrap.n_resamples


def _tiny_name(res) -> str:
    """The model name of the run's tiny model (``params.tiny``: the final checkpoint of that zoo family and size)."""
    from memlab.models.zoo import checkpoint_name

    t = res.params.tiny
    return checkpoint_name(t.family, t.size, "final")


def _means(x, seed: int, n_resamples: int) -> np.ndarray:
    """Bootstrap means of ``x`` (``resample_indices(len(x), n_resamples, seed)``)."""
    x = np.asarray(x, float)
    return np.concatenate([x[idx].mean(axis=1) for idx in resample_indices(len(x), n_resamples, seed)])


def _ci(stats, level: float, units: int | None = None) -> tuple[float, float]:
    """Percentile interval of bootstrap draws; with ``units`` (resampled units) the expanded percentile interval."""
    return quantile_ci(stats, expanded_level(level, max(2, units)) if units else level)


def _fmt(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


# -- Table 5: tracer validation (sanity checks, with the out-of-index negative control) ---------------------------
def _negatives(res) -> tuple[int, int]:
    neg = res.tables.get("negative_control_queries")
    if neg is None or neg.empty:
        return 0, 0
    return int(neg.false_exact_match.astype(bool).sum()), len(neg)


NEG = "share of out-of-index queries returned as an exact match"


@rule("propme_t5_pass_rate")
def t5_pass_rate(res, claim: Claim) -> Check:
    """Sanity: every indexed slice passes (pass rate 1.00 in every corpus × backend × query type cell) and no
    query from a document held out of the index comes back as an exact match (the negative control)."""
    q = res.tables["validation_queries"]
    k, n = _negatives(res)
    cells = q.groupby(["corpus", "backend", "query_type"]).passed.mean()
    return Check(float(q.passed.astype(float).mean()), NEG, k / n if n else None,
                 bool((cells == 1.0).all()) and n > 0 and k == 0,
                 f"{int(q.passed.sum())} of {len(q)} queries pass (lowest cell {cells.min():.3f}); negative control "
                 f"{k} of {n} false exact matches" + ("" if n else " (no negative control run)"))


@rule("propme_t5_retrieval")
def t5_retrieval(res, claim: Claim) -> Check:
    """Sanity: source retrieval and exact match are >= 0.96 (the paper's lowest Table 5 value) in every corpus ×
    backend × query type cell, and out-of-index queries retrieve no exact match (the negative control)."""
    q = res.tables["validation_queries"]
    k, n = _negatives(res)
    low = float(q.groupby(["corpus", "backend", "query_type"])[["retrieved", "exact_match"]].mean().min().min())
    return Check(low, NEG, k / n if n else None, low >= 0.96 and n > 0 and k == 0,
                 f"lowest cell rate {low:.3f} over {len(q)} queries; negative control {k} of {n} false exact matches")


# -- Table 1 / Fig. 1 / Fig. 2: capability vs propensity --------------------------------------------------------
def _tiny(res):
    """The generations of the tiny model (trained here: its exact training set is the traced corpus)."""
    g, name = res.tables.get("generation_scores"), _tiny_name(res)
    if g is None or g.empty:
        return None, name
    return g[g.model == name], name


def _external_note(res, metric: str) -> str:
    s, name = res.tables.get("capability_propensity"), _tiny_name(res)
    if s is None:
        return ""
    ext = s[s.model != name]
    if ext.empty:
        return ""
    parts = []
    for (m, c), g in ext.groupby(["model", "corpus"], sort=False):
        v = g.set_index("setting")[metric]
        parts.append(f"{m}/{c}: " + ", ".join(f"{k} {v[k]:.2f}" for k in ("generic", "specific", "prefix") if k in v))
    return (f"; pretrained models against a corpus they probably saw only in part (index ≠ training set, "
            f"not judged): {metric} " + "; ".join(parts))


def _setting_tiny(name, g) -> str:
    n = g.groupby("setting").size()
    return (f"{name} against its exact training set (index = training data); "
            + ", ".join(f"{k} n = {n.get(k, 0)}" for k in ("generic", "specific", "prefix")) + " generations; "
            "the prefix prompts are cut from that training set itself (the paper's from its pretraining corpus), "
            "so the prefix rows measure recall of the model's own training text")


def _gap(g, metric: str, seed: int, n_resamples: int):
    """Prefix mean, ordinary means and bootstrap draws of prefix − each ordinary setting (independent prompts)."""
    col = METRIC[metric]
    x = {s: g[g.setting == s][col].to_numpy(float) for s in ("prefix", *ORDINARY)}
    if any(len(v) == 0 for v in x.values()):
        return None
    bp = _means(x["prefix"], seed, n_resamples)
    diffs = {s: bp - _means(x[s], seed + 1 + k, n_resamples) for k, s in enumerate(ORDINARY)}
    return {s: float(v.mean()) for s, v in x.items()}, diffs, bp


NO_TINY = "the run has no per-generation scores of the tiny model (generation_scores missing)"




def _no_tiny() -> Finding:
    return untestable("no tiny-model generations", NO_TINY, full_command("trace_capability_propensity"))


def _gaps(res, metric: str, level: float):
    """(means, {ordinary setting: (prefix − it, interval, verdict of 'above 0', n)}) of the tiny model, or None."""
    g, _ = _tiny(res)
    if g is None or (got := _gap(g, metric, *_boot(res))) is None:
        return None
    m, diffs, bp = got
    n = len(g)
    k = int(g.groupby("setting").size().min())
    return m, {s: (m["prefix"] - m[s], _ci(d, level, k), decide(_ci(d, level, k)), n) for s, d in diffs.items()}, bp


def _needed(tests) -> int | None:
    needs = [n_to_decide(d, ci, n, 0.0) for d, ci, v, n in tests if v == "inconclusive"]
    return max((x for x in needs if x), default=None)


@rule("propme_t1_als")
def t1_als(res, claim: Claim) -> Finding:
    """Hypothesis: on the tiny model against its exact training set, prefix prompts give a longer average longest
    span (ALS) than generic and than specific prompts; two independent bootstrap intervals of the differences, each
    at 97.5 %: reproduced iff both lie above 0, contradicted iff one lies below. Our value: prefix ALS (tokens of
    our tokenizer; generations are capped at 48 tokens, the paper's ALS is 50.35)."""
    got = _gaps(res, "ALS", claim_level(claim, 2))
    if got is None:
        return _no_tiny()
    m, tests, bp = got
    g, name = _tiny(res)
    why = (f"ALS prefix {m['prefix']:.2f} vs generic {m['generic']:.2f} vs specific {m['specific']:.2f}; "
           + "; ".join(f"prefix − {s} {d:+.2f} {_fmt(ci)}" for s, (d, ci, _, _) in tests.items()))
    return Finding(m["prefix"], _ci(bp, claim_level(claim), units=int(g.groupby("setting").size().min())), _setting_tiny(name, g), combine([t[2] for t in tests.values()]),
                   why + _external_note(res, "ALS"), statistic="prefix ALS in tokens (bootstrap 95 %)", our_n=len(g),
                   n_needed=_needed(tests.values()))


@rule("propme_capability_gap")
def capability_gap(res, claim: Claim) -> Finding:
    """Hypothesis: on the tiny model against its exact training set, prefix prompts give a higher NVR and a higher
    FMR than generic and than specific prompts: four tests (NVR: bootstrap, FMR: MOVER interval of two shares),
    each at 1 − 0.05/4; reproduced iff all lie above 0, contradicted iff one lies below. Our value: prefix NVR /
    the larger ordinary NVR (the paper: up to 36×)."""
    level = claim_level(claim, 4)
    got = _gaps(res, "NVR", level)
    if got is None:
        return _no_tiny()
    m, tests, bp = got
    g, name = _tiny(res)
    fm = {s: g[g.setting == s].full_match.to_numpy(float) for s in ("prefix", *ORDINARY)}
    for s in ORDINARY:
        est, lo, hi = mover_contrast(int(fm["prefix"].sum()), len(fm["prefix"]), int(fm[s].sum()), len(fm[s]),
                                     level=level)
        tests[f"FMR {s}"] = (est, (lo, hi), decide((lo, hi)), len(fm["prefix"]) + len(fm[s]))
    top = max(m[s] for s in ORDINARY)
    why = "; ".join(f"prefix − {s} {d:+.3f} {_fmt(ci)}" for s, (d, ci, _, _) in tests.items())
    return Finding(m["prefix"] / top if top > 0 else None, None, _setting_tiny(name, g),
                   combine([t[2] for t in tests.values()]), f"NVR prefix {m['prefix']:.3f}, generic {m['generic']:.3f}, "
                   f"specific {m['specific']:.3f}; {why}" + _external_note(res, "NVR"),
                   statistic="prefix NVR / larger ordinary NVR (empty when both are 0); decided on the four "
                   "differences", our_n=len(g), n_needed=_needed(tests.values()))


@rule("propme_recall_roughly_twice")
def recall_roughly_twice(res, claim: Claim) -> Finding:
    """Hypothesis: on the tiny model against its exact training set, prefix prompts (capability) give about twice the
    NVR of ordinary prompts (propensity: generic and specific pooled, the paper's "propensity evaluations"). Decided
    on the bootstrap interval (95 %, prompt settings resampled independently) of the ratio prefix NVR / ordinary NVR
    against the band of "roughly": within a factor ``threshold`` (1.5) of 2 on a log scale. Reproduced iff the
    interval lies inside the band, contradicted iff wholly outside it (a gap far larger or smaller than twice),
    inconclusive otherwise. Our value: the ratio (empty when the ordinary NVR is 0)."""
    g, name = _tiny(res)
    if g is None:
        return _no_tiny()
    x = {"prefix": g[g.setting == "prefix"].nv_recall.to_numpy(float),
         "ordinary": g[g.setting.isin(ORDINARY)].nv_recall.to_numpy(float)}
    if not len(x["prefix"]) or not len(x["ordinary"]):
        return _no_tiny()
    pm, om = float(x["prefix"].mean()), float(x["ordinary"].mean())
    if pm == om == 0:
        return untestable(_setting_tiny(name, g), "no generation recalls anything (NVR 0 in every setting): no ratio",
                          full_command("trace_capability_propensity"))
    seed, n_resamples = _boot(res)
    bp, bo = _means(x["prefix"], seed, n_resamples), _means(x["ordinary"], seed + 1, n_resamples)
    log_ratio = _log(bp) - _log(bo)   # a mean of 0 counts as 1e-12: a ratio far outside any band, not undefined
    est, units = float(_log(pm) - _log(om)), min(len(x["prefix"]), len(x["ordinary"]))
    lo, hi = _ci(log_ratio, claim_level(claim), units)
    band, centre = float(np.log(claim.threshold)), float(np.log(claim.value))
    verdict = equivalence((lo - centre, hi - centre), band)
    need = _band_n(est, (lo, hi), len(g), (centre - band, centre + band)) if verdict == "inconclusive" else None
    edges = f"{claim.value / claim.threshold:.2f}–{claim.value * claim.threshold:.2f}"
    return Finding(pm / om if om else None, (float(np.exp(lo)), float(np.exp(hi))), _setting_tiny(name, g), verdict,
                   f"NVR prefix {pm:.3f} vs ordinary {om:.3f} (generic and specific, {len(x['ordinary'])} "
                   f"generations); ratio {np.exp(est):.2f} [{np.exp(lo):.2f}, {np.exp(hi):.2f}] against roughly "
                   f"{claim.value:g}× (within ×{claim.threshold:g}: {edges})" + _external_note(res, "NVR"),
                   statistic="prefix NVR / ordinary-prompt NVR (bootstrap 95 %, log scale)", our_n=len(g),
                   n_needed=need)


def _log(x):
    return np.log(np.maximum(x, 1e-12))


def _band_n(est: float, ci: tuple[float, float], n: int, band: tuple[float, float]) -> int | None:
    """The n that would decide an estimate against an equivalence band: inside it, both edges excluded; outside,
    the nearer edge."""
    if not np.isfinite(est):
        return None
    if band[0] < est < band[1]:
        needs = [n_to_decide(est, ci, n, e) for e in band]
        return None if None in needs else max(needs)
    return n_to_decide(est, ci, n, min(band, key=lambda e: abs(e - est)))


@rule("propme_prompt_overlap")
def prompt_overlap(res, claim: Claim) -> Finding:
    """Hypothesis: specific prompts overlap the tiny model's training set more than generic ones (the step of the
    paper's generic → specific → prefix rise that can fail here; prefix prompts are cut from that training set, so
    theirs is full by construction: sanity check propme_prefix_prompts_in_corpus). Decided on the prompts' average
    nv_recall against the training set (Fig. 2 a/c): 95 % bootstrap interval of specific − generic (different
    prompts: independent resamples); reproduced iff it lies above 0, contradicted iff below. The verbatim-matched
    share (Fig. 2 b/d) is reported, not tested: both template sets are written by us, never copied from the corpus,
    so theirs is 0 by design. Our value: specific − generic average nv_recall."""
    ps, name = res.tables.get("prompt_scores"), _tiny_name(res)
    cmd = full_command("trace_capability_propensity")
    if ps is None or ps.empty:
        return untestable("no per-prompt scores", "the run kept no per-prompt overlap (prompt_scores: a run before "
                          "issue 49)", cmd)
    t = ps[ps.model == name]
    x = {s: t[t.setting == s].nv_recall.to_numpy(float) for s in ORDINARY}
    if any(len(v) == 0 for v in x.values()):
        return untestable(name, "a template prompt setting is missing", cmd)
    seed, n_resamples = _boot(res)
    d = _means(x["specific"], seed, n_resamples) - _means(x["generic"], seed + 1, n_resamples)
    n = min(len(v) for v in x.values())
    est, ci = float(x["specific"].mean() - x["generic"].mean()), _ci(d, claim_level(claim), units=n)
    v = decide(ci)
    fm = {s: t[t.setting == s].full_match.to_numpy(float) for s in (*ORDINARY, "prefix")}
    shares = ", ".join(f"{s} {int(f.sum())}/{len(f)}" for s, f in fm.items() if len(f))
    return Finding(est, ci, f"{name}, prompts traced against its training set; "
                   + ", ".join(f"{s} n = {len(v_)}" for s, v_ in x.items()), v,
                   f"average nv_recall generic {x['generic'].mean():.3f}, specific {x['specific'].mean():.3f}; "
                   f"specific − generic {est:+.3f} {_fmt(ci)}; verbatim-matched prompts (not tested) {shares}",
                   statistic="specific − generic average nv_recall of the prompts (bootstrap 95 %)",
                   our_n=sum(len(v_) for v_ in x.values()),
                   n_needed=n_to_decide(est, ci, 2 * n, 0.0) if v == "inconclusive" else None)


@rule("propme_prefix_prompts_in_corpus")
def prefix_prompts_in_corpus(res, claim: Claim) -> Check:
    """Sanity: every prefix prompt is matched verbatim in the corpus it is traced against (it is cut from that
    corpus's documents), for every model × corpus of ``prompt_overlap``; the control is the template prompts'
    verbatim-matched share (written by us, never copied from the corpus: 0 expected)."""
    po = res.tables.get("prompt_overlap")
    control = "verbatim-matched share of the template (generic, specific) prompts"
    if po is None or po.empty or not (po.setting == "prefix").any():
        return Check(None, control, None, False, "no prefix prompts traced: nothing checked")
    pre, tpl = po[po.setting == "prefix"], po[po.setting.isin(ORDINARY)]
    k = (pre.verbatim_matched_fraction * pre.prompts).round()
    kt = (tpl.verbatim_matched_fraction * tpl.prompts).round()
    ok = bool((pre.verbatim_matched_fraction == 1.0).all())
    return Check(float(k.sum() / pre.prompts.sum()), control, float(kt.sum() / tpl.prompts.sum()) if len(tpl) else None,
                 ok, f"{int(k.sum())} of {int(pre.prompts.sum())} prefix prompts matched verbatim over "
                 f"{len(pre)} model × corpus cells (lowest {pre.verbatim_matched_fraction.min():.2f}); template "
                 f"prompts {int(kt.sum())} of {int(tpl.prompts.sum())}")


# -- Figs. 3–8: training stages --------------------------------------------------------------------------------
def _stage_pairs(res, corpus: str, setting: str = "prefix"):
    """{stage: per-prompt nv_recall (ordered by prompt i)} for ``corpus`` and ``setting``; stages in order."""
    g = res.tables.get("generation_scores")
    if g is None or g.empty:
        return None
    sub = g[(g.corpus == corpus) & (g.setting == setting)]
    if sub.empty:
        return None
    return {s: x.sort_values("i").nv_recall.to_numpy(float) for s, x in sorted(sub.groupby("stage"))}


def _stages_setting(res) -> str:
    g = res.tables.get("generation_scores")
    n = g.groupby(["corpus", "stage", "setting"]).size()
    return (f"tiny GPT-NeoX: stage0 trained on corpus A (KJV), stages 1–{g.stage.nunique() - 1} continual on "
            f"2/3 B (German fortunes) + 1/3 A; prefix prompts, n = "
            + (f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}–{int(n.max())}") + " per corpus × stage"
            "; an analog of the paper's pretraining stages (short continual runs of a tiny model, conf/zoo/stages_s*): "
            "the verdict is about this analog (declared deviation), not the paper's models")


def _paired(a, b, boot: tuple[int, int], level: float):
    """Paired bootstrap of mean(a) − mean(b) (the same prompts at two stages; ``boot``: the run's seed and
    resamples, :func:`_boot`): (difference, expanded percentile interval)."""
    seed, n_resamples = boot
    r = paired_bootstrap(a, b, n_resamples=n_resamples, seed=seed, ci=expanded_level(level, max(2, len(a))))
    return r.diff.estimate, (r.diff.ci_low, r.diff.ci_high)


@rule("propme_stages_parent_drop")
def stages_parent_drop(res, claim: Claim) -> Finding:
    """Hypothesis: corpus A plays Common Pile, stage 0 the parent (Comma), stages >= 1 the continual model; prefix
    NVR on A is lower at every continual stage than at stage 0 ("consistently"): one paired bootstrap interval of
    stage 0 − stage per continual stage, at a Bonferroni level; reproduced iff all lie above 0, contradicted iff
    one lies below, each kept only when the exact sign-flip test of the same prompts agrees (on a few prompts with
    little noise a bootstrap interval excludes 0 where no sign pattern could). Our value: stage 0 − final stage."""
    st = _stage_pairs(res, "A")
    if st is None or len(st) < 2:
        return untestable("fewer than two stages", "the run has no continual stage", full_command("trace_stages"))
    stages = list(st)
    base = stages[0]
    level = claim_level(claim, len(stages) - 1)
    tests = {s: _paired(st[base], st[s], _boot(res), level) for s in stages[1:]}
    seed, n_resamples = _boot(res)
    verdicts = {s: guard(decide(ci), sign_flip_p(np.asarray(st[base]) - np.asarray(st[s]), n_resamples=n_resamples,
                                                  seed=seed), level) for s, (_, ci) in tests.items()}
    n = len(st[base])
    needs = [n_to_decide(d, ci, n, 0.0) for s, (d, ci) in tests.items() if verdicts[s] == "inconclusive"]
    d, ci = tests[stages[-1]]
    return Finding(d, ci, _stages_setting(res), combine(list(verdicts.values())),
                   "; ".join(f"{base} − {s} {x:+.3f} {_fmt(c)}" for s, (x, c) in tests.items()),
                   statistic="prefix NVR on A, stage 0 − final stage (paired bootstrap)", our_n=n,
                   n_needed=max((x for x in needs if x), default=None))


@rule("propme_stages_stable")
def stages_stable(res, claim: Claim) -> Finding:
    """Hypothesis (equivalence): for both corpora, prefix NVR moves by less than ``threshold`` (0.05, our reading of
    "near-identical") from the first to the last continual stage. Paired bootstrap interval of last − first per
    corpus at 97.5 %: reproduced iff both lie inside ±threshold, contradicted iff one lies wholly outside it,
    inconclusive otherwise (fewer prompts → wider intervals → inconclusive, never an easier pass; fewer prompts than
    the exact sign-flip test needs at that level decide nothing, however little they move). Our value: the larger
    |last − first|."""
    out, m = {}, claim.threshold
    for c in ("A", "B"):
        st = _stage_pairs(res, c)
        if st is None or len(st) < 3:
            return untestable("fewer than two continual stages", "stability needs at least two continual stages",
                              full_command("trace_stages"))
        stages = list(st)[1:]
        out[c] = (*_paired(st[stages[-1]], st[stages[0]], _boot(res), claim_level(claim, 2)), len(st[stages[0]]))

    least = sign_flip_min_n(claim_level(claim, 2))
    verdicts = [equivalence(ci, m) if n >= least else "inconclusive" for _, ci, n in out.values()]
    big = max(out, key=lambda c: abs(out[c][0]))
    needs = [n_to_decide(abs(d), (abs(d) - (ci[1] - ci[0]) / 2, abs(d) + (ci[1] - ci[0]) / 2), n, m)
             for (d, ci, n), v in zip(out.values(), verdicts) if v == "inconclusive"]
    return Finding(out[big][0], out[big][1], _stages_setting(res), combine(verdicts),
                   "; ".join(f"{c}: last − first {d:+.3f} {_fmt(ci)}" for c, (d, ci, _) in out.items())
                   + f"; margin ±{m:g}", statistic="prefix NVR, last − first continual stage (paired bootstrap)",
                   our_n=sum(n for *_, n in out.values()), n_needed=max((x for x in needs if x), default=None))
