"""Probabilistic vs greedy extraction across a zoo family's checkpoints (issue 51): experiment ``extraction_curves``.

On a zoo family continued from a parent (``params.family``, e.g. conf/zoo/pearl.yaml: 36 member and 66 non-member
KJV chapters; epoch 0 = the parent's final model, ``init_from``), for every size in ``params.sizes`` and every epoch in
``params.epochs``:

1. **Pairs** (table ``pairs``, not shown). Per document one pair: its tokens [offset, offset + prefix_tokens) as the
   prefix and the next suffix_tokens as the suffix (tokenized as the backend's scoring does:
   ``backend.tokenizer(text)["input_ids"]``). log p_z under the configured sampler (``sampler``: temperature, top_k,
   top_p; :func:`memlab.metrics.extraction_probability.log_p_z`) and under greedy decoding (T = 0); greedy extraction
   = p_z under greedy is 1 (every suffix token is the argmax given the prefix and the suffix before it).
2. **Rates** (table ``extraction_by_checkpoint``): per size, epoch, split and n in ``ns``: the (n, p)-discoverable
   share (p = ``discoverable_p``; a document is discoverable iff 1 − (1 − p_z)^n ≥ p) beside the greedy extraction
   rate, each with an exact Clopper–Pearson interval at ``level``; every row names the sampler and the pair.
3. **Figures**: ``extraction_by_epoch`` (one panel per size: the share at each n of ``plot_ns`` vs epoch, members
   solid, non-members dashed, greedy dotted, exact-interval bands) and ``extraction_by_size`` (the last epoch of
   ``epochs``: share vs n per size, members vs non-members).

Every number comes from ``params`` (:class:`ExtractionCurvesParams`); nothing is defaulted here and nothing is random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memlab.errors import ConfigError
from memlab.metrics.extraction_probability import Sampler, rate_rows, sampler_and_greedy
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun


@dataclass(frozen=True)
class ExtractionCurvesParams:
    """``params`` of ``experiment=extraction_curves`` (values in conf/experiment/extraction_curves.yaml only)."""

    family: str                       # a zoo family continued from a parent (init_from): epoch 0 = the parent
    sizes: list[str] = field(metadata=check(nonempty=True))
    epochs: list[int] = field(metadata=check(ge=0, nonempty=True))   # checkpoints read (0 = the parent's model)
    offset: int = field(metadata=check(ge=0))           # first token of the prefix in each document
    prefix_tokens: int = field(metadata=check(ge=1))
    suffix_tokens: int = field(metadata=check(ge=1))
    sampler: Sampler
    ns: list[int] = field(metadata=check(ge=1, nonempty=True))       # the grid of n of (n, p)-discoverability
    plot_ns: list[int] = field(metadata=check(ge=1, nonempty=True))  # the n drawn in extraction_by_epoch
    discoverable_p: float = field(metadata=check(gt=0, le=1))
    level: float = field(metadata=check(gt=0, lt=1))    # exact (Clopper-Pearson) interval level
    batch_size: int = field(metadata=check(ge=1))       # pairs per forward pass of log p_z


def _check(p: ExtractionCurvesParams) -> None:
    if sorted(set(p.epochs)) != list(p.epochs):
        raise ConfigError(f"params.epochs must be increasing without repeats, got {list(p.epochs)}")
    if len(set(p.sizes)) != len(p.sizes):
        raise ConfigError(f"params.sizes has repeats: {list(p.sizes)}")
    if not set(p.plot_ns) <= set(p.ns):
        raise ConfigError(f"params.plot_ns {list(p.plot_ns)} must be among params.ns {list(p.ns)}")


def _pairs(backend, docs, p: ExtractionCurvesParams) -> list[tuple[list[int], list[int]]]:
    """Per document: tokens [offset, offset + prefix_tokens) and the next suffix_tokens; a document too short is
    refused in one line."""
    need = p.offset + p.prefix_tokens + p.suffix_tokens
    out = []
    for d in docs:
        ids = list(backend.tokenizer(d.text)["input_ids"])
        if len(ids) < need:
            raise ConfigError(f"{d.id} has {len(ids)} tokens; offset + prefix_tokens + suffix_tokens needs {need}")
        w = ids[p.offset:need]
        out.append((w[:p.prefix_tokens], w[p.prefix_tokens:]))
    return out


def pair_frame(catalog, p: ExtractionCurvesParams):
    """One row per size, epoch and document: split, log p_z under the sampler and under greedy, greedy (0/1)."""
    import pandas as pd

    _check(p)
    fam = catalog.family(p.family)
    if fam.recipe.init_from is None:
        raise ConfigError(f"params.family {p.family!r} has no init_from: epoch 0 is its parent's model")
    if not fam.members or not fam.nonmembers:
        raise ConfigError(f"zoo family {p.family!r} needs members and non-members")
    docs = list(fam.members) + list(fam.nonmembers)
    rows = []
    for size in p.sizes:
        for epoch in p.epochs:
            with catalog.checkpoint(p.family, size, epoch) as b:
                pairs = _pairs(b, docs, p)
                lpz, lpz_greedy = sampler_and_greedy(b, pairs, p.sampler, p.batch_size)
            for k, d in enumerate(docs):
                rows.append({"size": size, "epoch": int(epoch), "doc_id": d.id,
                             "split": "member" if k < len(fam.members) else "nonmember",
                             "log_p_z": lpz[k], "log_p_z_greedy": lpz_greedy[k],
                             "greedy": int(lpz_greedy[k] == 0.0)})
    return pd.DataFrame(rows)


def rate_table(df, p: ExtractionCurvesParams):
    """Per size, epoch, split and n: the (n, p)-discoverable share beside the greedy extraction rate, exact
    intervals for both (:func:`memlab.metrics.extraction_probability.rate_rows`); every row names the sampler and the
    pair."""
    import pandas as pd

    rows = [{"family": p.family, "size": size, "epoch": int(epoch), "split": split, **p.sampler.columns(),
             "offset": p.offset, "prefix_tokens": p.prefix_tokens, "suffix_tokens": p.suffix_tokens, **r}
            for (size, epoch, split), g in df.groupby(["size", "epoch", "split"], sort=False)
            for r in rate_rows(g.log_p_z.to_numpy(), g.greedy.to_numpy(), p.ns, p.discoverable_p, p.level)]
    return pd.DataFrame(rows)


STYLE = {"member": "-", "nonmember": "--"}


def by_epoch_figure(t, p: ExtractionCurvesParams):
    """One panel per size: the share at each n of plot_ns vs epoch (members solid, non-members dashed), greedy
    dotted; bands: exact intervals."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(p.sizes), figsize=(4.2 * len(p.sizes), 3.6), sharey=True, squeeze=False)
    for ax, size in zip(axes[0], p.sizes):
        ts = t[t["size"] == size]
        for split, ls in STYLE.items():
            for j, n in enumerate(p.plot_ns):
                g = ts[(ts.split == split) & (ts.n == n)]
                ax.plot(g.epoch, g.discoverable_share, ls=ls, c=f"C{j}", marker="o", ms=3,
                        label=f"n = {n:g}" if split == "member" else None)
                ax.fill_between(g.epoch, g.discoverable_ci_low, g.discoverable_ci_high, color=f"C{j}", alpha=0.1,
                                lw=0)
            g = ts[(ts.split == split) & (ts.n == p.ns[0])]
            ax.plot(g.epoch, g.greedy_rate, ls=":", c="k" if split == "member" else "0.5", lw=1.5,
                    label=f"greedy ({split})")
        ax.set_title(f"{p.family}/{size}", fontsize=9)
        ax.set_xlabel("epoch (0 = parent)")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel(f"share (n, {p.discoverable_p:g})-discoverable")
    axes[0][0].legend(fontsize=6, title="solid: members, dashed: non-members", title_fontsize=6)
    fig.tight_layout()
    return fig


def by_size_figure(t, p: ExtractionCurvesParams):
    """The last epoch: share vs n per size (colour), members solid / non-members dashed, exact bands."""
    import matplotlib.pyplot as plt

    last = t[t.epoch == p.epochs[-1]]
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for j, size in enumerate(p.sizes):
        for split, ls in STYLE.items():
            g = last[(last["size"] == size) & (last.split == split)]
            ax.plot(g.n, g.discoverable_share, ls=ls, c=f"C{j}", marker="o", ms=3, label=f"{size}: {split}")
            ax.fill_between(g.n, g.discoverable_ci_low, g.discoverable_ci_high, color=f"C{j}", alpha=0.1, lw=0)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("n (samples drawn)")
    ax.set_ylabel(f"share (n, {p.discoverable_p:g})-discoverable")
    ax.set_title(f"{p.family}, epoch {p.epochs[-1]}: {p.sampler.label()}", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def study(method: None, params: ExtractionCurvesParams, run: StudyRun) -> StudyResult:
    """The extraction_curves experiment (module docstring): tables ``pairs``, ``extraction_by_checkpoint``; figures
    ``extraction_by_epoch``, ``extraction_by_size``; headline metrics at the last epoch."""
    p, res = params, StudyResult()
    df = res.table("pairs", pair_frame(run.catalog, p), show=False)
    t = res.table("extraction_by_checkpoint", rate_table(df, p))
    pair = (f"tokens {p.offset + 1}-{p.offset + p.prefix_tokens} of each document as the prefix, the next "
            f"{p.suffix_tokens} as the suffix")
    res.figure("extraction_by_epoch", by_epoch_figure(t, p), caption=(
        f"{p.family}: share of documents whose suffix is (n, {p.discoverable_p:g})-discoverable under the sampler "
        f"{p.sampler.label()} (exact p_z; {pair}) vs fine-tuning epoch (0 = the parent model), one panel per size; "
        f"solid: members, dashed: non-members; dotted: greedy extraction rate; bands: exact {p.level:g} intervals."))
    res.figure("extraction_by_size", by_size_figure(t, p), caption=(
        f"{p.family}, epoch {p.epochs[-1]}: (n, {p.discoverable_p:g})-discoverable share vs n per size under the "
        f"sampler {p.sampler.label()} ({pair}); solid: members, dashed: non-members; bands: exact {p.level:g} "
        f"intervals. Greedy rates: table extraction_by_checkpoint."))
    for r in t[t.epoch == p.epochs[-1]].itertuples():
        key = f"{r.size}/epoch_{r.epoch}/{r.split}"
        res.metric(**{f"{key}/discoverable_n{r.n}": r.discoverable_share, f"{key}/greedy_rate": r.greedy_rate})
    fam = df[(df["size"] == p.sizes[0]) & (df.epoch == p.epochs[0])]
    res.metric(n_members=int((fam.split == "member").sum()), n_nonmembers=int((fam.split == "nonmember").sum()))
    return res
