"""The SimpleTrace/PROPME experiments as library calls, so the notebooks stay thin reports.

* :func:`validate` — tracer validation (seed 002, Table 5 analog);
* :func:`prompt_overlap` — prompts traced against the corpus (Fig. 2);
* :func:`generate`, :func:`trace_generations`, :func:`summary_rows`, :func:`propensity_rows` — capability
  vs propensity (Table 1 / Fig. 10) and per training stage (Figs. 3–8);
* :func:`stage_specs` / :func:`train_stages` — a tiny model trained on corpus A, then continually
  pre-trained in stages on a 2/3 B + 1/3 A token mixture (Figs. 3–8 analog).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Sequence

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.metrics import corpus_metrics, token_accuracy
from memlab.methods.trace.propme import Prompt, propensity
from memlab.methods.trace.simpletrace import GenerationTrace, Tracer

QUERY_TYPES = ("full", "partial_start", "partial_middle", "partial_end")


# ------------------------------------------------------------------------------------------ validation

def _word_start(text: str, offsets, j: int) -> bool:
    c = offsets[j][0]
    return j == 0 or c == 0 or text[c - 1].isspace() or text[c].isspace()


def validation_queries(tracer: Tracer, n_docs: int = 25, partial_tokens: int = 128, seed: int = 0) -> list[dict]:
    """For ``n_docs`` documents drawn from the index: the full text, and three ``partial_tokens``-token
    windows (start, middle, end) snapped to word starts/ends and cut from the raw text (the leading space
    kept, so the window tokenizes as it does inside the document)."""
    index, tok = tracer.index, tracer.tok
    rng = random.Random(f"{seed}:validation")
    picks = sorted(rng.sample(range(index.n_docs), min(n_docs, index.n_docs)))
    out = []
    for d in picks:
        text = index.doc_text(d)
        out.append({"doc_ix": d, "query_type": "full", "text": text})
        off = tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
        n = len(off)
        w = min(partial_tokens, n)
        for qt, a0 in (("partial_start", 0), ("partial_middle", (n - w) // 2), ("partial_end", n - w)):
            a = a0
            while a < n - 1 and not _word_start(text, off, a):
                a += 1
            e = min(a + w, n)  # exclusive token end; snap back to a word end
            while e > a + 1 and e < n and not _word_start(text, off, e):
                e -= 1
            c0 = off[a - 1][1] if a > 0 else 0
            out.append({"doc_ix": d, "query_type": qt, "text": text[c0:off[e - 1][1]]})
    return out


def validate(tracer: Tracer, n_docs: int = 25, partial_tokens: int = 128, seed: int = 0,
             progress: bool = False) -> tuple[list[dict], list[dict]]:
    """Per-query rows and per-query-type summary rows.

    retrieved: the source document is among the retrieved documents; exact_match: a kept span covers the
    whole query (start 0, end = its token count); passed: either (the paper's pass criterion)."""
    queries = validation_queries(tracer, n_docs, partial_tokens, seed)
    traces = tracer.trace([q["text"] for q in queries], progress=progress)
    rows = []
    for q, tr in zip(queries, traces):
        retrieved = any(m.doc_ix == q["doc_ix"] for m in tr.docs)
        exact = any(s.start == 0 and s.end == tr.n_tokens for s in tr.spans)
        rows.append({"doc_id": tracer.index.doc_id(q["doc_ix"]), "query_type": q["query_type"],
                     "query_tokens": tr.n_tokens, "retrieved": retrieved, "exact_match": exact,
                     "passed": retrieved or exact, "docs_returned": len(tr.docs),
                     "span_count": tr.spans[0].count if tr.spans else 0})
    summary = []
    for qt in QUERY_TYPES:
        sel = [r for r in rows if r["query_type"] == qt]
        if sel:
            summary.append({"query_type": qt, "queries": len(sel),
                            "retrieval_rate": float(np.mean([r["retrieved"] for r in sel])),
                            "exact_match_rate": float(np.mean([r["exact_match"] for r in sel])),
                            "pass_rate": float(np.mean([r["passed"] for r in sel]))})
    return rows, summary


# ------------------------------------------------------------------------------------ prompts, tracing

def prompt_overlap(tracer: Tracer, prompt_sets: dict[str, list[Prompt]], *, nv_recall_threshold: float = 0.5
                   ) -> list[dict]:
    """Fig. 2: each prompt set traced against the corpus — average nv_recall and the fraction of prompts
    matched verbatim (full_raw) in the corpus."""
    rows = []
    for setting, prompts in prompt_sets.items():
        traces = tracer.trace([p.text for p in prompts])
        m = corpus_metrics(traces, nv_recall_threshold=nv_recall_threshold, with_rouge=False)
        rows.append({"setting": setting, "prompts": len(prompts), "avg_nv_recall": m["avg_nv_recall"],
                     "verbatim_matched_fraction": m["generations_full_matches_ratio"],
                     "average_longest_span_length": m["average_longest_span_length"]})
    return rows


def generate(backend, prompts: Sequence[Prompt], *, max_new_tokens: int, seed: int = 0,
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


def summary_rows(traces: Sequence[GenerationTrace], keys: Sequence[str], *, n_tokens: int = 32,
                 nv_recall_threshold: float = 0.5) -> list[dict]:
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


def propensity_rows(summary: Sequence[dict], keys: Sequence[str], *, eps: float = 0.01) -> list[dict]:
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


# ---------------------------------------------------------------------------------------------- stages

def mixture_weights(a_docs, b_docs, tokenizer=None, b_share: float = 2 / 3) -> tuple[float, float]:
    """Passes per epoch (w_B, w_A) so that B makes up ``b_share`` of the tokens seen: w_B = 1 and
    w_A = (1 − b_share)/b_share · |B|/|A| (sizes in characters when no tokenizer is given)."""
    size = (lambda ds: sum(len(tokenizer(d.text)["input_ids"]) for d in ds)) if tokenizer else \
        (lambda ds: sum(len(d.text) for d in ds))
    a, b = size(a_docs), size(b_docs)
    if a == 0 or b == 0:
        raise MemlabError("stage mixture needs non-empty corpora A and B")
    return 1.0, (1 - b_share) / b_share * b / a


def stage_specs(a_docs, b_docs, heldout, *, arch: dict, train: dict, stage_epochs: Sequence[int],
                out_root: str | Path, b_share: float = 2 / 3):
    """(name, TrainSpec, out_dir) for stage 0 (A only) and each continual stage (B/A mixture).

    Stage 0 lists B (and the held-out documents) as non-members, with ``tokenizer_on='all'`` so one
    tokenizer covers both languages; later stages continue from the previous stage's final checkpoint."""
    from memlab.models.tiny import Arch, TrainSpec

    out_root = Path(out_root)
    wb, wa = mixture_weights(a_docs, b_docs, b_share=b_share)
    a_m = [dataclasses.replace(d, split="member") for d in a_docs]
    b_m = [dataclasses.replace(d, split="member") for d in b_docs]
    base = {k: v for k, v in train.items() if k != "epochs"}
    specs = [("stage0", TrainSpec(member_groups=[(a_m, 1.0)], nonmembers=list(b_docs) + list(heldout),
                                  arch=Arch(**arch), epochs=int(train["epochs"]), tokenizer_on="all",
                                  meta={"family": "stages", "stage": 0}, **base), out_root / "stage0")]
    for k, ep in enumerate(stage_epochs, 1):
        prev = specs[-1][2] / "final"
        specs.append((f"stage{k}", TrainSpec(member_groups=[(b_m, wb), (a_m, wa)], nonmembers=list(heldout),
                                             arch=None, epochs=int(ep), init_from=str(prev),
                                             meta={"family": "stages", "stage": k, "b_share": b_share}, **base),
                      out_root / f"stage{k}"))
    return specs


def train_stages(specs, progress: bool = False) -> dict[str, Path]:
    """Train (or reuse: training is idempotent and resumable) every stage in order; stage → final dir."""
    from memlab.models.tiny import train

    out = {}
    for name, spec, d in specs:
        train(spec, d, progress=progress)
        out[name] = Path(d) / "final"
    return out


def take_docs(docs, n: int, seed: int, *, min_chars: int = 1, exclude=()) -> list:
    """``n`` documents drawn with a seeded RNG (sorted by id for a stable order)."""
    ex = set(exclude)
    pool = [d for d in docs if len(d.text.strip()) >= min_chars and d.id not in ex]
    if len(pool) < n:
        raise MemlabError(f"need {n} documents of >= {min_chars} chars, the corpus has {len(pool)}")
    rng = random.Random(f"{seed}:take")
    return sorted(rng.sample(pool, n), key=lambda d: d.id)




# --------------------------------------------------------------------------------------------- helpers

def load_docs(spec: dict) -> list:
    """Documents of one corpus spec ``{name, options, n_docs?, min_chars?, seed?}`` (see load_corpus)."""
    from memlab.data.corpora import load_corpus

    docs = load_corpus(spec["name"], **dict(spec.get("options") or {}))
    if spec.get("n_docs"):
        docs = take_docs(docs, int(spec["n_docs"]), int(spec.get("seed", 0)),
                         min_chars=int(spec.get("min_chars", 1)))
    elif spec.get("min_chars"):
        docs = [d for d in docs if len(d.text.strip()) >= int(spec["min_chars"])]
    return [d for d in docs if d.text.strip()]


def docs_by_ids(ids: Sequence[str]) -> list:
    """Documents for ids of the form ``<corpus>/<unit or lang>/...`` as written in membership.json."""
    from memlab.data.corpora import load_corpus

    want = list(ids)
    groups: dict[tuple, list[str]] = {}
    for i in want:
        parts = i.split("/")
        if parts[0] == "kjv":
            key = ("kjv", (("unit", parts[1]),))
        elif parts[0] == "fortunes":
            key = ("fortunes", (("lang", parts[1]),))
        else:
            key = (parts[0], ())
        groups.setdefault(key, []).append(i)
    found = {}
    for (name, opts), _ in groups.items():
        for d in load_corpus(name, **dict(opts)):
            found[d.id] = d
    missing = [i for i in want if i not in found]
    if missing:
        raise MemlabError(f"{len(missing)} member ids not found in the installed corpora (e.g. {missing[0]!r}); "
                          "rebuild the model zoo against the installed data")
    return [found[i] for i in want]


def cached_index(docs, tokenizer, root: str | Path, *, backend: str = "suffix_array", label: str = "corpus"):
    """Build (once) an index of ``docs`` with ``tokenizer`` under ``root``, keyed by the documents'
    ids + SHA-256, the tokenizer fingerprint and the backend, so reruns reuse it."""
    import hashlib
    import json

    from memlab.methods.trace.index import build_index, load_index, tokenizer_fingerprint

    h = hashlib.sha256(json.dumps([[d.id, d.sha256] for d in docs] + [tokenizer_fingerprint(tokenizer), backend])
                       .encode()).hexdigest()[:16]
    path = Path(root) / f"{label}-{backend}-{h}"
    if (path / "meta.json").exists():
        return load_index(path)
    return build_index(docs, tokenizer, path, backend=backend, overwrite=True)


def tokenizer_for(path_or_none, docs, cache_root: str | Path, vocab_size: int = 4096):
    """An HF tokenizer: the folder given, or a byte-level BPE trained (deterministically, once) on docs."""
    import hashlib
    import json

    from transformers import AutoTokenizer

    if path_or_none:
        if not Path(path_or_none).exists():
            raise MemlabError(f"tokenizer folder {path_or_none} does not exist; build the model zoo (make models)")
        return AutoTokenizer.from_pretrained(str(path_or_none))
    from memlab.models.tiny import train_tokenizer

    h = hashlib.sha256(json.dumps([[d.id, d.sha256] for d in docs] + [vocab_size]).encode()).hexdigest()[:16]
    out = Path(cache_root) / f"bpe-{vocab_size}-{h}"
    if not (out / "tokenizer.json").exists():
        train_tokenizer([d.text for d in docs], vocab_size, out)
    return AutoTokenizer.from_pretrained(str(out))


def run_propme(backend, tracer: Tracer, template_file: str | Path, docs, *, n_prompts: int, max_new_tokens: int,
               prefix_tokens: int = 32, prefix_position: str = "start", seed: int = 0, extra: dict | None = None,
               progress: bool = False):
    """One PROPME cell: build the three prompt sets, generate greedily, trace the continuations.

    Returns (traces, prompt_sets); every trace's meta holds its ``setting`` plus ``extra``."""
    from memlab.methods.trace.propme import build_prompt_sets

    sets = build_prompt_sets(template_file, docs, tracer.tok, n=n_prompts, seed=seed, prefix_tokens=prefix_tokens,
                             continuation_tokens=max_new_tokens, prefix_position=prefix_position)
    prompts = [p for s in sets.values() for p in s]
    gens = generate(backend, prompts, max_new_tokens=max_new_tokens, seed=seed, progress=progress)
    return trace_generations(tracer, gens, extra, progress=progress), sets


def external_corpus(spec: dict, tokenizer, cache_root: str | Path, n_docs: int, seed: int = 0):
    """An existing infini-gram index directory (``spec.infini_gram_dir``, built with ``tokenizer``,
    ``spec.token_dtype`` default u16) plus ``n_docs`` documents sampled from it for prefix prompts."""
    from memlab.data.records import Document
    from memlab.methods.trace.index import ExternalInfiniGramIndex

    index = ExternalInfiniGramIndex(spec["infini_gram_dir"], tokenizer, token_dtype=spec.get("token_dtype", "u16"),
                                    cache_dir=cache_root)
    rng = random.Random(f"{seed}:external")
    picks = sorted(rng.sample(range(index.n_docs), min(n_docs, index.n_docs)))
    docs = [Document(id=index.doc_id(i), text=index.doc_text(i), source=str(index.path), licence="unknown")
            for i in picks]
    return index, [d for d in docs if d.text.strip()]
