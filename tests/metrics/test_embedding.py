"""Cosine similarity with the packaged all-MiniLM-L6-v2 (loads the real model once, offline)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memlab.metrics import embedding
from memlab.metrics.embedding import cosine, cosine_pairs, embed

A = "In the beginning God created the heaven and the earth."
PARAPHRASE = "At the very start, God made the sky and the land."
UNRELATED = "The quarterly earnings report shows a rise in semiconductor revenue."


def test_model_is_the_packaged_one() -> None:
    d = Path(embedding.model_dir())
    assert (d / "model.safetensors").is_file() and (d / "modules.json").is_file()


def test_cosine_behaviour() -> None:
    e = embed([A, PARAPHRASE, UNRELATED])
    assert e.shape == (3, 384)
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert cosine(A, A) == pytest.approx(1.0, abs=1e-6)  # identical
    assert cosine("", "") == pytest.approx(1.0, abs=1e-6)  # two empty strings embed identically
    para, unrel = cosine_pairs([A, A], [PARAPHRASE, UNRELATED])
    assert para > 0.5 > unrel  # paraphrase close, unrelated far
    assert cosine(A, PARAPHRASE) == pytest.approx(cosine(PARAPHRASE, A), abs=1e-6)  # symmetric
    assert embedding.load_model() is embedding.load_model()  # loaded once
    assert cosine_pairs([], []).shape == (0,)


def test_bad_input() -> None:
    with pytest.raises(TypeError):
        cosine(None, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed("a str")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        cosine_pairs(["a"], ["b", "c"])
