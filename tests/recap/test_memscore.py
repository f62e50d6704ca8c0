"""Hybrid memorization score (seed 000 eq. 1) and the Parrot masked LM."""

import dataclasses
import math

import pytest

from memlab.data.corpora import load_corpus
from memlab.methods.recap.memscore import Parrot, hybrid_score, inverse_loss


def test_published_coefficients():
    assert inverse_loss(0.01) == 1.0 and inverse_loss(8.0) == 0.0 and inverse_loss(100) == 0.0
    assert inverse_loss(4.005) == pytest.approx(0.5)
    # z = 4·inv + 4.5·R + 1.5·cos − 5
    assert hybrid_score(0.01, 1.0, 1.0) == pytest.approx(1 / (1 + math.exp(-(4 + 4.5 + 1.5 - 5))))
    assert hybrid_score(8.0, 0.0, 0.0) == pytest.approx(1 / (1 + math.exp(5)))
    assert hybrid_score(4.005, 0.5, 0.5) == pytest.approx(1 / (1 + math.exp(-(2 + 2.25 + 0.75 - 5))))


def test_parrot_prefers_the_book_and_caches(tmp_path, recap):
    ruth = [d.text for d in load_corpus("kjv", unit="chapter") if d.id.startswith("kjv/chapter/Ruth/")]
    book = ruth[0]
    cfg = dataclasses.replace(recap.method().memscore.parrot, max_epochs=15, vocab_size=800, hidden=64, layers=2, heads=2,
                              chunk_tokens=64, stride=32)
    p = Parrot(book, cfg, tmp_path)
    inside = p.mlm_loss(ruth[0][:600])
    outside = p.mlm_loss("Quarterly revenue grew by nine percent while the software division shipped new cloud servers.")
    assert inside < outside
    assert p.mlm_loss(ruth[0][:600]) == inside  # masks are seeded: the value is fixed
    again = Parrot(book, cfg, tmp_path)  # loaded from the cache, not retrained
    assert again.mlm_loss(ruth[0][:600]) == pytest.approx(inside)


def test_parrot_is_rebuilt_identically(recap):
    """Same book + config ⇒ byte-identical vocabulary and weights when trained again (the library's WordPiece
    trainer broke frequency ties in hash-map order: a new vocabulary, Parrot and filter table every run)."""
    import hashlib

    book = next(d.text for d in load_corpus("kjv", unit="chapter") if d.id == "kjv/chapter/Ruth/1")
    cfg = dataclasses.replace(recap.method().memscore.parrot, max_epochs=3, vocab_size=400, hidden=32, layers=1, heads=2,
                              chunk_tokens=64, stride=32)
    runs = []
    for _ in range(2):
        p = Parrot(book, cfg, None)
        weights = b"".join(v.numpy().tobytes() for v in p.model.state_dict().values())
        runs.append((p.tok.get_vocab(), hashlib.sha256(weights).hexdigest(), p.mlm_loss(book[:400])))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) <= 400 and {"[PAD]", "[UNK]", "[MASK]"} <= set(runs[0][0])


def test_overlapping_passage_count_beside_ours():
    """The authors' count (a span from every start block, overlaps counted) vs ours (no token counted twice)."""
    from memlab.metrics.passages import count_passages, count_passages_overlapping

    ref = " ".join(f"w{i}" for i in range(100))
    exact = count_passages(ref, [ref], min_tokens=40, max_mismatch=5).n_passages
    assert exact == count_passages_overlapping(ref, [ref], min_tokens=40, max_mismatch=5) == 2
    toks = ref.split()
    toks[30] = toks[60] = "x"  # two substitutions: three blocks, spans start at each
    cand = " ".join(toks)
    assert count_passages(cand, [cand], min_tokens=40, max_mismatch=5).n_passages == 2
    ours = count_passages(ref, [cand], min_tokens=40, max_mismatch=5).n_passages
    theirs = count_passages_overlapping(ref, [cand], min_tokens=40, max_mismatch=5)
    assert ours == 2 and theirs == 2 + 1  # 98 matched from block 1; 69 from block 2 (overlapping); 39 from block 3
    assert count_passages_overlapping(ref, ["unrelated words only"], min_tokens=40) == 0
