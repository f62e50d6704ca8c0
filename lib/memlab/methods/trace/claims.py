"""Paper vs ours for PROPME / SimpleTrace (seed 002): one rule per claim of conf/paper/002_propme.yaml.

Each rule reads only the :class:`~memlab.results.StudyResult` of ``trace_validation``,
``trace_capability_propensity`` or ``trace_stages`` (tables and metrics) and returns a
:class:`~memlab.comparison.Finding`; the verdict rule is stated in its docstring.

Intervals are bootstraps (:mod:`memlab.metrics.bootstrap`, 1000 resamples, seeded with the run's ``seed`` metric —
the config seed — so they are deterministic) over the units the metric averages: validation queries, or
generations (``generation_scores``: per generation its longest kept span, full match and best nv_recall, whose
means are ALS, FMR and NVR). Prompt settings use different prompts, so their differences are bootstrapped
independently (seeds s, s + 1, ...); training stages answer the same prompts, so stage differences are paired.
"""

from __future__ import annotations

import numpy as np

from memlab.comparison import Claim, Finding, rule
from memlab.metrics.bootstrap import paired_bootstrap, resample_indices

B = 1000
METRIC = {"ALS": "longest_span", "FMR": "full_match", "NVR": "nv_recall"}
ORDINARY = ("generic", "specific")


def _seed(res) -> int:
    return int(res.metrics.get("seed", 0) or 0)


def _means(x, seed: int) -> np.ndarray:
    """Bootstrap means of ``x`` (B draws, ``resample_indices(len(x), B, seed)``)."""
    x = np.asarray(x, float)
    return np.concatenate([x[idx].mean(axis=1) for idx in resample_indices(len(x), B, seed)])


def _ci(stats) -> tuple[float, float]:
    stats = np.asarray(stats, float)
    stats = stats[np.isfinite(stats)]
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return float(lo), float(hi)


def _fmt(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


# -- Table 5: tracer validation --------------------------------------------------------------------------------
def _validation_setting(q) -> str:
    corp = ", ".join(f"{c} ({g.doc_id.nunique()} docs)" for c, g in q.groupby("corpus", sort=False))
    return (f"corpora: {corp}; backends: {', '.join(q.backend.unique())}; query types: "
            f"{', '.join(q.query_type.unique())}; n = {len(q)} queries")


@rule("propme_t5_pass_rate")
def t5_pass_rate(res, claim: Claim) -> Finding:
    """Reproduced iff every query passes (pass rate 1.00 in every corpus × backend × query type cell, as in the
    paper's Table 5). Our value: the overall pass rate, with a 95 % bootstrap interval over queries."""
    q = res.tables.get("validation_queries")
    if q is None or q.empty:
        return Finding(None, None, "no validation queries", "not comparable", "the run issued no validation queries")
    passed = q.passed.astype(float).to_numpy()
    cells = q.groupby(["corpus", "backend", "query_type"]).passed.mean()
    ok = bool((cells == 1.0).all())
    why = (f"pass rate {passed.mean():.3f} over {len(q)} queries; lowest cell {cells.min():.3f}"
           + ("" if ok else f" ({', '.join('/'.join(k) for k, v in cells.items() if v < 1)})"))
    return Finding(float(passed.mean()), _ci(_means(passed, _seed(res))), _validation_setting(q),
                   "reproduced" if ok else "not reproduced", why)


@rule("propme_t5_retrieval")
def t5_retrieval(res, claim: Claim) -> Finding:
    """Reproduced iff the source-document retrieval rate and the exact-match rate are ≥ 0.96 (the paper's lowest
    Table 5 value) in every corpus × backend × query type cell. Our value: the lowest of those cell rates; the
    interval is the 95 % bootstrap interval over queries of the overall retrieval rate."""
    q = res.tables.get("validation_queries")
    if q is None or q.empty:
        return Finding(None, None, "no validation queries", "not comparable", "the run issued no validation queries")
    cells = q.groupby(["corpus", "backend", "query_type"])[["retrieved", "exact_match"]].mean()
    low = float(cells.min().min())
    ok = low >= 0.96
    got = q.retrieved.astype(float).to_numpy()
    why = (f"retrieval {got.mean():.3f} and exact match {q.exact_match.astype(float).mean():.3f} overall; lowest "
           f"cell {low:.3f}")
    if not ok:
        bad = cells[(cells < 0.96).any(axis=1)]
        why += f"; below 0.96: {', '.join('/'.join(k) for k in bad.index)}"
    return Finding(low, _ci(_means(got, _seed(res))), _validation_setting(q), "reproduced" if ok else "not reproduced",
                   why)


# -- Table 1 / Fig. 1 / Fig. 2: capability vs propensity --------------------------------------------------------
def _tiny(res):
    """The generations of the tiny model (trained here: its exact training set is the traced corpus)."""
    g = res.tables.get("generation_scores")
    name = res.metrics.get("tiny_model")
    if g is None or g.empty or name is None:
        return None, name
    return g[g.model == name], name


def _external_note(res, metric: str) -> str:
    s = res.tables.get("capability_propensity")
    name = res.metrics.get("tiny_model")
    if s is None or name is None:
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
            + ", ".join(f"{k} n = {n.get(k, 0)}" for k in ("generic", "specific", "prefix")) + " generations")


def _gap(g, metric: str, seed: int):
    """Prefix mean, ordinary means and bootstrap draws of prefix − each ordinary setting (independent prompts)."""
    col = METRIC[metric]
    x = {s: g[g.setting == s][col].to_numpy(float) for s in ("prefix", *ORDINARY)}
    if any(len(v) == 0 for v in x.values()):
        return None
    bp = _means(x["prefix"], seed)
    diffs = {s: bp - _means(x[s], seed + 1 + k) for k, s in enumerate(ORDINARY)}
    return {s: float(v.mean()) for s, v in x.items()}, diffs, bp


NO_TINY = "the run has no per-generation scores of the tiny model (generation_scores / tiny_model missing)"


@rule("propme_t1_als")
def t1_als(res, claim: Claim) -> Finding:
    """Tested on the tiny model against its exact training set (the paper's setting: a model with a fully known
    training corpus). Reproduced iff prefix ALS exceeds both the generic and the specific ALS, each difference
    with its 95 % bootstrap interval above 0. Our value: prefix ALS (tokens of our tokenizer), with its interval."""
    g, name = _tiny(res)
    if g is None or (got := _gap(g, "ALS", _seed(res))) is None:
        return Finding(None, None, "no tiny-model generations", "not comparable", NO_TINY)
    m, diffs, bp = got
    cis = {s: _ci(d) for s, d in diffs.items()}
    ok = all(lo > 0 for lo, _ in cis.values())
    why = (f"ALS prefix {m['prefix']:.2f} vs generic {m['generic']:.2f} vs specific {m['specific']:.2f} "
           f"(paper 50.35 / 27.95 / 29.47); prefix − generic {_fmt(cis['generic'])}, prefix − specific "
           f"{_fmt(cis['specific'])}; ratio to generic {m['prefix'] / m['generic']:.1f}× (paper 1.8×)"
           if m["generic"] > 0 else f"ALS prefix {m['prefix']:.2f}, generic 0")
    if not ok:
        why += "; prefix spans are not clearly longer"
    return Finding(m["prefix"], _ci(bp), _setting_tiny(name, g), "reproduced" if ok else "not reproduced",
                   why + _external_note(res, "ALS"))


@rule("propme_capability_gap")
def capability_gap(res, claim: Claim) -> Finding:
    """On the tiny model against its exact training set: reproduced iff prefix prompts give a higher NVR and a
    higher FMR than both generic and specific prompts, with the 95 % bootstrap interval of every NVR difference
    above 0 and prefix FMR > both ordinary FMRs. Our value: prefix NVR / best ordinary NVR (the paper's
    "up to 36×"), with its interval."""
    g, name = _tiny(res)
    seed = _seed(res)
    if g is None or (nvr := _gap(g, "NVR", seed)) is None:
        return Finding(None, None, "no tiny-model generations", "not comparable", NO_TINY)
    fmr = _gap(g, "FMR", seed)
    m, diffs, bp = nvr
    cis = {s: _ci(d) for s, d in diffs.items()}
    fm = fmr[0]
    ok = all(lo > 0 for lo, _ in cis.values()) and all(fm["prefix"] > fm[s] for s in ORDINARY)
    # ratio prefix / the larger ordinary NVR, bootstrapped with the same draws
    ords = {s: bp - d for s, d in diffs.items()}
    best_ord = np.maximum(ords["generic"], ords["specific"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = bp / best_ord
    top = max(m[s] for s in ORDINARY)
    value = m["prefix"] / top if top > 0 else None
    why = (f"NVR prefix {m['prefix']:.3f} vs generic {m['generic']:.3f} / specific {m['specific']:.3f} "
           f"(differences {_fmt(cis['generic'])}, {_fmt(cis['specific'])}); FMR prefix {fm['prefix']:.2f} vs "
           f"{fm['generic']:.2f} / {fm['specific']:.2f}")
    if not ok:
        why += "; prefix prompts do not clearly extract more"
    return Finding(value, _ci(ratio) if np.isfinite(ratio).any() else None, _setting_tiny(name, g),
                   "reproduced" if ok else "not reproduced", why + _external_note(res, "NVR"))


def _propensity(p, c, eps):
    return (p + eps) / (p + c + 2 * eps)


@rule("propme_propensity_below_half")
def propensity_below_half(res, claim: Claim) -> Finding:
    """On the tiny model against its exact training set: reproduced iff the FMR and NVR propensity of both
    ordinary settings (generic, specific) is below 0.5, and the 95 % bootstrap interval of the largest NVR
    propensity lies below 0.5 (propensities from the ``propensity`` table; the interval resamples the ordinary and
    the prefix generations independently; (p + ε) / (p + c + 2ε) as memlab.methods.trace.propme, ε from the run's
    ``propensity_eps`` metric). Our value: the largest of the four propensities (with that interval when it is an
    NVR propensity)."""
    g, name = _tiny(res)
    prop = res.tables.get("propensity")
    if g is None or prop is None or prop.empty:
        return Finding(None, None, "no tiny-model generations", "not comparable", NO_TINY)
    p = prop[prop.model == name].set_index("setting")
    vals = {f"{m} {s}": float(p.loc[s, f"{m}_propensity"]) for s in ORDINARY if s in p.index for m in ("FMR", "NVR")}
    if len(vals) < 4:
        return Finding(None, None, _setting_tiny(name, g), "not comparable", "missing ordinary settings")
    eps = float(res.metrics.get("propensity_eps", 0.01))
    seed = _seed(res)
    worst = max(ORDINARY, key=lambda s: vals[f"NVR {s}"])
    xs = g[g.setting == worst].nv_recall.to_numpy(float)
    xc = g[g.setting == "prefix"].nv_recall.to_numpy(float)
    ci = _ci(_propensity(_means(xs, seed + 1), _means(xc, seed), eps))
    top = max(vals.values())
    ok = top < 0.5 and ci[1] < 0.5
    why = ", ".join(f"{k} {v:.3f}" for k, v in vals.items()) + f"; NVR {worst} interval {_fmt(ci)}"
    if not ok:
        why += "; the tiny model leaks under ordinary prompts about as much as under attack"
    return Finding(top, ci if top == vals[f"NVR {worst}"] else None, _setting_tiny(name, g),
                   "reproduced" if ok else "not reproduced", why + _external_note_prop(res))


def _external_note_prop(res) -> str:
    prop = res.tables.get("propensity")
    name = res.metrics.get("tiny_model")
    ext = prop[prop.model != name] if prop is not None else None
    if ext is None or ext.empty:
        return ""
    parts = [f"{r.model}/{r.corpus} {r.setting}: {r.NVR_propensity:.2f}" for r in ext.itertuples()]
    return "; pretrained models, partial corpus (not judged): NVR propensity " + ", ".join(parts)


@rule("propme_prompt_overlap")
def prompt_overlap(res, claim: Claim) -> Finding:
    """On the tiny model's training set: reproduced iff the prompts' own overlap with the corpus rises strictly
    from generic to specific to prefix in average nv_recall, and does not fall in the verbatim-matched fraction.
    Our value: the prefix prompts' average nv_recall (no interval: the study keeps only per-setting means)."""
    po = res.tables.get("prompt_overlap")
    name = res.metrics.get("tiny_model")
    if po is None or po.empty or name is None:
        return Finding(None, None, "no prompt-overlap table", "not comparable", "the run traced no prompts")
    t = po[po.model == name].set_index("setting")
    if not all(s in t.index for s in ("generic", "specific", "prefix")):
        return Finding(None, None, f"{name}", "not comparable", "a prompt setting is missing")
    nv, vm = t.avg_nv_recall, t.verbatim_matched_fraction
    ok = (nv["generic"] < nv["specific"] < nv["prefix"]) and (vm["generic"] <= vm["specific"] <= vm["prefix"])
    why = (f"avg nv_recall generic {nv['generic']:.3f}, specific {nv['specific']:.3f}, prefix {nv['prefix']:.3f}; "
           f"verbatim matched {vm['generic']:.2f}, {vm['specific']:.2f}, {vm['prefix']:.2f}")
    if not ok:
        why += ("; prefix prompts overlap far more, but generic and specific prompts are not ordered as in the paper "
                "(ours are hand-written templates filled with topics from a list, not GPT-written prompt sets)"
                if nv["prefix"] > max(nv["generic"], nv["specific"]) else "; prefix prompts do not overlap most")
    setting = f"{name}, prompts traced against its training set; " + ", ".join(
        f"{s} n = {int(t.loc[s, 'prompts'])}" for s in ("generic", "specific", "prefix"))
    return Finding(float(nv["prefix"]), None, setting, "reproduced" if ok else "not reproduced", why)


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
            + (f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}–{int(n.max())}") + " per corpus × stage")


def _paired(a, b, seed):
    """Paired bootstrap of mean(a) − mean(b) (the same prompts at two stages): (difference, interval)."""
    r = paired_bootstrap(a, b, n_resamples=B, seed=seed)
    return r.diff.estimate, (r.diff.ci_low, r.diff.ci_high)


@rule("propme_stages_parent_drop")
def stages_parent_drop(res, claim: Claim) -> Finding:
    """Corpus A plays Common Pile (the parent's corpus), stage 0 the parent (Comma), stages ≥ 1 the continual
    model (DFM Decoder). Reproduced iff prefix NVR on A is lower at every continual stage than at stage 0, and the
    paired 95 % interval of stage 0 − final stage lies above 0. Our value: stage 0 − final stage NVR on A."""
    st = _stage_pairs(res, "A")
    if st is None or len(st) < 2:
        return Finding(None, None, "fewer than two stages", "not comparable", "the run has no continual stage")
    stages = list(st)
    base, final = stages[0], stages[-1]
    d, ci = _paired(st[base], st[final], _seed(res))
    means = {s: float(v.mean()) for s, v in st.items()}
    ok = all(means[s] < means[base] for s in stages[1:]) and ci[0] > 0
    why = ("prefix NVR on A: " + ", ".join(f"{s} {v:.3f}" for s, v in means.items())
           + f"; {base} − {final} {d:+.3f} {_fmt(ci)}")
    if not ok:
        why += "; continual pre-training does not clearly lower memorization of A"
    return Finding(d, ci, _stages_setting(res), "reproduced" if ok else "not reproduced", why)


@rule("propme_stages_stable")
def stages_stable(res, claim: Claim) -> Finding:
    """The paper's Stage 1, Stage 2 and Final are our continual stages 1..last. Reproduced iff, for both corpora,
    prefix NVR does not change significantly from the first to the last continual stage: the paired 95 % interval
    of last − first contains 0 for A and for B. Our value: the larger |last − first| of the two corpora (its
    interval is that corpus's)."""
    out = {}
    for c in ("A", "B"):
        st = _stage_pairs(res, c)
        if st is None or len(st) < 3:
            return Finding(None, None, "fewer than two continual stages", "not comparable",
                           "stability across continual stages needs at least two of them")
        stages = list(st)[1:]
        d, ci = _paired(st[stages[-1]], st[stages[0]], _seed(res))
        out[c] = (d, ci, {s: float(st[s].mean()) for s in stages})
    ok = all(ci[0] <= 0 <= ci[1] for _, ci, _ in out.values())
    big = max(out, key=lambda c: abs(out[c][0]))
    why = "; ".join(f"{c}: " + ", ".join(f"{s} {v:.3f}" for s, v in m.items()) + f" (last − first {d:+.3f} {_fmt(ci)})"
                    for c, (d, ci, m) in out.items())
    if not ok:
        moved = [c for c, (d, ci, _) in out.items() if not ci[0] <= 0 <= ci[1]]
        why += (f"; prefix NVR changes significantly across the continual stages for {', '.join(moved)}"
                + (" (memorization of the new corpus B keeps growing instead of being established early)"
                   if "B" in moved and out["B"][0] > 0 else ""))
    return Finding(out[big][0], out[big][1], _stages_setting(res), "reproduced" if ok else "not reproduced", why)
