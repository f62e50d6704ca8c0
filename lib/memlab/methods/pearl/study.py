"""The PEARL studies (seeds 001/003), one function per experiment; the notebooks ``notebooks/pearl_*.ipynb`` only
show what these return.

Each function takes the method's settings (:class:`~memlab.methods.pearl.engine.PearlConfig`, from
conf/method/pearl.yaml), the experiment's own ``params`` (the dataclasses below, from conf/experiment/pearl_*.yaml)
and the run (:class:`memlab.study_run.StudyRun`: its model catalog, models under test), and returns a
:class:`memlab.results.StudyResult`. The ground-truth studies read a zoo family (``method.study.family``) whose
exact members and non-members are known; documents are drawn with :func:`memlab.data.sampling.sample_docs`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from memlab.data.sampling import sample_docs
from memlab.comparison import paper_mark
from memlab.errors import ConfigError
from memlab.methods.pearl import plots
from memlab.methods.pearl import tables as T
from memlab.methods.pearl.acr_params import AcrParams
from memlab.methods.pearl.calibration import calibrate_alpha
from memlab.methods.pearl.claims import PAPER_TAU_B
from memlab.methods.pearl.engine import PearlConfig
from memlab.metrics.mia import judged_names
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun


def mia_scores() -> list[str]:
    """The scores pearl_mia judges: PEARL's own two and every judged MIA score of the registry
    (:func:`memlab.metrics.mia.judged_names`)."""
    return ["sensitivity", "gfd", *judged_names()]


@dataclass(frozen=True)
class CalibrationParams:
    target_fpr: float = field(metadata=check(ge=0, le=1))
    example_words: int = field(metadata=check(ge=1))


@dataclass(frozen=True)
class EpochsParams:
    alphas: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))
    acr: AcrParams                    # the white-box comparison (001 Annex 1, 003 Fig. 7)


@dataclass(frozen=True)
class MiaParams:
    target_fpr: float = field(metadata=check(ge=0, le=1))
    min_k: float = field(metadata=check(gt=0, le=1))
    verbatim_truth: float = field(metadata=check(ge=0, le=1))
    n_resamples: int = field(metadata=check(ge=2))    # bootstrap resamples of the AUC bars


@dataclass(frozen=True)
class SizesParams:
    sizes: list[str] = field(metadata=check(nonempty=True))
    alphas: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))


@dataclass(frozen=True)
class Source:
    corpus: str                      # a name for memlab.data.corpora.load_corpus
    options: dict
    domain: str = field(metadata=check(choices=("text", "code")))
    n: int | None = field(metadata=check(ge=1))
    min_words: int = field(metadata=check(ge=0))
    meta: dict | None                # {meta key: allowed values}


@dataclass(frozen=True)
class WildParams:
    tasks: list[str] = field(metadata=check(choices=("completion", "summarization"), nonempty=True))
    calibration_sources: dict[str, str]   # domain -> its known-unseen source (a key of sources, same domain)
    sources: dict[str, Source]
    alphas: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))   # the paper's fixed thresholds
    target_fprs: list[float] = field(metadata=check(ge=0, le=1, nonempty=True))

    def __post_init__(self):
        for domain in sorted({s.domain for s in self.sources.values()}):
            cal = self.calibration_sources.get(domain)
            if cal not in self.sources or self.sources[cal].domain != domain:
                raise ConfigError(f"params.calibration_sources.{domain} must name a source of domain {domain!r}, "
                                  f"got {cal!r}")


def ground_truth_docs(method: PearlConfig, catalog):
    """The zoo family of ``method.study``, a seeded sample of its members, of its non-members, and the held-out
    halves of those non-members ({id: "calibration" | "evaluation"}: thresholds are fitted on one half, FPRs
    reported on the other)."""
    st = method.study
    fam = catalog.family(st.family)
    members = sample_docs(fam.members, st.n_members, method.seed)
    nonmembers = sample_docs(fam.nonmembers, st.n_nonmembers, method.seed)
    return fam, members, nonmembers, T.split_halves([d.id for d in nonmembers], f"{method.seed}:halves")


def with_halves(df, halves: dict[str, str]):
    """``df`` with a ``half`` column: "member", or the non-member's calibration / evaluation half."""
    df = df.copy()
    df["half"] = [halves.get(i, "member") for i in df.doc_id]
    return df


def calibration(method: PearlConfig, params: CalibrationParams, run: StudyRun) -> StudyResult:
    """FPR vs threshold α on known non-members (001 Fig. 6 / 003 Fig. 10), α at a target FPR, and input
    similarity per perturbation level (003 Table 8 analog), at checkpoint ``study.epoch``."""
    import pandas as pd

    p, catalog, st, res = params, run.catalog, method.study, StudyResult()
    _, members, nonmembers, halves = ground_truth_docs(method, catalog)
    docs = members + nonmembers
    res.table("input_similarity_by_level", T.similarity_table(docs, method, st.kinds).round(4))
    res.table("perturbation_examples", T.examples_table(members[0], method, st.kinds, p.example_words))
    with catalog.checkpoint(st.family, st.size, st.epoch) as backend:
        df = pd.concat([T.pearl_frame(backend, docs, method.replace(perturbation={"kind": k})) for k in st.kinds],
                       ignore_index=True)
    df = with_halves(df, halves)
    res.table("pearl_scores", df.round(4), show=False)
    res.table("mean_scores_by_kind_and_split",
              df.groupby(["kind", "split"])[["perf_k0", "perf_k5", "sensitivity", "gfd", "verbatim"]].mean().round(3)
              .reset_index(), show=False)
    fpr = T.fpr_table(df[df.half == "evaluation"], T.thresholds(st.thresholds), by=["kind"])
    res.table("fpr_vs_threshold", fpr, show=False)  # on the evaluation half of the non-members
    mark = paper_mark("pearl_calibration_low_fpr")
    res.figure("fpr_vs_threshold", plots.fpr_by_kind(fpr, p.target_fpr, mark and (PAPER_TAU_B, *mark)))
    cal = T.calibration_table(df, [p.target_fpr], by=["kind"])
    res.table("alpha_at_target_fpr", cal.round(4))
    res.metric(**{f"alpha_{r.kind}_{r.score}": r.alpha for r in cal.itertuples()},
               **{f"fpr_evaluation_{r.kind}_{r.score}": r.fpr_evaluation for r in cal.itertuples()},
               **{f"members_flagged_{r.kind}_{r.score}": r.others_flagged_share for r in cal.itertuples()})
    return res


def epochs(method: PearlConfig, params: EpochsParams, run: StudyRun) -> StudyResult:
    """Share of documents flagged per fine-tuning epoch, members vs non-members, per perturbation kind
    (003 Fig. 4, 001 Figs. 7/8)."""
    import pandas as pd
    from tqdm.auto import tqdm

    p, catalog, st, res = params, run.catalog, method.study, StudyResult()
    if not set(p.acr.epochs) <= set(st.epochs):
        raise ConfigError(f"params.acr.epochs {list(p.acr.epochs)} must be among method.study.epochs "
                          f"{list(st.epochs)}: ACR is compared with PEARL's scores of the same checkpoints")
    _, members, nonmembers, _ = ground_truth_docs(method, catalog)
    frames = []
    for epoch in tqdm(list(st.epochs), desc="epochs"):
        with catalog.checkpoint(st.family, st.size, epoch) as backend:
            for kind in st.kinds:
                frames.append(T.pearl_frame(backend, members + nonmembers, method.replace(perturbation={"kind": kind}),
                                            progress=False, epoch=epoch))
    df = pd.concat(frames, ignore_index=True)
    res.table("pearl_scores", df.round(4), show=False)
    flags = T.flag_table(df, p.alphas, by=["kind", "split", "epoch"], score=method.decision_score)
    res.table("flagged_share_by_epoch", flags.round(4), show=False)
    res.table("flagged_share_by_epoch_wide", flags.pivot_table(index=["kind", "alpha", "split"], columns="epoch",
                                                               values="share").round(2).reset_index(), show=False)
    res.figure("flagged_share_by_epoch", plots.flagged_by_epoch(flags, st.kinds, method.decision_score,
                                                                 paper_mark("pearl_epochs_members_vs_nonmembers")))
    last = flags[flags.epoch == max(st.epochs)]
    res.metric(**{f"final_share_{r.kind}_{r.split}_a{r.alpha}": r.share for r in last.itertuples()})
    from memlab.methods.pearl.acr import acr_figure, acr_table  # torch: imported when the study runs

    acr = acr_table(catalog, st.family, st.size, members + nonmembers, p.acr, progress=True)
    res.table("acr_scores", acr.round(4))
    res.figure("acr_vs_epoch_and_pearl", acr_figure(acr, df, score=method.decision_score, alpha=method.alpha))
    res.metric(**{f"acr_compressible_{split}_e{e}": float(g.compressible.mean())
                  for (split, e), g in acr.groupby(["split", "epoch"])})
    return res


def mia(method: PearlConfig, params: MiaParams, run: StudyRun) -> StudyResult:
    """PEARL vs membership inference per epoch (003 Table 4 / Fig. 13). As in the paper, every score's threshold is
    fixed once — fitted on the calibration half of the non-members at the first epoch listed (before fine-tuning
    when it is 0) at ``target_fpr`` — and applied unchanged at every epoch; PEARL uses its fixed α. Reported: % of
    members and of evaluation-half non-members flagged by the perplexity MIA, by PEARL and by both; ROC-AUC,
    precision, recall and FPR of every score against exact membership (members vs evaluation half) and, where both
    classes occur, against extractability."""
    p, st, res = params, method.study, StudyResult()
    df = _mia_scores_by_epoch(method, p, run.catalog)
    res.table("scores_by_epoch", df.round(4), show=False)
    fixed = _fixed_mia_thresholds(df, method, p, res)
    df["mia"] = df.neg_perplexity > fixed["neg_perplexity"]
    df["memo"] = df.sensitivity > method.alpha
    report = df[df.half != "calibration"]
    ov = T.overlap_table(report, "mia", "memo", by=["epoch", "split"])
    table4 = ov.pivot_table(index="epoch", columns="split", values=["n", "mia_pct", "memo_pct", "both_pct"]).round(1)
    table4.columns = [f"{split}_{v}" for v, split in table4.columns]
    res.table("mia_vs_memorization", table4.reset_index())
    det = _mia_detection_by_epoch(report, fixed, method, p)
    res.table("detection_by_epoch", det.round(4), show=False)
    final = det[det.epoch == max(st.epochs)]
    res.table("detection_final_epoch", final.round(3))
    _detection_vs_extractable(report, res)
    res.figure("auc_by_epoch", plots.auc_by_epoch(det[det.rule.str.startswith("fixed at")], report, seed=method.seed,
                                                 n_resamples=p.n_resamples))
    res.figure("flagged_by_epoch", plots.mia_vs_pearl(table4.reset_index()))
    cal = final[final.rule.str.startswith("fixed at")]
    res.metric(**{f"auc_final_{r.score}": r.auc for r in cal.itertuples()},
               **{f"precision_final_{r.score}": r.precision for r in cal.itertuples()},
               **{f"recall_final_{r.score}": r.recall for r in cal.itertuples()},
               **{f"fpr_final_{r.score}": r.fpr for r in cal.itertuples()})
    return res


def _mia_scores_by_epoch(method: PearlConfig, p: MiaParams, catalog):
    """One row per (epoch, document): PEARL's and every MIA score, the non-member half, ``member`` and
    ``extractable`` (verbatim share ≥ ``p.verbatim_truth``) as 0/1."""
    import pandas as pd
    from tqdm.auto import tqdm

    st = method.study
    _, members, nonmembers, halves = ground_truth_docs(method, catalog)
    docs, frames = members + nonmembers, []
    for epoch in tqdm(list(st.epochs), desc="epochs"):
        with catalog.checkpoint(st.family, st.size, epoch) as backend:
            pe = T.pearl_frame(backend, docs, method, progress=False, epoch=epoch)
            scores = T.mia_frame(backend, docs, settings=asdict(p), max_words=method.task.max_input_words)
        frames.append(pe.merge(scores.drop(columns=["split"]), on="doc_id"))
    df = with_halves(pd.concat(frames, ignore_index=True), halves)
    df["member"] = (df.split == "member").astype(int)
    df["extractable"] = (df.verbatim >= p.verbatim_truth).astype(int)
    return df


def _fixed_mia_thresholds(df, method: PearlConfig, p: MiaParams, res: StudyResult) -> dict:
    """Each score's threshold at ``p.target_fpr`` on the calibration half at the first epoch, plus PEARL's α
    (``sensitivity_alpha``); recorded as the ``fixed_thresholds`` table."""
    import pandas as pd

    st = method.study
    first = df[(df.epoch == st.epochs[0]) & (df.half == "calibration")]
    fixed = {s: calibrate_alpha(first[s].dropna().to_numpy(), p.target_fpr, floor=float("-inf"))
             for s in ["neg_perplexity", *mia_scores()] if first[s].notna().any()}
    fixed["sensitivity_alpha"] = method.alpha
    res.table("fixed_thresholds", pd.DataFrame([{"score": s, "threshold": t, "fitted_on": (
        f"calibration half, epoch {st.epochs[0]}, FPR {p.target_fpr}" if s != "sensitivity_alpha" else "method.alpha")}
        for s, t in fixed.items()]).round(6))
    return fixed


def _mia_detection_by_epoch(report, fixed: dict, method: PearlConfig, p: MiaParams):
    """Per epoch: every MIA score at its fixed threshold, and PEARL's decision score at α, against membership."""
    import pandas as pd

    st, judged = method.study, mia_scores()
    rows = []
    for epoch, g in report.groupby("epoch"):
        dec = {s: t for s, t in fixed.items() if s in judged}
        t = T.detection_table(g, "member", judged, dec)
        t["truth"], t["epoch"], t["rule"] = "member", epoch, f"fixed at epoch {st.epochs[0]} (FPR {p.target_fpr})"
        alpha = T.detection_table(g, "member", [method.decision_score], {method.decision_score: method.alpha})
        alpha["truth"], alpha["epoch"], alpha["rule"] = "member", epoch, f"fixed alpha={method.alpha}"
        rows += [t, alpha]
    return pd.concat(rows, ignore_index=True)


def _detection_vs_extractable(report, res: StudyResult) -> None:
    """Every MIA score against extractability, at the epochs where both classes occur (no tables otherwise)."""
    import pandas as pd

    judged = mia_scores()
    ext = [T.detection_table(g, "extractable", judged).assign(epoch=e, n_extractable=int(g.extractable.sum()))
           for e, g in report.groupby("epoch") if g.extractable.nunique() == 2]
    if ext:
        ext = pd.concat(ext, ignore_index=True)
        res.table("detection_vs_extractable_by_epoch", ext.round(3), show=False)
        res.table("auc_vs_extractable", ext.pivot_table(index="score", columns="epoch", values="auc").round(2)
                  .reset_index(), show=False)


def sizes(method: PearlConfig, params: SizesParams, run: StudyRun) -> StudyResult:
    """Flagged counts at three thresholds for each model size, and FPR curves per size on non-members
    (001/003 Table 2, 003 Fig. 8)."""
    import pandas as pd

    p, catalog, st, res = params, run.catalog, method.study, StudyResult()
    fam, members, nonmembers, halves = ground_truth_docs(method, catalog)
    frames = []
    for size in p.sizes:
        with catalog.checkpoint(st.family, size, st.epoch) as backend:
            frames.append(T.pearl_frame(backend, members + nonmembers, method, size=size))
    df = with_halves(pd.concat(frames, ignore_index=True), halves)
    res.table("pearl_scores", df.round(4), show=False)
    flags = T.flag_table(df, p.alphas, by=["size", "split"], score=method.decision_score)
    table2 = flags.pivot_table(index=["split", "size"], columns="alpha", values="flagged").reset_index()
    table2.columns = [c if isinstance(c, str) else f"flagged_{method.decision_score}>{c}" for c in table2.columns]
    table2 = table2.merge(pd.DataFrame([{"size": z, "non_embedding_params": fam.non_embedding_params(z),
                                         "final_train_loss": fam.final_loss(z)} for z in p.sizes]), on="size")
    # each size's weights (the claim orders sizes by them, not by params.sizes) and final training loss
    res.table("flagged_counts_by_size", table2)
    fpr = T.fpr_table(df[df.half == "evaluation"], T.thresholds(st.thresholds), by=["size"], scores=[method.decision_score])
    res.table("fpr_vs_threshold_by_size", fpr, show=False)
    res.figure("fpr_vs_threshold_by_size", plots.fpr_by_size(fpr, p.sizes, method.decision_score, p.alphas))
    res.metric(**{f"members_flagged_{r.size}_a{r.alpha}": r.flagged for r in flags[flags.split == "member"].itertuples()})
    return res


def wild(method: PearlConfig, params: WildParams, run: StudyRun) -> StudyResult:
    """PEARL in the wild on the run's models under test (:func:`wild_models`)."""
    return wild_models(method, params, run.catalog, run.targets)


def wild_models(method: PearlConfig, p: WildParams, catalog, targets: list[dict],
                scored: Callable[[int], None] | None = None) -> StudyResult:
    """PEARL on pretrained models in the wild (001/003 §4.4–4.5): flagged counts at the paper's thresholds and at
    thresholds calibrated per domain on known-unseen documents (text: post-2024 prose, code: post-cutoff Python, as
    LBPP in the paper), sensitivity per source and task, completion vs summarization. ``targets``: the model nodes
    under test (:func:`memlab.model_use.target_nodes`), each prompted in :func:`prompt_style`. ``scored(n)`` is told
    after each (task, source) of its n documents (the audit's overall progress)."""
    import pandas as pd

    res = StudyResult()
    sources, halves = wild_sources(method, p)
    frames, models = [], [node["name"] for node in targets]
    for model, node in zip(models, targets):
        with catalog.using(node) as backend:
            frames += source_frames(method, p.tasks, sources, {n: s.domain for n, s in p.sources.items()}, backend,
                                    prompt_style(backend), model, scored)
    df = with_halves(pd.concat(frames, ignore_index=True), halves)
    res.table("pearl_scores", df.round(4), show=False)
    keys = ["model", "task_kind", "domain", "source"]
    score = method.decision_score
    flags = T.flag_table(df, list(p.alphas), by=keys, score=score)
    table3 = flags.pivot_table(index=keys, columns="alpha", values="flagged").reset_index()
    table3.columns = [c if isinstance(c, str) else f"flagged_{score}>{c}" for c in table3.columns]
    table3 = table3.merge(flags.groupby(keys).n.first().reset_index(), on=keys)
    res.table("flagged_counts_fixed_thresholds", table3)
    cal = T.domain_calibration_table(df, list(p.target_fprs), p.calibration_sources, score)
    res.table("alpha_calibrated_per_domain", cal.round(4))
    res.table("flagged_counts_calibrated", T.calibrated_flags_table(df, cal, score).round(4))
    res.table("seen_vs_unseen_mann_whitney", T.mann_whitney_table(df, p.calibration_sources, score).round(4))
    res.figure("sensitivity_by_source_and_task", plots.sensitivity_by_source(df, cal, models, p.tasks,
                                                                             list(p.sources), p.target_fprs))
    at = T.calibrated_alphas(cal, p.target_fprs, score)   # each task on its own scale (issue 49), else the paper's
    res.table("completion_vs_summarization", completion_vs_summarization(df, at[1] if at else min(p.alphas), score))
    med = df.groupby(keys).sensitivity.agg(["median", "size"]).reset_index()
    med = med.rename(columns={"median": "sensitivity", "size": "n"})
    res.table("median_sensitivity", med.round(4))
    res.metric(**{f"median_sens_{r.model}_{r.task_kind}_{r.source}": r.sensitivity for r in med.itertuples()})
    return res


def source_frames(method: PearlConfig, tasks, sources: dict, domains: dict, backend, style: str, model: str,
                  scored: Callable[[int], None] | None = None) -> list:
    """PEARL's per-document frames of every source under each task (``{domain}_{task}``, prompted in ``style``), one
    frame per (task, source): pearl_wild's loop, which the audit and its self-check run too."""
    frames = []
    for task in tasks:
        for name, docs in sources.items():
            cfg = method.replace(task={"name": f"{domains[name]}_{task}", "style": style})
            frames.append(T.pearl_frame(backend, docs, cfg, model=model, source=name, task_kind=task,
                                        domain=domains[name]))
            if scored:
                scored(len(docs))
    return frames


def wild_sources(method: PearlConfig, p: WildParams):
    """The documents of every source (a seeded sample; the known-unseen calibration sets are ``nonmember``, the
    others ``unknown``) and the calibration/evaluation half of each known-unseen document."""
    unseen = set(p.calibration_sources.values())
    sources = {name: sample_docs(_corpus(s), s.n, method.seed, min_words=s.min_words, meta=s.meta,
                                 split="nonmember" if name in unseen else "unknown")
               for name, s in p.sources.items()}
    halves = {}
    for name in sorted(unseen):
        halves.update(T.split_halves([d.id for d in sources[name]], f"{method.seed}:halves"))
    return sources, halves


def prompt_style(backend) -> str:
    """``chat`` for a model that speaks chat (a chat template, or a chat-only endpoint), else ``raw`` (plain text)."""
    return "chat" if backend.has_chat_template or backend.chat_only else "raw"


def completion_vs_summarization(df, alphas, score: str):
    """Per model and source: held-out documents flagged under completion, summarization and both
    (:func:`~memlab.methods.pearl.tables.task_flags`: ``alphas`` one fixed α, or each (model, task, domain)'s own
    calibrated α, whose values the table's alpha_<task> columns show); a task that did not run (``params.tasks``)
    is left empty, never counted as zero flags."""
    import pandas as pd

    wide, rows = T.task_flags(df, alphas, score), []
    for (model, src), g in wide.groupby(level=["model", "source"]):
        ran = {t: g[t].fillna(False).to_numpy(bool) for t in ("completion", "summarization") if t in g}
        both = int((ran["completion"] & ran["summarization"]).sum()) if len(ran) == 2 else None
        dom = df[df.source == src].domain.iloc[0] if "domain" in df else None
        rows.append({"model": model, "source": src,
                     **{f"alpha_{t}": alphas if isinstance(alphas, (int, float)) else alphas.get((model, t, dom))
                        for t in ("completion", "summarization")},
                     **{t: int(ran[t].sum()) if t in ran else None for t in ("completion", "summarization")},
                     "both": both, "n": len(g)})
    return pd.DataFrame(rows).astype({"completion": "Int64", "summarization": "Int64", "both": "Int64"})


def _corpus(s: Source):
    from memlab.data.corpora import load_corpus

    return load_corpus(s.corpus, **dict(s.options))
