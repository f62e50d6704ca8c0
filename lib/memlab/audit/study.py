"""The audit of one model (``python -m memlab.run experiment=audit model=…``): PEARL in the wild, the MIA baselines,
RECAP extraction and SimpleTrace, each run on the model under test by the method's own study code, and one summary
table (``audit``): per method, what it found on this model (share with a Wilson 95 % interval, n) and, beside it, the
method's recall and false-positive rate at the same decision rule on the tiny ground-truth zoo
(:mod:`memlab.audit.ground_truth`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from memlab.audit import decide, judge, page, parts, plots
from memlab.audit import ground_truth as GT
from memlab.errors import ConfigError
from memlab.methods.pearl import study as pearl_study
from memlab.methods.pearl.engine import PearlConfig
from memlab.methods.recap import evaluate as E
from memlab.methods.recap.config import CATEGORIES, TARGET_GROUPS, RecapConfig, TargetConfig
from memlab.methods.recap.study import run_recap
from memlab.methods.trace import study as trace_study
from memlab.methods.trace.config import TraceConfig
from memlab.methods.trace.generation import propensity_rows, summary_rows
from memlab.metrics.mia import judged_names
from memlab.progress import Parts
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

@dataclass(frozen=True)
class MiaSpec:
    min_k: float = field(metadata=check(gt=0, le=1))      # Min-K% / Min-K%++: the lowest k share of tokens
    target_fpr: float = field(metadata=check(ge=0, le=1))  # each threshold: this FPR on the known-unseen half
    max_words: int | None = field(metadata=check(ge=1))    # each text: its first max_words words (null: whole)
    reference: str | None                                  # a conf/model preset: the reference attack's model


@dataclass(frozen=True)
class RecapTarget:
    """RECAP's target settings (``TargetConfig``) but the model and its prompt style, which come from the model
    under test (chat if it has a chat template, else plain)."""

    budget_factor: float = field(metadata=check(gt=0))
    max_new_tokens: int | None = field(metadata=check(ge=1))
    tokens_per_word: float = field(metadata=check(gt=0))
    max_context_tokens: int | None = field(metadata=check(ge=1))
    min_prompt_tokens: int = field(metadata=check(ge=1))
    categories: list[str] = field(metadata=check(choices=CATEGORIES, nonempty=True))
    events_per_book: int | None = field(metadata=check(ge=1))
    group: str = field(metadata=check(choices=TARGET_GROUPS))


@dataclass(frozen=True)
class GroundTruthRuns:
    """Where each method's error rates come from: PEARL, MIA, blind and RECAP rows from the audit run blind on the
    zoo (``selfcheck``: audit_selfcheck); SimpleTrace from the tracer's validation; each attack's TPR at 1 % and
    0.1 % FPR from the zoo family sized to read them (``low_fpr``: mia_low_fpr)."""

    selfcheck: str
    trace: str
    low_fpr: str


@dataclass(frozen=True)
class AuditParams:
    """``params`` of conf/experiment/audit.yaml: pearl_wild's (which it extends), then the other methods' cells."""

    tasks: list[str] = field(metadata=check(choices=("completion", "summarization"), nonempty=True))
    calibration_sources: dict[str, str]
    sources: dict[str, pearl_study.Source]
    alphas: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))
    target_fprs: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))
    controls: dict[str, str | None]   # each source -> its same-domain known-unseen control (null: not judged)
    mia: MiaSpec
    extraction: decide.ExtractionRule
    recap: RecapTarget
    trace: trace_study.ExternalCells
    ground_truth: GroundTruthRuns

    @property
    def wild(self) -> pearl_study.WildParams:
        """PEARL in the wild's settings (checked like pearl_wild's)."""
        return pearl_study.WildParams(tasks=self.tasks, calibration_sources=self.calibration_sources,
                                      sources=self.sources, alphas=self.alphas, target_fprs=self.target_fprs)

    def __post_init__(self):
        self.wild  # noqa: B018 — the calibration sources must name sources of their domain
        unseen = set(self.calibration_sources.values())
        for name, spec in self.sources.items():
            if name not in self.controls:
                raise ConfigError(f"params.controls.{name} is missing: name its same-domain known-unseen source, or "
                                  "null (the source is then not judged)")
            c = self.controls[name]
            if c is not None and (c not in unseen or self.sources[c].domain != spec.domain):
                raise ConfigError(f"params.controls.{name}={c!r} must be a known-unseen source of domain "
                                  f"{spec.domain!r} (params.calibration_sources: {sorted(unseen)})")


def audit(method: PearlConfig, params: AuditParams, run: StudyRun) -> StudyResult:
    """Every method on the one model under test (``run.targets``; PEARL's settings are ``method``, RECAP's and
    SimpleTrace's ``methods.recap`` / ``methods.trace``); the summary table first, then each method's own tables."""
    import pandas as pd

    targets = run.targets
    if len(targets) != 1:
        raise ConfigError(f"experiment=audit tests one model per run, got {len(targets)} "
                          f"({', '.join(n['name'] for n in targets)}): run it once per model, e.g. "
                          "python -m memlab.run -m experiment=audit model=a,b")
    pearl, recap, trace = method, run.typed("methods.recap"), run.typed("methods.trace")
    p, catalog, out_dir, progress = params, run.catalog, run.out_dir, run.progress
    node, results, detail = targets[0], Path(run.results_root), StudyResult()
    gt = GT.selfcheck_rates(results, p.ground_truth.selfcheck)
    sources, halves = pearl_study.wild_sources(pearl, p.wild)
    units = parts.planned_units(sources, p.tasks, recap, p.recap.categories, p.recap.events_per_book,
                                p.trace.n_prompts, len(p.trace.corpora))
    with Parts("audit", units) as overall:   # the runner's line: part i/4, units, overall ETA
        rows, style = _pearl(pearl, p, catalog, node, reference_node(p.mia.reference, run.cfg), (sources, halves),
                             gt, detail, progress, overall)
        with overall.part(parts.RECAP):
            rows += _recap(recap, p, catalog, node, style, Path(out_dir) / "recap", gt, detail, progress)
        with overall.part(parts.TRACE):
            rows += _trace(trace, p, catalog, node, results, detail)
    low = GT.low_fpr_rates(results, p.ground_truth.low_fpr)
    rows = [{**r, **GT.low_fpr_lookup(low, r["method"]).row()} for r in rows]
    return summary_result(pd.DataFrame(rows), node["name"]).merge(detail)


def reference_node(name: str | None, cfg) -> dict | None:
    """The reference model's node (``params.mia.reference``: a conf/model preset), resolved as the run's models are."""
    from memlab.model_use import preset
    from memlab.config import to_plain

    if name is None:
        return None
    plain = to_plain(cfg)
    return preset(name, plain["paths"], plain.get("numerics"))


def summary_result(summary, model: str) -> StudyResult:
    """The audit's own outputs: ``tables/audit.csv`` (every column, full precision) shown on the page as the table an
    owner reads (:func:`memlab.audit.page.owner_table`), the figure with its caption under it, the metrics."""
    res = StudyResult()
    res.table("audit", summary, view=page.owner_table(summary))
    res.figure("audit", plots.findings(summary, model), caption=plots.CAPTION, caption_on_page=True)
    res.metric(model=model, **{f"{r.method}/{r.finding}": r.value for r in summary.itertuples()
                               if r.value is not None and r.value == r.value})
    return res


def _finding(method: str, finding: str, rule: str, k: int | None, n: int | None, rates: GT.Rates,
             note: str = "") -> dict:
    value, lo, hi = GT.share(k, n)
    return {"method": method, "finding": finding, "rule": rule, "value": value, "ci_low": lo, "ci_high": hi,
            "k": k, "n": n, "note": note, **rates.row()}


# -- PEARL, the MIA baselines and the blind baseline ------------------------------------------------------------
def _pearl(pearl: PearlConfig, p: AuditParams, catalog, node: dict, reference: dict | None,
           documents: tuple[dict, dict], gt: dict, detail: StudyResult, progress: bool,
           overall: Parts) -> tuple[list[dict], str]:
    """PEARL's, the MIA baselines', the reference attack's, probabilistic extraction's and the blind baseline's rows,
    each source judged against its same-domain control (:mod:`memlab.audit.judge`), and the model's prompt style
    (read while the MIA holds the model); ``documents``: the sources' documents and the controls' halves
    (:func:`pearl_study.wild_sources`); ``reference``: the reference model's node, or None."""
    with overall.part(parts.PEARL):
        wild = pearl_study.wild_models(pearl, p.wild, catalog, [node], scored=overall.credit)
    for name, df in wild.tables.items():
        detail.table(f"pearl_{name}", df, show=False)
    for name, fig in wild.figures.items():
        detail.figure(f"pearl_{name}", fig, show=False, caption=wild.captions.get(name))
    mdf, unavailable, style = _mia(p, catalog, node, reference, documents, detail, progress, overall)
    pdf = wild.tables["pearl_scores"]
    pdf = _halves_of_controls(pdf, p.controls)
    flags = decide.decisions(pdf, mdf, p.controls, score=pearl.decision_score, alpha=pearl.alpha,
                             target_fpr=p.mia.target_fpr, extraction=p.extraction)
    detail.table("audit_decisions", flags, show=False)
    order = {s: i for i, s in enumerate(p.sources)}   # each method's rows in the config's source order
    judged = sorted(judge.judged_rows(flags, p.controls), key=lambda r: order.get(r["source"], len(order)))
    methods = list(dict.fromkeys(flags.method))
    rows = [_judged(r, gt) for r in sorted(judged, key=lambda r: methods.index(r["method"]))]
    rows += [_finding(label, "unavailable", "—", None, None, GT.lookup(gt, label), note=why)
             for label, why in unavailable]
    return rows, style


def _mia(p: AuditParams, catalog, node: dict, reference: dict | None, documents: tuple[dict, dict],
         detail: StudyResult, progress: bool, overall: Parts):
    """The MIA scores, the reference attack (with ``reference``: a model node), probabilistic extraction and the blind
    baseline of every document, with their halves (None when the backend can't score); the (row label, why) of
    every rule the backend or the config leaves unavailable; the model's prompt style (read while it is loaded)."""
    from contextlib import nullcontext

    from memlab.methods.pearl.study import with_halves

    sources, halves = documents
    unavailable, mdf = [], None
    with overall.part(parts.MIA), catalog.using(node) as backend, \
            (catalog.using(reference) if reference else nullcontext()) as ref:
        style = "chat" if pearl_study.prompt_style(backend) == "chat" else "plain"
        extraction = p.extraction if decide.extractable(backend) else None
        try:
            mdf = with_halves(decide.mia_frame(backend, sources, settings=dataclasses.asdict(p.mia),
                                               max_words=p.mia.max_words, progress=progress, scored=overall.credit,
                                               reference=ref, extraction=extraction), halves)
        except NotImplementedError as err:   # a backend that can't score prompts (e.g. a chat-only API)
            why = " ".join(str(err).split())
            unavailable = [(decide.mia_label(s), why) for s in (*judged_names(), *decide.reference_names())]
    if extraction is None:
        unavailable.append((decide.EXTRACTION, "the backend gives no whole next-token distribution (a served model's "
                                               "log-probs are top-k): the sampler's p_z can't be computed"))
    if reference is None and mdf is not None:
        unavailable += [(decide.mia_label(s), NO_REFERENCE) for s in decide.reference_names()]
    if mdf is not None:
        mdf = _halves_of_controls(mdf, p.controls)
        detail.table("mia_scores", mdf.round(4), show=False)
        unavailable += [(decide.mia_label(s), "the backend gives no score for it (Min-K%++ needs the whole "
                                              "vocabulary's log-probs)") for s in judged_names() if mdf[s].isna().all()]
    return mdf, unavailable, style


NO_REFERENCE = ("no reference model given (params.mia.reference=<a conf/model preset>, e.g. gemma-3-270m: a model that "
                "did not see the texts in question; memlab audit … --reference <preset>)")


def _halves_of_controls(df, controls: dict):
    """``df`` with ``half`` kept for the controls' documents (calibration/evaluation) and ``all`` for every judged
    source's: a judged source is compared whole with its control's evaluation half."""
    return df.assign(half=df.half.where(df.source.isin(set(controls.values())), "all"))


def _judged(r: dict, gt: dict) -> dict:
    """One judged row of :func:`memlab.audit.judge.judged_rows` in the audit table's columns."""
    what = {judge.CONTROL: "known-unseen (FPR)", judge.NOT_JUDGED: "not judged"}.get(r["conclusion"], "flagged")
    row = _finding(r["method"], f"{r['source']}: {what}", r["rule"], r["k"], r["n"], GT.lookup(gt, r["method"]),
                   note=r["conclusion"])
    k0, n0 = r.get("control_k"), r.get("control_n")
    return {**row, "control": r["control"], "control_value": k0 / n0 if n0 else None,
            "control_k": k0, "control_n": n0, "diff": r.get("diff"), "diff_low": r.get("diff_low"),
            "diff_high": r.get("diff_high"), "conclusion": r["conclusion"]}


# -- RECAP -----------------------------------------------------------------------------------------------------
def _recap(recap: RecapConfig, p: AuditParams, catalog, node: dict, style: str, out_dir: Path, gt_all: dict,
           detail: StudyResult, progress: bool) -> list[dict]:
    target = TargetConfig(model=node, prompt_style=style, price_in=0.0, price_out=0.0, membership=None,
                          **dataclasses.asdict(p.recap))
    cfg = dataclasses.replace(recap, targets={node["name"]: target})
    run = run_recap(cfg, catalog, out_dir, progress=progress)
    books = E.book_scores(E.events_frame(run["all_records"]), cfg.recap.score_variant)
    detail.table("recap_book_scores", books, show=False)
    import pandas as pd

    col = f"passages_m{cfg.passage_tolerance}"
    rec = books[books.method == "recap"].sort_values("category", kind="stable")
    # a book is flagged when RECAP extracted at least one passage; the model's own known-unseen books (post-2025
    # texts, category non_training) are every other category's control, judged as PEARL's sources are
    control = "non_training" if (rec.category == "non_training").any() else None
    controls = {c: control for c in rec.category.unique() if c != "non_training"}
    decisions = pd.DataFrame({"method": "RECAP", "rule": GT.lookup(gt_all, "RECAP").rule, "source": rec.category,
                              "doc_id": rec.book, "half": "evaluation", "flagged": rec[col] >= 1})
    rows = []
    for r in judge.judged_rows(decisions[judge.DECISION_COLUMNS], controls):
        g = rec[rec.category == r["source"]]
        floor = books[(books.method == "echo") & (books.category == r["source"])].rouge_l.mean()
        row = _judged(r, gt_all)
        if r["conclusion"] in (judge.ABOVE, judge.SAME):
            row["finding"] = f"{r['source']}: books extracted"
        rows.append({**row, "note": f"ROUGE-L {g.rouge_l.mean():.3f} (metadata-echo floor {floor:.3f})"})
    return rows


# -- SimpleTrace -----------------------------------------------------------------------------------------------
def _trace(trace: TraceConfig, p: AuditParams, catalog, node: dict, results: Path, detail: StudyResult) -> list[dict]:
    import pandas as pd

    traces, overlap = trace_study.model_traces(trace, p.trace, node, catalog)
    keys = ["model", "corpus", "setting"]
    summary = pd.DataFrame(summary_rows(traces, keys, n_tokens=trace.n_tokens,
                                        nv_recall_threshold=trace.nv_recall_threshold))
    detail.table("trace_capability_propensity", summary, show=False)
    detail.table("trace_propensity", pd.DataFrame(propensity_rows(summary.to_dict("records"), keys,
                                                                  eps=trace.propensity_eps)), show=False)
    detail.table("trace_prompt_overlap", pd.DataFrame(overlap), show=False)
    gt, rows = GT.trace_rates(results, p.ground_truth.trace), []
    for r in summary.itertuples():
        n = int(r.total_generations)
        rows.append(_finding("SimpleTrace", f"{r.corpus}, {r.setting} prompts: full matches",
                             f"a generation's whole span found in {r.corpus}", int(round(r.FMR * n)), n, gt,
                             note=f"ALS {r.ALS:.1f} tokens"))
    return rows
