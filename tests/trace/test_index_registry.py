"""A new index backend is one module: a toy backend (a plain scan of the token file) dropped into
:mod:`memlab.methods.trace.index.kinds` is listed by the registry, accepted by the configs that name a backend, built
by ``build_index``, reopened by ``load_index`` by the name in its meta.json, and answers as the suffix array does;
SimpleTrace's validation over it agrees with the suffix array's. Afterwards the registry is as before."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from memlab.errors import ConfigError
from memlab.methods.trace.index import BACKENDS, backend_class, build_index, encode_texts, load_index
from memlab.methods.trace.index import base as index_base
from memlab.methods.trace.validation import validate
from memlab.schema import method_config, typed

TOY = "toy_scan"
TOY_MODULE = f'''"""``backend="{TOY}"``: the corpus token file kept as is; every query scans it (tests only)."""

import numpy as np

from memlab.methods.trace.index.base import Occurrences, TokenIndex, register_backend


@register_backend
class ToyScanIndex(TokenIndex):
    name = "{TOY}"

    def __init__(self, path, meta):
        self.path, self.meta = path, meta
        self.T = np.load(path / "scan.npy").astype(np.int64)
        self.unigram = np.load(path / "unigram.npy")
        self.doc_of = np.cumsum(self.T == self.T.max()) - 1   # every document starts with SEP (the largest id)

    @classmethod
    def required_files(cls, meta):
        return ["scan.npy", "unigram.npy", "texts.bin", "text_offsets.npy", "ids.json"]

    @classmethod
    def build(cls, corpus, out, base_meta, **options):
        tokens = np.fromfile(corpus.tokens_file, dtype=corpus.dtype)
        np.save(out / "scan.npy", np.append(tokens, np.iinfo(corpus.dtype).max).astype(corpus.dtype))

    def _starts(self, tokens):
        g = np.asarray([int(t) for t in tokens], dtype=np.int64)
        if len(g) == 0 or len(g) > len(self.T):
            return np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(self.T[:len(self.T) - len(g) + 1] == g[0])
        return np.array([s for s in starts if np.array_equal(self.T[s:s + len(g)], g)], dtype=np.int64)

    def count(self, tokens):
        return len(self._starts(tokens))

    def occurrences(self, tokens, *, cap=10, max_scan=1000):
        starts = self._starts(tokens)
        docs = sorted({{int(d) for d in self.doc_of[starts[:max_scan]]}})
        return Occurrences(len(starts), docs[:cap], len(docs))
'''


@pytest.fixture
def toy_backend(drop_in_plugin):
    """The toy module in a folder added to the backends' package path, as if dropped into it; afterwards the
    registry and the package are as before."""
    return drop_in_plugin(index_base.KIND_PACKAGE, TOY, TOY_MODULE, lambda: index_base.unregister_backend(TOY))


def test_the_built_in_backends_come_from_the_plugin_package():
    kinds = index_base.KIND_PACKAGE
    assert {name: cls.__module__ for name, cls in BACKENDS.items()} == {
        "suffix_array": f"{kinds}.suffix_array", "infini_gram": f"{kinds}.infini_gram"}
    known = r"^unknown index backend 'nope'; use one of \['infini_gram', 'suffix_array'\]$"
    with pytest.raises(ConfigError, match=known):
        backend_class("nope")


def test_a_new_backend_module_builds_loads_and_answers_as_the_suffix_array(toy_backend, corpus, tokenizer, sa_index,
                                                                           tmp_path):
    assert toy_backend in BACKENDS and backend_class(toy_backend).name == toy_backend
    with pytest.raises(ConfigError, match=f"use one of .*'{toy_backend}'"):
        backend_class("nope")
    # a config naming the backend is accepted while the module is there (the choices are the registry's)
    node = {"corpora": [{"label": "x", "name": "kjv"}], "backends": ["suffix_array", toy_backend], "tokenizer": None,
            "vocab_size": 300, "n_docs": 4, "n_negatives": 1, "partial_tokens": 16}
    from memlab.methods.trace.study import ValidationParams

    assert typed(ValidationParams, node, "params").backends == ["suffix_array", toy_backend]

    built = build_index(corpus, tokenizer, tmp_path / "toy", backend=toy_backend, tokenize_workers=1)
    toy = load_index(tmp_path / "toy")
    assert type(toy).__name__ == "ToyScanIndex" and type(built) is type(toy) and toy.meta["backend"] == toy_backend
    assert (toy.n_docs, toy.n_tokens) == (sa_index.n_docs, sa_index.n_tokens)
    assert np.array_equal(toy.unigram, sa_index.unigram)
    assert [toy.doc_id(i) for i in range(toy.n_docs)] == [d.id for d in corpus]
    assert toy.doc_text(7) == corpus[7].text

    texts = [corpus[3].text, corpus[11].text[:80], corpus[20].text[-60:], "zzz kalo mine qua " + corpus[5].text[:40]]
    for ids in encode_texts(tokenizer, texts):
        ids = [int(t) for t in ids]
        assert np.array_equal(toy.longest_matches(ids), sa_index.longest_matches(ids))
        for a, b in [(0, 1), (0, 3), (2, 8), (0, len(ids)), (len(ids) // 2, len(ids))]:
            q = ids[a:b]
            assert toy.count(q) == sa_index.count(q), (a, b)
            everything = dict(cap=len(corpus), max_scan=10**6)
            assert toy.occurrences(q, **everything).doc_ixs == sa_index.occurrences(q, **everything).doc_ixs
    assert toy.count(list(reversed(ids))) == sa_index.count(list(reversed(ids))) == 0

    # SimpleTrace's validation (the trace_validation study's queries) over each backend: the same answers
    trace = method_config("trace")
    rows = {name: validate(trace.tracer(index, tokenizer), n_docs=6, partial_tokens=16, seed=0)[0]
            for name, index in (("toy", toy), ("sa", sa_index))}
    keys = ("doc_id", "query_type", "query_tokens", "retrieved", "exact_match", "span_count")
    assert [[r[k] for k in keys] for r in rows["toy"]] == [[r[k] for k in keys] for r in rows["sa"]]
    assert len(rows["toy"]) == 24 and all(r["passed"] for r in rows["toy"])


def test_the_toy_backend_is_gone_after_its_test():
    assert TOY not in BACKENDS and f"{index_base.KIND_PACKAGE}.{TOY}" not in sys.modules
