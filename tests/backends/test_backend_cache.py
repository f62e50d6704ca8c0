"""The sqlite response cache: hits, per-sample keys, score caching, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memlab.backends.base import Backend, Generation, GenerationRequest as Req, Sample
from memlab.backends.cache import CachedBackend
from memlab.backends.jobs import expand


def test_hits_keys_and_sample_reuse(micro_family, micro_backend, tmp_path):
    cache = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    p = " ".join(micro_family.members[0].text.split()[:10])
    greedy = Req(prompt=p, max_new_tokens=8, n=3)
    sampled = Req(prompt=p, max_new_tokens=8, temperature=1.0, n=2, seed=1)
    first = cache.generate([greedy, sampled])
    assert not any(g.cached for g in first) and cache.misses == 3  # greedy stores sample 0 only
    used = cache.usage.requests
    again = cache.generate([greedy, sampled])
    assert cache.usage.requests == used  # hits cost nothing
    assert all(g.cached for g in again) and [g.texts for g in again] == [g.texts for g in first]
    assert cache.hits == 3 and cache.misses == 3
    # more samples of the same request: samples 0, 1 come from the cache, only 2, 3 are computed
    more = cache.generate([sampled.with_n(4)])[0]
    assert more.texts[:2] == first[1].texts and not more.cached and cache.misses == 5
    assert more.texts == micro_backend.generate([sampled.with_n(4)])[0].texts
    # the seed is part of the key
    other = cache.generate([Req(prompt=p, max_new_tokens=8, temperature=1.0, n=2, seed=2)])[0]
    assert not other.cached and cache.misses == 7
    assert len(cache) == 7
    # a reopened cache (new process, same file) serves the same answers
    reopened = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    assert reopened.generate([sampled])[0].texts == first[1].texts and reopened.hits == 2



def test_weight_dtype_is_part_of_the_key(micro_family, micro_backend, tmp_path):
    """The same weights loaded in bf16 compute other answers: a cache filled in fp32 must not serve them."""
    from memlab.backends.factory import build_backend

    text = " ".join(micro_family.members[0].text.split()[:30])
    req = Req(prompt=" ".join(text.split()[:10]), max_new_tokens=8)
    fp32 = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    fp32.generate([req]), fp32.score([text])
    bf16 = CachedBackend(build_backend({**micro_family.model_cfg, "dtype": "bfloat16"}), tmp_path / "c.sqlite")
    assert (fp32.numerics, bf16.numerics) == ("float32/grouped-kv", "bfloat16/grouped-kv")  # the zoo's kv_cache: grouped
    got = bf16.score([text])[0]
    bf16.generate([req])
    assert bf16.hits == 0 and bf16.misses == 2 and len(bf16) == 4
    assert got.logprobs != fp32.score([text])[0].logprobs  # the answers do differ: a shared key would mix them


def test_one_checkpoint_under_two_names_shares_its_answers_and_other_weights_do_not(micro_family, micro_backend,
                                                                                    tmp_path):
    """A zoo family's epoch 0 is its parent's final model reached under another name (tiny-neox-pearl-m-e0 is
    tiny-neox-pearl_base-m-final): a local model is keyed by its files' content, so another name, or a copy of the
    folder elsewhere, is answered from the cache; another checkpoint's weights, or the same folder under a revision
    label the user gave (which names it, as a hub revision does), are keyed apart."""
    import shutil

    from memlab.backends.factory import build_backend

    text = " ".join(micro_family.members[0].text.split()[:30])
    req = Req(prompt=" ".join(text.split()[:10]), max_new_tokens=8, temperature=1.0, n=2, seed=3)
    db = tmp_path / "c.sqlite"
    first = CachedBackend(micro_backend, db)
    answers, scores = first.generate([req])[0].texts, first.score([text])[0].logprobs
    copy = shutil.copytree(micro_family.final_dir, tmp_path / "elsewhere" / "final")
    for cfg in ({**micro_family.model_cfg, "name": "tiny-neox-child-xs-e0"}, {**micro_family.model_cfg,
                                                                             "path": str(copy), "name": None}):
        again = CachedBackend(build_backend(cfg), db)
        assert again.model_id != first.model_id and again.weights_key == first.weights_key
        assert again.generate([req])[0].texts == answers
        assert np.array_equal(again.score([text])[0].logprobs, scores, equal_nan=True)   # the first token: nan
        assert (again.hits, again.misses) == (3, 0)
    earliest = micro_family.checkpoints[min(micro_family.checkpoints)]
    other = CachedBackend(build_backend({**micro_family.model_cfg, "path": str(earliest)}), db)
    labelled = CachedBackend(build_backend({**micro_family.model_cfg, "revision": "v1"}), db)
    assert labelled.weights_key is None and other.weights_key != first.weights_key
    for apart in (other, labelled):
        apart.generate([req]), apart.score([text])
        assert (apart.hits, apart.misses) == (0, 3)
    assert not np.array_equal(other.score([text])[0].logprobs, scores, equal_nan=True)   # they do answer otherwise


class _CrashingScorer(Backend):
    """Delegates to a real backend; raises after `crash_after` texts were reported finished."""

    def __init__(self, inner, crash_after: int | None):
        super().__init__()
        self.inner, self.crash_after, self.computed = inner, crash_after, []
        self.model_id, self.revision = inner.model_id, inner.revision

    def generate(self, requests, *, progress=False):
        return self.inner.generate(requests)

    def score(self, texts, *, progress=False, on_done=None):
        def report(k, res):
            if self.crash_after is not None and len(self.computed) >= self.crash_after:
                raise RuntimeError("simulated crash")
            on_done(k, res)
            self.computed.append(texts[k])
        return self.inner.score(texts, on_done=report)


def test_score_cache_resumes_after_crash(micro_family, micro_backend, tmp_path):
    texts = [d.text[:200] for d in micro_family.members + micro_family.nonmembers] + ["And Boaz"]
    crashing = _CrashingScorer(micro_backend, crash_after=5)  # batch size 4: dies inside the second batch
    with pytest.raises(RuntimeError, match="simulated crash"):
        CachedBackend(crashing, tmp_path / "s.sqlite").score(texts)
    done_before = list(crashing.computed)
    assert len(done_before) == 5
    resumed = _CrashingScorer(micro_backend, crash_after=None)
    cache = CachedBackend(resumed, tmp_path / "s.sqlite")
    got = cache.score(texts)
    assert sorted(resumed.computed) == sorted(set(texts) - set(done_before))
    want = micro_backend.score(texts)
    assert [s.token_ids for s in got] == [s.token_ids for s in want]
    flat = lambda ss: [lp for s in ss for lp in s.logprobs[1:]]  # noqa: E731
    assert flat(got) == pytest.approx(flat(want), abs=1e-5)
    assert all(s.vocab_std is not None for s in got)
    assert cache.score(texts[:2])[0].logprobs[1:] == got[0].logprobs[1:] and cache.hits == 5 + 2


class _Echo(Backend):
    """A backend without per-sample hooks (the cache's fallback path): echoes the prompt reversed."""

    model_id, revision = "echo", "v1"

    def __init__(self):
        super().__init__()
        self.calls = 0

    def generate(self, requests, *, progress=False):
        self.calls += len(requests)
        return [Generation([Sample(r.prompt[::-1] + str(i)) for i in range(r.n)], 1, r.n) for r in requests]


def test_score_progress_sends_its_last_count(micro_family, micro_backend, tmp_path, monkeypatch):
    """The runner's console gets "score … n/n" even when scoring ends within the progress throttle."""
    from memlab.progress import ENV

    log = tmp_path / "progress.jsonl"
    monkeypatch.setenv(ENV, str(log))
    texts = [d.text[:120] for d in micro_family.members[:3]]
    CachedBackend(micro_backend, tmp_path / "p.sqlite").score(texts)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["label"].startswith("score ") and (last["done"], last["total"], last["requests"]) == (3, 3, 3)


def test_wraps_any_backend(tmp_path):
    echo = _Echo()
    cache = CachedBackend(echo, tmp_path / "e.sqlite")
    reqs = [Req(prompt=f"p{i}", temperature=0.5, n=2) for i in range(20)]
    first = cache.generate(reqs)
    assert echo.calls == 20 and first[3].texts == ["3p0", "3p1"]
    assert [g.texts for g in cache.generate(reqs)] == [g.texts for g in first] and echo.calls == 20
    with pytest.raises(NotImplementedError):
        cache.score(["x"])


# ---- resume after SIGKILL ------------------------------------------------------------------------------------

_SCRIPT = r'''
import json, sys, time
import torch
torch.set_num_threads(1)
from memlab.backends.base import GenerationRequest
from memlab.backends.factory import build_backend

cfg, db, reqs_path, log_path, out_path, delay = sys.argv[1:7]
backend = build_backend(json.loads(cfg), {"name": "sqlite", "path": db})
requests = [GenerationRequest(**r) for r in json.load(open(reqs_path))]
real = backend.inner.generate_samples

def counted(jobs, progress=False, on_done=None):
    """Log the cache key of every sample the model really computed (after the cache committed it)."""
    def report(k, res):
        on_done(k, res)
        with open(log_path, "a") as f:
            f.write(backend.generation_key(jobs[k].request, jobs[k].index) + "\n")
        time.sleep(float(delay))  # slow enough for the parent to kill us mid-run
    return real(jobs, progress=progress, on_done=report)

backend.inner.generate_samples = counted
gens = backend.generate(requests)
json.dump([[[s.text, s.token_ids, s.finish_reason] for s in g.samples] for g in gens], open(out_path, "w"))
'''


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_resume_after_sigkill_repeats_no_finished_sample(micro_family, micro_backend, tmp_path):
    docs = micro_family.members + micro_family.nonmembers
    reqs = []
    for i in range(16):
        words = docs[i % len(docs)].text.split()
        p = " ".join(words[i: i + 6 + i % 5])
        reqs.append(Req(prompt=p, max_new_tokens=12) if i % 2 else
                    Req(prompt=p, max_new_tokens=12, temperature=1.0, n=2, seed=i))
    (tmp_path / "reqs.json").write_text(json.dumps([r.__dict__ for r in reqs]))
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)
    db = tmp_path / "cache.sqlite"
    cfg = json.dumps({**micro_family.model_cfg, "batch_size": 4})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "lib"),
                                                        os.environ.get("PYTHONPATH", "")])}

    def start(log: str, out: str, delay: str):
        err = open(tmp_path / f"{log}.stderr", "w")  # a file, not a pipe: a full pipe would block the child
        return subprocess.Popen([sys.executable, str(script), cfg, str(db), str(tmp_path / "reqs.json"),
                                 str(tmp_path / log), str(tmp_path / out), delay], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)

    def stderr(log: str) -> str:
        return (tmp_path / f"{log}.stderr").read_text()[-2000:]

    keyer = CachedBackend(micro_backend, tmp_path / "keys-only.sqlite")
    all_keys = {keyer.generation_key(j.request, j.index) for j in expand(reqs)}
    assert len(all_keys) == 8 + 16  # 8 greedy requests (1 sample each) + 8 sampled x 2

    proc = start("log1", "out1.json", "0.15")
    deadline = time.monotonic() + 120
    while len(_lines(tmp_path / "log1")) < 6:
        assert proc.poll() is None, stderr("log1")
        assert time.monotonic() < deadline, "the cached run never got going"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (tmp_path / "out1.json").exists()
    with sqlite3.connect(db) as con:
        committed = {k for (k,) in con.execute("SELECT key FROM responses")}
    assert set(_lines(tmp_path / "log1")) <= committed  # every logged sample had been committed
    assert 6 <= len(committed) < len(all_keys)

    proc = start("log2", "out2.json", "0")
    assert proc.wait(timeout=300) == 0, stderr("log2")
    recomputed = _lines(tmp_path / "log2")
    assert not set(recomputed) & committed  # no finished sample computed twice
    assert sorted(recomputed) == sorted(all_keys - committed)

    uninterrupted = micro_backend.generate(reqs)
    resumed = json.loads((tmp_path / "out2.json").read_text())
    assert resumed == [[[s.text, s.token_ids, s.finish_reason] for s in g.samples] for g in uninterrupted]

    # a third run (here in-process, same file) computes nothing
    third = CachedBackend(micro_backend, db)
    gens = third.generate(reqs)
    assert third.misses == 0 and all(g.cached for g in gens)
    assert [[[s.text, s.token_ids, s.finish_reason] for s in g.samples] for g in gens] == resumed


def test_a_loss_only_score_is_the_same_log_probs_and_never_served_for_min_k_pp(micro_family, micro_backend, tmp_path):
    """``score(vocab=False)`` (the audit's reference model: only its loss is read) leaves out Min-K%++'s statistics
    and keeps every log-prob's bits; the cache keeps it apart, so a later full request computes the statistics
    rather than getting None from the lean entry."""
    texts = [d.text[:300] for d in micro_family.members[:3]]
    lean = micro_backend.score(texts, vocab=False)
    full = micro_backend.score(texts)
    assert all(s.vocab_mean is None and s.vocab_std is None for s in lean)
    assert [s.logprobs for s in lean] == [s.logprobs for s in full] and all(s.vocab_std for s in full)
    cache = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    assert [s.logprobs for s in cache.score(texts, vocab=False)] == [s.logprobs for s in lean]
    got = cache.score(texts)
    assert cache.hits == 0 and all(s.vocab_std is not None for s in got)
    assert [s.vocab_mean for s in got] == [s.vocab_mean for s in full]
    assert cache.score(texts, vocab=False)[0].vocab_mean is None and cache.hits == 3
