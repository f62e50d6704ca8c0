"""The SimpleTrace / PROPME studies (seed 002), one function per experiment; the notebooks ``notebooks/trace_*.ipynb``
only show what these return.

Each function takes the method's settings (:class:`~memlab.methods.trace.config.TraceConfig`, conf/method/trace.yaml),
the experiment's ``params`` (dataclasses below, conf/experiment/trace_*.yaml) and the run
(:class:`memlab.study_run.StudyRun`: its model catalog and models under test), and returns a
:class:`memlab.results.StudyResult`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memlab.comparison import paper_mark
from memlab.data.sampling import load_spec, sample_docs
from memlab.errors import ConfigError
from memlab.methods.trace import plots
from memlab.methods.trace.config import TraceConfig
from memlab.methods.trace.generation import (prompt_overlap, propensity_rows, run_propme, span_length_frame,
                                             summary_rows)
from memlab.methods.trace.index import BACKENDS
from memlab.methods.trace.index.cache import external_corpus, tokenizer_for
from memlab.methods.trace.validation import negative_control, validate
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

POSITIONS = ("start", "random")


@dataclass(frozen=True)
class ValidationParams:
    corpora: list[dict] = field(metadata=check(nonempty=True))   # corpus specs (memlab.data.sampling.load_spec)
    backends: list[str] = field(metadata=check(choices=BACKENDS, nonempty=True))
    tokenizer: str | None            # None = byte-level BPE trained on the corpus; or an HF tokenizer folder
    vocab_size: int = field(metadata=check(ge=256))
    n_docs: int = field(metadata=check(ge=1))
    n_negatives: int = field(metadata=check(ge=1))   # documents held out of each index: the negative control
    partial_tokens: int = field(metadata=check(ge=1))


@dataclass(frozen=True)
class StagesParams:
    zoo_families: list[str] = field(metadata=check(nonempty=True))
    zoo_size: str
    train_here: bool
    corpus_a: dict
    corpus_b: dict
    b_share: float = field(metadata=check(gt=0, lt=1))
    arch: dict[str, int]
    train: dict
    stage_epochs: list[int] = field(metadata=check(ge=1))
    stages_dir: str
    n_prompts: int = field(metadata=check(ge=1))
    max_new_tokens: int = field(metadata=check(ge=1))


@dataclass(frozen=True)
class TinyCell:
    family: str
    size: str
    domain: str
    n_prompts: int = field(metadata=check(ge=1))
    max_new_tokens: int = field(metadata=check(ge=1))
    prefix_tokens: int = field(metadata=check(ge=1))
    prefix_position: str = field(metadata=check(choices=POSITIONS))


@dataclass(frozen=True)
class ExternalCells:
    n_prompts: int = field(metadata=check(ge=1))
    max_new_tokens: int = field(metadata=check(ge=1))
    prefix_tokens: int = field(metadata=check(ge=1))
    prefix_position: str = field(metadata=check(choices=POSITIONS))
    corpora: list[dict]              # {label, domain, name, options} or {label, domain, infini_gram_dir, token_dtype}
    served_tokenizer_vocab: int = field(metadata=check(ge=256))   # a served model (no local tokenizer): the index and
    # the prompts use a byte-level BPE of this many tokens trained on the traced corpus (its generations are text)


@dataclass(frozen=True)
class CapabilityParams:
    tiny: TinyCell
    external: ExternalCells


def generation_frame(traces, keys):
    """One row per generation: its group keys, its position ``i`` in the group (the same prompt has the same ``i``
    at every stage) and the per-generation values whose means are ALS, FMR and NVR — the units of the
    paper-vs-ours bootstrap (memlab.methods.trace.claims)."""
    import pandas as pd

    rows, seen = [], {}
    for tr in traces:
        key = tuple(tr.meta.get(k) for k in keys)
        seen[key] = seen.get(key, -1) + 1
        rows.append({**dict(zip(keys, key)), "i": seen[key], "longest_span": tr.longest_span,
                     "full_match": float(tr.full_match), "nv_recall": float(tr.nv_recall)})
    return pd.DataFrame(rows, columns=[*keys, "i", "longest_span", "full_match", "nv_recall"])


def validation(method: TraceConfig, params: ValidationParams, run: StudyRun) -> StudyResult:
    """Retrieval, exact-match and pass rates of whole-document and partial queries, per corpus and index backend
    (seed 002 Table 5 analog), and a negative control: ``n_negatives`` documents held out of each index are queried
    the same way and must not come back as exact matches. No model involved."""
    import pandas as pd

    p, res, rows, summary, builds, neg_rows, neg_summary = params, StudyResult(), [], [], [], [], []
    for spec in p.corpora:
        docs = load_spec(spec)
        held = sample_docs(docs, p.n_negatives, f"{method.seed}:negatives")
        docs = [d for d in docs if d.id not in {h.id for h in held}]
        tok = tokenizer_for(p.tokenizer, docs, method.index_root, vocab_size=p.vocab_size)
        for backend in p.backends:
            index = method.index(docs, tok, spec["label"], backend=backend)
            # sizes only: build times vary run to run (tables must not); `make bench` measures build speed
            builds.append({"corpus": spec["label"], "backend": backend, "docs": index.n_docs, "tokens": index.n_tokens})
            tracer = method.tracer(index, tok)
            r, s = validate(tracer, p.n_docs, p.partial_tokens, method.seed)
            rows += [{"corpus": spec["label"], "backend": backend, **x} for x in r]
            summary += [{"corpus": spec["label"], "backend": backend, **x} for x in s]
            r, s = negative_control(tracer, held, p.partial_tokens)
            neg_rows += [{"corpus": spec["label"], "backend": backend, **x} for x in r]
            neg_summary += [{"corpus": spec["label"], "backend": backend, **x} for x in s]
    res.table("index_builds", pd.DataFrame(builds))
    summary = res.table("validation", pd.DataFrame(summary))
    negatives = res.table("negative_control", pd.DataFrame(neg_summary))
    res.table("negative_control_queries", pd.DataFrame(neg_rows), show=False)
    queries = res.table("validation_queries", pd.DataFrame(rows), show=False)
    res.table("failed_queries", queries[~(queries.retrieved & queries.exact_match)])
    res.metric(min_retrieval_rate=float(summary.retrieval_rate.min()),
               min_exact_match_rate=float(summary.exact_match_rate.min()),
               min_pass_rate=float(summary.pass_rate.min()), queries=int(len(queries)),
               max_false_exact_match_rate=float(negatives.false_exact_match_rate.max()))
    res.metric(seed=method.seed)  # bootstrap seed of the paper-vs-ours rules (memlab.methods.trace.claims)
    return res


def stage_models(p: StagesParams, catalog) -> tuple[dict[str, dict], list, list]:
    """{stage: model node}, corpus A, corpus B: the zoo's stage families (stage 0 = corpus A; stage 1's members =
    B + A), or — ``train_here`` — stages trained now into ``stages_dir/<hash of params>``."""
    if p.train_here:
        from memlab.methods.trace.stages import stage_specs, train_stages

        A, B = load_spec(p.corpus_a), load_spec(p.corpus_b)
        key = hashlib.sha256(json.dumps(asdict(p), sort_keys=True).encode()).hexdigest()[:12]
        specs = stage_specs(A, B, [], arch=dict(p.arch), train=dict(p.train), stage_epochs=list(p.stage_epochs),
                            out_root=Path(p.stages_dir) / key, b_share=p.b_share)
        dirs = train_stages(specs, progress=False)
        return ({s: {**catalog.template, "name": f"trace-stages-{key}-{s}", "path": str(d), "gguf_file": None,
                     "revision": "auto"} for s, d in dirs.items()}, A, B)
    fams = [catalog.family(n) for n in p.zoo_families]
    A = fams[0].members
    B = [d for d in fams[1].members if d.id not in {a.id for a in A}]
    return {f"stage{k}": catalog.checkpoint_cfg(f.name, p.zoo_size, "final") for k, f in enumerate(fams)}, A, B


def stages(method: TraceConfig, params: StagesParams, run: StudyRun) -> StudyResult:
    """ALS, FMR, NVR per prompt setting, propensity and span lengths per training stage and corpus
    (seed 002 Figs. 3–8 analog)."""
    import pandas as pd
    from transformers import AutoTokenizer

    p, catalog, res = params, run.catalog, StudyResult()
    nodes, A, B = stage_models(p, catalog)
    tok = AutoTokenizer.from_pretrained(nodes["stage0"]["path"])
    corpora = {"A": (p.corpus_a, A), "B": (p.corpus_b, B)}
    tracers = {c: method.tracer(method.index(docs, tok, f"stages-{spec['label']}"), tok)
               for c, (spec, docs) in corpora.items()}
    traces = []
    for stage, node in nodes.items():
        with catalog.using(node) as backend:
            for c, (spec, docs) in corpora.items():
                t, _ = run_propme(backend, tracers[c], Path(method.prompts_dir) / f"{spec['domain']}.txt", docs,
                                  n_prompts=p.n_prompts, max_new_tokens=p.max_new_tokens,
                                  prefix_tokens=spec["prefix_tokens"], prefix_position=spec["prefix_position"],
                                  seed=method.seed, extra={"stage": stage, "corpus": c})
                traces += t
    keys = ["corpus", "stage", "setting"]
    summary = pd.DataFrame(summary_rows(traces, keys, n_tokens=method.n_tokens,
                                        nv_recall_threshold=method.nv_recall_threshold))
    summary = summary.sort_values(keys).reset_index(drop=True)
    res.table("stage_metrics_full", summary, show=False)
    res.table("stage_metrics", summary[keys + ["ALS", "FMR", "NVR", "token_accuracy", "generations_with_spans"]])
    res.figure("stage_metrics", plots.stage_metrics(summary, generation_frame(traces, keys),
                                                    paper_mark("propme_t1_als"), p.max_new_tokens,
                                                    seed=method.seed, n_resamples=method.bootstrap.n_resamples))
    prop = pd.DataFrame(propensity_rows(summary.to_dict("records"), keys, eps=method.propensity_eps))
    prop = res.table("stage_propensity", prop.sort_values(["corpus", "stage", "setting"]).reset_index(drop=True))
    res.figure("stage_propensity", plots.stage_propensity(prop))
    res.figure("stage_span_lengths", plots.stage_span_lengths(span_length_frame(traces, keys), list(nodes)))
    res.table("generation_scores", generation_frame(traces, keys), show=False)
    res.metric(**{f"{r.corpus}_{r.stage}_{r.setting}_{m}": float(getattr(r, m))
                  for r in summary.itertuples() for m in ("ALS", "FMR", "NVR")},
               **{f"{r.corpus}_{r.stage}_{r.setting}_{m}_propensity": float(getattr(r, f"{m}_propensity"))
                  for r in prop.itertuples() for m in ("FMR", "NVR")})
    res.metric(seed=method.seed)
    return res


def capability_propensity(method: TraceConfig, params: CapabilityParams, run: StudyRun) -> StudyResult:
    """Capability (prefix prompts) vs propensity (generic / specific prompts), seed 002 Table 1 / Fig. 10: the tiny
    model against its exact training set, and pretrained models against corpora they likely saw."""
    import pandas as pd

    p, catalog, res, t = params, run.catalog, StudyResult(), params.tiny
    fam = catalog.family(t.family)
    node = catalog.checkpoint_cfg(t.family, t.size, "final")
    tiny_name = node["name"]
    with catalog.using(node) as backend:
        tracer = method.tracer(method.index(fam.members, backend.tokenizer, "tiny-members"), backend.tokenizer)
        traces, sets = run_propme(backend, tracer, Path(method.prompts_dir) / f"{t.domain}.txt", fam.members,
                                  n_prompts=t.n_prompts, max_new_tokens=t.max_new_tokens, prefix_tokens=t.prefix_tokens,
                                  prefix_position=t.prefix_position, seed=method.seed,
                                  extra={"model": tiny_name, "corpus": "training set"})
    per_prompt: list[dict] = []
    overlap = [{"model": tiny_name, "corpus": "training set", **r}
               for r in prompt_overlap(tracer, sets, n_tokens=method.n_tokens,
                                      nv_recall_threshold=method.nv_recall_threshold, per_prompt=per_prompt)]
    all_traces = list(traces)
    for node in run.targets:
        got, over = model_traces(method, p.external, node, catalog)
        all_traces += got
        overlap += over
    keys = ["model", "corpus", "setting"]
    summary = pd.DataFrame(summary_rows(all_traces, keys, n_tokens=method.n_tokens,
                                        nv_recall_threshold=method.nv_recall_threshold))
    res.table("capability_propensity_full", summary, show=False)
    res.table("capability_propensity", summary[keys + ["total_generations", "ALS", "FMR", "NVR", "token_accuracy",
                                                       "n_token_span_ratio", "rouge_l_recall"]])
    prop = res.table("propensity", pd.DataFrame(propensity_rows(summary.to_dict("records"), keys,
                                                                eps=method.propensity_eps)))
    res.table("prompt_overlap", pd.DataFrame(overlap))
    # per prompt of the tiny model: the units of the paper-vs-ours bootstrap (memlab.methods.trace.claims)
    res.table("prompt_scores", pd.DataFrame([{"model": tiny_name, "corpus": "training set", **r} for r in per_prompt],
                                            columns=["model", "corpus", "setting", "i", "nv_recall", "full_match"]),
              show=False)
    res.figure("span_length_histograms", plots.span_lengths(span_length_frame(all_traces, keys),
                                                            list(summary.groupby(["model", "corpus"]).groups)))
    res.table("generation_scores", generation_frame(all_traces, keys), show=False)
    tiny = summary[summary.model == tiny_name].set_index("setting")
    res.metric(**{f"tiny_{m}_{s}": float(tiny.loc[s, m]) for m in ("ALS", "FMR", "NVR") for s in tiny.index},
               **{f"{r.model}_{r.corpus}_{r.setting}_{m}_propensity".replace(" ", "_"): float(getattr(r, f"{m}_propensity"))
                  for r in prop.itertuples() for m in ("FMR", "NVR")})
    res.metric(seed=method.seed, tiny_model=tiny_name, propensity_eps=method.propensity_eps)  # for trace/claims.py
    return res


def model_traces(method: TraceConfig, e: ExternalCells, node: dict, catalog) -> tuple[list, list[dict]]:
    """One pretrained model (a model node) prompted in every setting for each corpus of ``e.corpora`` and traced
    against that corpus: its traces and the prompt-overlap rows (seed 002 Fig. 2)."""
    traces, overlap, name = [], [], node["name"]
    with catalog.using(node) as b:
        own = getattr(b, "tokenizer", None)
        for spec in e.corpora:
            if spec.get("infini_gram_dir"):  # real scale: an existing infini-gram index built with this tokenizer
                if own is None:
                    raise ConfigError(f"model {name} is served without a local tokenizer: an infini-gram index "
                                      f"({spec['label']}) needs the tokenizer it was built with; trace an embedded "
                                      "corpus, or give the model as an HF folder")
                tok = own
                index, docs = external_corpus(spec, tok, method.index_root, e.n_prompts, method.seed)
            else:
                docs = load_spec(spec)
                tok = own or tokenizer_for(None, docs, method.index_root, vocab_size=e.served_tokenizer_vocab)
                index = method.index(docs, tok, f"{name}-{spec['label']}")
            tr = method.tracer(index, tok)
            got, s = run_propme(b, tr, Path(method.prompts_dir) / f"{spec['domain']}.txt", docs,
                                n_prompts=e.n_prompts, max_new_tokens=e.max_new_tokens,
                                prefix_tokens=e.prefix_tokens, prefix_position=e.prefix_position,
                                seed=method.seed, extra={"model": name, "corpus": spec["label"]})
            traces += got
            overlap += [{"model": name, "corpus": spec["label"], **r}
                        for r in prompt_overlap(tr, s, n_tokens=method.n_tokens,
                                                nv_recall_threshold=method.nv_recall_threshold)]
    return traces, overlap
