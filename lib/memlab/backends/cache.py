"""Response cache at the backend boundary: sqlite (WAL), one row per finished sample or scored text.

Key = sha256 of the JSON of (the model: its id and weights revision, or the backend's ``weights_key`` in their place
when it has one, so a local model is keyed by its files' content, not by the name it is reached under; the backend's
``numerics`` when set (the HF weight dtype and KV cache) together with the numeric profile the process computes under
(``numerics.active()``: ``pinned``, ``native``, ...; so a native run's answers are never reused by a pinned run, nor
the reverse), for a served model its identity (backend kind, normalized base_url, the server's own description of the
model and what it reports about how it computes, see identity.py; the server's numeric profile is its own and not in
the key), method, every request field incl. ``seed``, sample index) — for ``score``: (the model, numerics, served
identity, "score", text, plus the backend's ``score_variant`` when it has one, e.g. approximate
Min-K%++ statistics). ``n`` is left out of the generation key on purpose: sample ``i`` does not depend on ``n`` (see
base.py), so asking for 10 samples after 5 reuses the first 5. Greedy requests store only sample 0 (all greedy
samples are equal).

Every sample is written and committed the moment the wrapped backend reports it finished (an HF batch, one
API call), so a run killed with SIGKILL and rerun recomputes only what had not finished.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from memlab.backends.base import Backend, Generation, GenerationRequest, Message, Sample, TokenScores
from memlab.backends.jobs import SampleJob, SampleResult, assemble, effective_index, expand
from memlab.errors import MemlabError
from memlab.progress import Progress

_FALLBACK_CHUNK = 16  # requests per commit for wrapped backends that can't report samples one by one


def _digest(payload: dict) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedBackend(Backend):
    """Wraps any :class:`Backend`; same interface; ``Generation.cached`` is True when every sample of a
    request came from the cache. ``hits`` / ``misses`` count samples and scored texts."""

    def __init__(self, inner: Backend, path: str | Path):
        super().__init__()
        self.inner = inner
        self.model_id, self.revision, self.numerics = inner.model_id, inner.revision, inner.numerics
        self.weights_key = inner.weights_key
        self._model = ({"weights": inner.weights_key} if inner.weights_key
                       else {"model": inner.model_id, "revision": inner.revision})
        self.has_chat_template, self.chat_only = inner.has_chat_template, inner.chat_only
        self.usage = inner.usage  # real calls only: cache hits cost nothing
        self.hits = self.misses = 0
        from memlab import numerics

        self.numerics_profile = numerics.active()  # the process's profile (pinned at import), for the HF keys
        self.path = Path(path)
        if self.path.is_dir():
            raise MemlabError(f"cache.path {self.path} is a directory, not a cache file; point cache.path at a file "
                              "(e.g. <folder>/responses.sqlite), or run with cache=null")
        self._lock = threading.Lock()
        self._told_deleted = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _open(self.path)
        except sqlite3.DatabaseError as err:
            if not _is_corrupt(err):  # disk full, I/O error, read-only, locked: the file is not at fault
                raise _unusable(self.path, err) from None
            self._move_aside(err)
            self._db = _open(self.path)
        except OSError as err:
            raise _unusable(self.path, err) from None
        self._inode = _inode(self.path)

    def _move_aside(self, err: sqlite3.DatabaseError) -> None:
        """Garbage, a truncated file, a text file: keep it for inspection, start an empty cache, say so."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        self.path.replace(aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        print(f"memlab: warning: response cache {self.path} is not a usable sqlite database ({err}); moved it "
              f"to {aside.name} and started an empty cache (delete it, or run with cache=null to bypass the "
              "cache)", file=sys.stderr)

    def _same_file(self) -> None:
        """A cache file deleted (or replaced) during the run: reopen one at the path, so what is fetched from
        now on is kept, and say so once. Called with self._lock held."""
        if _inode(self.path) == self._inode:
            return
        self._db.close()
        self._db = _open(self.path)
        self._inode = _inode(self.path)
        if not self._told_deleted:
            self._told_deleted = True
            print(f"memlab: warning: response cache {self.path} was deleted or replaced during the run; answers "
                  "from now on go to a new cache file there (those cached before are gone)", file=sys.stderr)

    def __getattr__(self, name: str) -> Any:
        # .tokenizer, .model, .score_token_ids, ... of the wrapped backend
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    # ---- keys and storage ----------------------------------------------------------------------------------
    def generation_key(self, request: GenerationRequest, index: int) -> str:
        fields = request.to_key_dict()
        fields.pop("n")
        return _digest({**self._model, **self._numerics(), "method": "generate", "request": fields,
                        "sample": effective_index(request, index)})

    def score_key(self, text: str, vocab: bool = True) -> str:
        payload = {**self._model, **self._numerics(), "method": "score", "text": text}
        if not vocab:   # log-probs without Min-K%++'s statistics: never served where the statistics are wanted
            payload["vocab"] = False
        variant = getattr(self.inner, "score_variant", None)
        if variant:  # e.g. Min-K%++ statistics approximated from top-k log-probs: never mixed with exact ones
            payload["variant"] = variant
        return _digest(payload)

    def _numerics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"numerics": self.numerics} if self.numerics else {}
        identity = getattr(self.inner, "cache_identity", None)
        if callable(identity):  # served models: never shared across servers or the models they load
            out["served"] = identity()
        elif self.numerics:  # computed here (HF): the numeric profile decides the kernels, so the bits
            out["numerics_profile"] = self.numerics_profile
        return out

    def _get_many(self, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            self._same_file()
            for start in range(0, len(uniq), 500):
                part = uniq[start:start + 500]
                rows = self._db.execute(f"SELECT key, value FROM responses WHERE key IN ({','.join('?' * len(part))})",
                                        part).fetchall()
                found.update(rows)
        return found

    def _put(self, key: str, method: str, value: str) -> None:
        with self._lock:
            self._same_file()
            self._db.execute("INSERT OR REPLACE INTO responses (key, method, value) VALUES (?, ?, ?)",
                             (key, method, value))

    # ---- generation ----------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest], *, progress: bool = False) -> list[Generation]:
        jobs = expand(requests)
        keys = [self.generation_key(j.request, j.index) for j in jobs]
        found = self._get_many(keys)
        results: dict[SampleJob, SampleResult] = {}
        cached: dict[SampleJob, bool] = {}
        missing: list[int] = []
        for k, (job, key) in enumerate(zip(jobs, keys)):
            if key in found:
                results[job], cached[job] = _decode_sample(found[key]), True
            else:
                missing.append(k)
        self.hits += len(jobs) - len(missing)
        self.misses += len(missing)
        with Progress(f"generate {self.model_id}", total=len(jobs)) as bar:
            bar.advance(len(jobs) - len(missing), hits=len(jobs) - len(missing))
            if missing:
                miss_jobs = [jobs[k] for k in missing]

                def on_done(pos: int, res: SampleResult) -> None:
                    self._put(keys[missing[pos]], "generate", _encode_sample(res))
                    bar.advance(1, requests=1)

                if _accepts(getattr(self.inner, "generate_samples", None), "on_done"):
                    computed = self.inner.generate_samples(miss_jobs, progress=progress, on_done=on_done)
                    results.update(zip(miss_jobs, computed))
                else:
                    results.update(self._generate_fallback(miss_jobs, progress))
        return assemble(requests, results, cached)

    def _generate_fallback(self, jobs: Sequence[SampleJob], progress: bool) -> dict[SampleJob, SampleResult]:
        """For wrapped backends without ``generate_samples``: whole requests, committed per chunk."""
        reqs = list(dict.fromkeys(j.request for j in jobs))
        out: dict[SampleJob, SampleResult] = {}
        for start in range(0, len(reqs), _FALLBACK_CHUNK):
            chunk = reqs[start:start + _FALLBACK_CHUNK]
            for rq, gen in zip(chunk, self.inner.generate(chunk, progress=progress)):
                for i, sample in enumerate(gen.samples):
                    res = SampleResult(sample, gen.prompt_tokens, gen.completion_tokens // max(1, len(gen.samples)))
                    job = SampleJob(rq, effective_index(rq, i))
                    out[job] = res
                    self._put(self.generation_key(rq, i), "generate", _encode_sample(res))
        return out

    # ---- scoring -------------------------------------------------------------------------------------------
    def score(self, texts: Sequence[str], *, progress: bool = False, vocab: bool = True) -> list[TokenScores]:
        keys = [self.score_key(t, vocab) for t in texts]
        found = self._get_many(keys)
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        scored: dict[str, TokenScores] = {}
        with Progress(f"score {self.model_id}", total=len(texts)) as bar:  # `with`: the last count is always sent
            bar.advance(len(texts) - len(todo), hits=len(texts) - len(todo))
            if todo:
                def on_done(pos: int, res: TokenScores) -> None:
                    self._put(self.score_key(todo[pos], vocab), "score", _encode_scores(res))
                    bar.advance(1, requests=1)

                inner = self.inner.score
                lean = {} if vocab or not _accepts(inner, "vocab") else {"vocab": False}
                if _accepts(inner, "on_done"):
                    scored.update(zip(todo, inner(todo, progress=progress, on_done=on_done, **lean)))
                else:
                    for start in range(0, len(todo), _FALLBACK_CHUNK):
                        chunk = todo[start:start + _FALLBACK_CHUNK]
                        for text, res in zip(chunk, inner(chunk, progress=progress, **lean)):
                            scored[text] = res
                            self._put(self.score_key(text, vocab), "score", _encode_scores(res))
        return [scored[t] if t in scored else _decode_scores(found[k]) for t, k in zip(texts, keys)]

    def render_chat(self, messages: Sequence[Message]) -> str:
        return self.inner.render_chat(messages)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self.inner.close()


def _open(path: Path) -> sqlite3.Connection:
    """Open (or create) the cache; sqlite3.DatabaseError if the file is not a healthy sqlite database."""
    # autocommit (isolation_level=None): each INSERT is its own committed transaction
    db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process
        db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, method TEXT NOT NULL, "
                   "value TEXT NOT NULL)")
        (verdict,) = db.execute("PRAGMA quick_check").fetchone()  # a truncated file opens but is not whole
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {verdict}")
        db.execute("SELECT COUNT(*) FROM responses").fetchone()
        _mark_key_version(db, path)
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


# 4: local HF models keyed by their content (weights_key), not their name;
# 3: HF keys hold the numeric profile, served keys what the server reports about how it computes (issue 50);
# 2: served models keyed by their identity (issue 33); 1 (no meta row): by model_id alone
KEY_VERSION = "4"


def _mark_key_version(db: sqlite3.Connection, path: Path) -> None:
    """A cache written before key version 2 keyed served models' answers by the preset's model_id alone, one
    before version 3 HF answers without the numeric profile and served answers without the server's settings:
    those rows are never reused (their keys can't be rebuilt from a hash). Said once, then the file is marked."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = db.execute("SELECT value FROM meta WHERE name = 'key_version'").fetchone()
    if row is None or row[0] != KEY_VERSION:
        (n_rows,) = db.execute("SELECT COUNT(*) FROM responses").fetchone()
        if n_rows:
            print(f"memlab: note: response cache {path} predates key version {KEY_VERSION} (local models "
                  "keyed by their files' content): answers cached there before are not reused; delete the "
                  "file to reclaim the space", file=sys.stderr)
        db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('key_version', ?)", (KEY_VERSION,))


_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def _is_corrupt(err: sqlite3.DatabaseError) -> bool:
    """The file's content is at fault (not the disk, the permissions or another process)."""
    code = getattr(err, "sqlite_errorcode", None)
    return (code is None and not isinstance(err, sqlite3.OperationalError)) or (code or 0) & 0xFF in _CORRUPT_CODES


def _unusable(path: Path, err: BaseException) -> MemlabError:
    code = getattr(err, "sqlite_errorcode", None)
    full = (code is not None and code & 0xFF == 13) or getattr(err, "errno", None) == errno.ENOSPC
    if full:
        return MemlabError(f"disk full: cannot open the response cache {path} (its file is untouched); free space "
                           "on that disk, or point cache.path elsewhere, or run with cache=null")
    return MemlabError(f"cannot open the response cache {path}: {str(err).strip().splitlines()[0]} (its file is "
                       "untouched); check the folder's permissions and free space, or run with cache=null")


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _accepts(fn, keyword: str) -> bool:
    try:
        return fn is not None and keyword in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _encode_sample(res: SampleResult) -> str:
    s = res.sample
    return json.dumps({"text": s.text, "token_ids": s.token_ids, "finish_reason": s.finish_reason,
                       "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens},
                      ensure_ascii=False)


def _decode_sample(value: str) -> SampleResult:
    d = json.loads(value)
    return SampleResult(Sample(d["text"], d["token_ids"], d["finish_reason"]), d["prompt_tokens"],
                        d["completion_tokens"])


def _encode_scores(s: TokenScores) -> str:
    # NaN (position 0) is written as the JSON extension NaN, which json.loads reads back
    return json.dumps({"token_ids": s.token_ids, "logprobs": s.logprobs, "vocab_mean": s.vocab_mean,
                       "vocab_std": s.vocab_std})


def _decode_scores(value: str) -> TokenScores:
    d = json.loads(value)
    return TokenScores(d["token_ids"], d["logprobs"], d["vocab_mean"], d["vocab_std"])
