"""Index backends: exact answers (against brute force), same answers on both backends, bad input."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest

from memlab.data.records import Document
from memlab.errors import MemlabError
from memlab.methods.trace.index import build_index, encode_texts, load_index, read_jsonl_bytes


def _corpus_lists(corpus, tokenizer):
    return [list(map(int, t)) for t in encode_texts(tokenizer, [d.text for d in corpus])]


def _brute_count(docs_tokens, q):
    n = 0
    for t in docs_tokens:
        for i in range(len(t) - len(q) + 1):
            n += t[i:i + len(q)] == q
    return n


def _brute_longest(docs_tokens, g):
    joined = [tuple(t) for t in docs_tokens]
    out = []
    for i in range(len(g)):
        best = 0
        for t in joined:
            for s in range(len(t)):
                k = 0
                while i + k < len(g) and s + k < len(t) and t[s + k] == g[i + k]:
                    k += 1
                best = max(best, k)
        out.append(best)
    return out


def _queries(docs_tokens, n=12, seed=0):
    """Pieces of documents spliced together with random tokens: long, short and no matches."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        g = []
        for _ in range(3):
            t = rng.choice(docs_tokens)
            a = rng.randrange(len(t))
            g += t[a:a + rng.randint(1, 25)]
            g += [rng.randrange(300) for _ in range(rng.randint(0, 3))]
        out.append(g)
    return out


def test_longest_matches_exact_and_backends_agree(corpus, tokenizer, sa_index, ig_index):
    toks = _corpus_lists(corpus, tokenizer)
    for g in _queries(toks, n=8):
        want = _brute_longest(toks, g)
        assert sa_index.longest_matches(g).tolist() == want
        assert sa_index.longest_matches_naive(g).tolist() == want
        assert ig_index.longest_matches(g).tolist() == want


def test_counts_and_documents_agree(corpus, tokenizer, sa_index, ig_index):
    toks = _corpus_lists(corpus, tokenizer)
    rng = random.Random(1)
    for _ in range(30):
        t = rng.choice(toks)
        a = rng.randrange(len(t))
        q = t[a:a + rng.randint(1, 6)]
        assert sa_index.count(q) == ig_index.count(q) == _brute_count(toks, q)
        o1 = sa_index.occurrences(q, cap=5)
        o2 = ig_index.occurrences(q, cap=5)
        assert o1 == o2
        holders = [i for i, d in enumerate(toks) if _brute_count([d], q)]
        assert o1.doc_ixs == holders[:5] and o1.n_docs_scanned == len(holders)
    assert sa_index.count([]) == 0 and sa_index.count([299, 299, 299, 299, 299]) == 0


def test_documents_and_metadata_round_trip(corpus, tokenizer, sa_index, ig_index):
    for ix in (sa_index, ig_index):
        assert ix.n_docs == len(corpus)
        assert ix.doc_text(7) == corpus[7].text and ix.doc_id(7) == corpus[7].id
        assert ix.doc_index(corpus[3].id) == 3
        assert int(ix.unigram.sum()) == ix.n_tokens


def test_reload_is_memory_mapped(sa_index):
    again = load_index(sa_index.path)
    assert isinstance(again.SA.base, np.memmap) or isinstance(getattr(again.SA.base, "base", None), np.memmap)
    assert not again.SA.flags.writeable
    assert again.longest_matches([1, 2, 3]).tolist() == sa_index.longest_matches([1, 2, 3]).tolist()


def test_tokenizer_mismatch_is_refused(sa_index, tmp_path, corpus):
    from memlab.methods.trace.simpletrace import Tracer
    from memlab.models.tiny import train_tokenizer

    other = train_tokenizer([d.text for d in corpus[:5]], 280, tmp_path / "other")
    with pytest.raises(MemlabError, match="tokenizer mismatch"):
        Tracer(sa_index, other, k_frac=0.05, doc_cap=10, min_span_tokens=1, min_full_match_words=8)


def _lowercasing(tokenizer):
    """The same vocabulary, merges and specials, with a lowercasing normalizer (the fault of issue 33)."""
    from tokenizers import Tokenizer, normalizers

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.normalizer = normalizers.Lowercase()
    return type(tokenizer)(tokenizer_object=backend, **tokenizer.special_tokens_map)


def _tracer(index, tok):
    from memlab.methods.trace.simpletrace import Tracer

    return Tracer(index, tok, k_frac=0.05, doc_cap=10, min_span_tokens=1, min_full_match_words=8)


def test_lowercasing_tokenizer_with_the_same_vocabulary_is_refused(sa_index, tokenizer):
    lower = _lowercasing(tokenizer)
    assert lower.get_vocab() == tokenizer.get_vocab() and type(lower) is type(tokenizer)  # what version 1 hashed
    assert lower.all_special_tokens == tokenizer.all_special_tokens
    assert lower.tokenize("Moses SAID") != tokenizer.tokenize("Moses SAID")  # yet other ids
    with pytest.raises(MemlabError, match="tokenizer mismatch") as e:
        _tracer(sa_index, lower)
    assert "\n" not in str(e.value) and "rebuild" in str(e.value)
    _tracer(sa_index, tokenizer)  # the control: the tokenizer the index was built with is accepted


def test_index_with_an_old_fingerprint_is_refused_in_one_line(sa_index, tokenizer, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(sa_index.path, old)
    meta = json.loads((old / "meta.json").read_text())
    del meta["tokenizer_fingerprint_version"]  # what an index built before version 2 records
    (old / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MemlabError, match="version-1 tokenizer fingerprint") as e:
        _tracer(load_index(old), tokenizer)
    assert "\n" not in str(e.value) and f"delete {old}" in str(e.value)


@pytest.mark.parametrize("bad, match", [
    ([], "no documents"),
    ([Document(id="a", text="  \n", source="x", licence="x")], "empty"),
    ([Document(id="a", text="ok \udcff bad", source="x", licence="x")], "invalid UTF-8"),
    ([("a", b"caf\xe9 au lait")], "not valid UTF-8"),
    ([Document(id="a", text="one", source="x", licence="x"), Document(id="a", text="two", source="x", licence="x")],
     "not unique"),
])
def test_bad_corpora_one_line(bad, match, tokenizer, tmp_path):
    with pytest.raises(MemlabError, match=match) as err:
        build_index(bad, tokenizer, tmp_path / "ix", backend="suffix_array")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "ix").exists()


def test_invalid_utf8_in_jsonl_file(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_bytes(json.dumps({"id": "a", "text": "fine"}).encode() + b"\n" + b'{"id": "b", "text": "bad \xff"}\n')
    with pytest.raises(MemlabError, match=r"c.jsonl:2: invalid UTF-8"):
        read_jsonl_bytes(p)


def test_missing_and_half_built_index(sa_index, tmp_path):
    with pytest.raises(MemlabError, match="does not exist"):
        load_index(tmp_path / "nope")
    half = tmp_path / "half"
    shutil.copytree(sa_index.path, half)
    (half / "meta.json").unlink()
    with pytest.raises(MemlabError, match="incomplete"):
        load_index(half)
    broken = tmp_path / "broken"
    shutil.copytree(sa_index.path, broken)
    (broken / "sa.npy").unlink()
    with pytest.raises(MemlabError, match=r"incomplete \(missing sa.npy"):
        load_index(broken)


def test_build_is_reused_not_rebuilt(sa_index, corpus, tokenizer):
    again = build_index(corpus, tokenizer, sa_index.path, backend="suffix_array")
    assert again.meta == sa_index.meta


def test_backend_registry_and_unknown_backend(corpus, tokenizer, tmp_path):
    """Both backends register under their names; an unknown name is one ConfigError naming the known ones."""
    from memlab.errors import ConfigError
    from memlab.methods.trace.index import BACKENDS, InfiniGramIndex, SuffixArrayIndex

    assert BACKENDS == {"suffix_array": SuffixArrayIndex, "infini_gram": InfiniGramIndex}
    assert all(cls.name == name for name, cls in BACKENDS.items())
    known = r"unknown index backend 'nope'; use one of \['infini_gram', 'suffix_array'\]"
    with pytest.raises(ConfigError, match=known) as e:
        build_index(corpus, tokenizer, tmp_path / "ix", backend="nope")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "ix").exists() and not (tmp_path / "ix.tmp").exists()


def test_external_infini_gram_directory(ig_index, tokenizer, tmp_path):
    """An infini-gram directory without our records (as if built elsewhere) answers like our own index."""
    from memlab.methods.trace.index import ExternalInfiniGramIndex

    ext = ExternalInfiniGramIndex(ig_index.path, tokenizer, token_dtype="u16", cache_dir=tmp_path)
    assert ext.n_docs == ig_index.n_docs and (ext.unigram == ig_index.unigram).all()
    assert ext.doc_text(5) == ig_index.doc_text(5)
    g = [int(t) for t in tokenizer(ig_index.doc_text(2))["input_ids"][:40]]
    assert ext.longest_matches(g).tolist() == ig_index.longest_matches(g).tolist()
    with pytest.raises(MemlabError, match="not an infini-gram index"):
        ExternalInfiniGramIndex(tmp_path, tokenizer)


@pytest.mark.parametrize("backend", ["sa", "ig"])
@pytest.mark.parametrize("query", ["count", "occurrences", "longest_matches"])
def test_token_ids_outside_the_vocabulary_are_refused(sa_index, ig_index, backend, query):
    index = sa_index if backend == "sa" else ig_index
    vocab = int(index.meta["vocab_size"])
    ok = [1, 2, 3]
    getattr(index, query)(ok)  # in-vocabulary ids answer
    for bad in ([1, vocab, 2], [-1, 2]):
        with pytest.raises(MemlabError, match=f"token id {bad[1] if bad[0] == 1 else bad[0]} is outside") as e:
            getattr(index, query)(bad)
        assert "\n" not in str(e.value)
