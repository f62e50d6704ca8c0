"""Glue for the RECAP notebooks: config → benchmark, agents, targets → event records. No logic in notebooks.

``params`` (see ``conf/experiment/recap_*.yaml``): ``echotrace`` (EchoTrace-mini spec), ``max_events_per_book``,
``summary`` (section summary agent), ``agents`` (verifier/jailbreak/feedback; ``llm: null`` = deterministic,
else the name of a ``conf/model`` chat model), ``recap`` (:class:`~memlab.methods.recap.pipeline.RecapSettings`),
``memscore`` (Parrot config; ``enabled``), ``targets`` (list of {name, model, prompt_style, max_new_tokens,
tokens_per_word, max_context_tokens, price_in, price_out, membership_file, membership_books}).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any


from memlab.config import to_plain
from memlab.data.echotrace import Book, coverage_report, echotrace_mini
from memlab.errors import MissingSourceError
from memlab.methods.recap.agents import FeedbackAgent, Jailbreaker, SectionSummaryAgent, VerbatimVerifier
from memlab.methods.recap.extraction import ExtractionAgent
from memlab.methods.recap.memscore import ParrotConfig
from memlab.methods.recap.pipeline import (Agents, RecapRunner, RecapSettings, ResultStore, Target,
                                           make_memscore_fn, run_books)
from memlab.methods.recap.prompts import Prompts

log = logging.getLogger(__name__)



def segment_books(books: list[Book], summary: SectionSummaryAgent, max_events_per_book: int | None) -> list[Book]:
    """Run the section summary agent on every chapter; keep the first ``max_events_per_book`` events."""
    for b in books:
        left = max_events_per_book
        segmented = 0
        for ch in b.chapters:
            if left is not None and left <= 0:
                ch.events = []
                continue
            ch.events = summary.segment(ch, b.title)
            segmented += sum(len(e.text.split()) for e in ch.events)
            if left is not None:
                ch.events = ch.events[:left]
                left -= len(ch.events)
        # coverage of the segmentation itself (chapters segmented before the event cap), for the report
        b.meta["segmented_words"] = segmented
        if not b.events:
            log.warning("book %s yields no events (empty, or shorter than one event)", b.id)
    return books


def kjv_membership(path: str | Path, n_books: int) -> tuple[dict[str, str], list[str], list[str]]:
    """From a tiny family's membership record: {book id: split} and the first ``n_books`` member/non-member
    KJV book names (a book counts when every one of its documents is on one side)."""
    path = Path(path)
    if not path.is_file():
        raise MissingSourceError(f"membership record {path} not found; build the tiny-model zoo first (make zoo)")
    rec = json.loads(path.read_text())

    def books_of(ids: list[str]) -> list[str]:
        out: list[str] = []
        for i in ids:
            parts = i.split("/")
            if len(parts) >= 3 and parts[0] == "kjv" and parts[2] not in out:
                out.append(parts[2])
        return out

    members, nonmembers = books_of(rec.get("members", [])), books_of(rec.get("nonmembers", []))
    members = [b for b in members if b not in nonmembers]
    split = {f"kjv/{b}": "member" for b in members} | {f"kjv/{b}": "nonmember" for b in nonmembers}
    return split, members[:n_books], nonmembers[:n_books]


def build_agents(params, llm_backend=None) -> tuple[SectionSummaryAgent, Agents]:
    ag = to_plain(params.get("agents")) or {}
    sm = to_plain(params.get("summary")) or {}
    prompts = Prompts(params.get("prompts_dir"))
    summary = SectionSummaryAgent(llm=llm_backend if sm.get("use_llm") else None, prompts=prompts,
                                  target_words=int(sm.get("target_words", 120)), min_words=int(sm.get("min_words", 8)),
                                  ngram_guard=int(ag.get("ngram_guard", 6)))
    agents = Agents(
        verifier=VerbatimVerifier(llm=llm_backend, prompts=prompts, min_words=int(ag.get("verifier_min_words", 3))),
        jailbreaker=Jailbreaker(llm=llm_backend, prompts=prompts, mode=str(ag.get("jailbreak", "narrative_tool"))),
        feedback=FeedbackAgent(llm=llm_backend, prompts=prompts, ngram_guard=int(ag.get("ngram_guard", 6)),
                               max_retries=int(ag.get("max_retries", 2))))
    return summary, agents


def run_recap(rep, *, progress: bool = True) -> dict:
    """Everything the notebooks need: books, notes, coverage, records (all targets), store path."""
    p = rep.params
    llm_name = (p.get("agents") or {}).get("llm")
    llm = (rep.backend(rep.model_cfg(llm_name) if isinstance(llm_name, str) else llm_name)) if llm_name else None
    summary, agents = build_agents(p, llm)
    books, notes = echotrace_mini(to_plain(p.echotrace))
    settings = RecapSettings.from_dict(to_plain(p.recap))
    ms = to_plain(p.get("memscore")) or {}
    memscore_fn = (make_memscore_fn(ParrotConfig(**{**(ms.get("parrot") or {}), "seed": rep.seed}),
                                    Path(rep.paths.cache) / "recap-parrot", stem=settings.stem)
                   if ms.get("enabled", True) else None)
    store = ResultStore(rep.out_dir / "events.jsonl")
    all_books: dict[str, Book] = {b.id: b for b in books}
    segment_books(books, summary, p.get("max_events_per_book"))
    for t in p.targets:
        t = to_plain(t)
        membership, extra = None, []
        if t.get("membership_file"):
            try:
                membership, mem, non = kjv_membership(t["membership_file"], int(t.get("membership_books", 2)))
                extra, _ = echotrace_mini({"public_domain": {"kjv_books": mem + non,
                                                             "max_chapters": p.echotrace.public_domain.get("max_chapters")}})
                extra = segment_books([b for b in extra if b.id not in all_books], summary,
                                      t.get("membership_events_per_book", p.get("max_events_per_book")))
                all_books.update({b.id: b for b in extra})
            except MissingSourceError as err:
                notes.append(f"target {t['name']}: membership books skipped ({err})")
        # ``model``: a conf/model name, or an inline model node (tests use the micro model this way)
        backend = rep.backend(rep.model_cfg(t["model"]) if isinstance(t["model"], str) else t["model"])
        ex = ExtractionAgent(backend, style=t.get("prompt_style", "chat"), prompts=summary.prompts,
                             max_new_tokens=int(t.get("max_new_tokens", 256)),
                             tokens_per_word=float(t.get("tokens_per_word", 1.6)),
                             max_context_tokens=t.get("max_context_tokens"), seed=rep.seed)
        runner = RecapRunner(Target(t["name"], ex, float(t.get("price_in", 0.0)), float(t.get("price_out", 0.0)),
                                    membership), agents, settings, store, memscore_fn=memscore_fn)
        shared = [b for b in books if t.get("categories") is None or b.category in t["categories"]]
        run_books(runner, shared + extra, progress=progress)
        if ex.truncated:
            notes.append(f"target {t['name']}: {ex.truncated} prompts cut from the left to fit the context")
    records = store.rows(status=None)
    errors = [r for r in records if r.get("status") != "ok"]
    if errors:
        notes.append(f"{len(errors)} event(s) failed and were recorded as errors; rerun to retry them")
    return {"books": list(all_books.values()), "notes": notes, "coverage": coverage_report(all_books.values()),
            "records": [r for r in records if r.get("status") == "ok"], "errors": errors, "store": store.path,
            "agent_stats": {"verifier_llm_failures": agents.verifier.errors,
                            "feedback_llm_failures": agents.feedback.errors,
                            "feedback_leak_rejections": agents.feedback.leak_rejections,
                            "summary_llm_failures": summary.errors, "summary_leak_edits": summary.leaks_removed}}
