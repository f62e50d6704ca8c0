"""Low-FPR membership inference and probabilistic extraction on a zoo family (issue 51): experiment ``mia_low_fpr``.

On one checkpoint of a zoo family whose members and non-members are exact (``params.family``, e.g. conf/zoo/
kjv_verses.yaml: 510 + 2999 KJV verses), with the family's pre-fine-tuning model (epoch 0 = ``init_from``), or a
sibling named as ``reference``, as the reference model:

1. **Scores.** Every document's first ``score_tokens`` tokens are scored by both models (teacher forcing); every
   registered MIA score of the target (:func:`memlab.metrics.mia.member_scores`: loss, perplexity, zlib, Min-K%,
   Min-K%++ and any plug-in score) plus the two reference attacks (Carlini et al. 2021 / Mireshghallah et al. 2022):
   ``ref_loss_difference`` = loss_reference − loss_target and ``ref_loss_ratio`` = −loss_target / loss_reference —
   both oriented higher = member, as every column of the ``scores`` table — and the blind baseline
   (:mod:`memlab.metrics.blind`, ``blind``: zlib compressibility of the same scored text, never the model), read as
   one more attack: what a split's text distributions alone give at low FPR (issue 47). Each method group the
   experiment mounts under ``methods`` (conf/experiment/mia_low_fpr.yaml: ``methods.pearl``, conf/method/pearl.yaml)
   adds its attack: ``group.member_scores(target, docs)`` (PEARL:
   :meth:`memlab.methods.pearl.engine.PearlConfig.member_scores`, ``pearl_sensitivity``, the text-completion task
   under bit flips as pearl_mia runs it), on a seeded subset of the documents (``method_subset``: such an attack
   generates, so scoring every document can cost more than the rest of the study); the other documents have NaN
   there. The group is handed in typed, never imported (a method never imports another).
2. **Low-FPR table** (``low_fpr``, :mod:`memlab.metrics.low_fpr`). The non-members are split once into a calibration
   half and an evaluation half (the first ⌊n/2⌋ of ``np.random.default_rng(seed).permutation(n)``, the run's
   ``seed``); each attack's threshold is fitted on the calibration half at each ``target_fprs`` and read on all
   members (TPR) and on the evaluation half (FPR), each with an exact Clopper–Pearson interval at ``level``;
   ``resolvable`` says whether the calibration half can show an FPR above 0 and ≤ the target at all. AUC (members
   vs all non-members) with a stratified percentile bootstrap interval (``n_resamples``, seeded with ``seed``).
   Each attack is read on the documents it scored: a subset attack's rows count its subset's members and halves
   (``n_members``, ``n_calibration``, ``n_evaluation``, ``n_nonmembers_auc``) and say ``documents: seeded subset``.
3. **ROC figure** ``roc_low_fpr``: every attack on the documents it scored, members vs non-members, log-log axes
   (:func:`memlab.plots.roc_low_fpr`).
4. **Extraction.** Per document the pair (its first ``prefix_tokens`` tokens, the next ``suffix_tokens``): log p_z
   under the configured sampler (``sampler``: temperature, top_k, top_p; :func:`memlab.metrics.extraction_probability.
   log_p_z`) and greedy extraction = p_z under the greedy sampler is 1 (T = 0: every suffix token is the argmax given
   the prefix and the suffix before it, which is exactly "greedy decoding reproduces the suffix"). Table
   ``extraction``: per split and n in ``ns``, the (n, p)-discoverable share (p = ``discoverable_p``) beside the greedy
   extraction rate, with exact intervals; every row states the sampler. Figure ``extraction_vs_n``.

Every number comes from ``params`` (:class:`LowFprParams`), the method groups and the run's ``seed``; nothing is
defaulted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memlab.errors import ConfigError
from memlab.metrics.blind import COLUMN as BLIND, zlib_compressibility
from memlab.metrics.extraction_probability import Sampler, rate_rows, sampler_and_greedy
from memlab.models.reference import ReferenceCheckpoint, reference_losses, reference_of
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

@dataclass(frozen=True)
class MethodSubset:
    """The documents the method groups' attacks score: a seeded sample (:func:`memlab.data.sampling.sample_docs`,
    stream ``"<seed>:method_subset:<member | calibration | evaluation>"``) of ``members`` members and ``nonmembers``
    non-members, ⌊nonmembers/2⌋ of them from the calibration half and the rest from the evaluation half (so the
    subset's calibration count is fixed, not drawn); null = every member / every non-member."""

    members: int | None = field(metadata=check(ge=1))
    nonmembers: int | None = field(metadata=check(ge=2))


@dataclass(frozen=True)
class FamilyCheckpoint:
    """One checkpoint of a zoo family read beside ``params.family``: its members and non-members, its MIA scores and
    the reference attacks against its reference model: ``reference``, or where that is null and the family continues
    a parent (``init_from``), that parent (epoch 0); none when both are missing."""

    family: str
    size: str
    epoch: int | str                  # an epoch or "final"
    method_subset: MethodSubset | None   # the documents the method groups' attacks (PEARL) score; null: none
    reference: ReferenceCheckpoint | None   # null: the parent (init_from), if any


@dataclass(frozen=True)
class LowFprParams:
    """``params`` of ``experiment=mia_low_fpr`` (values in conf/experiment/mia_low_fpr.yaml only)."""

    family: str                       # a zoo family continued from a parent (init_from): the parent is the reference
    size: str
    reference: ReferenceCheckpoint | None   # null: the parent (FamilyCheckpoint.reference)
    epoch: int | str                  # the target checkpoint: an epoch or "final"
    score_tokens: int = field(metadata=check(ge=2))     # tokens of each document the MIA scores read (from its start)
    min_k: float = field(metadata=check(gt=0, le=1))    # k of Min-K% / Min-K%++
    target_fprs: list[float] = field(metadata=check(gt=0, lt=1, nonempty=True))
    level: float = field(metadata=check(gt=0, lt=1))    # exact (Clopper-Pearson) and bootstrap interval level
    n_resamples: int = field(metadata=check(ge=2))      # bootstrap resamples of the AUC interval
    prefix_tokens: int = field(metadata=check(ge=1))
    suffix_tokens: int = field(metadata=check(ge=1))
    sampler: Sampler
    ns: list[int] = field(metadata=check(ge=1, nonempty=True))   # the grid of n of (n, p)-discoverability
    discoverable_p: float = field(metadata=check(gt=0, le=1))
    batch_size: int = field(metadata=check(ge=1))       # pairs per forward pass of log p_z
    method_subset: MethodSubset       # the documents the method groups' attacks (PEARL) score
    families: dict[str, FamilyCheckpoint]  # the other zoo families, read the same way: low_fpr_by_family (keys only
                                           # name an entry, so that a profile can change one entry's keys alone)

    @property
    def main(self) -> FamilyCheckpoint:
        return FamilyCheckpoint(self.family, self.size, self.epoch, self.method_subset, self.reference)


def _ids(backend, docs, need: int) -> list[list[int]]:
    """Each document's token ids, tokenized once as the backend's scoring does (its own special tokens,
    ``score_bos: tokenizer``); a document of fewer than ``need`` tokens is refused in one line. A family continued
    from its parent (``init_from``) inherits the parent's tokenizer, so these ids serve the reference model too."""
    if getattr(backend, "score_bos", "tokenizer") != "tokenizer":
        raise ConfigError("mia_low_fpr scores token ids as the tokenizer makes them: use score_bos: tokenizer")
    tok = backend.tokenizer
    out = []
    for d in docs:
        ids = list(tok(d.text)["input_ids"])
        if len(ids) < need:
            raise ConfigError(f"{d.id} has {len(ids)} tokens; the prefix/suffix pair needs {need}")
        out.append(ids)
    return out


def _scored(backend, ids, p: LowFprParams) -> tuple[list[dict], list[float], list[float], list[str], list[float]]:
    """Every registered MIA score (higher = member) of each document's first ``score_tokens`` tokens, its loss, the
    blind baseline of the same text, that text, and its loss in nats per byte (for a reference of another tokenizer)."""
    from memlab.metrics.mia import loss, member_scores, nll_per_byte

    scored = backend.score_token_ids(ids)
    texts = [backend.tokenizer.decode(i, skip_special_tokens=True) for i in ids]
    settings = {"min_k": p.min_k}
    return ([dict(member_scores(ts, t, settings)) for ts, t in zip(scored, texts)], [loss(ts) for ts in scored],
            [zlib_compressibility(t) for t in texts], texts, [nll_per_byte(ts, t) for ts, t in zip(scored, texts)])


def _method_subset(docs, halves: list[str], sub: MethodSubset, seed: int) -> list[int]:
    """Indices into ``docs`` of the documents the method groups' attacks score (:class:`MethodSubset`), in document
    order; a subset larger than the family is refused in one line, before any model loads."""
    from memlab.data.sampling import sample_docs

    n_non = sub.nonmembers
    want = {"member": sub.members, "calibration": None if n_non is None else n_non // 2,
            "evaluation": None if n_non is None else n_non - n_non // 2}
    picked: set[str] = set()
    for group, n in want.items():
        pool = [d for d, h in zip(docs, halves) if h == group]
        if n is not None and n > len(pool):
            raise ConfigError(f"params.method_subset asks for {n} {group} documents; the family has {len(pool)}")
        picked.update(d.id for d in sample_docs(pool, n, f"{seed}:method_subset:{group}"))
    return [k for k, d in enumerate(docs) if d.id in picked]


def score_frame(catalog, at: FamilyCheckpoint, p: LowFprParams, seed: int, groups: list, progress: bool):
    """One row per document of ``at``'s family: split, non-member half, every attack's score (higher = member), both
    losses, log p_z under the sampler and under greedy decoding, and greedy extraction (0/1); each method group's
    attack (``groups``: :func:`method_groups`) on the method subset (NaN on the other documents). Both losses are
    per token, or per byte against a reference of another tokenizer (:mod:`memlab.models.reference`); a family
    with no reference model has its reference attacks and reference loss NaN.
    Returns the frame and the names of the method groups' attacks."""
    import pandas as pd

    from memlab.metrics.mia import reference_scores

    fam = catalog.family(at.family)
    docs = list(fam.members) + list(fam.nonmembers)
    if not fam.members or len(fam.nonmembers) < 2:
        raise ConfigError(f"zoo family {at.family!r} needs members and ≥ 2 non-members (a calibration half and an "
                          f"evaluation half), has {len(fam.members)} and {len(fam.nonmembers)}")
    for g in groups:
        if not callable(getattr(g, "member_scores", None)):
            raise ConfigError(f"method group {type(g).__name__} has no member_scores(backend, docs, progress): "
                              "mia_low_fpr reads a method only as an attack that scores documents")
    n_non = len(fam.nonmembers)
    cal = set(np.random.default_rng(seed).permutation(n_non)[:n_non // 2].tolist())
    halves = ["member"] * len(fam.members) + ["calibration" if j in cal else "evaluation" for j in range(n_non)]
    subset = _method_subset(docs, halves, at.method_subset, seed) if groups else []
    n_pair = p.prefix_tokens + p.suffix_tokens
    ref = reference_of(catalog, at.family, at.size, at.reference, docs)   # before any model loads
    with catalog.checkpoint(at.family, at.size, at.epoch) as target:
        ids = _ids(target, docs, n_pair)
        scored_ids = [i[:p.score_tokens] for i in ids]
        scores, loss_t, blind, texts, per_byte_t = _scored(target, scored_ids, p)
        pairs = [(i[:p.prefix_tokens], i[p.prefix_tokens:n_pair]) for i in ids]
        lpz, lpz_greedy = sampler_and_greedy(target, pairs, p.sampler, p.batch_size)
        by_method = [g.member_scores(target, [docs[k] for k in subset], progress=progress) for g in groups]
    loss_r = [np.nan] * len(docs) if ref is None else reference_losses(catalog, ref, scored_ids, texts)
    loss_a = per_byte_t if ref is not None and not ref.same_tokenizer else loss_t   # in the unit of loss_r
    usable = [s for s in reference_scores() if ref is not None and (ref.same_tokenizer or s.across_tokenizers)]
    extra = {}
    for a, values in ((a, v) for scored in by_method for a, v in scored.items()):
        if a in extra or a in scores[0] or a in {s.name for s in reference_scores()} or a == BLIND:
            raise ConfigError(f"two attacks are named {a!r}: mount a method group once under methods")
        extra[a] = np.full(len(docs), np.nan)
        extra[a][subset] = values
    rows = []
    for k, d in enumerate(docs):
        by_ref = {s.name: np.nan for s in reference_scores()} | {s.name: s.raw(loss_a[k], loss_r[k]) for s in usable}
        rows.append({"doc_id": d.id, "split": "member" if halves[k] == "member" else "nonmember", "half": halves[k],
                     **{s: (np.nan if v is None else v) for s, v in scores[k].items()}, **by_ref,
                     **{a: v[k] for a, v in extra.items()},
                     BLIND: blind[k], "loss_target": loss_a[k], "loss_reference": loss_r[k],
                     "log_p_z": lpz[k], "log_p_z_greedy": lpz_greedy[k], "greedy": int(lpz_greedy[k] == 0.0)})
    return pd.DataFrame(rows), list(extra)


def attacks(df) -> list[str]:
    """Every registered MIA score the backend could compute, then the registered reference attacks (where the
    family has a reference model), then the blind baseline."""
    from memlab.metrics.mia import reference_scores, score_names

    return [s for s in [*score_names(), *(r.name for r in reference_scores()), BLIND] if df[s].notna().all()]


def read_on(df, attack: str):
    """The members and the non-members ``attack`` scored (all, or a method's subset)."""
    d = df[df[attack].notna()]
    return d[d.split == "member"], d[d.split == "nonmember"]


def low_fpr_table(df, names: list[str], p: LowFprParams, seed: int):
    """One row per attack (``names``) x target FPR, each read on the documents it scored (``documents``: all, or a
    seeded subset): threshold on the calibration half, TPR on the members and FPR on the evaluation half with exact
    intervals, resolvability, AUC (members vs all non-members) with its bootstrap interval."""
    import pandas as pd

    from memlab.metrics.low_fpr import auc_with_interval, tpr_at_fpr_held_out

    rows = []
    for a in names:
        mem, non = read_on(df, a)
        documents = "all" if len(mem) + len(non) == len(df) else "seeded subset"
        cal_idx = np.flatnonzero((non.half == "calibration").to_numpy())
        auc = auc_with_interval(mem[a].to_numpy(), non[a].to_numpy(), n_resamples=p.n_resamples, seed=seed,
                                level=p.level)
        for t in p.target_fprs:
            op = tpr_at_fpr_held_out(mem[a].to_numpy(), non[a].to_numpy(), t, calibration=cal_idx, seed=None,
                                     level=p.level)
            rows.append({"attack": a, "documents": documents, "target_fpr": t, "threshold": op.threshold,
                         "tpr": op.tpr, "tpr_ci_low": op.tpr_ci[0], "tpr_ci_high": op.tpr_ci[1], "tp": op.tp,
                         "n_members": op.n_members, "fpr_evaluation": op.fpr, "fpr_ci_low": op.fpr_ci[0],
                         "fpr_ci_high": op.fpr_ci[1], "fp_evaluation": op.fp, "n_evaluation": op.n_nonmembers,
                         "n_calibration": op.n_calibration, "resolvable": op.resolvable, "min_fpr": op.min_fpr,
                         "auc": auc.estimate, "auc_ci_low": auc.ci_low, "auc_ci_high": auc.ci_high,
                         "n_nonmembers_auc": len(non), "level": p.level})
    return pd.DataFrame(rows)


def extraction_table(df, p: LowFprParams):
    """Per split and n: the (n, p)-discoverable share under the sampler beside the greedy extraction rate, exact
    intervals for both (:func:`memlab.metrics.extraction_probability.rate_rows`); every row names the sampler and the
    pair."""
    import pandas as pd

    rows = [{"split": split, **p.sampler.columns(), "prefix_tokens": p.prefix_tokens,
             "suffix_tokens": p.suffix_tokens, **r}
            for split, g in df.groupby("split", sort=False)
            for r in rate_rows(g.log_p_z.to_numpy(), g.greedy.to_numpy(), p.ns, p.discoverable_p, p.level)]
    return pd.DataFrame(rows)


def extraction_figure(ext, p: LowFprParams):
    """(n, p)-discoverable share vs n per split (bands: exact intervals), greedy extraction rate as dashed lines."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for k, (split, g) in enumerate(ext.groupby("split", sort=False)):
        c = f"C{k}"
        ax.plot(g.n, g.discoverable_share, marker="o", c=c, label=f"{split}: (n, {p.discoverable_p:g})-discoverable")
        ax.fill_between(g.n, g.discoverable_ci_low, g.discoverable_ci_high, color=c, alpha=0.15, lw=0)
        ax.axhline(g.greedy_rate.iloc[0], c=c, ls="--", lw=1, label=f"{split}: greedy extraction")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("n (samples drawn)")
    ax.set_ylabel("share of documents")
    ax.set_title(f"{p.family}/{p.size}: {p.prefix_tokens} → {p.suffix_tokens} tokens, {p.sampler.label()}",
                 fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def method_groups(run: StudyRun) -> list:
    """The typed method groups mounted under the config's ``methods`` (``/method@methods.<name>: <name>`` in the
    experiment's defaults), in config order; each adds its attack."""
    names = list(run.cfg.get("methods") or {}) if run.cfg is not None else []
    return [run.typed(f"methods.{name}") for name in names]


def study(method: None, params: LowFprParams, run: StudyRun) -> StudyResult:
    """The mia_low_fpr experiment (module docstring): tables ``scores``, ``low_fpr``, ``extraction``; figures
    ``roc_low_fpr``, ``extraction_vs_n``; headline metrics; and for each of ``params.families`` (:func:`other_families`)
    tables ``low_fpr_by_family``, ``extraction_by_family``, ``scores_by_family``, a figure
    ``roc_low_fpr_<family>_<size>_<epoch>`` and metrics ``by_family/...``. No method of its own (``method`` None):
    the method groups whose attacks join the others are mounted under ``methods`` (:func:`method_groups`)."""
    if method is not None:
        raise ConfigError("mia_low_fpr has no method of its own: mount a method group under methods.<name> to add "
                          "its attack")
    p, res = params, StudyResult()
    groups = method_groups(run)
    df, method_attacks = score_frame(run.catalog, p.main, p, run.seed, groups, run.progress)
    res.table("scores", df, show=False)
    names = attacks(df) + method_attacks
    table = res.table("low_fpr", low_fpr_table(df, names, p, run.seed))
    mem, non = df[df.split == "member"], df[df.split == "nonmember"]
    fig, caption = roc_figure(df, names, p.main, p, "low_fpr")
    res.figure("roc_low_fpr", fig, caption=caption)
    ext = res.table("extraction", extraction_table(df, p))
    res.figure("extraction_vs_n", extraction_figure(ext, p), caption=(
        f"Share of documents whose {p.suffix_tokens}-token suffix after their first {p.prefix_tokens} tokens is "
        f"(n, {p.discoverable_p:g})-discoverable under the sampler {p.sampler.label()} (exact p_z), members vs "
        f"non-members; dashed: greedy extraction rate; bands: exact {p.level:g} intervals."))
    for r in table.itertuples():
        key = f"{r.attack}/fpr_{r.target_fpr:g}"
        res.metric(**{f"{key}/tpr": r.tpr, f"{key}/tpr_ci_low": r.tpr_ci_low, f"{key}/tpr_ci_high": r.tpr_ci_high,
                      f"{key}/fpr_evaluation": r.fpr_evaluation})
    res.metric(**{f"{r.attack}/auc": r.auc for r in table.drop_duplicates("attack").itertuples()})
    for r in ext.itertuples():
        res.metric(**{f"{r.split}/discoverable_n{r.n}": r.discoverable_share, f"{r.split}/greedy_rate": r.greedy_rate})
    for a in method_attacks:
        m, n = read_on(df, a)
        res.metric(**{f"{a}/n_members": len(m), f"{a}/n_nonmembers": len(n)})
    res.metric(n_members=len(mem), n_nonmembers=len(non))
    other_families(res, run, p, groups, method_attacks, table, ext)
    return res


def roc_figure(df, names: list[str], at: FamilyCheckpoint, p: LowFprParams, table: str):
    """The ROC of every attack in ``names`` on the documents it scored (log-log axes, :func:`memlab.plots.
    roc_low_fpr`) and its caption, naming the table that holds the operating points."""
    from memlab.metrics.low_fpr import roc_curve
    from memlab.metrics.mia import reference_scores
    from memlab.plots import roc_low_fpr

    curves, subsets = {}, []
    for a in names:
        m, n = read_on(df, a)
        curve = a if len(m) + len(n) == len(df) else f"{a} (seeded subset: {len(m)} + {len(n)})"
        curves[curve] = roc_curve(m[a].to_numpy(), n[a].to_numpy())
        if curve != a:
            where = "params.method_subset" if table == "low_fpr" else "its method_subset in params.families"
            subsets.append(f"{a} scored a seeded subset of {len(m)} members and {len(n)} non-members ({where}). ")
    n_mem, n_non = int((df.split == "member").sum()), int((df.split == "nonmember").sum())
    fig = roc_low_fpr(curves, n_members=n_mem, n_nonmembers=n_non, marks=list(p.target_fprs))
    read = [s.name for s in reference_scores() if s.name in names]
    reference = ("No reference attack: the family is trained from scratch (it has no parent model). " if not read else
                 "Reference attacks compare with the family's parent model (epoch 0). " if at.reference is None else
                 f"Reference attacks compare with {at.reference.label}, a sibling that never trained on these "
                 "members or non-members" + ("" if len(read) == len(reference_scores()) else
                                             f"; it tokenizes otherwise: {', '.join(read)} only, in nats per byte")
                 + ". ")
    reference += "blind: zlib compressibility of the same text, never the model. " if BLIND in names else ""
    reference += "".join(f"{', '.join(g[:-1])} and {g[-1]} draw the same curve ({g[-1]}'s, on top). "
                         for g in _same_curves(curves))
    return fig, (
        f"ROC of every attack on {at.family}/{at.size} (epoch {at.epoch}), {n_mem} members vs {n_non} "
        f"non-members, log-log axes; dotted: FPR {', '.join(f'{t:g}' for t in p.target_fprs)}. {reference}"
        + "".join(subsets)
        + f"TPR at those FPRs with exact intervals, thresholds fitted on a calibration half of the non-members: table "
        f"{table}.")


def _same_curves(curves) -> list[list[str]]:
    """Groups of attacks whose ROC curves are the same points (e.g. loss and perplexity, which order the documents
    alike, or every attack that separates members perfectly), in drawing order: the last one drawn hides the rest."""
    groups: list[list[str]] = []
    for name, c in curves.items():
        same = next((g for g in groups if np.array_equal(curves[g[0]].fpr, c.fpr)
                     and np.array_equal(curves[g[0]].tpr, c.tpr)), None)
        if same is None:
            groups.append([name])
        else:
            same.append(name)
    return [g for g in groups if len(g) > 1]


def other_families(res: StudyResult, run: StudyRun, p: LowFprParams, groups: list, method_attacks: list[str], low,
                   ext) -> None:
    """``params.families`` read as ``params.family`` is (the method groups' attacks on each one's ``method_subset``;
    where it is null, rows saying that the main family's ``method_attacks`` were not run: :func:`not_run_rows`): with
    the main family's rows (``low``, ``ext``) they make the tables ``low_fpr_by_family`` and ``extraction_by_family``
    (column ``family``: family/size/epoch; their per-document rows: ``scores_by_family``), and each gets its ROC
    figure ``roc_low_fpr_<family>_<size>_<epoch>``. A family with fewer non-members than a target FPR needs says so
    in its rows (``resolvable``, ``min_fpr``)."""
    import pandas as pd

    seen = {label(p.main)}
    lows, exts, frames = [low.assign(family=label(p.main))], [ext.assign(family=label(p.main))], []
    for at in p.families.values():
        if label(at) in seen:
            raise ConfigError(f"params.families lists {label(at)} twice (params.family included)")
        seen.add(label(at))
        df, extra = score_frame(run.catalog, at, p, run.seed, groups if at.method_subset else [], run.progress)
        names = attacks(df) + extra
        frames.append(df.assign(family=label(at)))
        lows.append(low_fpr_table(df, names, p, run.seed).assign(family=label(at)))
        not_run = not_run_rows([] if at.method_subset else method_attacks, p)
        exts.append(extraction_table(df, p).assign(family=label(at)))
        fig, caption = roc_figure(df, names, at, p, "low_fpr_by_family")
        res.figure(f"roc_low_fpr_{at.family}_{at.size}_{at.epoch}", fig, caption=caption)
        for r in lows[-1].itertuples():
            res.metric(**{f"by_family/{label(at)}/{r.attack}/fpr_{r.target_fpr:g}/tpr": r.tpr,
                          f"by_family/{label(at)}/{r.attack}/auc": r.auc})
        res.metric(**{f"by_family/{label(at)}/n_members": int((df.split == "member").sum()),
                      f"by_family/{label(at)}/n_nonmembers": int((df.split == "nonmember").sum())})
        if len(not_run):
            lows[-1] = pd.concat([lows[-1], not_run.assign(family=label(at))], ignore_index=True)
    if frames:
        res.table("scores_by_family", _family_first(pd.concat(frames, ignore_index=True)), show=False)
    res.table("low_fpr_by_family", _family_first(pd.concat(lows, ignore_index=True)))
    res.table("extraction_by_family", _family_first(pd.concat(exts, ignore_index=True)))


def not_run_rows(names: list[str], p: LowFprParams):
    """A row per method-group attack (``names``) x target FPR that a family does not run (its ``method_subset`` is
    null): ``documents`` says so, no document is counted and every rate, threshold and AUC is NaN, so the table
    shows the attack as not run rather than leaving it out."""
    import pandas as pd

    counts = ("tp", "n_members", "fp_evaluation", "n_evaluation", "n_calibration", "n_nonmembers_auc")
    return pd.DataFrame([{"attack": a, "documents": NOT_RUN, "target_fpr": t, **{c: 0 for c in counts},
                          "resolvable": False, "level": p.level} for a in names for t in p.target_fprs])


NOT_RUN = "none: not run (method_subset null)"


def label(at: FamilyCheckpoint) -> str:
    """The family checkpoint's name in the by-family tables, metrics and errors: family/size/epoch."""
    return f"{at.family}/{at.size}/{at.epoch}"


def _family_first(t):
    return t[["family", *[c for c in t.columns if c != "family"]]]
