"""The RECAP loop and its baselines, one event record at a time, resumable (seed 000 §3, §4.2).

Per event (all target calls greedy, temperature 0):

1. **Prefix-probing**: ``prefix_probe.txt`` (book title, N = words of the reference, the opening line).
2. **DSP**: the extraction prompt built from the event metadata (the dynamic soft prompt).
3. **Verifier** on the DSP output; if blocked → **Jailbreaker** prompt, verified again.
   **DSP + Jailbreak** = the jailbreak output when DSP was blocked, else the DSP output.
4. **RECAP** = DSP + Jailbreak, then the feedback loop: stop at once if the score > ``stop_score`` (0.95);
   else up to ``max_rounds`` (5) rounds of feedback → re-attempt → verify; an attempt is accepted only if
   it beats the best so far by > ``min_gain`` (0.02); with ``stop_on_no_gain`` the loop ends at the first
   round without an accepted attempt (paper §3.5). Optional memorization-score filter: events whose hybrid
   score (``memscore.py``) is below ``filter_threshold`` are not refined.

Score = ROUGE-L of (reference = event text after its opening line, candidate = output), ``score_variant``
(the YAML's "recall", stemmed word tokens: the authors' choice); both recall and F1 are stored.

The four methods share calls (the ladder of the paper): DSP's output is DSP + JB's starting point, which
is RECAP's. So one run yields all four results, and each method's cost is counted cumulatively.

Resume: an event's record is appended to ``events.jsonl`` (flushed + fsynced) as soon as it is done; a rerun
skips recorded events and, through the backend's response cache, re-reads every target call of a half-done
chunk instead of recomputing it. Events are processed in chunks of ``batch_events`` so the backend can batch.
A failing target call (timeout, server error) marks the chunk's events ``status: error`` (logged, saved) and
the run goes on; a rerun retries them.

Copyright-safe redaction: for books whose category is in ``redact_categories`` the record holds scores,
passage spans (token positions in the reference), lengths and SHA-256 hashes, never output, feedback or
metadata text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from tqdm.auto import tqdm

from memlab.data.echotrace import Book, Event
from memlab.metrics.passages import count_passages
from memlab.metrics.rouge import rouge_l, word_tokens
from memlab.methods.recap.agents import FeedbackAgent, Jailbreaker, VerbatimVerifier
from memlab.methods.recap.extraction import ExtractionAgent, event_fields
from memlab.methods.recap.memscore import hybrid_score
from memlab.methods.recap.text import content_overlap, leaked_ngrams
from memlab.schema import check

log = logging.getLogger(__name__)

METHODS = ("prefix", "dsp", "dsp_jb", "recap")


@dataclass(frozen=True)
class RecapSettings:
    """``method.recap`` (conf/method/recap.yaml): the loop's settings; every value lives in the YAML."""

    max_rounds: int = field(metadata=check(ge=0))          # feedback rounds (paper: 5)
    stop_score: float = field(metadata=check(ge=0, le=1))  # no feedback once the score exceeds this
    min_gain: float = field(metadata=check(ge=0, le=1))    # an attempt is accepted only above best + min_gain
    stop_on_no_gain: bool
    score_variant: str = field(metadata=check(choices=("recall", "f1")))
    stem: bool
    passage_tokens: int = field(metadata=check(ge=1))
    tolerances: tuple[int, ...] = field(metadata=check(ge=0, nonempty=True))
    batch_events: int = field(metadata=check(ge=1))
    filter_threshold: float | None = field(metadata=check(ge=0, le=1))   # null = refine every event
    redact_categories: tuple[str, ...]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResultStore:
    """Append-only JSONL of event records, keyed by (target, book, event); the last record of a key wins."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: dict[tuple[str, str, str], dict] = {}
        if self.path.is_file():
            with self.path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        r = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by a kill: the event is simply redone
                        log.warning("%s:%d is truncated; that event will be redone", self.path, n)
                        continue
                    self.records[(r["target"], r["book_id"], r["event_id"])] = r

    def done(self, target: str, book_id: str, event_id: str) -> bool:
        r = self.records.get((target, book_id, event_id))
        return r is not None and r.get("status") == "ok"

    def add(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[(record["target"], record["book_id"], record["event_id"])] = record

    def rows(self, status: str | None = "ok") -> list[dict]:
        return [r for r in self.records.values() if status is None or r.get("status") == status]


@dataclass
class Target:
    """A target model: its name (table column), an :class:`ExtractionAgent`, and token prices (USD / 1M)."""

    name: str
    extractor: ExtractionAgent
    price_in: float
    price_out: float
    membership: dict | None  # book id -> "member" | "nonmember", for models trained here; else None


@dataclass
class Agents:
    verifier: VerbatimVerifier
    jailbreaker: Jailbreaker
    feedback: FeedbackAgent


@dataclass
class _Attempt:
    text: str
    recall: float
    f1: float
    blocked: bool
    reason: str


@dataclass
class _State:
    book: Book
    event: Event
    fields: dict
    calls: dict = field(default_factory=lambda: {m: [0, 0, 0] for m in ("prefix", "dsp", "jb", "feedback")})
    agent_chars: dict = field(default_factory=lambda: {"verifier": 0, "jailbreak": 0, "feedback": 0})
    agent_calls: dict = field(default_factory=lambda: {"verifier": 0, "jailbreak": 0, "feedback": 0})
    attempts: dict = field(default_factory=dict)
    rounds: list = field(default_factory=list)
    best: _Attempt | None = None
    base_user: str = ""
    memscore: dict | None = None
    filtered: bool = False


class RecapRunner:
    """Runs the ladder (prefix, DSP, DSP + JB, RECAP) for the events of books on one target."""

    def __init__(self, target: Target, agents: Agents, settings: RecapSettings, store: ResultStore, *,
                 memscore_fn: Callable[[Book, list[Event], list[str]], list[dict]] | None = None) -> None:
        self.t, self.a, self.s, self.store = target, agents, settings, store
        self.memscore_fn = memscore_fn
        self.summary_template_chars = len(target.extractor.prompts.raw("summary"))

    # -- scoring
    def _attempt(self, ev: Event, text: str, verdict) -> _Attempt:
        r = rouge_l(ev.reference, text, stem=self.s.stem)
        return _Attempt(text, r.recall, r.f1, verdict.blocked, verdict.reason)

    def _score(self, a: _Attempt) -> float:
        return a.recall if self.s.score_variant == "recall" else a.f1

    def _gen(self, states: list[_State], reqs, stage: str) -> list[str]:
        gens = self.t.extractor.run(reqs)
        for st, g in zip(states, gens):
            c = st.calls[stage]
            c[0] += 1
            c[1] += g.prompt_tokens
            c[2] += g.completion_tokens
        return [g.text for g in gens]

    def _verify(self, states: list[_State], texts: list[str], *, prompts: list[str] | None = None,
                count: bool = True):
        before = self.a.verifier.prompt_chars
        v = self.a.verifier.verify(texts, [st.book.title for st in states], prompts,
                                   [st.fields["opening_line"] for st in states])
        if not count:  # prefix-probing outputs are classified for the record only; no method pays for it
            return v
        raw = len(self.a.verifier.prompts.raw("verifier"))
        for st, t in zip(states, texts):
            st.agent_calls["verifier"] += 1
            # an LLM verifier: the prompts it sent; the rule: the prompt an LLM verifier would have been sent
            st.agent_chars["verifier"] += ((self.a.verifier.prompt_chars - before) // len(states)
                                           if self.a.verifier.llm is not None else raw + len(t))
        return v

    # -- the ladder for one chunk
    def _run_chunk(self, items: list[tuple[Book, Event]]) -> list[_State]:
        ex = self.t.extractor
        states = [_State(b, e, event_fields(b, e)) for b, e in items]
        # 1. prefix-probing
        texts = self._gen(states, [ex.prefix_request(st.fields) for st in states], "prefix")
        for st, txt, v in zip(states, texts, self._verify(states, texts, count=False)):
            st.attempts["prefix"] = self._attempt(st.event, txt, v)
        # 2. DSP
        for st in states:
            st.base_user = ex.prompts.fill("extraction", **st.fields)
        texts = self._gen(states, [ex.user_request(st.base_user, st.fields) for st in states], "dsp")
        for st, txt, v in zip(states, texts, self._verify(states, texts, prompts=[st.base_user for st in states])):
            st.attempts["dsp"] = self._attempt(st.event, txt, v)
        # 3. jailbreak the blocked ones
        blocked = [st for st in states if st.attempts["dsp"].blocked]
        if blocked:
            users = []
            for st in blocked:
                before = self.a.jailbreaker.prompt_chars
                users.append(self.a.jailbreaker.rewrite(st.fields, st.base_user))
                st.agent_chars["jailbreak"] += self.a.jailbreaker.prompt_chars - before
                st.agent_calls["jailbreak"] += int(self.a.jailbreaker.mode == "past_tense")
            texts = self._gen(blocked, [ex.user_request(u, st.fields) for u, st in zip(users, blocked)], "jb")
            for st, u, txt, v in zip(blocked, users, texts, self._verify(blocked, texts, prompts=users)):
                st.attempts["jb"] = self._attempt(st.event, txt, v)
                st.base_user = u  # later re-attempts keep the framing that got through
        for st in states:
            st.attempts["dsp_jb"] = st.attempts.get("jb", st.attempts["dsp"])
            st.best = st.attempts["dsp_jb"]
        # optional: hybrid memorization score of the first valid attempt (filter + the Fig. 8 analysis)
        if self.memscore_fn is not None:
            for b in dict.fromkeys(st.book.id for st in states):
                group = [st for st in states if st.book.id == b]
                for st, ms in zip(group, self.memscore_fn(group[0].book, [st.event for st in group],
                                                          [st.best.text for st in group])):
                    st.memscore = ms
                    if self.s.filter_threshold is not None and ms["score"] < self.s.filter_threshold:
                        st.filtered = True
        # 4. feedback loop
        active = [st for st in states if self._score(st.best) <= self.s.stop_score and not st.filtered]
        for rnd in range(1, self.s.max_rounds + 1):
            if not active:
                break
            before = self.a.feedback.prompt_chars
            fbs = self.a.feedback.feedback([st.event.reference for st in active], [st.best.text for st in active],
                                           [st.event.characters for st in active])
            share = (self.a.feedback.prompt_chars - before) // len(active)
            raw = len(self.a.feedback.prompts.raw("feedback"))
            reqs = []
            for st, fb in zip(active, fbs):
                st.agent_calls["feedback"] += 1
                st.agent_chars["feedback"] += (share if self.a.feedback.llm is not None
                                               else raw + len(st.event.reference) + len(st.best.text))
                reqs.append(ex.reattempt_request(st.base_user, st.best.text, fb.text, st.fields))
            texts = self._gen(active, reqs, "feedback")
            still = []
            prompts = [st.base_user + "\n" + fb.text for st, fb in zip(active, fbs)]
            for st, fb, txt, v in zip(active, fbs, texts, self._verify(active, texts, prompts=prompts)):
                att = self._attempt(st.event, txt, v)
                accepted = (not att.blocked) and self._score(att) > self._score(st.best) + self.s.min_gain
                st.rounds.append({"round": rnd, "recall": att.recall, "f1": att.f1, "blocked": att.blocked,
                                  "accepted": accepted, "best_before": self._score(st.best),
                                  "feedback": fb.text, "leak_rejections": fb.leak_rejections,
                                  "feedback_sanitized": fb.sanitized, "output": txt})
                if accepted:
                    st.best = att
                if (accepted or not self.s.stop_on_no_gain) and self._score(st.best) <= self.s.stop_score:
                    still.append(st)
            active = still
        for st in states:
            st.attempts["recap"] = st.best
        return states

    # -- records
    def _record(self, book: Book, st: _State) -> dict:
        ev = st.event
        redact = book.category in self.s.redact_categories
        # the section summary agent reads each chapter once; its cost is shared by the chapter's events
        ch = next((c for c in book.chapters if any(e.id == ev.id for e in c.events)), None)
        n_ev = max(1, len(ch.events)) if ch else 1
        summary_chars = ((len(ch.text) if ch else 0) + self.summary_template_chars) / n_ev
        summary_calls = 1 / n_ev
        meta_text = "\n".join([ev.title, ", ".join(ev.characters), *ev.detailed_summary])
        audit = {"metadata_overlap": content_overlap(meta_text, ev.reference),
                 "metadata_leaks": len(leaked_ngrams(meta_text, ev.reference, self.a.feedback.ngram_guard,
                                                     allowed=[ev.first_sentence, ev.last_sentence])),
                 # feedback: share of the content words the metadata did NOT already give that it reveals
                 "feedback_overlap": [content_overlap(r["feedback"], ev.reference, known=meta_text) for r in st.rounds],
                 "feedback_leaks": [len(leaked_ngrams(r["feedback"], ev.reference, self.a.feedback.ngram_guard))
                                    for r in st.rounds]}
        cost = {"prefix": ["prefix"], "dsp": ["dsp"], "dsp_jb": ["dsp", "jb"], "recap": ["dsp", "jb", "feedback"]}
        agent_cost = {"prefix": [], "dsp": [], "dsp_jb": ["verifier", "jailbreak"],
                      "recap": ["verifier", "jailbreak", "feedback"]}
        methods = {}
        for m in METHODS:
            a = st.attempts[m]
            passages, spans = {}, {}
            for tol in self.s.tolerances:
                rep = count_passages(ev.reference, [a.text], min_tokens=self.s.passage_tokens, max_mismatch=tol)
                passages[str(tol)] = rep.n_passages
                spans[str(tol)] = [[sp.ref_start, sp.ref_end] for sp in rep.spans]
            methods[m] = {
                "recall": a.recall, "f1": a.f1, "blocked": a.blocked, "block_reason": a.reason,
                "output": None if redact else a.text, "output_sha256": sha256(a.text),
                "output_words": len(a.text.split()), "passages": passages, "spans": spans,
                "target_calls": sum(st.calls[s][0] for s in cost[m]),
                "prompt_tokens": sum(st.calls[s][1] for s in cost[m]),
                "completion_tokens": sum(st.calls[s][2] for s in cost[m]),
                "agent_prompt_chars": sum(st.agent_chars[s] for s in agent_cost[m])
                + (summary_chars if m != "prefix" else 0),
                "agent_calls": sum(st.agent_calls[s] for s in agent_cost[m]) + (summary_calls if m != "prefix" else 0),
            }
        rounds = [{**r, "feedback": None if redact else r["feedback"], "feedback_sha256": sha256(r["feedback"]),
                   "output": None if redact else r["output"], "output_sha256": sha256(r["output"])}
                  for r in st.rounds]
        return {
            "target": self.t.name, "book_id": book.id, "book_title": book.title, "category": book.category,
            "split": (self.t.membership or {}).get(book.id), "event_id": ev.id, "status": "ok", "redacted": redact,
            "reference_sha256": sha256(ev.reference), "gold_tokens": len(word_tokens(ev.reference)),
            "gold_words": len(ev.reference.split()),
            "metadata": None if redact else ev.metadata(), "metadata_sha256": sha256(json.dumps(ev.metadata())),
            "methods": methods, "rounds": rounds, "memscore": st.memscore, "filtered": st.filtered,
            "hint_audit": audit,
            "price_in": self.t.price_in, "price_out": self.t.price_out,
        }

    def run(self, books: Sequence[Book], *, progress: bool = True) -> list[dict]:
        """Run every not-yet-recorded event of ``books`` (chunks of ``batch_events`` events, across books, in
        order); returns this target's ok records of these books."""
        for b in books:
            if not b.events:
                log.warning("book %s has no events (empty or shorter than one event); nothing to extract", b.id)
        todo = [(b, e) for b in books for e in b.events if not self.store.done(self.t.name, b.id, e.id)]
        bs = max(1, int(self.s.batch_events))
        bar = tqdm(total=len(todo), desc=f"RECAP {self.t.name}", disable=not progress or not todo)
        for i in range(0, len(todo), bs):
            chunk = todo[i:i + bs]
            try:
                states = self._run_chunk(chunk)
            except KeyboardInterrupt:
                raise
            except Exception as err:  # a target failure: log, record, go on; a rerun retries these events
                log.error("target %s failed on %d events (%s: %s); recorded as errors, rerun to retry",
                          self.t.name, len(chunk), type(err).__name__, err)
                for b, e in chunk:
                    self.store.add({"target": self.t.name, "book_id": b.id, "event_id": e.id, "status": "error",
                                    "error": f"{type(err).__name__}: {err}"[:500], "category": b.category})
                bar.update(len(chunk))
                continue
            for st in states:
                self.store.add(self._record(st.book, st))
            bar.update(len(chunk))
        bar.close()
        ids = {b.id for b in books}
        return [r for r in self.store.rows() if r["target"] == self.t.name and r["book_id"] in ids]


def run_books(runner: RecapRunner, books: Sequence[Book], *, progress: bool = True) -> list[dict]:
    """All events of ``books`` on the runner's target (see :meth:`RecapRunner.run`)."""
    return runner.run(books, progress=progress)


def make_memscore_fn(parrot_cfg, cache_dir: str | Path | None, *, stem: bool = True):
    """A ``memscore_fn`` for :class:`RecapRunner`: Parrot (one per book, cached on disk) + ROUGE-L + cosine."""
    from memlab.metrics.embedding import cosine_pairs
    from memlab.methods.recap.memscore import Parrot, inverse_loss

    parrots: dict[str, Parrot] = {}

    def fn(book: Book, events: list[Event], outputs: list[str]) -> list[dict]:
        if book.id not in parrots:
            parrots[book.id] = Parrot(book.text, parrot_cfg, cache_dir)
        p = parrots[book.id]
        refs = [e.reference for e in events]
        cos = cosine_pairs(refs, list(outputs))
        out = []
        for ref, o, c in zip(refs, outputs, cos):
            loss = p.mlm_loss(o)
            r = rouge_l(ref, o, stem=stem).recall
            out.append({"mlm_loss": loss, "inv": inverse_loss(loss), "rouge_l": r, "cosine": float(c),
                        "score": hybrid_score(loss, r, float(c))})
        return out

    return fn
