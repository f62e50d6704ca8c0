"""The audit of one model (``python -m memlab.run experiment=audit model=…``): PEARL in the wild, the MIA baselines,
RECAP extraction and SimpleTrace, each run on the model under test by the method's own study code, and one summary
table (``audit``): per method, what it found on this model (share with a Wilson 95 % interval, n) and, beside it, the
method's recall and false-positive rate at the same decision rule on the tiny ground-truth zoo
(:mod:`memlab.audit.ground_truth`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from memlab.audit import ground_truth as GT
from memlab.audit import plots
from memlab.errors import ConfigError
from memlab.methods.pearl import study as pearl_study
from memlab.methods.pearl import tables as T
from memlab.methods.pearl.calibration import calibrate_alpha
from memlab.methods.pearl.engine import PearlConfig
from memlab.methods.recap import evaluate as E
from memlab.methods.recap.config import CATEGORIES, TARGET_GROUPS, RecapConfig, TargetConfig
from memlab.methods.recap.study import run_recap
from memlab.methods.trace import study as trace_study
from memlab.methods.trace.config import TraceConfig
from memlab.methods.trace.generation import propensity_rows, summary_rows
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

MIA_SCORES = ("loss", "zlib_ratio", "min_k", "min_k_pp")   # higher = more likely a member (memlab.metrics.mia)


@dataclass(frozen=True)
class MiaSpec:
    min_k: float = field(metadata=check(gt=0, le=1))      # Min-K% / Min-K%++: the lowest k share of tokens
    target_fpr: float = field(metadata=check(ge=0, le=1))  # each threshold: this FPR on the known-unseen half
    max_words: int | None = field(metadata=check(ge=1))    # each text: its first max_words words (null: whole)


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
    """The zoo experiments whose default run gives each method's error rates."""

    pearl: str
    recap: str
    trace: str


@dataclass(frozen=True)
class AuditParams:
    """``params`` of conf/experiment/audit.yaml: pearl_wild's (which it extends), then the other methods' cells."""

    tasks: list[str] = field(metadata=check(choices=("completion", "summarization"), nonempty=True))
    calibration_sources: dict[str, str]
    sources: dict[str, pearl_study.Source]
    alphas: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))
    target_fprs: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))
    mia: MiaSpec
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
    rows, style = _pearl(pearl, p, catalog, node, results, detail, progress)
    rows += _recap(recap, p, catalog, node, style, Path(out_dir) / "recap", results, detail, progress)
    rows += _trace(trace, p, catalog, node, results, detail)
    summary = pd.DataFrame(rows)
    res = StudyResult()
    res.table("audit", summary)
    res.figure("audit", plots.findings(summary, node["name"]), caption=plots.CAPTION)
    res.metric(model=node["name"], **{f"{r.method}/{r.finding}": r.value for r in summary.itertuples()
                                      if r.value is not None and r.value == r.value})
    return res.merge(detail)


def _finding(method: str, finding: str, rule: str, k: int | None, n: int | None, rates: GT.Rates,
             note: str = "") -> dict:
    value, lo, hi = GT.share(k, n)
    return {"method": method, "finding": finding, "rule": rule, "value": value, "ci_low": lo, "ci_high": hi,
            "k": k, "n": n, "note": note, **rates.row()}


# -- PEARL and the MIA baselines -----------------------------------------------------------------------------
def _pearl(pearl: PearlConfig, p: AuditParams, catalog, node: dict, results: Path,
           detail: StudyResult, progress: bool) -> tuple[list[dict], str]:
    """PEARL's and the MIA baselines' rows, and the model's prompt style (read while the MIA holds the model)."""
    wild = pearl_study.wild_models(pearl, p.wild, catalog, [node])
    for name, df in wild.tables.items():
        detail.table(f"pearl_{name}", df, show=False)
    for name, fig in wild.figures.items():
        detail.figure(f"pearl_{name}", fig, show=False, caption=wild.captions.get(name))
    score, alpha = pearl.decision_score, pearl.alpha
    gt = GT.pearl_rates(results, p.ground_truth.pearl, list(MIA_SCORES), alpha, score, p.mia.target_fpr)
    df, rows = wild.tables["pearl_scores"], []
    for (task, source), g in df.groupby(["task_kind", "source"], sort=True):
        g = g[g.half != "calibration"] if source in p.calibration_sources.values() else g
        what = "known-unseen (FPR)" if source in p.calibration_sources.values() else "flagged"
        rows.append(_finding(f"PEARL ({task})", f"{source}: {what}", f"{score} > {alpha}",
                             int((g[score] > alpha).sum()), len(g), gt[score]))
    mia, style = _mia(pearl, p, catalog, node, gt, detail, progress)
    return rows + mia, style


def _mia(pearl: PearlConfig, p: AuditParams, catalog, node: dict, gt: dict,
         detail: StudyResult, progress: bool) -> tuple[list[dict], str]:
    import pandas as pd

    sources, halves = pearl_study.wild_sources(pearl, p.wild)
    with catalog.using(node) as backend:
        style = "chat" if pearl_study.prompt_style(backend) == "chat" else "plain"
        try:
            frames = [T.mia_frame(backend, docs, k=p.mia.min_k, max_words=p.mia.max_words, progress=progress,
                                  source=name)
                      for name, docs in sources.items()]
        except NotImplementedError as err:   # a backend that can't score prompts (e.g. a chat-only API)
            why = " ".join(str(err).split())
            return [_finding(f"MIA ({s})", "unavailable", "—", None, None, gt[s], note=why) for s in MIA_SCORES], style
    df = pd.concat(frames, ignore_index=True)
    df["half"] = df.doc_id.map(halves).fillna("all")
    scored = [s for s in MIA_SCORES if df[s].notna().any()]
    rows = [_finding(f"MIA ({s})", "unavailable", "—", None, None, gt[s],
                     note="the backend gives no score for it (Min-K%++ needs the whole vocabulary's log-probs)")
            for s in MIA_SCORES if s not in scored]
    fits = [{"score": s, "domain": domain,
             "threshold": calibrate_alpha(df[(df.source == unseen) & (df.half == "calibration")][s].dropna().to_numpy(),
                                          p.mia.target_fpr, floor=float("-inf")),
             "fitted_on": f"{unseen} calibration half"}
            for domain, unseen in p.calibration_sources.items() for s in scored]
    thresholds = {(f["domain"], f["score"]): f["threshold"] for f in fits}
    for source, spec in p.sources.items():
        unseen = p.calibration_sources[spec.domain]
        g = df[(df.source == source) & (df.half != "calibration")]
        what = "known-unseen (FPR)" if source == unseen else "flagged"
        for s in scored:
            vals = g[s].dropna()
            rows.append(_finding(f"MIA ({s})", f"{source}: {what}", f"fitted at FPR {p.mia.target_fpr} on {unseen}",
                                 int((vals > thresholds[spec.domain, s]).sum()), len(vals), gt[s]))
    detail.table("mia_scores", df.round(4), show=False)
    detail.table("mia_thresholds", pd.DataFrame(fits).round(6), show=False)
    return rows, style


# -- RECAP -----------------------------------------------------------------------------------------------------
def _recap(recap: RecapConfig, p: AuditParams, catalog, node: dict, style: str, out_dir: Path, results: Path,
           detail: StudyResult, progress: bool) -> list[dict]:
    target = TargetConfig(model=node, prompt_style=style, price_in=0.0, price_out=0.0, membership=None,
                          **dataclasses.asdict(p.recap))
    cfg = dataclasses.replace(recap, targets={node["name"]: target})
    run = run_recap(cfg, catalog, out_dir, progress=progress)
    books = E.book_scores(E.events_frame(run["all_records"]), cfg.recap.score_variant)
    detail.table("recap_book_scores", books, show=False)
    tol = cfg.passage_tolerance
    gt, col, rows = GT.recap_rates(results, p.ground_truth.recap, tol), f"passages_m{tol}", []
    for category, g in books[books.method == "recap"].groupby("category", sort=True):
        floor = books[(books.method == "echo") & (books.category == category)].rouge_l.mean()
        rows.append(_finding("RECAP", f"{category}: books extracted", gt.rule, int((g[col] >= 1).sum()), len(g), gt,
                             note=f"ROUGE-L {g.rouge_l.mean():.3f} (metadata-echo floor {floor:.3f})"))
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
