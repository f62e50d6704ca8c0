"""The audit's per-document decisions on one model: PEARL per task (score > α), each MIA score and the blind baseline
(threshold fitted on the same-domain control), for the owner's audit and for its blind runs on the zoo alike
(:mod:`memlab.audit.selfcheck`): one procedure, so the rates the self-check measures are the audit's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from memlab.audit.judge import fitted_flags, fixed_flags
from memlab.errors import ConfigError
from memlab.metrics.blind import COLUMN as BLIND_COLUMN, NAME as BLIND, zlib_compressibility
from memlab.metrics.extraction_probability import Sampler
from memlab.metrics.mia import judged_names   # the MIA scores the audit judges (higher = more likely a member)
from memlab.metrics.mia import reference_scores
from memlab.schema import check


def pearl_label(task: str) -> str:
    return f"PEARL ({task})"


def mia_label(score: str) -> str:
    return f"MIA ({score})"


def pearl_frame(pearl, tasks: Sequence[str], sources: Mapping[str, list], domains: Mapping[str, str], backend,
                style: str, model: str):
    """PEARL's per-document scores of every source under each task, by pearl_wild's own loop."""
    from memlab.methods.pearl.study import source_frames

    return pd.concat(source_frames(pearl, tasks, sources, domains, backend, style, model), ignore_index=True)


@dataclass(frozen=True)
class ExtractionRule:
    """Probabilistic extraction as the audit decides it (Hayes et al. 2024; :mod:`memlab.metrics.extraction_probability`;
    conf/extraction/hayes.yaml): a document is flagged when the ``suffix_tokens`` after its first ``prefix_tokens``
    tokens are (n, p)-discoverable under ``sampler``, i.e. emitted at least once in ``n`` samples (one of the grid
    ``ns`` the zoo experiments read) with probability ≥ ``discoverable_p``."""

    prefix_tokens: int = field(metadata=check(ge=1))
    suffix_tokens: int = field(metadata=check(ge=1))
    sampler: Sampler
    ns: list[int] = field(metadata=check(ge=1, nonempty=True))
    discoverable_p: float = field(metadata=check(gt=0, le=1))
    n: int = field(metadata=check(ge=1))
    batch_size: int = field(metadata=check(ge=1))      # pairs per forward pass

    def __post_init__(self):
        if self.n not in self.ns:
            raise ConfigError(f"params.extraction.n={self.n} must be one of the grid ns {list(self.ns)} the zoo "
                              "experiments read (its ground truth)")

    def rule(self) -> str:
        return (f"the {self.suffix_tokens} tokens after the first {self.prefix_tokens} (n={self.n:g}, "
                f"p={self.discoverable_p:g})-discoverable under {self.sampler.label()}")


EXTRACTION = "extraction (p_z)"            # the audit's row label of the extraction rule
DISCOVERABLE = "discoverable"              # its per-document column: 1.0 (n, p)-discoverable, 0.0 not, NaN too short


def reference_names() -> tuple[str, ...]:
    """The reference attacks the audit runs: the registered ones that hold across tokenizers (the owner's reference
    may tokenize otherwise; :func:`memlab.metrics.mia.reference_scores`)."""
    return tuple(s.name for s in reference_scores(across_tokenizers=True))


def mia_frame(backend, sources: Mapping[str, list], *, settings: Mapping, max_words: int | None, progress: bool,
              scored: Callable[[int], None] | None = None, reference=None, extraction: ExtractionRule | None = None):
    """Every MIA score of every document (:func:`memlab.methods.pearl.tables.mia_frame`; ``settings``: the audit's
    ``params.mia``, whose ``min_k`` is k of Min-K%) and the blind baseline on the same text; with a ``reference``
    backend, the reference attacks (:func:`reference_names`, of the two models' nats per byte, so their tokenizers
    may differ); with ``extraction``, each document's (n, p)-discoverable
    flag (:data:`DISCOVERABLE`) and log p_z. ``scored(n)`` is told after each source of its n documents (the
    audit's overall progress)."""
    from memlab.methods.pearl import tables as T
    from memlab.metrics.mia import nll_per_byte

    frames = []
    for name, docs in sources.items():
        texts = T.mia_texts(docs, max_words)
        target = backend.score(texts, progress=progress)
        f = T.mia_rows(docs, texts, target, settings, source=name)
        f[BLIND_COLUMN] = [zlib_compressibility(t) for t in texts]
        if reference is not None:
            losses = [(nll_per_byte(a, t), nll_per_byte(b, t)) for a, b, t in
                      zip(target, reference.score(texts, vocab=False), texts)]
            for r in reference_scores(across_tokenizers=True):
                f[r.name] = [r.raw(*pair) for pair in losses]
        if extraction is not None:
            f["log_p_z"], f[DISCOVERABLE] = extraction_columns(backend, docs, extraction)
        frames.append(f)
        if scored:
            scored(len(docs))
    return pd.concat(frames, ignore_index=True)


def extractable(backend) -> bool:
    """Whether :func:`extraction_columns` can run on ``backend`` (a local model with its tokenizer)."""
    return getattr(backend, "model", None) is not None and getattr(backend, "tokenizer", None) is not None


def extraction_columns(backend, docs: list, rule: ExtractionRule) -> tuple[np.ndarray, np.ndarray]:
    """Per document: log p_z of the ``suffix_tokens`` after its first ``prefix_tokens`` tokens (its whole text,
    tokenized as the backend's tokenizer does) under ``rule.sampler``, and 1.0 when that suffix is
    (n, p)-discoverable, else 0.0; NaN for a document shorter than the pair. A backend without a local model (a
    served one: its log-probs are top-k, not the whole distribution the sampler's truncation needs) raises
    NotImplementedError."""
    from memlab.metrics.extraction_probability import discoverable_rate, log_p_z

    if not extractable(backend):
        raise NotImplementedError("probabilistic extraction needs the model's whole next-token distribution "
                                  "(a local model); this backend gives none")
    need = rule.prefix_tokens + rule.suffix_tokens
    ids = [list(backend.tokenizer(d.text)["input_ids"]) for d in docs]
    long = [k for k, i in enumerate(ids) if len(i) >= need]
    lpz, flag = np.full(len(docs), np.nan), np.full(len(docs), np.nan)
    if long:
        pairs = [(ids[k][:rule.prefix_tokens], ids[k][rule.prefix_tokens:need]) for k in long]
        (got,) = log_p_z(backend.model, pairs, samplers=[rule.sampler.settings()], batch_size=rule.batch_size,
                         pad_token_id=backend.pad_token_id)
        lpz[long] = got
        flag[long] = (discoverable_rate(np.exp(got), rule.n) >= rule.discoverable_p).astype(float)
    return lpz, flag


def decisions(pearl_df, mia_df, controls: Mapping[str, str | None], *, score: str, alpha: float,
              target_fpr: float, extraction: ExtractionRule | None = None) -> pd.DataFrame:
    """Every document's flag under every rule; ``*_df`` carry ``source``, ``doc_id`` and ``half``. MIA and blind
    thresholds are fitted once per control, on its calibration half, and judge the sources of that control."""
    out = []
    if pearl_df is not None:
        for task, g in pearl_df.groupby("task_kind", sort=False):
            out.append(fixed_flags(g, score, alpha, pearl_label(task)))
    if mia_df is not None:
        scores = [(mia_label(s), s) for s in (*judged_names(), *reference_names()) if s in mia_df and mia_df[s].notna().any()]
        for control in sorted({c for c in controls.values() if c is not None}):
            judged = {s for s, c in controls.items() if c == control} | {control}
            g = mia_df[mia_df.source.isin(judged)]
            for label, s in [*scores, (BLIND, BLIND_COLUMN)]:
                out.append(fitted_flags(g, s, control, target_fpr, label))
        free = mia_df[mia_df.source.map(lambda s: controls.get(s) is None and s not in controls.values())]
        for label, s in [*scores, (BLIND, BLIND_COLUMN)]:   # no control: rows say "not judged" (flags unused)
            out.append(fixed_flags(free, s, float("inf"), label).assign(rule="—"))
        if extraction is not None and DISCOVERABLE in mia_df:   # a fixed rule, as PEARL's: every source
            done = mia_df[mia_df[DISCOVERABLE].notna()]
            out.append(fixed_flags(done, DISCOVERABLE, 0.5, EXTRACTION).assign(rule=extraction.rule()))
    return pd.concat(out, ignore_index=True)
