"""Fixtures for the trace tests: a small generated corpus, its BPE tokenizer, and both index backends."""

from __future__ import annotations

import random

import pytest

from memlab.data.records import Document

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sha", "dor", "ul", "ix", "ben", "qua"]


def make_corpus(n_docs: int = 40, seed: int = 0) -> list[Document]:
    """Pseudo-words in sentences; a few sentences are shared by several documents (duplicates)."""
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(400)})
    shared = [" ".join(rng.choice(vocab) for _ in range(12)) + "." for _ in range(3)]
    docs = []
    for i in range(n_docs):
        sents = []
        for _ in range(rng.randint(3, 12)):
            if rng.random() < 0.1:
                sents.append(rng.choice(shared))
            else:
                sents.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(4, 15))).capitalize() + ".")
        docs.append(Document(id=f"synthetic/{i}", text=" ".join(sents), source="generated", licence="CC0"))
    return docs


@pytest.fixture(scope="session")
def corpus() -> list[Document]:
    return make_corpus()


@pytest.fixture(scope="session")
def tokenizer(corpus, tmp_path_factory):
    from memlab.models.tiny import train_tokenizer

    return train_tokenizer([d.text for d in corpus], 300, tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def sa_index(corpus, tokenizer, tmp_path_factory):
    from memlab.methods.trace.index import build_index

    return build_index(corpus, tokenizer, tmp_path_factory.mktemp("idx") / "sa", backend="suffix_array")


@pytest.fixture(scope="session")
def ig_index(corpus, tokenizer, tmp_path_factory):
    from memlab.methods.trace.index import build_index

    return build_index(corpus, tokenizer, tmp_path_factory.mktemp("idx") / "ig", backend="infini_gram", shards=2)
