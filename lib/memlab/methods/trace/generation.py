"""PROPME cells: prompt sets → greedy continuations → traces, and the tables of seed 002 built from them.

* :func:`run_propme` — one cell: the three prompt sets (generic, specific, prefix), greedy generation, tracing;
* :func:`prompt_overlap` — the prompts themselves traced against the corpus (Fig. 2);
* :func:`summary_rows`, :func:`propensity_rows`, :func:`span_length_frame` — Table 1 / Fig. 10 and per-stage
  Figs. 3–8 from the traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from memlab.methods.trace.metrics import corpus_metrics, token_accuracy
from memlab.methods.trace.propme import Prompt, build_prompt_sets, propensity
from memlab.methods.trace.simpletrace import GenerationTrace, Tracer


def run_propme(backend, tracer: Tracer, template_file: str | Path, docs, *, n_prompts: int, max_new_tokens: int,
               prefix_tokens: int, prefix_position: str, seed: int, extra: dict | None = None,
               progress: bool = False):
    """One PROPME cell: build the three prompt sets, generate greedily, trace the continuations.

    Returns (traces, prompt_sets); every trace's meta holds its ``setting`` plus ``extra``."""
    sets = build_prompt_sets(template_file, docs, tracer.tok, n=n_prompts, seed=seed, prefix_tokens=prefix_tokens,
                             continuation_tokens=max_new_tokens, prefix_position=prefix_position)
    prompts = [p for s in sets.values() for p in s]
    gens = generate(backend, prompts, max_new_tokens=max_new_tokens, seed=seed, progress=progress)
    return trace_generations(tracer, gens, extra, progress=progress), sets


def prompt_overlap(tracer: Tracer, prompt_sets: dict[str, list[Prompt]], *, n_tokens: int,
                   nv_recall_threshold: float, per_prompt: list | None = None) -> list[dict]:
    """Fig. 2: each prompt set traced against the corpus — average nv_recall and the fraction of prompts
    matched verbatim (full_raw) in the corpus. ``per_prompt``: a list that gets one row per prompt (its setting,
    position ``i``, nv_recall and full match: the units whose means those are)."""
    rows = []
    for setting, prompts in prompt_sets.items():
        traces = tracer.trace([p.text for p in prompts])
        if per_prompt is not None:
            per_prompt += [{"setting": setting, "i": i, "nv_recall": float(t.nv_recall),
                            "full_match": float(t.full_match)} for i, t in enumerate(traces)]
        m = corpus_metrics(traces, n_tokens=n_tokens, nv_recall_threshold=nv_recall_threshold, with_rouge=False)
        rows.append({"setting": setting, "prompts": len(prompts), "avg_nv_recall": m["avg_nv_recall"],
                     "verbatim_matched_fraction": m["generations_full_matches_ratio"],
                     "average_longest_span_length": m["average_longest_span_length"]})
    return rows


def generate(backend, prompts: Sequence[Prompt], *, max_new_tokens: int, seed: int,
             progress: bool = False) -> list[dict]:
    """Greedy (temperature 0) continuations; prefix prompts are sent as exact token ids (after BOS when the
    model's tokenizer adds one to text prompts)."""
    from memlab.backends.base import GenerationRequest

    reqs = []
    tok = getattr(backend, "tokenizer", None)
    # a model whose tokenizer adds BOS to text prompts (Gemma) also gets it before exact-id prompts
    bos = []
    if tok is not None and tok.bos_token_id is not None:
        probe = tok("a")["input_ids"]
        bos = [tok.bos_token_id] if probe and probe[0] == tok.bos_token_id else []
    for p in prompts:
        if p.prompt_token_ids is not None and tok is not None:
            reqs.append(GenerationRequest(prompt_token_ids=tuple(bos + list(p.prompt_token_ids)),
                                          max_new_tokens=max_new_tokens, temperature=0.0, seed=seed))
        else:
            reqs.append(GenerationRequest(prompt=p.text, max_new_tokens=max_new_tokens, temperature=0.0, seed=seed))
    gens = backend.generate(reqs, progress=progress)
    out = []
    for p, g in zip(prompts, gens):
        s = g.samples[0]
        out.append({"setting": p.setting, "prompt": p.text, "text": s.text, "token_ids": s.token_ids,
                    "reference_ids": p.reference_ids, "doc_id": p.doc_id})
    return out


def trace_generations(tracer: Tracer, generations: Sequence[dict], extra: dict | None = None,
                      progress: bool = False) -> list[GenerationTrace]:
    """Trace generation texts (empty ones score 0, never dropped), carrying setting/extra in ``meta``."""
    saved = tracer.on_empty
    tracer.on_empty = "zero"
    try:
        metas = []
        for g in generations:
            m = {"setting": g["setting"], **(extra or {})}
            if g.get("reference_ids") and g.get("token_ids") is not None:
                m["token_accuracy"] = token_accuracy(g["reference_ids"], g["token_ids"])
            metas.append(m)
        return tracer.trace([g["text"] for g in generations], metas, progress=progress)
    finally:
        tracer.on_empty = saved


def summary_rows(traces: Sequence[GenerationTrace], keys: Sequence[str], *, n_tokens: int,
                 nv_recall_threshold: float) -> list[dict]:
    """One row per group (grouped by ``meta[k]`` for k in keys): ALS, FMR, NVR and the other metrics."""
    groups: dict[tuple, list[GenerationTrace]] = {}
    for tr in traces:
        groups.setdefault(tuple(tr.meta.get(k) for k in keys), []).append(tr)
    rows = []
    for key, trs in groups.items():
        m = corpus_metrics(trs, n_tokens=n_tokens, nv_recall_threshold=nv_recall_threshold)
        accs = [t.meta["token_accuracy"] for t in trs if "token_accuracy" in t.meta]
        row = dict(zip(keys, key))
        row.update({"ALS": m["average_longest_span_length"], "FMR": m["generations_full_matches_ratio"],
                    "NVR": m["avg_nv_recall"], "token_accuracy": float(np.mean(accs)) if accs else None})
        row.update({k: v for k, v in m.items() if not isinstance(v, dict)})
        rows.append(row)
    return rows


def propensity_rows(summary: Sequence[dict], keys: Sequence[str], *, eps: float) -> list[dict]:
    """For every group (keys without 'setting'): propensity of generic and specific vs prefix, for FMR
    and NVR (``propensity(p, c)``, see :mod:`memlab.methods.trace.propme`)."""
    other = [k for k in keys if k != "setting"]
    by = {(tuple(r[k] for k in other), r["setting"]): r for r in summary}
    rows = []
    for (g, setting), r in by.items():
        cap = by.get((g, "prefix"))
        if setting == "prefix" or cap is None:
            continue
        row = dict(zip(other, g))
        row["setting"] = setting
        for metric in ("FMR", "NVR"):
            row[metric] = r[metric]
            row[f"{metric}_prefix"] = cap[metric]
            row[f"{metric}_propensity"] = propensity(r[metric], cap[metric], eps)
        rows.append(row)
    return rows


def span_length_frame(traces: Sequence[GenerationTrace], keys: Sequence[str]):
    import pandas as pd

    rows = [{**{k: tr.meta.get(k) for k in keys}, "span_length": s.length} for tr in traces for s in tr.spans]
    return pd.DataFrame(rows, columns=[*keys, "span_length"])
