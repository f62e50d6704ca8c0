"""The RECAP loop and its baselines, one event record at a time, resumable (seed 000 §3, §4.2).

Per event (all target calls greedy, temperature 0):

1. **Prefix-probing**: ``prefix_probe.txt`` (book title, N = words of the reference, the opening line).
2. **DSP**: the extraction prompt built from the event metadata (the dynamic soft prompt).
3. **Verifier** on the DSP output; if blocked → **Jailbreaker** prompt, verified again.
   **DSP + Jailbreak** = the jailbreak output when DSP was blocked, else the DSP output.
4. **RECAP** = DSP + Jailbreak, then the feedback loop: stop at once if the score > ``stop_score`` (0.95);
   no loop when DSP and the jailbreak were both blocked (``skip_double_blocked``, the authors' code);
   else up to ``max_rounds`` (5) rounds of feedback on the latest output → re-attempt (``refinement:
   multi_turn``: the growing conversation of the authors' loop; ``single_turn``: the base prompt + the
   latest output + its report) → verify; an attempt is accepted only if it beats the best so far by >
   ``min_gain`` (0.02); with ``stop_on_no_gain`` the loop ends at the first round without an accepted
   attempt (paper §3.5). Optional memorization-score filter: events whose hybrid score (``memscore.py``)
   is below ``filter_threshold`` are not refined.

Score = ROUGE-L of (reference = event text after its opening line, candidate = output), ``score_variant``
(the YAML's "recall", stemmed word tokens: the authors' choice); both recall and F1 are stored. A blocked
output (refusal, judged no attempt) scores 0 (``blocked_score: zero``, as the authors' code, which replaces
it by ``MODEL_RESPONSE_BLOCKED``); its raw ROUGE-L is kept as ``raw_recall``. ``keep`` = the old rule.

Floors (``baselines``): ``echo`` = the score of the hints the DSP prompt gives (book title, section title,
characters, summary bullets) used *as the output*; ``echo_fb`` = the same plus every feedback report RECAP
gave. A method that does not clear its floor reproduced nothing beyond its prompt.

Cost: target tokens as measured by the backend; agent tokens from the LLM calls actually made (0 with the
deterministic agents), per stage: verifier of DSP / jailbreak / feedback rounds, jailbreak rewrite, feedback.
Verifier calls inside the feedback loop are charged to RECAP only.

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

import json
import logging
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tqdm.auto import tqdm

from memlab.data.echotrace import Book, Event
from memlab.metrics.passages import count_passages, count_passages_overlapping
from memlab.metrics.rouge import rouge_l, word_tokens
from memlab.progress import Progress
from memlab.methods.recap.agents import (ContaminationJudge, FeedbackAgent, Jailbreaker, VerbatimVerifier,
                                         strip_stock)
from memlab.methods.recap.extraction import ExtractionAgent, event_fields
from memlab.methods.recap.store import ResultStore, sha256
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
    blocked_score: str = field(metadata=check(choices=("zero", "keep")))   # zero = the authors' code
    skip_double_blocked: bool            # no feedback loop when DSP and the jailbreak were both blocked
    refinement: str = field(metadata=check(choices=("multi_turn", "single_turn")))   # multi_turn = authors


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
    judge: ContaminationJudge | None = None  # App. S; None or no LLM = the fixed heuristic


@dataclass
class _Attempt:
    text: str
    recall: float
    f1: float
    blocked: bool
    reason: str
    raw_recall: float = 0.0  # before a blocked output is scored 0


AGENT_STAGES = ("verifier_dsp", "jailbreak", "verifier_jb", "feedback", "verifier_fb")
# which agent stages each method pays for (the summary agent's share is added for every method but prefix)
AGENT_COST = {"prefix": (), "dsp": (), "dsp_jb": ("verifier_dsp", "jailbreak", "verifier_jb"),
              "recap": ("verifier_dsp", "jailbreak", "verifier_jb", "feedback", "verifier_fb")}
TARGET_COST = {"prefix": ("prefix",), "dsp": ("dsp",), "dsp_jb": ("dsp", "jb"), "recap": ("dsp", "jb", "feedback")}


def _usage() -> dict:
    return {k: {"calls": 0, "tokens_in": 0.0, "tokens_out": 0.0, "prompt_chars": 0.0} for k in AGENT_STAGES}


@dataclass
class _State:
    book: Book
    event: Event
    fields: dict
    calls: dict = field(default_factory=lambda: {m: [0, 0, 0] for m in ("prefix", "dsp", "jb", "feedback")})
    agent: dict = field(default_factory=_usage)
    attempts: dict = field(default_factory=dict)
    rounds: list = field(default_factory=list)
    turns: list = field(default_factory=list)  # [(output, feedback on it)] of the refinement conversation
    last: str = ""  # the latest output of the conversation (feedback is given on it)
    best: _Attempt | None = None
    base_user: str = ""
    memscore: dict | None = None
    filtered: bool = False
    skipped: str | None = None  # why the feedback loop did not run
    judge: dict = field(default_factory=dict)


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
        if verdict.blocked and self.s.blocked_score == "zero":
            return _Attempt(text, 0.0, 0.0, True, verdict.reason, r.recall)
        return _Attempt(text, r.recall, r.f1, verdict.blocked, verdict.reason, r.recall)

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

    @staticmethod
    def _charge(states: list[_State], stage: str, agent, before: tuple[int, int, int], *, calls: int = 1,
                chars: list[float] | None = None) -> None:
        """Charge ``states`` for one agent call each: tokens actually spent (an equal share of the batch) and
        prompt characters (``chars``: per state; default an equal share of what the agent built)."""
        n = max(1, len(states))
        t_in, t_out, pc = (agent.tokens_in - before[0]) / n, (agent.tokens_out - before[1]) / n, \
            (agent.prompt_chars - before[2]) / n
        for k, st in enumerate(states):
            u = st.agent[stage]
            u["calls"] += calls
            u["tokens_in"] += t_in
            u["tokens_out"] += t_out
            u["prompt_chars"] += chars[k] if chars is not None else pc

    @staticmethod
    def _mark(agent) -> tuple[int, int, int]:
        return agent.tokens_in, agent.tokens_out, agent.prompt_chars

    def _verify(self, states: list[_State], texts: list[str], *, stage: str | None,
                prompts: list[str] | None = None, asked: list[str] | None = None):
        """Verdicts for ``texts``; ``stage`` = the verifier stage charged (None: prefix-probing, which no
        method pays for; its outputs are judged the same way). ``prompts``: the user turns the rule's echo check
        reads; ``asked``: the prompts the LLM judge reads (default ``prompts``)."""
        ver = self.a.verifier
        before = self._mark(ver)
        asked = asked if asked is not None else prompts
        v = ver.verify(texts, [st.book.title for st in states], prompts,
                       [st.fields["opening_line"] for st in states], asked=asked)
        if stage is not None:
            if ver.llm is not None:
                chars = None
            else:  # what the judge would have read
                chars = [len(ver.judge_prompt(t, st.book.title, a))
                         for t, st, a in zip(texts, states, asked or [""] * len(texts))]
            self._charge(states, stage, ver, before, chars=chars)
        return v

    # -- the ladder for one chunk
    def _run_chunk(self, items: list[tuple[Book, Event]]) -> list[_State]:
        states = [_State(b, e, event_fields(b, e)) for b, e in items]
        for st in states:
            st.fields["gold_tokens"] = self.t.extractor.gold_tokens(st.event.reference)
        self._first_attempts(states)
        if self.memscore_fn is not None:
            self._memorization_scores(states)
        self._feedback_loop(states)
        for st in states:
            st.attempts["recap"] = st.best
        if self.a.judge is not None and self.a.judge.llm is not None:
            self._judge_hints(states)
        return states

    def _first_attempts(self, states: list[_State]) -> None:
        """Steps 1-3: prefix-probing, DSP, the jailbreak of blocked DSP outputs; DSP + JB is RECAP's start."""
        ex = self.t.extractor
        texts = self._gen(states, [ex.prefix_request(st.fields) for st in states], "prefix")
        for st, txt, v in zip(states, texts, self._verify(states, texts, stage=None,
                                                          asked=[ex.prefix_user(st.fields) for st in states])):
            st.attempts["prefix"] = self._attempt(st.event, txt, v)
        for st in states:
            st.base_user = ex.dsp_user(st.fields)
        texts = self._gen(states, [ex.user_request(st.base_user, st.fields) for st in states], "dsp")
        for st, txt, v in zip(states, texts, self._verify(states, texts, stage="verifier_dsp",
                                                          prompts=[st.base_user for st in states])):
            st.attempts["dsp"] = self._attempt(st.event, txt, v)
        blocked = [st for st in states if st.attempts["dsp"].blocked]
        if blocked:
            users = []
            for st in blocked:
                before = self._mark(self.a.jailbreaker)
                users.append(self.a.jailbreaker.rewrite(st.fields, st.base_user))
                self._charge([st], "jailbreak", self.a.jailbreaker, before,
                             calls=int(self.a.jailbreaker.mode == "past_tense"))
            texts = self._gen(blocked, [ex.user_request(u, st.fields) for u, st in zip(users, blocked)], "jb")
            for st, u, txt, v in zip(blocked, users, texts, self._verify(blocked, texts, stage="verifier_jb",
                                                                         prompts=users)):
                st.attempts["jb"] = self._attempt(st.event, txt, v)
                st.base_user = u  # later re-attempts keep the framing that got through
        for st in states:
            st.attempts["dsp_jb"] = st.attempts.get("jb", st.attempts["dsp"])
            st.best = st.attempts["dsp_jb"]
            st.last = st.best.text

    def _memorization_scores(self, states: list[_State]) -> None:
        """Hybrid memorization score of the first valid attempt, per book (the filter + the Fig. 8 analysis)."""
        for b in dict.fromkeys(st.book.id for st in states):
            group = [st for st in states if st.book.id == b]
            for st, ms in zip(group, self.memscore_fn(group[0].book, [st.event for st in group],
                                                      [st.best.text for st in group])):
                st.memscore = ms
                if self.s.filter_threshold is not None and ms["score"] < self.s.filter_threshold:
                    st.filtered = True

    def _feedback_loop(self, states: list[_State]) -> None:
        """Step 4: every event not skipped gets up to ``max_rounds`` rounds of feedback and re-attempt."""
        for st in states:
            if self.s.skip_double_blocked and st.attempts["dsp"].blocked and st.attempts["dsp_jb"].blocked:
                st.skipped = "dsp_and_jailbreak_blocked"
            elif self._score(st.best) > self.s.stop_score:
                st.skipped = "above_stop_score"
            elif st.filtered:
                st.skipped = "memscore_filter"
        active = [st for st in states if st.skipped is None]
        for rnd in range(1, self.s.max_rounds + 1):
            if not active:
                break
            active = self._feedback_round(active, rnd)

    def _feedback_round(self, active: list[_State], rnd: int) -> list[_State]:
        """One round: feedback on each latest output, re-attempt, verify; returns the events that go on."""
        before = self._mark(self.a.feedback)
        fbs = self.a.feedback.feedback([st.event.reference for st in active], [st.last for st in active],
                                       [st.event.characters for st in active])
        raw = len(self.a.feedback.prompts.raw("feedback"))
        chars = (None if self.a.feedback.llm is not None
                 else [raw + len(st.event.reference) + len(st.last) for st in active])
        self._charge(active, "feedback", self.a.feedback, before, chars=chars)
        reqs = []
        for st, fb in zip(active, fbs):
            turns = st.turns + [(st.last, fb.text)]
            if self.s.refinement == "single_turn":
                turns = turns[-1:]
            reqs.append(self.t.extractor.reattempt_request(st.base_user, turns, st.fields))
        texts = self._gen(active, reqs, "feedback")
        still = []
        prompts = [st.base_user + "\n" + fb.text for st, fb in zip(active, fbs)]
        for st, fb, txt, v in zip(active, fbs, texts, self._verify(active, texts, stage="verifier_fb",
                                                                   prompts=prompts)):
            att = self._attempt(st.event, txt, v)
            accepted = (not att.blocked) and self._score(att) > self._score(st.best) + self.s.min_gain
            st.rounds.append({"round": rnd, "recall": att.recall, "f1": att.f1, "blocked": att.blocked,
                              "raw_recall": att.raw_recall, "accepted": accepted,
                              "best_before": self._score(st.best), "feedback": fb.text,
                              "leak_rejections": fb.leak_rejections, "feedback_sanitized": fb.sanitized,
                              "output": txt})
            st.turns.append((st.last, fb.text))
            st.last = txt
            if accepted:
                st.best = att
            if (accepted or not self.s.stop_on_no_gain) and self._score(st.best) <= self.s.stop_score:
                still.append(st)
        return still

    def _judge_hints(self, states: list[_State]) -> None:
        """App. S judge (the agent LLM) on every hint given: each event's metadata, then each feedback report."""
        where = [(st, k) for st in states for k in (None, *range(len(st.rounds)))]
        refs = [st.event.reference for st, _ in where]
        hints = [self._meta_text(st.book, st.event) if k is None else st.rounds[k]["feedback"] for st, k in where]
        for (st, k), v in zip(where, self.a.judge.judge(refs, hints)):
            if k is None:
                st.judge["metadata"] = v
            else:
                st.judge.setdefault("feedback", [None] * len(st.rounds))[k] = v

    # -- records
    @staticmethod
    def _meta_text(book: Book, ev: Event) -> str:
        """The hints the DSP prompt gives the target (book title, section title, characters, summary)."""
        return "\n".join([book.title, ev.title, ", ".join(ev.characters), *ev.detailed_summary])

    def _passages(self, ev: Event, text: str) -> tuple[dict, dict, dict]:
        passages, spans, overlap = {}, {}, {}
        for tol in self.s.tolerances:
            rep = count_passages(ev.reference, [text], min_tokens=self.s.passage_tokens, max_mismatch=tol)
            passages[str(tol)] = rep.n_passages
            spans[str(tol)] = [[sp.ref_start, sp.ref_end] for sp in rep.spans]
            overlap[str(tol)] = count_passages_overlapping(ev.reference, [text], min_tokens=self.s.passage_tokens,
                                                           max_mismatch=tol)
        return passages, spans, overlap

    def _record(self, book: Book, st: _State) -> dict:
        ev = st.event
        redact = book.category in self.s.redact_categories
        # the section summary agent reads each chapter once; its cost is shared by the chapter's events
        ch = next((c for c in book.chapters if any(e.id == ev.id for e in c.events)), None)
        n_ev = max(1, len(ch.events)) if ch else 1
        summary_chars = ((len(ch.text) if ch else 0) + self.summary_template_chars) / n_ev
        s_in, s_out = (book.meta.get("summary_usage", {}).get(ch.id, (0, 0)) if ch else (0, 0))
        summary = {"calls": 1 / n_ev, "tokens_in": s_in / n_ev, "tokens_out": s_out / n_ev,
                   "prompt_chars": summary_chars}
        meta_text = self._meta_text(book, ev)
        fb_text = "\n".join(r["feedback"] for r in st.rounds)
        audit = {"metadata_overlap": content_overlap(meta_text, ev.reference),
                 "metadata_leaks": len(leaked_ngrams(meta_text, ev.reference, self.a.feedback.ngram_guard,
                                                     allowed=[ev.first_sentence])),
                 # feedback: share of the content words the metadata did NOT already give that it reveals
                 # (the deterministic report's stock phrases stripped first)
                 "feedback_overlap": [content_overlap(strip_stock(r["feedback"]), ev.reference, known=meta_text)
                                      for r in st.rounds],
                 "feedback_leaks": [len(leaked_ngrams(r["feedback"], ev.reference, self.a.feedback.ngram_guard))
                                    for r in st.rounds],
                 "metadata_judge": st.judge.get("metadata"),
                 "feedback_judge": st.judge.get("feedback", [None] * len(st.rounds))}
        methods = {}
        for m in METHODS:
            a = st.attempts[m]
            passages, spans, overlap = self._passages(ev, a.text)
            agent = {k: sum(st.agent[s][k] for s in AGENT_COST[m]) + (summary[k] if m != "prefix" else 0)
                     for k in ("calls", "tokens_in", "tokens_out", "prompt_chars")}
            methods[m] = {
                "recall": a.recall, "f1": a.f1, "raw_recall": a.raw_recall, "blocked": a.blocked,
                "block_reason": a.reason, "output": None if redact else a.text, "output_sha256": sha256(a.text),
                "output_words": len(a.text.split()), "passages": passages, "passages_overlap": overlap,
                "spans": spans,
                "target_calls": sum(st.calls[s][0] for s in TARGET_COST[m]),
                "prompt_tokens": sum(st.calls[s][1] for s in TARGET_COST[m]),
                "completion_tokens": sum(st.calls[s][2] for s in TARGET_COST[m]),
                "agent_prompt_chars": agent["prompt_chars"], "agent_calls": agent["calls"],
                "agent_tokens_in": agent["tokens_in"], "agent_tokens_out": agent["tokens_out"],
            }
        baselines = {}
        for name, hint in (("echo", meta_text), ("echo_fb", meta_text + "\n" + fb_text)):
            r = rouge_l(ev.reference, hint, stem=self.s.stem)
            passages, _, overlap = self._passages(ev, hint)
            baselines[name] = {"recall": r.recall, "f1": r.f1, "passages": passages, "passages_overlap": overlap}
        rounds = [{**r, "feedback": None if redact else r["feedback"], "feedback_sha256": sha256(r["feedback"]),
                   "output": None if redact else r["output"], "output_sha256": sha256(r["output"])}
                  for r in st.rounds]
        return {
            "target": self.t.name, "book_id": book.id, "book_title": book.title, "category": book.category,
            "split": (self.t.membership or {}).get(book.id), "event_id": ev.id, "status": "ok", "redacted": redact,
            "reference_sha256": sha256(ev.reference), "gold_tokens": len(word_tokens(ev.reference)),
            "gold_words": len(ev.reference.split()), "gold_target_tokens": st.fields["gold_tokens"],
            "output_budget": self.t.extractor.budget(st.fields),
            "metadata": None if redact else ev.metadata(), "metadata_sha256": sha256(json.dumps(ev.metadata())),
            "methods": methods, "baselines": baselines, "rounds": rounds, "feedback_skipped": st.skipped,
            "memscore": st.memscore, "filtered": st.filtered, "hint_audit": audit,
            "agent_usage": {**st.agent, "summary": summary},
            "price_in": self.t.price_in, "price_out": self.t.price_out,
        }

    def run(self, books: Sequence[Book], *, progress: bool = True,
            events_per_book: dict[str, int | None] | None = None) -> list[dict]:
        """Run every not-yet-recorded event of ``books`` (chunks of ``batch_events`` events, across books, in
        order; ``events_per_book``: {book id: the first n events only}); returns this target's records of these
        books — ok ones and errors (scored 0 by the tables)."""
        for b in books:
            if not b.events:
                log.warning("book %s has no events (empty or shorter than one event); nothing to extract", b.id)
        cap = events_per_book or {}
        todo = [(b, e) for b in books for e in b.events[:cap.get(b.id)]
                if not self.store.done(self.t.name, b.id, e.id)]
        bs = max(1, int(self.s.batch_events))
        bar = tqdm(total=len(todo), desc=f"RECAP {self.t.name}", disable=not progress or not todo)
        with Progress(f"RECAP {self.t.name} events", total=len(todo), outer=True) as events:  # the runner's line
            for i in range(0, len(todo), bs):
                self._run_events(todo[i:i + bs], bar, events)
        bar.close()
        ids = {b.id for b in books}
        return [r for r in self.store.rows(status=None) if r["target"] == self.t.name and r["book_id"] in ids]

    def _run_events(self, chunk, bar, events: Progress) -> None:
        """One chunk of (book, event) pairs: recorded, or recorded as errors on a target failure."""
        try:
            states = self._run_chunk(chunk)
        except Exception as err:  # a target failure (Ctrl-C is no Exception): log, record, go on; a rerun retries
            log.error("target %s failed on %d events (%s: %s); recorded as errors, rerun to retry",
                      self.t.name, len(chunk), type(err).__name__, err)
            for b, e in chunk:
                self.store.add({"target": self.t.name, "book_id": b.id, "book_title": b.title, "event_id": e.id,
                                "status": "error", "category": b.category, "split": (self.t.membership or {}).get(b.id),
                                "gold_tokens": len(word_tokens(e.reference)), "gold_words": len(e.reference.split()),
                                "error": f"{type(err).__name__}: {err}"[:500]})
            states = []
        for st in states:
            self.store.add(self._record(st.book, st))
        bar.update(len(chunk))
        events.advance(len(chunk))
