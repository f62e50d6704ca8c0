"""PEARL's tables from per-document rows (the computations behind seed 001/003's tables and figures).

* :func:`pearl_frame` — PEARL on documents → one row per document (labels added as columns).
* :func:`flag_table`, :func:`fpr_table`, :func:`detection_table`, :func:`overlap_table`,
  :func:`calibration_table` — the papers' tables from those rows.
* :func:`mia_frame` — every registered MIA score (loss / perplexity / zlib / Min-K% / Min-K%++, …) per document
  from per-token log-probs (:mod:`memlab.metrics.mia`), the membership-inference baselines of seed 003 Table 4.
* :func:`similarity_table`, :func:`examples_table` — input similarity per level (seed 003 Table 8 analog).
* :func:`domain_calibration_table`, :func:`calibrated_flags_table`, :func:`mann_whitney_table` — the wild study's
  per-domain calibration (each domain's α from its own known-unseen source) and seen-vs-unseen tests.
* :func:`calibrated_alphas`, :func:`task_flags` — each (model, task, domain)'s own calibrated α, and every held-out
  document flagged or not under each task at it (completion vs summarization: the tasks score on different scales).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.methods.pearl.engine import PearlConfig, results_frame, run_pearl


def pearl_frame(backend, docs: Sequence[Document], cfg: PearlConfig, *, progress: bool = True, **labels: Any):
    """PEARL on ``docs`` as a DataFrame (one row per document) with ``labels`` added as constant columns."""
    df = results_frame(run_pearl(backend, docs, cfg, progress=progress))
    for k, v in labels.items():
        df[k] = v
    return df


def thresholds(spec: Mapping[str, float]) -> np.ndarray:
    """A threshold grid ``{start, stop, step}`` (inclusive of stop), rounded to 6 decimals."""
    start, stop, step = float(spec["start"]), float(spec["stop"]), float(spec["step"])
    if step <= 0 or stop < start:
        raise ConfigError(f"threshold grid needs step > 0 and stop ≥ start, got {dict(spec)}")
    return np.round(np.arange(start, stop + step / 2, step), 6)


def flag_table(df, alphas: Sequence[float], by: Sequence[str], score: str):
    """Share and count of documents with ``score > α`` for each α and group (seed 003 Fig. 4 / Table 2)."""
    import pandas as pd

    rows = []
    for keys, g in df.groupby(list(by), sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for a in alphas:
            flagged = int((g[score] > a).sum())
            rows.append({**dict(zip(by, keys)), "score": score, "alpha": float(a), "flagged": flagged,
                         "n": int(len(g)), "share": flagged / len(g)})
    return pd.DataFrame(rows)


def fpr_table(df, grid: Sequence[float], by: Sequence[str], scores: Sequence[str] = ("sensitivity", "gfd")):
    """FPR(α) on known non-members for every α of the grid, score and group (seed 001 Fig. 6)."""
    import pandas as pd

    from memlab.methods.pearl.calibration import fpr_curve

    rows = []
    groups = df.groupby(list(by), sort=True) if by else [((), df)]
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        for s in scores:
            for r in fpr_curve(g[s].to_numpy(), grid):
                rows.append({**dict(zip(by, keys)), "score": s, **r})
    return pd.DataFrame(rows)


def detection_table(df, truth: str, scores: Sequence[str], decisions: Mapping[str, float] | None = None):
    """ROC-AUC of every score against the 0/1 column ``truth``, and precision/recall at a threshold.

    ``decisions`` maps a score name to its threshold (rule ``score > threshold``); scores without one get
    only the AUC. Scores oriented higher = more likely positive (:mod:`memlab.metrics.mia` convention).
    """
    import pandas as pd

    from memlab.metrics.detection import rates_at_threshold, roc_auc

    y = df[truth].astype(int).to_numpy()
    rows = []
    for s in scores:
        x = df[s].astype(float).to_numpy()
        ok = np.isfinite(x)
        row = {"score": s, "n": int(ok.sum()),
               "auc": roc_auc(y[ok], x[ok]) if len(set(y[ok].tolist())) == 2 else float("nan")}
        if decisions and s in decisions:
            r = rates_at_threshold(y[ok], x[ok], float(decisions[s]))
            row.update(threshold=float(decisions[s]), precision=r.precision, recall=r.tpr, fpr=r.fpr,
                       flagged=r.tp + r.fp)
        rows.append(row)
    return pd.DataFrame(rows)


def overlap_table(df, a: str, b: str, by: Sequence[str]):
    """Per group: % of documents with decision ``a``, with ``b``, and with both (seed 003 Table 4)."""
    import pandas as pd

    rows = []
    for keys, g in df.groupby(list(by), sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        n = len(g)
        rows.append({**dict(zip(by, keys)), "n": n, f"{a}_pct": 100 * g[a].mean(), f"{b}_pct": 100 * g[b].mean(),
                     "both_pct": 100 * (g[a] & g[b]).mean()})
    return pd.DataFrame(rows)


# ---- membership inference baselines ---------------------------------------------------------------------------

MIA_COLUMNS = {"perplexity": "neg_perplexity"}   # a score's column where it is not the score's name (seed 003's)


def mia_frame(backend, docs: Sequence[Document], *, settings: Mapping[str, Any], max_words: int | None,
              progress: bool = False, **labels: Any):
    """Per document: every registered MIA score (:func:`memlab.metrics.mia.member_scores`: higher = more likely
    member; −perplexity is the column ``neg_perplexity``) plus the raw perplexity (``ppl``), computed on the same text
    PEARL sees (first ``max_words`` words); ``settings`` are the run's MIA settings (``min_k``: k of Min-K%)."""
    texts = mia_texts(docs, max_words)
    return mia_rows(docs, texts, backend.score(texts, progress=progress), settings, **labels)


def mia_texts(docs: Sequence[Document], max_words: int | None) -> list[str]:
    """The text each document is scored on: its first ``max_words`` words (None: whole)."""
    from memlab.methods.pearl.tasks import first_words

    return [first_words(d.text, max_words) for d in docs]


def mia_rows(docs: Sequence[Document], texts: Sequence[str], scored, settings: Mapping[str, Any], **labels: Any):
    """:func:`mia_frame`'s rows from the backend's ``scored`` token scores of ``texts`` (one per document)."""
    import pandas as pd

    from memlab.metrics.mia import member_scores

    rows = []
    for d, t, ts in zip(docs, texts, scored):
        m = member_scores(ts, t, settings)
        rows.append({"doc_id": d.id, "split": d.split,
                     **{MIA_COLUMNS.get(s, s): float("nan") if v is None else v for s, v in m.items()},
                     "ppl": -m["perplexity"], **labels})
    return pd.DataFrame(rows)


def calibration_table(df, target_fprs: Sequence[float], by: Sequence[str], scores: Sequence[str] = ("sensitivity", "gfd")):
    """Held-out calibration, per group and score: α fitted on the group's **calibration** non-members at each target
    FPR (:func:`memlab.methods.pearl.calibration.calibrate_alpha`); the FPR it reaches on the **evaluation**
    non-members (never seen by the fit: the number to report) and, for reference, on the calibration half itself;
    and the share of the group's other documents (members / likely-seen sources) flagged at that α. ``df`` needs a
    ``half`` column: "calibration" / "evaluation" for non-members (:func:`split_halves`)."""
    import pandas as pd

    from memlab.methods.pearl.calibration import calibrate_alpha

    rows = []
    groups = df.groupby(list(by), sort=True) if by else [((), df)]
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        cal, ev = g[g["half"] == "calibration"], g[g["half"] == "evaluation"]
        rest = g[g["split"] != "nonmember"]
        for s in scores:
            for t in target_fprs:
                a = calibrate_alpha(cal[s].to_numpy(), float(t))
                rows.append({**dict(zip(by, keys)), "score": s, "target_fpr": float(t), "alpha": a,
                             "fpr_evaluation": float((ev[s] > a).mean()) if len(ev) else float("nan"),
                             "n_evaluation": int(len(ev)),
                             "fpr_calibration": float((cal[s] > a).mean()), "n_calibration": int(len(cal)),
                             "others_flagged_share": float((rest[s] > a).mean()) if len(rest) else float("nan"),
                             "n_others": int(len(rest))})
    return pd.DataFrame(rows)


def split_halves(nonmember_ids: Sequence[str], seed: int | str) -> dict[str, str]:
    """{doc id: "calibration" | "evaluation"}: a seeded half of the non-members fits thresholds, the other half
    reports FPRs (the first ⌈n/2⌉ of a seeded shuffle of the ids in sorted order calibrate)."""
    import random

    ids = sorted(nonmember_ids)
    random.Random(seed).shuffle(ids)
    cut = (len(ids) + 1) // 2
    return {i: ("calibration" if j < cut else "evaluation") for j, i in enumerate(ids)}


def similarity_table(docs: Sequence[Document], cfg: PearlConfig, kinds: Sequence[str]):
    """Mean input similarity per perturbation kind and level (seed 003 Table 8 analog); see
    :func:`memlab.methods.pearl.engine.input_similarity` for the columns."""
    import pandas as pd

    from memlab.methods.pearl.engine import input_similarity

    rows = []
    for k in kinds:
        rows += input_similarity(docs, cfg.replace(perturbation={"kind": k}))
    sim = pd.DataFrame(rows)
    return sim.groupby(["kind", "level"], sort=True)[["changed", "rouge_l_f1", "ncd_similarity"]].mean().reset_index()


def examples_table(doc: Document, cfg: PearlConfig, kinds: Sequence[str], words: int):
    """The first ``words`` words of one document's task input at every level and kind (Table 8 layout)."""
    import pandas as pd

    from memlab.methods.pearl.engine import prepare
    from memlab.methods.pearl.tasks import first_words

    rows = []
    for k in kinds:
        for p in prepare([doc], cfg.replace(perturbation={"kind": k}))[0].perturbed:
            rows.append({"kind": k, "level": p.level, "changed": p.n_changed, "input": first_words(p.text, words)})
    return pd.DataFrame(rows)


def domain_calibration_table(df, target_fprs: Sequence[float], calibration_sources: Mapping[str, str],
                             score: str):
    """:func:`calibration_table` per model, task and **domain**: α is fitted on the calibration half of the domain's
    known-unseen source (``calibration_sources``: domain → source name) and its FPR read on the evaluation half;
    ``others_flagged_share`` covers the domain's other sources only. ``df`` needs ``domain`` and ``half`` columns."""
    parts = []
    for domain, unseen in sorted(calibration_sources.items()):
        g = df[df.domain == domain]
        if not len(g[g.source == unseen]):
            raise ConfigError(f"calibration source {unseen!r} of domain {domain!r} has no rows")
        cal = calibration_table(g, target_fprs, by=["model", "task_kind", "domain"], scores=[score])
        cal.insert(3, "calibration_source", unseen)
        parts.append(cal)
    import pandas as pd

    return pd.concat(parts, ignore_index=True)


def calibrated_flags_table(df, cal, score: str):
    """Per row of :func:`domain_calibration_table` and source of its domain: documents with ``score`` > that α, the
    calibration source counted on its evaluation half only (the fit never saw it)."""
    import pandas as pd

    rows = []
    for r in cal.itertuples():
        g = df[(df.model == r.model) & (df.task_kind == r.task_kind) & (df.domain == r.domain)
               & (df.half != "calibration")]
        for src, gs in g.groupby("source", sort=True):
            rows.append({"model": r.model, "task_kind": r.task_kind, "domain": r.domain,
                         "calibration_source": r.calibration_source, "target_fpr": r.target_fpr, "alpha": r.alpha,
                         "source": src, "flagged": int((gs[score] > r.alpha).sum()), "n": len(gs)})
    return pd.DataFrame(rows)


def calibrated_alphas(cal, target_fprs: Sequence[float], score: str):
    """(the strictest nonzero target FPR, its α per (model, task_kind, domain) from :func:`domain_calibration_table`
    ``cal``); None when no target FPR is above 0 (nothing to calibrate each task at)."""
    fprs = sorted(f for f in target_fprs if f > 0)
    if not fprs or cal is None:
        return None
    rows = cal[(cal.target_fpr == fprs[0]) & (cal.score == score)]
    return fprs[0], rows.set_index(["model", "task_kind", "domain"]).alpha


def task_flags(df, alphas, score: str):
    """Every document not in a calibration half, flagged (``score`` > α) or not under each task that ran: a frame
    indexed by (model, source, doc_id) with one boolean column per task_kind (missing where a task did not score
    the document). ``alphas``: one number for every task (a fixed threshold), or a Series of α per
    (model, task_kind, domain) (:func:`calibrated_alphas`), so that each task is judged on its own scale."""
    d = df[df.half != "calibration"] if "half" in df else df
    if isinstance(alphas, (int, float)):
        flagged = d[score] > alphas
    else:
        flagged = d[score] > [alphas[(m, k, dom)] for m, k, dom in zip(d.model, d.task_kind, d.domain)]
    wide = d.assign(flagged=flagged).pivot_table(index=["model", "source", "doc_id"], columns="task_kind",
                                                 values="flagged", aggfunc="first")
    return wide.astype("boolean")


def mann_whitney_table(df, calibration_sources: Mapping[str, str], score: str):
    """Per model, task and likely-seen source: the one-sided Mann–Whitney U test that the source's ``score`` is
    stochastically greater than that of the known-unseen source of its domain (``calibration_sources``: domain →
    source; ``df`` needs a ``domain`` column; scipy.stats.mannwhitneyu, exact p when possible); medians and n of
    both sides."""
    import pandas as pd
    from scipy.stats import mannwhitneyu

    rows = []
    for (model, task, domain), g in df.groupby(["model", "task_kind", "domain"], sort=True):
        unseen_source = calibration_sources[domain]
        unseen = g[g.source == unseen_source][score].dropna().to_numpy()
        for src, gs in g[g.source != unseen_source].groupby("source", sort=True):
            seen = gs[score].dropna().to_numpy()
            if len(seen) and len(unseen):
                u, pval = mannwhitneyu(seen, unseen, alternative="greater")
            else:
                u, pval = float("nan"), float("nan")
            rows.append({"model": model, "task_kind": task, "domain": domain, "source": src,
                         "unseen_source": unseen_source,
                         "median_seen": float(np.median(seen)) if len(seen) else float("nan"),
                         "median_unseen": float(np.median(unseen)) if len(unseen) else float("nan"),
                         "n_seen": len(seen), "n_unseen": len(unseen), "U": float(u), "p_one_sided": float(pval)})
    return pd.DataFrame(rows)
