"""The audit's per-document decisions on one model: PEARL per task (score > α), each MIA score and the blind baseline
(threshold fitted on the same-domain control), for the owner's audit and for its blind runs on the zoo alike
(:mod:`memlab.audit.selfcheck`): one procedure, so the rates the self-check measures are the audit's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from memlab.audit.judge import fitted_flags, fixed_flags
from memlab.metrics.blind import NAME as BLIND, zlib_compressibility
from memlab.metrics.mia import judged_names   # the MIA scores the audit judges (higher = more likely a member)


def pearl_label(task: str) -> str:
    return f"PEARL ({task})"


def mia_label(score: str) -> str:
    return f"MIA ({score})"


def pearl_frame(pearl, tasks: Sequence[str], sources: Mapping[str, list], domains: Mapping[str, str], backend,
                style: str, model: str):
    """PEARL's per-document scores of every source under each task, by pearl_wild's own loop."""
    from memlab.methods.pearl.study import source_frames

    return pd.concat(source_frames(pearl, tasks, sources, domains, backend, style, model), ignore_index=True)


def mia_frame(backend, sources: Mapping[str, list], *, settings: Mapping, max_words: int | None, progress: bool,
              scored: Callable[[int], None] | None = None):
    """Every MIA score of every document (:func:`memlab.methods.pearl.tables.mia_frame`; ``settings``: the audit's
    ``params.mia``, whose ``min_k`` is k of Min-K%) and the blind baseline on the same text; ``scored(n)`` is told
    after each source of its n documents (the audit's overall progress)."""
    from memlab.methods.pearl import tables as T
    from memlab.methods.pearl.tasks import first_words

    frames = []
    for name, docs in sources.items():
        f = T.mia_frame(backend, docs, settings=settings, max_words=max_words, progress=progress, source=name)
        f["blind"] = [zlib_compressibility(first_words(d.text, max_words)) for d in docs]
        frames.append(f)
        if scored:
            scored(len(docs))
    return pd.concat(frames, ignore_index=True)


def decisions(pearl_df, mia_df, controls: Mapping[str, str | None], *, score: str, alpha: float,
              target_fpr: float) -> pd.DataFrame:
    """Every document's flag under every rule; ``*_df`` carry ``source``, ``doc_id`` and ``half``. MIA and blind
    thresholds are fitted once per control, on its calibration half, and judge the sources of that control."""
    out = []
    if pearl_df is not None:
        for task, g in pearl_df.groupby("task_kind", sort=False):
            out.append(fixed_flags(g, score, alpha, pearl_label(task)))
    if mia_df is not None:
        scores = [(mia_label(s), s) for s in judged_names() if s in mia_df and mia_df[s].notna().any()]
        for control in sorted({c for c in controls.values() if c is not None}):
            judged = {s for s, c in controls.items() if c == control} | {control}
            g = mia_df[mia_df.source.isin(judged)]
            for label, s in [*scores, (BLIND, "blind")]:
                out.append(fitted_flags(g, s, control, target_fpr, label))
        free = mia_df[mia_df.source.map(lambda s: controls.get(s) is None and s not in controls.values())]
        for label, s in [*scores, (BLIND, "blind")]:   # no control: rows say "not judged" (flags unused)
            out.append(fixed_flags(free, s, float("inf"), label).assign(rule="—"))
    return pd.concat(out, ignore_index=True)
