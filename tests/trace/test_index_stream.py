"""Streamed, parallel index builds give the index of the former all-in-memory build, byte for byte."""

from __future__ import annotations

import json
import random

import numpy as np
import pydivsufsort
import pytest

from memlab.methods.trace.index import build_index, encode_texts, token_dtype_for, vocab_size_of
from memlab.methods.trace.index import corpus_stream
from tests.trace.conftest import make_corpus

SA_ARRAYS = ("tokens.npy", "sa.npy", "isa.npy", "lcp.npy", "doc_starts.npy", "unigram.npy", "text_offsets.npy")


def _former_build(docs, tokenizer) -> dict[str, np.ndarray]:
    """The suffix-array files as the build before streaming made them: all texts encoded in one list, the
    corpus laid out in memory, divsufsort + Kasai + inverse over it."""
    token_lists = encode_texts(tokenizer, [d.text for d in docs])
    vocab = vocab_size_of(tokenizer)
    dt = token_dtype_for(vocab)
    sep = np.iinfo(dt).max
    T = np.concatenate([np.concatenate([[sep], t]) for t in token_lists] + [[sep]]).astype(dt)
    sa = pydivsufsort.divsufsort(np.array(T))
    lcp = pydivsufsort.kasai(np.array(T), sa).astype(np.int32)
    isa = np.empty_like(sa)
    isa[sa] = np.arange(len(T), dtype=sa.dtype)
    blobs = [d.text.encode("utf-8") for d in docs]
    return {"tokens.npy": T, "sa.npy": sa.astype(np.int32), "isa.npy": isa, "lcp.npy": lcp,
            "doc_starts.npy": np.cumsum([len(t) + 1 for t in token_lists]) - [len(t) for t in token_lists],
            "unigram.npy": np.bincount(np.concatenate(token_lists), minlength=vocab)[:vocab],
            "text_offsets.npy": np.concatenate([[0], np.cumsum([len(b) for b in blobs])])}


@pytest.fixture(scope="module")
def big_corpus():
    """Larger than several tokenization chunks (with the chunk size lowered below), and with duplicates."""
    docs = make_corpus(n_docs=300, seed=3)
    return docs + [type(d)(id=d.id + "/dup", text=d.text, source=d.source, licence=d.licence) for d in docs[:20]]


@pytest.mark.parametrize("workers,piece_cache", [(1, True), (2, True), (2, False)])
def test_streamed_build_equals_former_build(big_corpus, tokenizer, tmp_path, monkeypatch, workers, piece_cache):
    monkeypatch.setattr(corpus_stream, "CHUNK_BYTES", 4096)  # dozens of chunks, so the pool is used
    index = build_index(iter(big_corpus), tokenizer, tmp_path / "sa", tokenize_workers=workers, piece_cache=piece_cache,
                        backend="suffix_array")
    want = _former_build(big_corpus, tokenizer)
    for name, arr in want.items():
        got = np.load(index.path / name)
        assert got.dtype == arr.dtype or name in ("doc_starts.npy", "unigram.npy", "text_offsets.npy"), name
        assert np.array_equal(got, arr), name
    assert (index.path / "texts.bin").read_bytes() == b"".join(d.text.encode() for d in big_corpus)
    # written as the ids come, byte for byte what one json.dumps of the whole list gives
    assert (index.path / "ids.json").read_text(encoding="utf-8") == json.dumps([d.id for d in big_corpus],
                                                                               ensure_ascii=False)
    assert not (index.path / corpus_stream.TOKENS_FILE).exists()


def test_seen_ids_finds_the_first_repeat_across_chunks_and_merges():
    seen = corpus_stream.SeenIds(earlier=lambda: ids)
    ids = [f"doc/{i}" for i in range(50_000)] + ["Psalm 23 — ünïcode"]
    for a in range(0, len(ids), 997):
        assert seen.add(ids[a:a + 997]) is None
    assert seen.n == len(ids) == sum(len(r) for r in seen.runs)
    assert len(seen.runs) <= 8  # merged: ~log2 of 52 chunks, not one run a chunk
    assert all((np.diff(r.astype(np.float64)) >= 0).all() for r in seen.runs)
    assert seen.add(["new/1", "doc/123", "Psalm 23 — ünïcode"]) == "doc/123"
    assert seen.add(["new/2", "new/2"]) == "new/2"  # twice within one call
    assert seen.add(["new/3"]) is None


def test_seen_ids_lets_a_hash_collision_pass(monkeypatch):
    monkeypatch.setattr(corpus_stream, "_hashes", lambda ids: np.zeros(len(ids), dtype=np.uint64))  # all collide
    written: list[str] = []
    seen = corpus_stream.SeenIds(earlier=lambda: written)
    for chunk in (["a", "b"], ["c"], ["d", "e"]):
        assert seen.add(chunk) is None
        written += chunk
    assert seen.add(["f", "b"]) == "b"
    assert seen.add(["g", "g"]) == "g"


def test_repeated_id_in_a_later_chunk_is_named(big_corpus, tokenizer, tmp_path, monkeypatch):
    from memlab.errors import MemlabError

    monkeypatch.setattr(corpus_stream, "CHUNK_BYTES", 4096)
    docs = big_corpus + [type(big_corpus[0])(id=big_corpus[5].id, text="another text", source="x", licence="x")]
    with pytest.raises(MemlabError, match=f"not unique \\({big_corpus[5].id!r} comes twice\\)"):
        build_index(iter(docs), tokenizer, tmp_path / "ix", tokenize_workers=2, backend="suffix_array")
    assert not (tmp_path / "ix").exists()


def test_same_corpus_gives_byte_identical_index(big_corpus, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_stream, "CHUNK_BYTES", 4096)
    a = build_index(big_corpus, tokenizer, tmp_path / "a", tokenize_workers=2, backend="suffix_array")
    b = build_index(big_corpus, tokenizer, tmp_path / "b", tokenize_workers=1, backend="suffix_array")
    files = sorted(p.name for p in a.path.iterdir())
    assert files == sorted(p.name for p in b.path.iterdir())
    for name in files:
        if name != "meta.json":
            assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), name
    drop = lambda m: {k: v for k, v in m.items() if k != "build_seconds"}  # noqa: E731
    assert drop(a.meta) == drop(b.meta)


def test_infini_gram_token_shards_answer_like_the_suffix_array(big_corpus, tokenizer, tmp_path):
    sa = build_index(big_corpus, tokenizer, tmp_path / "sa", backend="suffix_array")
    ig = build_index(iter(big_corpus), tokenizer, tmp_path / "ig", backend="infini_gram", shard_tokens=3000)
    # more than 10 shards: the engine opens tokenized.10 before tokenized.2, and document order must survive
    assert len(ig.meta["docs_per_shard"]) > 10 and sum(ig.meta["docs_per_shard"]) == len(big_corpus)
    toks = [list(map(int, t)) for t in encode_texts(tokenizer, [d.text for d in big_corpus])]
    rng = random.Random(0)
    for _ in range(40):
        t = rng.choice(toks)
        a = rng.randrange(len(t))
        q = t[a:a + rng.randint(1, 8)]
        assert ig.count(q) == sa.count(q)
        assert ig.occurrences(q, cap=5, max_scan=10**6) == sa.occurrences(q, cap=5, max_scan=10**6)
    g = toks[7][:30] + [5, 6] + toks[100][10:40]
    assert ig.longest_matches(g).tolist() == sa.longest_matches(g).tolist()
    assert ig.doc_text(123) == big_corpus[123].text


def test_infini_gram_build_equals_its_own_indexer(tokenizer, tmp_path):
    """Our tables (one divsufsort pass per shard, shards side by side) are byte for byte the ones
    ``infini_gram.indexing`` writes from the same token files (its Rust make-part/merge/concat, one CPU)."""
    import shutil
    import subprocess
    import sys

    docs = make_corpus(n_docs=1500, seed=5)
    docs += [type(d)(id=d.id + "/dup", text=d.text, source=d.source, licence=d.licence) for d in docs[:50]]
    ig = build_index(iter(docs), tokenizer, tmp_path / "ig", backend="infini_gram", shard_tokens=60_000)
    shards = len(ig.meta["docs_per_shard"])
    assert shards >= 3
    ref = tmp_path / "ref"
    ref.mkdir()
    for s in range(shards):
        shutil.copy(ig.path / f"tokenized.{s}", ref / f"tokenized.{s}")
        shutil.copy(ig.path / f"offset.{s}", ref / f"offset.{s}")
    run = subprocess.run([sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(ref), "--save_dir", str(ref),
                          "--token_dtype", ig.meta["token_dtype"], "--shards", str(shards), "--cpus", "1",
                          "--mem", "1", "--ulimit", "20000"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-500:]
    for s in range(shards):
        assert (ig.path / f"table.{s}").read_bytes() == (ref / f"table.{s}").read_bytes(), s


@pytest.mark.parametrize("word", ["table", "tokenized", "metadata"])
def test_infini_gram_path_the_engine_cannot_open_is_one_line(big_corpus, tokenizer, tmp_path, word):
    """The engine picks files by substring of their path and crashes on these words: refused before building."""
    from memlab.errors import MemlabError

    with pytest.raises(MemlabError, match=f"path contains '{word}'.*move the index") as err:
        build_index(big_corpus, tokenizer, tmp_path / f"my_{word}s" / "ig", backend="infini_gram")
    assert "\n" not in str(err.value)
    assert not (tmp_path / f"my_{word}s" / "ig").exists()


def test_shards_are_cut_while_tokenizing_at_shard_tokens(big_corpus, tokenizer, tmp_path, monkeypatch):
    """A shard is the documents up to the one that brings it to shard_tokens tokens (separators counted), the last
    shard the rest, whatever the chunking; they are cut (and sorted) while later chunks are still being tokenized."""
    from memlab.methods.trace.index.kinds import infini_gram

    monkeypatch.setattr(corpus_stream, "CHUNK_BYTES", 4096)
    cuts_during: list[int] = []
    real_written = infini_gram.ShardStream.written

    def written(self, tokens_file, lengths):
        real_written(self, tokens_file, lengths)
        cuts_during.append(len(self.docs_per_shard))
    monkeypatch.setattr(infini_gram.ShardStream, "written", written)
    shard_tokens = 5000
    ig = build_index(iter(big_corpus), tokenizer, tmp_path / "ig", backend="infini_gram", shard_tokens=shard_tokens)
    sizes = [len(t) + 1 for t in encode_texts(tokenizer, [d.text for d in big_corpus])]
    want, n, acc = [], 0, 0
    for size in sizes:
        n, acc = n + 1, acc + size
        if acc >= shard_tokens:
            want.append(n)
            n, acc = 0, 0
    want += [n] if n else []
    assert ig.meta["docs_per_shard"] == want and len(want) > 3
    assert 0 < cuts_during[len(cuts_during) // 2] < len(want)  # half way through the chunks, shards were cut


@pytest.mark.parametrize("backend,options", [("suffix_array", {}), ("infini_gram", {"shard_tokens": 2000})])
def test_failed_stream_leaves_nothing_behind(big_corpus, tokenizer, tmp_path, monkeypatch, backend, options):
    from memlab.data.records import Document
    from memlab.errors import MemlabError

    monkeypatch.setattr(corpus_stream, "CHUNK_BYTES", 4096)  # shards cut (and sorting) before the bad document
    bad = big_corpus[:250] + [Document(id="late", text=" ", source="x", licence="x")]
    with pytest.raises(MemlabError, match="'late' is empty"):
        build_index(iter(bad), tokenizer, tmp_path / "ix", backend=backend, **options)
    assert not (tmp_path / "ix").exists() and not (tmp_path / "ix.tmp").exists()
