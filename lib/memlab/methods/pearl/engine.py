"""Run PEARL on documents through any backend, batched (seed 001 Fig. 3 / seed 003 Fig. 2).

For every document x: build the task input X (and reference Y for completion), perturb X at every level k
(:mod:`.perturb`), prompt the model i times per level with seeded sampling, score every output against Y
(:mod:`.tasks`), then compute X_k, sensitivity, GFD and the decision (:mod:`.scores`). All prompts of a run
go to the backend in one ``generate`` call, so the backend batches across documents and levels (and its
cache makes a killed run resume).

Seeds. The perturbation of x uses ``derive_seed(seed, "perturb", kind, x.id)``. The sampling seed of every
request for x is ``derive_seed(seed, "sample", x.id)``, the same at every level: sample j at level k and
sample j at level k+1 share their random stream (common random numbers), so the level-to-level differences
that sensitivity and GFD measure carry less sampling noise. Sample j of a request is a pure function of
(model, request, seed, j) by the backend contract.

i = ``samples`` outputs per level, sampled at ``temperature`` > 0 (with temperature 0 all i outputs are the
greedy one; allowed, e.g. for the benchmark, but then i > 1 adds nothing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memlab.backends.base import Backend, GenerationRequest
from memlab.data.records import Document
from memlab.errors import ConfigError, MemlabError
from memlab.schema import check
from memlab.methods.pearl import scores as S
from memlab.methods.pearl.perturb import KINDS, PerturbationConfig, Perturbed, Perturber, derive_seed
from memlab.methods.pearl.tasks import (TaskConfig, build_request, first_words, load_prompt, performance,
                                        split_completion)


@dataclass(frozen=True)
class PearlStudy:
    """``method.study``: the ground-truth studies' shared settings (a zoo family with exact membership)."""

    family: str | None               # conf/zoo/<family>.yaml; null where the experiment reads no zoo family (pearl_wild)
    size: str
    epoch: int = field(metadata=check(ge=0))            # single-checkpoint studies (0 = before fine-tuning)
    epochs: list[int] = field(metadata=check(ge=0, nonempty=True))   # per-epoch studies
    n_members: int = field(metadata=check(ge=1))
    n_nonmembers: int = field(metadata=check(ge=1))
    kinds: list[str] = field(metadata=check(choices=KINDS, nonempty=True))
    thresholds: dict[str, float]     # {start, stop, step}: the α grid of FPR curves


@dataclass(frozen=True)
class PearlConfig:
    """``conf/method/pearl.yaml`` — every value lives there (no defaults here); built by :func:`memlab.schema.typed`."""

    seed: int
    samples: int = field(metadata=check(ge=1))          # i outputs per level
    temperature: float = field(metadata=check(ge=0))
    top_p: float = field(metadata=check(gt=0, le=1))
    tau_b: float = field(metadata=check(ge=0, le=1))
    gfd_unit: str = field(metadata=check(choices=S.GFD_UNITS))
    sensitivity_mode: str = field(metadata=check(choices=S.SENSITIVITY_MODES))
    decision_score: str = field(metadata=check(choices=S.DECISION_SCORES))
    alpha: float = field(metadata=check(ge=0, le=1))
    verbatim_words: int = field(metadata=check(ge=0))   # > 0: also a greedy level-0 completion (truth aid)
    task: TaskConfig
    perturbation: PerturbationConfig
    study: PearlStudy

    def replace(self, **changes: Any) -> "PearlConfig":
        """A copy with top-level fields changed; ``perturbation={...}``/``task={...}`` dicts update sub-fields."""
        for key in ("perturbation", "task", "study"):
            if isinstance(changes.get(key), Mapping):
                sub = getattr(self, key)
                unknown = set(changes[key]) - set(sub.__dataclass_fields__)
                if unknown:
                    raise ConfigError(f"unknown {key} option(s) {sorted(unknown)}; known: "
                                      f"{sorted(sub.__dataclass_fields__)}")
                changes[key] = dataclasses.replace(sub, **changes[key])
        return dataclasses.replace(self, **changes)

    def member_scores(self, backend: Backend, docs: Sequence[Document], *, progress: bool) -> dict[str, list[float]]:
        """PEARL as one membership attack among others: ``{"pearl_<decision_score>": each document's decision score
        (:attr:`PearlResult.score`)}`` from :func:`run_pearl` under this config, in the order of ``docs``. Higher =
        a larger performance falloff under perturbation = more likely memorized, i.e. member. A study that is not
        PEARL's gets this config as its ``method`` (its experiment selects the method group ``pearl``) and calls
        this, so no other method imports PEARL (experiment mia_low_fpr)."""
        results = run_pearl(backend, docs, self, progress=progress)
        return {f"pearl_{self.decision_score}": [r.score for r in results]}


@dataclass
class PearlResult:
    """PEARL's verdict on one document for one (model, task, perturbation)."""

    doc_id: str
    split: str | None
    source: str
    task: str
    kind: str
    levels: list[int]
    n_changed: list[int]
    perf: list[float]                 # X_k, one per level
    perf_samples: list[list[float]]   # per level, per sample
    sensitivity: float                # in the configured ``sensitivity_mode``
    sensitivity_signed: float         # max_k (X_k − X_{k+1})   (seed 001 eq. 3 as written)
    sensitivity_absolute: float       # max_k |X_k − X_{k+1}|  (the papers' reported values, the authors' code)
    gfd: float
    score: float                      # the decision score (sensitivity or GFD)
    memorized: bool                   # score > alpha
    verbatim: float | None = None     # share of the first verbatim_words reference words reproduced greedily
    outputs: list[list[str]] = field(default_factory=list, repr=False)

    def row(self) -> dict:
        """A flat table row without texts (X_k as perf_k<level> columns)."""
        r = {k: getattr(self, k) for k in ("doc_id", "split", "source", "task", "kind", "sensitivity",
                                           "sensitivity_signed", "sensitivity_absolute", "gfd", "score",
                                           "memorized", "verbatim")}
        for k, x, n in zip(self.levels, self.perf, self.n_changed):
            r[f"perf_k{k}"] = x
            r[f"changed_k{k}"] = n
        return r


@dataclass
class _Item:
    doc: Document
    x: str
    reference: str | None
    perturbed: list[Perturbed]


def prepare(docs: Sequence[Document], cfg: PearlConfig, perturber: Perturber | None = None) -> list[_Item]:
    """Task inputs, references (completion) and perturbed inputs for every document (no model calls)."""
    if not docs:
        raise MemlabError("PEARL got no documents; check the corpus options")
    perturber = perturber or Perturber(cfg.perturbation)
    items = []
    for doc in docs:
        text = first_words(doc.text, cfg.task.max_input_words)
        if not text.strip():
            raise MemlabError(f"document {doc.id!r} has an empty text; drop empty documents first")
        if cfg.task.is_completion:
            x, ref = split_completion(text, cfg.task.split)
        else:
            x, ref = text, None
        pert = perturber.all_levels(x, derive_seed(cfg.seed, "perturb", cfg.perturbation.kind, doc.id))
        items.append(_Item(doc, x, ref, pert))
    return items


def _verbatim(output: str, reference: str, n: int) -> float:
    ref = reference.split()[:n]
    out = output.split()[: len(ref)]
    hit = 0
    for a, b in zip(out, ref):
        if a != b:
            break
        hit += 1
    return hit / max(len(ref), 1)


def run_pearl(backend: Backend, docs: Sequence[Document], cfg: PearlConfig, *, progress: bool = False,
              perturber: Perturber | None = None, keep_outputs: bool = False) -> list[PearlResult]:
    """PEARL on every document, all prompts batched through ``backend.generate``; one result per document."""
    items = prepare(docs, cfg, perturber)
    template = load_prompt(cfg.task)
    t = cfg.task

    def req(x: str, doc_id: str, n: int, temperature: float) -> GenerationRequest:
        return build_request(template, t, x, n=n, temperature=temperature, top_p=cfg.top_p,
                             seed=derive_seed(cfg.seed, "sample", doc_id))

    greedy: list[GenerationRequest] = []
    if not t.is_completion or cfg.verbatim_words > 0:
        greedy = [req(it.x, it.doc.id, 1, 0.0) for it in items]
    sampled = [req(p.text, it.doc.id, cfg.samples, cfg.temperature) for it in items for p in it.perturbed]
    gens = backend.generate(greedy + sampled, progress=progress)
    g_greedy, g_sampled = gens[: len(greedy)], gens[len(greedy):]

    n_levels = len(cfg.perturbation.levels)
    results = []
    for d, it in enumerate(items):
        verbatim = None
        if t.is_completion:
            reference = it.reference
            if cfg.verbatim_words > 0:
                verbatim = _verbatim(g_greedy[d].text, reference, cfg.verbatim_words)
        else:
            reference = g_greedy[d].text
        outs = [g_sampled[d * n_levels + j].texts for j in range(n_levels)]
        per_sample = [[performance(t, o, reference) for o in level] for level in outs]
        perf = S.level_means(per_sample)
        sens = S.sensitivity(perf, cfg.sensitivity_mode)
        g = S.gfd(per_sample, cfg.tau_b, cfg.gfd_unit)
        score = sens if cfg.decision_score == "sensitivity" else g
        results.append(PearlResult(
            doc_id=it.doc.id, split=it.doc.split, source=it.doc.source, task=t.name, kind=cfg.perturbation.kind,
            levels=list(cfg.perturbation.levels), n_changed=[p.n_changed for p in it.perturbed],
            perf=[float(x) for x in perf], perf_samples=per_sample, sensitivity=sens,
            sensitivity_signed=S.sensitivity(perf, "signed"), sensitivity_absolute=S.sensitivity(perf, "absolute"),
            gfd=g, score=score,
            memorized=S.memorized(score, cfg.alpha), verbatim=verbatim, outputs=outs if keep_outputs else []))
    return results


def input_similarity(docs: Sequence[Document], cfg: PearlConfig, perturber: Perturber | None = None) -> list[dict]:
    """Similarity of each perturbed input to the original, per document and level (seed 003 Table 8 analog).

    Columns: ``rouge_l_f1`` = ROUGE-L F1 (word tokens, no stemming) of perturbed vs original input;
    ``ncd_similarity`` = 1 − NCD_zlib(perturbed, original); ``changed`` = units changed (bytes or words).
    """
    from memlab.metrics.ncd import completion_score
    from memlab.metrics.rouge import rouge_l

    rows = []
    for it in prepare(docs, cfg, perturber):
        for p in it.perturbed:
            rows.append({"doc_id": it.doc.id, "kind": p.kind, "level": p.level, "changed": p.n_changed,
                         "rouge_l_f1": rouge_l(it.x, p.text).f1, "ncd_similarity": completion_score(p.text, it.x)})
    return rows


def results_frame(results: Sequence[PearlResult]):
    """A pandas DataFrame of :meth:`PearlResult.row` (no texts)."""
    import pandas as pd

    return pd.DataFrame([r.row() for r in results])
