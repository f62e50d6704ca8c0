"""Benchmark SimpleTrace (issue 4): span extraction speed and index build throughput.

Corpus: the offline corpora (KJV, Wikipedia sample, English + German fortunes, Python stdlib) topped up with
the ``.py`` sources of the installed ``transformers`` package until ``target_tokens`` tokens (10 M; with ``quick``
0.1 M, 20 generations and a smaller tokenizer sample), tokenized with a byte-level BPE (vocab 4096) trained on a
2 MB sample. 2 % of the documents are
held out of the index.

Generations (``n_generations`` × ``gen_tokens``, 1,000 × 256): half are near-verbatim copies of indexed text
(a random window, each token replaced by a random id with probability 1/40 — long spans broken by edits),
half are windows of held-out documents (ordinary text: short spans only).

Measured side by side (ratios are what matter on this shared machine):
* ``ours``: :meth:`SuffixArrayIndex.longest_matches` (the bound from the previous start + LCP walk);
* ``naive``: per-start narrowing from the whole suffix array (:meth:`longest_matches_naive`), on a
  subset of generations (results checked equal to ours), extrapolated per generation;
* ``infini_gram_attribute``: ``InfiniGramEngine.attribute`` (OLMoTrace's primitive, C++) on the same
  corpus and generations (it also returns documents; we time it as the closest public equivalent);
* ``simpletrace``: our full steps 1–4 (spans, rarity filter, documents, merge, nv statistics) per generation;
* tokenization alone, one thread, side by side on the indexed documents: the fast tokenizer's batch call
  against the pre-token cache the builds use (:mod:`memlab.methods.trace.index.piece_cache`, compiled with numba;
  the cache starting empty), ids checked equal;
* index build MB/s (text bytes / build seconds, tokenization excluded and included; and per CPU second,
  which a busy shared machine does not change much) for both backends, each build in its own subprocess
  so its peak memory is its own: the build process's peak RSS (VmHWM), the largest helper's
  ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (an upper bound: it includes the RSS the helper was started
  from) and the peak summed RSS of all the build's processes; the suffix-array build also with one
  tokenizer process, to show what the worker processes buy, and without the pre-token cache, to show what
  it buys;
* infini-gram tables side by side on the same token files: ``infini_gram.indexing`` (Rust make-part / merge /
  concat) against ours (one divsufsort pass a shard), wall and CPU seconds, tables checked byte-identical;
* the same builds on a ~``BIG_CORPUS_MB`` MB corpus (full run only): seeded shuffles of the indexed
  documents' lines, so it is not trivially repeated, generated into the temp dir at bench time; infini-gram
  in shards of ``BIG_SHARD_TOKENS`` tokens (its peak memory is bounded by the shard, not the corpus);
* memory flat in corpus size (full run only): infini-gram builds of the 28 MB corpus, the first half of the big one
  and the big one, in shards of the same ``FLAT_SHARD_TOKENS`` tokens, and their peak RSS. The 28 MB build is
  over before two shards are sorted side by side, as they are in the steady state of the larger ones; from
  half to whole, what grows is what the build keeps per document (24 bytes, :mod:`.corpus_stream`).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BIG_CORPUS_MB = 300        # the "past RAM" case: peak RSS should not grow with it (full run only)
BIG_SHARD_TOKENS = 25_000_000  # infini-gram shard size for the big corpus
FLAT_SHARD_TOKENS = 5_000_000  # below the 28 MB corpus's ~10 M tokens: all corpora sorted in shards of one size
IG_MEM_GB = 4              # memory the infini-gram table sort may use (shards side by side)
RSS_POLL_S = 0.1           # sampling interval of a build's summed RSS


def _corpus(target_tokens: int, tok, encode):
    from memlab.data.corpora import load_corpus
    from memlab.data.records import Document

    docs = []
    for name, opts in (("kjv", {"unit": "chapter"}), ("wiki", {}), ("fortunes", {"lang": "en"}),
                       ("fortunes", {"lang": "de"}), ("stdlib", {})):
        try:
            docs += [d for d in load_corpus(name, **opts) if d.text.strip()]
        except Exception as err:  # a missing source shrinks the corpus; the top-up below compensates
            print(f"bench_trace: skipping corpus {name}: {err}")
    import transformers

    extra = sorted(Path(transformers.__file__).parent.rglob("*.py"))
    rng = random.Random(0)
    rng.shuffle(docs)
    ntok, out = 0, []
    for d in docs:
        if ntok >= target_tokens:
            break
        out.append(d)
        ntok += len(encode(d.text))
    for p in extra:
        if ntok >= target_tokens:
            break
        text = p.read_text(encoding="utf-8", errors="replace").replace("\ufffd", "?")
        if text.strip():
            out.append(Document(id=f"py/{p.name}/{len(out)}", text=text, source=str(p), licence="Apache-2.0"))
            ntok += len(encode(text))
    return out, ntok


def _write_jsonl(docs, path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": d.id, "text": d.text}, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path):
    """(id, text) pairs, one line at a time: the build streams them."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            yield rec["id"], rec["text"]


def _shuffled_copies(src: Path, dst: Path, target_mb: float) -> float:
    """Seeded copies of ``src`` (copy k: every document's lines shuffled with seed k, every fifth word
    swapped with its neighbour) until ``target_mb`` MB of text; returns the MB written."""
    written, k = 0, 0
    with dst.open("w", encoding="utf-8") as f:
        while written < target_mb * 1e6:
            k += 1
            rng = random.Random(k)
            for doc_id, text in _read_jsonl(src):
                lines = text.split("\n")
                rng.shuffle(lines)
                words = "\n".join(lines).split(" ")
                for i in range(rng.randrange(5), len(words) - 1, 5):
                    words[i], words[i + 1] = words[i + 1], words[i]
                text = " ".join(words)
                f.write(json.dumps({"id": f"{doc_id}#{k}", "text": text}, ensure_ascii=False) + "\n")
                written += len(text.encode("utf-8"))
                if written >= target_mb * 1e6:
                    break
    return written / 1e6


def _timed_build(corpus: Path, tok_dir: Path, out: Path, backend: str, **options) -> dict:
    """Build an index in a fresh subprocess (this file, ``build`` mode): its seconds, and the peak summed RSS
    of the build's processes (the build and its helpers: tokenizer workers, infini-gram's indexer), sampled
    every ``RSS_POLL_S`` seconds."""
    import psutil

    cmd = [sys.executable, __file__, "build", str(corpus), str(tok_dir), str(out), backend, json.dumps(options)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [root] + root.children(recursive=True)))
        except psutil.Error:  # a process ended between listing and reading it
            pass
        time.sleep(RSS_POLL_S)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"index build failed: {stderr.strip().splitlines()[-1:]}")
    return {**json.loads(stdout.strip().splitlines()[-1]), "peak_rss_all_processes_mb": round(peak / 2**20, 1)}


def _build_child(corpus: str, tok_dir: str, out: str, backend: str, options: str) -> None:
    from transformers import AutoTokenizer

    from memlab.methods.trace.index import build_index

    tok = AutoTokenizer.from_pretrained(tok_dir)
    before = resource.getrusage(resource.RUSAGE_SELF)  # imports and tokenizer loading are not the build
    t0 = time.perf_counter()
    ix = build_index(_read_jsonl(Path(corpus)), tok, out, backend=backend, **json.loads(options))
    wall = time.perf_counter() - t0
    mb = ix.meta["text_bytes"] / 1e6
    kb = 1024  # ru_maxrss is in KiB on Linux
    me, helpers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime  # CPU time: what a busy machine can't steal
           + helpers.ru_utime + helpers.ru_stime)
    print(json.dumps({
        "text_mb": round(mb, 2), "tokens": ix.n_tokens, "seconds": round(wall, 2),
        "mb_per_s_incl_tokenize": round(mb / wall, 2),
        "mb_per_s_tokenize": round(mb / ix.meta["build_seconds"]["tokenize"], 2),
        "mb_per_s_index": round(mb / ix.meta["build_seconds"]["index"], 2),
        "cpu_seconds": round(cpu, 2), "mb_per_cpu_s": round(mb / cpu, 2),
        # ru_maxrss counts what a process held before exec (its parent's RSS when it was started), so the
        # build process's own peak is VmHWM; the helpers' ru_maxrss is an upper bound for the same reason
        "peak_rss_mb": round(_vm_hwm_kb() / kb, 1), "peak_rss_helper_max_mb": round(helpers.ru_maxrss / kb, 1)}))


def _tokenizers_side_by_side(texts: list[str], tok_dir: Path) -> dict:
    """One process, one thread: the fast tokenizer's batch call against the pre-token cache on the same texts
    (in chunks of the build's size, the cache starting empty), ids checked equal."""
    from tokenizers import Tokenizer

    from memlab.methods.trace.index.corpus_stream import _chunks
    from memlab.methods.trace.index.piece_cache import PieceCachedEncoder

    js = Tokenizer.from_file(str(tok_dir / "tokenizer.json")).to_str()
    tok = Tokenizer.from_str(js)
    chunks = [[t for _, t, _ in c] for c in _chunks((str(i), t) for i, t in enumerate(texts))]  # as the build cuts them
    t0 = time.perf_counter()
    want = [[e.ids for e in tok.encode_batch_fast(c, add_special_tokens=False)] for c in chunks]
    t_fast = time.perf_counter() - t0
    enc = PieceCachedEncoder(tok, js)
    t0 = time.perf_counter()
    got = [enc.encode_block(c, 0xFFFF, np.dtype(np.uint16)) for c in chunks]
    t_cached = time.perf_counter() - t0
    for w, (lengths, _) in zip(want, got):
        assert lengths.tolist() == [len(i) for i in w], "pre-token cache and tokenizer disagree"
    assert np.array_equal(np.concatenate([b for _, b in got]),
                          np.concatenate([np.concatenate([[0xFFFF], i]) for w in want for i in w]).astype(np.uint16))
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    return {"text_mb": round(mb, 2), "fast_tokenizer_mb_per_s": round(mb / t_fast, 2),
            "piece_cache_mb_per_s": round(mb / t_cached, 2), "speedup": round(t_fast / t_cached, 2),
            "distinct_pieces": len(enc)}


def _tables_side_by_side(index_dir: Path, work: Path) -> dict:
    """infini-gram tables for the same token files, side by side: ``infini_gram.indexing`` (its Rust make-part /
    merge / concat, on all cores) against our build (:func:`write_table`, one divsufsort pass a shard, shards side
    by side); wall and CPU seconds of each, tables checked byte-identical."""
    from concurrent.futures import ThreadPoolExecutor

    from memlab.methods.trace.index.corpus_stream import available_cores
    from memlab.methods.trace.index.kinds.infini_gram import write_table

    meta = json.loads((index_dir / "meta.json").read_text())
    names = [p.suffix[1:] for p in sorted(index_dir.glob("tokenized.*"))]
    ref, ours = work / "ref", work / "ours"
    for d in (ref, ours):
        d.mkdir()
        for s in names:
            shutil.copy(index_dir / f"tokenized.{s}", d / f"tokenized.{s}")
            shutil.copy(index_dir / f"offset.{s}", d / f"offset.{s}")
    width = {"u16": 2, "u32": 4}[meta["token_dtype"]]
    cpu0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(ref), "--save_dir", str(ref),
                    "--token_dtype", meta["token_dtype"], "--shards", str(len(names)), "--cpus",
                    str(available_cores()), "--mem", str(IG_MEM_GB), "--ulimit", "20000"],
                   check=True, capture_output=True)
    t_ref = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ref = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    me0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with ThreadPoolExecutor(min(available_cores(), len(names))) as pool:
        list(pool.map(lambda s: write_table(ours / f"tokenized.{s}", ours / f"table.{s}", width), names))
    t_ours = time.perf_counter() - t0
    me1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu_ours = me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime
    same = all((ref / f"table.{s}").read_bytes() == (ours / f"table.{s}").read_bytes() for s in names)
    shutil.rmtree(ref)
    shutil.rmtree(ours)
    return {"shards": len(names), "tables_identical": same, "infini_gram_indexing_s": round(t_ref, 2),
            "ours_s": round(t_ours, 2), "speedup": round(t_ref / t_ours, 2),
            "infini_gram_indexing_cpu_s": round(cpu_ref, 2), "ours_cpu_s": round(cpu_ours, 2),
            "cpu_ratio": round(cpu_ref / cpu_ours, 2)}


def _vm_hwm_kb() -> int:
    """Peak RSS of this process since its exec (KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _generations(index, held_ids, n, L, rng):
    T = index.T
    starts = index.doc_starts
    ends = np.append(starts[1:] - 1, len(T) - 1)
    long_docs = [i for i in range(index.n_docs) if ends[i] - starts[i] > L + 1]
    gens = []
    for k in range(n // 2):  # near-verbatim copies of indexed text
        d = rng.choice(long_docs)
        a = rng.randrange(int(starts[d]), int(ends[d]) - L)
        g = np.asarray(T[a:a + L], dtype=np.int64).copy()
        mask = np.array([rng.random() < 1 / 40 for _ in range(L)])
        g[mask] = [rng.randrange(index.meta["vocab_size"]) for _ in range(int(mask.sum()))]
        gens.append(g)
    held = [h for h in held_ids if len(h) > L]
    for k in range(n - n // 2):  # ordinary text that is not in the index
        h = rng.choice(held)
        a = rng.randrange(len(h) - L)
        gens.append(np.asarray(h[a:a + L], dtype=np.int64))
    return gens


def run(quick: bool = False) -> dict:
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoTokenizer

    from memlab.methods.trace.index import load_index
    from memlab.schema import method_config
    from memlab.models.tiny import train_tokenizer
    from memlab.data.corpora import load_corpus

    target = 100_000 if quick else 10_000_000
    n_gens = 20 if quick else 1000
    L = 256
    n_naive = 4 if quick else 100
    rng = random.Random(0)
    res: dict = {"quick": quick, "gen_tokens": L, "n_generations": n_gens}
    with tempfile.TemporaryDirectory(prefix="bench_trace_") as tmp:
        tmp = Path(tmp)
        sample = [d.text for d in load_corpus("kjv", unit="chapter")[:100 if quick else 400]] + \
                 [d.text for d in load_corpus("stdlib")[:15 if quick else 60]]
        train_tokenizer(sample, 4096, tmp / "tok")
        tok = AutoTokenizer.from_pretrained(str(tmp / "tok"))  # the one the build subprocesses load
        encode = lambda t: tok(t, add_special_tokens=False, verbose=False)["input_ids"]  # noqa: E731
        docs, ntok = _corpus(int(target * 1.03), tok, encode)  # 2 % are held out below
        rng.shuffle(docs)
        n_held = max(2, len(docs) // 50)
        if quick:  # a small corpus may hold out only short documents: hold out long ones (held-out generations need L)
            docs.sort(key=lambda d: len(encode(d.text)) <= L)  # stable: the shuffled order within each group
        held, indexed = docs[:n_held], docs[n_held:]
        held_ids = [encode(d.text) for d in held]

        tok_dir = tmp / "tok"
        indexed_file = tmp / "indexed.jsonl"
        _write_jsonl(indexed, indexed_file)
        res["tokenize_one_thread"] = _tokenizers_side_by_side([d.text for d in indexed], tok_dir)
        builds = {"sa": _timed_build(indexed_file, tok_dir, tmp / "sa", "suffix_array"),
                  "ig": _timed_build(indexed_file, tok_dir, tmp / "ig", "infini_gram", mem_gb=IG_MEM_GB)}
        if not quick:
            builds["sa_1_tokenizer_process"] = _timed_build(indexed_file, tok_dir, tmp / "sa1", "suffix_array",
                                                            tokenize_workers=1)
            shutil.rmtree(tmp / "sa1")
            builds["sa_no_piece_cache"] = _timed_build(indexed_file, tok_dir, tmp / "sa0", "suffix_array",
                                                       piece_cache=False)
            shutil.rmtree(tmp / "sa0")
        res["infini_gram_tables_side_by_side"] = _tables_side_by_side(tmp / "ig", tmp)
        sa, ig = load_index(tmp / "sa"), load_index(tmp / "ig")
        res.update(index_tokens=sa.n_tokens, index_docs=sa.n_docs, index_text_mb=round(sa.meta["text_bytes"] / 1e6, 2))
        res["sa_build_mb_per_s"] = builds["sa"]["mb_per_s_index"]
        res["sa_build_mb_per_s_incl_tokenize"] = builds["sa"]["mb_per_s_incl_tokenize"]
        res["infini_gram_build_mb_per_s"] = builds["ig"]["mb_per_s_index"]
        res["infini_gram_build_mb_per_s_incl_tokenize"] = builds["ig"]["mb_per_s_incl_tokenize"]
        if not quick:
            big = tmp / "big.jsonl"
            res["big_corpus_mb"] = round(_shuffled_copies(indexed_file, big, BIG_CORPUS_MB), 1)
            builds["big_sa"] = _timed_build(big, tok_dir, tmp / "big_sa", "suffix_array")
            shutil.rmtree(tmp / "big_sa")
            builds["big_ig"] = _timed_build(big, tok_dir, tmp / "big_ig", "infini_gram", mem_gb=IG_MEM_GB,
                                            shard_tokens=BIG_SHARD_TOKENS)
            shutil.rmtree(tmp / "big_ig")
            half = tmp / "half.jsonl"  # the first half of the big corpus (the same seeded copies, stopped at half)
            _shuffled_copies(indexed_file, half, BIG_CORPUS_MB / 2)
            for name, src in (("flat_ig_28mb", indexed_file), ("flat_ig_half", half), ("flat_ig_big", big)):
                builds[name] = _timed_build(src, tok_dir, tmp / name, "infini_gram", mem_gb=IG_MEM_GB,
                                            shard_tokens=FLAT_SHARD_TOKENS)
                shutil.rmtree(tmp / name)
            half.unlink()
            flat = [builds[n] for n in ("flat_ig_28mb", "flat_ig_half", "flat_ig_big")]
            res["flat_peak_rss_mb"] = [b["peak_rss_mb"] for b in flat]
            res["flat_peak_rss_growth_half_to_big_mb"] = round(flat[2]["peak_rss_mb"] - flat[1]["peak_rss_mb"], 1)
            big.unlink()
        res["builds"] = builds

        gens = _generations(sa, held_ids, n_gens, L, rng)

        t0 = time.perf_counter()
        ours = [sa.longest_matches(g) for g in gens]
        t_ours = time.perf_counter() - t0
        res["ours_s_per_gen"] = t_ours / n_gens
        res["ours_total_s"] = round(t_ours, 2)
        res["mean_longest_match_copies"] = float(np.mean([o.max() for o in ours[:n_gens // 2]]))
        res["mean_longest_match_heldout"] = float(np.mean([o.max() for o in ours[n_gens // 2:]]))

        # naive on a subset with the same mix (half copies, half held-out), timed per generation next to ours
        half = n_naive // 2
        sub = list(range(half)) + list(range(n_gens // 2, n_gens // 2 + n_naive - half))
        t_n, t_o = [], []
        for i in sub:
            t0 = time.perf_counter()
            nv = sa.longest_matches_naive(gens[i])
            t1 = time.perf_counter()
            sa.longest_matches(gens[i])
            t_o.append(time.perf_counter() - t1)
            t_n.append(t1 - t0)
            assert (nv == ours[i]).all(), "naive and ours disagree"
        res["naive_s_per_gen"] = float(np.mean(t_n))
        res["speedup_vs_naive"] = round(sum(t_n) / sum(t_o), 2)
        res["speedup_vs_naive_copies"] = round(sum(t_n[:half]) / sum(t_o[:half]), 2)
        res["speedup_vs_naive_heldout"] = round(sum(t_n[half:]) / sum(t_o[half:]), 2)

        t0 = time.perf_counter()
        for g in gens:
            ig.attribute(g.tolist(), min_len=1, max_cnt=10)
        t_attr = time.perf_counter() - t0
        res["infini_gram_attribute_s_per_gen"] = t_attr / n_gens
        res["ours_vs_infini_gram_attribute"] = round(t_attr / t_ours, 3)  # > 1: ours faster

        t0 = time.perf_counter()
        ig_ms = [ig.longest_matches(gens[i]) for i in sub]
        t_igms = time.perf_counter() - t0
        assert all((ig_ms[j] == ours[i]).all() for j, i in enumerate(sub)), "backends disagree"
        res["infini_gram_count_bound_s_per_gen"] = t_igms / len(sub)

        tracer = method_config("trace").tracer(sa, tok)  # the experiments' settings (conf/method/trace.yaml)
        texts = [tok.decode(g.tolist()) for g in gens[:: max(1, n_gens // 100)]]
        t0 = time.perf_counter()
        tracer.trace(texts)
        res["simpletrace_steps1to4_s_per_gen"] = (time.perf_counter() - t0) / len(texts)
        sa.close()
        ig.close()
    for k, v in list(res.items()):
        if isinstance(v, float):
            res[k] = round(v, 5)
    return res



if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        _build_child(*sys.argv[2:7])
    else:
        print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
