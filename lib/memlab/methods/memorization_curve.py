"""Memorization curve: exact greedy continuation rate of training vs held-out text, per epoch and size.

Metric — **exact k-token continuation rate**: for a probe (a window of ``prefix_len + cont_len`` consecutive
token ids inside one document), the model is given the ``prefix_len``-token prefix as exact token ids and
decodes ``cont_len`` tokens greedily; the probe counts as memorized iff all ``cont_len`` generated ids equal
the document's next ``cont_len`` ids. The rate is the share of probes memorized (the extractable-memorization
test of Carlini et al., used by the Pythia memorization studies with k = 32).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from memlab.backends.base import Backend, GenerationRequest
from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.schema import check
from memlab.study_run import StudyRun


@dataclass(frozen=True)
class CurveParams:
    """``params`` of ``experiment=memorization_curve`` — values live in conf/experiment/memorization_curve.yaml
    only; the runner checks them (types and ranges) before any model loads."""

    family: str                      # <paths.zoo>/<family>.yaml, built into <paths.models>/tiny-neox/<family>
    sizes: list[str] | None          # None = every size of the family
    epochs: list[int] | None = field(metadata=check(ge=0))   # explicit epochs, or None = every epoch_every-th
    epoch_every: int = field(metadata=check(ge=1))
    n_probes: int = field(metadata=check(ge=1))              # probes per split
    prefix_len: int = field(metadata=check(ge=1))            # tokens given
    cont_len: int = field(metadata=check(ge=1))              # tokens that must be reproduced exactly


@dataclass(frozen=True)
class Probe:
    doc_id: str
    start: int  # token offset of the prefix inside the document
    prefix_ids: tuple[int, ...]
    target_ids: tuple[int, ...]


def sample_probes(docs: Sequence[Document], tokenize, n: int, prefix_len: int, cont_len: int,
                  seed: int) -> list[Probe]:
    """``n`` probes drawn with a seeded RNG: a document uniformly among those long enough, then a start
    position uniformly inside it. ``tokenize(text) -> list[int]`` must be the model's tokenizer."""
    if n < 1 or prefix_len < 1 or cont_len < 1:
        raise ConfigError(f"n, prefix_len and cont_len must be >= 1 (got {n}, {prefix_len}, {cont_len})")
    window = prefix_len + cont_len
    tokenized = [(d.id, list(tokenize(d.text))) for d in docs]
    usable = [(i, ids) for i, ids in tokenized if len(ids) >= window]
    if not usable:
        raise ConfigError(f"no document has the {window} tokens a probe needs; lower prefix_len/cont_len")
    rng = random.Random(seed)
    probes = []
    for _ in range(n):
        doc_id, ids = usable[rng.randrange(len(usable))]
        start = rng.randrange(len(ids) - window + 1)
        probes.append(Probe(doc_id, start, tuple(ids[start:start + prefix_len]),
                            tuple(ids[start + prefix_len:start + window])))
    return probes


def exact_continuations(backend: Backend, probes: Sequence[Probe], *, progress: bool = False) -> list[bool]:
    """For each probe: did greedy decoding reproduce the target ids exactly?"""
    reqs = [GenerationRequest(prompt_token_ids=p.prefix_ids, max_new_tokens=len(p.target_ids), temperature=0.0)
            for p in probes]
    outs = backend.generate(reqs, progress=progress)
    hits = []
    for p, g in zip(probes, outs):
        ids = g.samples[0].token_ids
        if ids is None:
            raise ConfigError(f"backend {backend.model_id} returns no token ids; exact continuation needs them")
        hits.append(tuple(ids[: len(p.target_ids)]) == p.target_ids)
    return hits


def curve_rows(checkpoints: Mapping[tuple[str, int], object], probes_by_split: Mapping[str, Sequence[Probe]],
               backend_for, *, progress: bool = False) -> list[dict]:
    """One row per (size, epoch, split): n probes, exact hits, rate.

    ``checkpoints`` maps (size, epoch) → checkpoint; ``backend_for(checkpoint)`` returns a Backend for it.
    """
    rows = []
    items: Iterable = list(checkpoints.items())  # the caller's order (family size order, then epoch)
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(list(items), desc="checkpoints")
    for (size, epoch), ckpt in items:
        backend = backend_for(ckpt)
        try:
            for split, probes in probes_by_split.items():
                hits = exact_continuations(backend, probes)
                rows.append({"size": size, "epoch": epoch, "split": split, "n": len(hits),
                             "exact": int(sum(hits)), "rate": sum(hits) / len(hits)})
        finally:
            backend.close()
    return rows


def family_curve(family, *, open_backend, n_probes: int, prefix_len: int, cont_len: int, seed: int,
                 sizes: Sequence[str] | None, epochs: Sequence[int] | None, epoch_every: int, template: Mapping,
                 progress: bool = True):
    """The whole curve for a zoo family (``memlab.models.zoo.Family``) as a DataFrame.

    Probes are drawn once (same windows for every size and epoch) from the family's members and
    non-members with its tokenizer; each checkpoint is named by :meth:`~memlab.models.zoo.Family.model_cfg` from
    the run's model node ``template`` and opened with ``open_backend(node)``. ``epochs`` (explicit list) wins over
    ``epoch_every`` (every n-th epoch plus the last).
    """
    import pandas as pd
    from transformers import AutoTokenizer

    sizes = list(sizes) if sizes else family.sizes
    if epochs:
        epochs = list(epochs)
    else:  # every ``epoch_every``-th epoch, always ending at the last one
        epochs = sorted({*range(epoch_every, family.epochs + 1, epoch_every), family.epochs})
    tok = AutoTokenizer.from_pretrained(str(family.tokenizer_dir))
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    probes = {"member": sample_probes(family.members, encode, n_probes, prefix_len, cont_len, seed),
              "nonmember": sample_probes(family.nonmembers, encode, n_probes, prefix_len, cont_len, seed)}
    ckpts = {(s, e): family.model_cfg(s, e, dict(template)) for s in sizes for e in epochs}
    rows = curve_rows(ckpts, probes, open_backend, progress=progress)
    return pd.DataFrame(rows)


def study(method: None, params: CurveParams, run: StudyRun):
    """The memorization-curve experiment: the table, the figure (one panel per size) and the last-epoch rates."""
    import seaborn as sns

    from memlab.results import StudyResult

    p, catalog, res = params, run.catalog, StudyResult()
    fam = catalog.family(p.family)
    df = res.table("continuation_rate", family_curve(
        fam, open_backend=catalog.open, n_probes=p.n_probes, prefix_len=p.prefix_len, cont_len=p.cont_len,
        seed=run.seed, sizes=p.sizes, epochs=p.epochs, epoch_every=p.epoch_every, template=catalog.template))
    res.figure("memorization_curve", curve_figure(df, p.cont_len, fam.name))
    last = df[df.epoch == df.epoch.max()]
    res.table("last_epoch_rate", last.pivot(index="size", columns="split", values="rate").reset_index(), show=False)
    summary = {f"{r['size']}/{r['split']}/last_epoch_rate": r["rate"] for _, r in last.iterrows()}
    summary.update({f"{r['size']}/{r['split']}/last_epoch_exact": int(r["exact"]) for _, r in last.iterrows()})
    res.metric(n_probes=int(p.n_probes), last_epoch=int(df.epoch.max()), **summary)
    return res


def curve_figure(df, cont_len: int, family: str):
    """The continuation rate per epoch, one panel per size, one line per split; bands: 95 % Wilson intervals of each
    rate (``exact`` of ``n`` probes; one row per point, so seaborn draws no interval of its own)."""
    import seaborn as sns

    from memlab.plots import wilson_bounds

    sns.set_theme(style="whitegrid")
    splits = list(dict.fromkeys(df["split"]))
    palette = dict(zip(splits, sns.color_palette(n_colors=len(splits))))
    g = sns.relplot(data=df, x="epoch", y="rate", hue="split", hue_order=splits, palette=palette, col="size",
                    kind="line", marker="o", errorbar=None, col_order=list(dict.fromkeys(df["size"])), height=3,
                    aspect=1.1, facet_kws={"ylim": (-0.03, 1.03)})
    for size, ax in g.axes_dict.items():
        for split in splits:
            h = df[(df["size"] == size) & (df.split == split)].sort_values("epoch")
            ax.fill_between(h.epoch, *wilson_bounds(h.exact, h.n), color=palette[split], alpha=0.15, lw=0)
    g.set_axis_labels("epoch", f"exact {cont_len}-token continuation rate")
    lo, hi = (int(df.n.min()), int(df.n.max())) if len(df) else (0, 0)
    g.figure.suptitle(f"Memorization curve — tiny GPT-NeoX '{family}' family", y=1.04)
    g.figure.set_label(f"Share of probes whose exact {cont_len}-token greedy continuation the model reproduces, per "
                       f"epoch, one panel per model size, one line per split; bands: 95 % Wilson intervals; n = "
                       f"{lo if lo == hi else f'{lo}–{hi}'} probes per point. No paper value: conf/paper holds none "
                       "for this curve.")
    return g.figure
