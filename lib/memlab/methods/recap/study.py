"""The RECAP studies (seed 000), one function per experiment; the notebooks ``notebooks/recap_*.ipynb`` only show
what these return.

Each function takes the method's settings (:class:`~memlab.methods.recap.config.RecapConfig`, from
conf/method/recap.yaml), the experiment's own ``params`` (the dataclasses below, from conf/experiment/recap_*.yaml),
and the run (:class:`memlab.study_run.StudyRun`: its ``catalog`` of the models it may open, its folder ``out_dir``
where the resumable event store ``events.jsonl`` lives), and returns a :class:`memlab.results.StudyResult`.

Both studies run the same benchmark (:func:`run_recap`): EchoTrace-mini, segmented by the section summary agent,
then the ladder prefix-probing → DSP → DSP + jailbreak → RECAP on every target. Target calls go through the
run's response cache, so the second study re-reads the first one's calls.
"""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from memlab.comparison import paper_mark
from memlab.data.echotrace import Book, coverage_report, echotrace_mini
from memlab.errors import ConfigError, MissingSourceError
from memlab.methods.recap import evaluate as E
from memlab.methods.recap import plots
from memlab.methods.recap.agents import (ContaminationJudge, FeedbackAgent, Jailbreaker, VerbatimVerifier,
                                         agent_fallbacks, agents_label)
from memlab.methods.recap.config import RecapConfig
from memlab.methods.recap.extraction import ExtractionAgent
from memlab.methods.recap.memscore import make_memscore_fn
from memlab.methods.recap.pipeline import Agents, RecapRunner, ResultStore, Target
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.summary import SectionSummaryAgent
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Table3Params:
    """recap_table3 has no settings of its own: everything is the method's."""


@dataclass(frozen=True)
class FeedbackParams:
    contamination_overlap: float = field(metadata=check(ge=0, le=1))   # a hint revealing more is "too detailed"


# -- the benchmark run shared by both studies ------------------------------------------------------------------
def build_agents(method: RecapConfig, llm=None) -> tuple[SectionSummaryAgent, Agents]:
    """The section summary agent and the verifier / jailbreaker / feedback agents of ``method`` (``llm``: the
    agents' chat backend, None = deterministic agents)."""
    ag, sm, tokens = method.agents, method.summary, method.agents.max_new_tokens
    prompts = Prompts(method.prompts_dir)
    summary = SectionSummaryAgent(llm=llm if sm.use_llm else None, prompts=prompts, max_new_tokens=tokens.summary,
                                  target_words=sm.target_words, min_words=sm.min_words, ngram_guard=ag.ngram_guard,
                                  n_characters=sm.n_characters, n_keywords=sm.n_keywords,
                                  temperature=sm.temperature)
    agents = Agents(
        verifier=VerbatimVerifier(llm=llm, prompts=prompts, max_new_tokens=tokens.verifier,
                                  min_words=ag.verifier_min_words, max_echo=ag.verifier_max_echo,
                                  judge_rule=ag.refusal_judge, keyword_rule=ag.refusal_keywords,
                                  judge_input=ag.verifier_input),
        jailbreaker=Jailbreaker(llm=llm, prompts=prompts, max_new_tokens=tokens.jailbreak, mode=ag.jailbreak),
        feedback=FeedbackAgent(llm=llm, prompts=prompts, max_new_tokens=tokens.feedback, ngram_guard=ag.ngram_guard,
                               max_retries=ag.max_retries),
        judge=ContaminationJudge(llm=llm, prompts=prompts, max_new_tokens=tokens.verifier))
    return summary, agents


def extraction_agent(method: RecapConfig, target, backend, prompts: Prompts) -> ExtractionAgent:
    """The extraction agent of one target (``method.targets.<name>``, a TargetConfig) talking to ``backend``."""
    return ExtractionAgent(backend=backend, style=target.prompt_style, prompts=prompts,
                           max_new_tokens=target.max_new_tokens, budget_factor=target.budget_factor,
                           tokens_per_word=target.tokens_per_word, max_context_tokens=target.max_context_tokens,
                           min_prompt_tokens=target.min_prompt_tokens, seed=method.seed)


def segment_books(books: list[Book], summary: SectionSummaryAgent, max_events_per_book: int | None) -> list[Book]:
    """Run the section summary agent on every chapter; keep the first ``max_events_per_book`` events (None: all)."""
    for b in books:
        left = max_events_per_book
        segmented = 0
        for ch in b.chapters:
            if left is not None and left <= 0:
                ch.events = []
                continue
            before = (summary.tokens_in, summary.tokens_out)
            ch.events = summary.segment(ch, b.title)
            # the LLM summary agent's tokens for this chapter (shared by its events in the cost table)
            b.meta.setdefault("summary_usage", {})[ch.id] = [summary.tokens_in - before[0],
                                                            summary.tokens_out - before[1]]
            segmented += sum(len(e.text.split()) for e in ch.events)
            if left is not None:
                ch.events = ch.events[:left]
                left -= len(ch.events)
        # coverage of the segmentation itself (chapters segmented before the event cap), for the report
        b.meta["segmented_words"] = segmented
        if not b.events:
            log.warning("book %s yields no events (empty, or shorter than one event)", b.id)
    return books


# where a membership record's document id names its EchoTrace-mini book: kjv/book/<Book> (or kjv/chapter/<Book>/<n>),
# licences/<name>, wiki/<Title>
NAME_AT = {"kjv": 2, "licences": 1, "wiki": 1}


def zoo_membership(path: str | Path, n_books: int) -> tuple[dict[str, str], dict[str, tuple[list[str], list[str]]]]:
    """From a tiny family's membership record: {book id: split} and, per source (``kjv`` books, ``licences``), the
    first ``n_books`` member and non-member names (a KJV book counts when every one of its documents is on one
    side). Book ids are EchoTrace-mini's: ``kjv/<book>``, ``licences/<name>``, ``wiki/<Title>``."""
    path = Path(path)
    if not path.is_file():
        raise MissingSourceError(f"membership record {path} not found; build the tiny-model zoo first (make zoo)")
    rec = json.loads(path.read_text())

    def names_of(ids: list[str], source: str) -> list[str]:
        out: list[str] = []
        for i in ids:
            parts = i.split("/")
            name = parts[NAME_AT[source]] if parts[0] == source and len(parts) > NAME_AT[source] else None
            if name and name not in out:
                out.append(name)
        return out

    split: dict[str, str] = {}
    picked: dict[str, tuple[list[str], list[str]]] = {}
    for source in NAME_AT:
        members, nonmembers = names_of(rec.get("members", []), source), names_of(rec.get("nonmembers", []), source)
        members = [b for b in members if b not in nonmembers]
        split |= {f"{source}/{b}": "member" for b in members} | {f"{source}/{b}": "nonmember" for b in nonmembers}
        picked[source] = (members[:n_books], nonmembers[:n_books])
    return split, picked


def require_books(books: list[Book], notes: list[str], failure: str) -> None:
    """No usable EchoTrace book (every configured book refused, missing or too short for one event): one line
    naming what was refused and why, instead of empty tables failing later (``KeyError: 'target'``)."""
    if books:
        return
    why = [_brief(n) for n in notes if not n.startswith("papers: no LaTeX")]
    raise ConfigError(f"RECAP has no usable book: every book method.echotrace selects {failure}"
                      f"{' (' + '; '.join(why) + ')' if why else ''}; fix or replace the files in "
                      "method.echotrace.files, or select built-in books (method.echotrace.public_domain.kjv_books, "
                      "method.echotrace.copyrighted.licences, method.echotrace.non_training.n_docs)")


def _brief(note: str) -> str:
    """One refusal note without its advice: '<file> skipped (book file <file> has 3 words' -> '…has 3 words)'."""
    note = " ".join(note.split()).split("; ")[0].split(" — ")[0]
    return note + ")" * (note.count("(") - note.count(")"))


def _open(catalog, model, stack: ExitStack):
    """A backend for a conf/model name or an inline model node, closed when ``stack`` closes."""
    return stack.enter_context(catalog.named(model) if isinstance(model, str) else catalog.using(model))


def run_recap(method: RecapConfig, catalog, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Books, notes, coverage, event records of every target (resumed from ``out_dir/events.jsonl``)."""
    books, notes = echotrace_mini(method.echotrace.spec())
    require_books(books, notes, "is refused or missing")  # before any model is opened
    with ExitStack() as agent_stack:
        llm = _open(catalog, method.agents.llm, agent_stack) if method.agents.llm else None
        summary, agents = build_agents(method, llm)
        rs = method.recap
        memscore_fn = (make_memscore_fn(method.memscore.parrot, method.memscore.cache_dir, stem=rs.stem)
                       if method.memscore.enabled else None)
        store = ResultStore(Path(out_dir) / "events.jsonl")
        all_books: dict[str, Book] = {b.id: b for b in books}
        shared_ids = set(all_books)
        segment_books(books, summary, method.max_events_per_book)
        require_books([b for b in books if b.events], notes, "is refused or yields no event")
        for name, t in method.targets.items():
            membership, extra = None, []
            if t.membership is not None:
                try:
                    membership, extra = _membership_books(method, t.membership, summary, all_books, shared_ids)
                except MissingSourceError as err:
                    notes.append(f"target {name}: membership books skipped ({err})")
            with ExitStack() as stack:
                ex = extraction_agent(method, t, _open(catalog, t.model, stack), summary.prompts)
                runner = RecapRunner(Target(name, ex, t.price_in, t.price_out, membership), agents, rs, store,
                                     memscore_fn=memscore_fn)
                shared = [b for b in books if t.categories is None or b.category in t.categories]
                runner.run(shared + extra, progress=progress, events_per_book={b.id: t.events_per_book for b in shared})
            if ex.truncated:
                notes.append(f"target {name}: {ex.truncated} prompts cut from the left to fit the context")
            if ex.budget_capped:
                notes.append(f"target {name}: {ex.budget_capped} output budgets below {t.budget_factor} × gold "
                             f"tokens (the context of {ex.max_context_tokens} tokens is the cap)")
    records = store.rows(status=None)
    if not records:  # books exist but no target's categories select one
        raise ConfigError("RECAP scored no event: no target's method.targets.<name>.categories selects a usable book "
                          f"(books: {', '.join(f'{b.id} [{b.category}]' for b in books)}); fix the categories or the "
                          "books of method.echotrace")
    errors = [r for r in records if r.get("status") != "ok"]
    if errors:
        notes.append(f"{len(errors)} event(s) failed and were recorded as errors; rerun to retry them")
    for note in notes:
        log.warning("RECAP: %s", note)
    return {"books": list(all_books.values()), "notes": notes, "coverage": coverage_report(all_books.values()),
            "records": [r for r in records if r.get("status") == "ok"], "errors": errors, "store": store.path,
            "all_records": records,  # ok + error events (errors are scored 0 by the tables)
            "agent_stats": {"verifier_llm_failures": agents.verifier.errors,
                            "feedback_llm_failures": agents.feedback.errors,
                            "feedback_leak_rejections": agents.feedback.leak_rejections,
                            "summary_llm_failures": summary.errors, "summary_leak_edits": summary.leaks_removed,
                            **agent_fallbacks(summary, agents.verifier, agents.jailbreaker, agents.feedback,
                                              agents.judge)}}


def _membership_books(method: RecapConfig, m, summary: SectionSummaryAgent, all_books: dict[str, Book],
                      shared_ids: set[str]) -> tuple[dict[str, str], list[Book]]:
    """A target with exact membership (``m``: its ``membership`` settings): {book id: split} and its extra member and
    non-member books (KJV books, licences, Wikipedia articles). A book another target already added is reused
    (segmented once, and ``all_books`` grows by the new ones); the benchmark's shared books (``shared_ids``) are
    never extra."""
    membership, picked = zoo_membership(m.file, m.books)
    (mem, non), (lic_mem, lic_non), (wiki_mem, wiki_non) = picked["kjv"], picked["licences"], picked["wiki"]
    cp = method.echotrace.copyrighted
    extra, _ = echotrace_mini({
        "public_domain": {"kjv_books": mem + non, "max_chapters": method.echotrace.public_domain.max_chapters},
        "copyrighted": {"licences": lic_mem + lic_non, "max_words": cp.max_words, "wiki": wiki_mem + wiki_non,
                        "wiki_max_words": cp.wiki_max_words}})
    ids = [b.id for b in extra if b.id not in shared_ids]
    new = segment_books([b for b in extra if b.id not in all_books], summary, m.events_per_book)
    all_books.update({b.id: b for b in new})
    return membership, [all_books[i] for i in ids]


def _benchmark(method: RecapConfig, catalog, out_dir, res: StudyResult, progress: bool):
    """Run the benchmark; the coverage table; the event and book frames."""
    import pandas as pd

    run = run_recap(method, catalog, out_dir, progress=progress)
    res.table("coverage", pd.DataFrame(run["coverage"]))
    df = E.events_frame(run["all_records"])
    return run, df, E.book_scores(df, method.recap.score_variant)


# -- the studies ------------------------------------------------------------------------------------------------
def table3(method: RecapConfig, params: Table3Params, run: StudyRun) -> StudyResult:
    """Table 3 analog (methods × targets × category, book-level bootstrap mean ± sd), passages per book (Fig. 13),
    mismatch tolerance 0..5 (Fig. 18), member vs non-member books (exact membership), cost by method (App. V)."""
    res = StudyResult()
    bench, df, books = _benchmark(method, run.catalog, run.out_dir, res, run.progress)
    rs, tol = method.recap, method.passage_tolerance
    res.table("book_scores", books, show=False)
    res.table("table3", E.table3(books, n_resamples=method.bootstrap.n_resamples, seed=method.seed,
                                 targets=list(method.targets), variant=rs.score_variant, stem=rs.stem))
    ppb = res.table("passages_per_book", E.passages_per_book(books, tolerance=tol))
    res.figure("passages_per_book", plots.passages_per_book(ppb, tol))
    sweep = res.table("tolerance_sweep", E.tolerance_sweep(books), show=False)
    res.figure("tolerance_sweep", plots.tolerance_sweep(sweep))
    mem = res.table("membership", E.membership_table(books, tolerance=tol, n_resamples=method.bootstrap.n_resamples,
                                                     seed=method.seed))
    ag = method.agents
    res.table("cost", E.cost_table(df, agent_price_in=ag.price_in, agent_price_out=ag.price_out))
    res.table("cost_by_stage", E.cost_by_stage(bench["records"]), show=False)
    res.table("events", E.events_table(df, rs.score_variant), show=False)

    def cell(grp, m, target):
        x = books[(books.group == grp) & (books.method == m) & (books.target == target)]["rouge_l"]
        return float(x.mean()) if len(x) else None

    # metrics.json: the PLAIN mean over books (table3.csv prints the bootstrap mean ± sd [CI]); the tiny model's
    # books split into "<category> (members)" / "(non-members)" groups, as in the tables
    targets, grps = books.target.unique(), books.group.unique()
    slug = {g: g.replace(" (", "/").rstrip(")") for g in grps}   # "public_domain (members)" -> public_domain/members
    numbers = {f"rouge_l/{t}/{slug[g]}/{m}": cell(g, m, t) for t in targets for g in grps for m in E.ROWS
               if cell(g, m, t) is not None}
    numbers["rouge_l_statistic"] = "plain mean over books of the book token-weighted ROUGE-L"
    numbers.update({f"passages_m{tol}/{t}/{m}": int(books[(books.target == t) & (books.method == m)][f"passages_m{tol}"]
                                                    .sum()) for t in targets for m in E.METHODS})
    for r in mem.itertuples():
        numbers[f"membership/{r.target}/{r.method}/{r.split}/passages"] = int(r.passages)
        numbers[f"membership/{r.target}/{r.method}/{r.split}/rouge_l"] = float(r.rouge_l_mean)  # plain mean
    res.metric(events=len(bench["records"]), event_errors=len(bench["errors"]), **numbers, **bench["agent_stats"])
    # refusal share per target / category / method (the aligned tiny target refuses licence requests; issue 29), for
    # the reader and the paper-vs-ours rules (memlab.methods.recap.claims)
    res.table("refusals", E.refusal_table(df))
    res.metric(bootstrap_seed=method.seed, bootstrap_resamples=method.bootstrap.n_resamples,  # claims.py reads these
               agents=agents_label("llm" if method.agents.llm else "deterministic", bench["agent_stats"]))
    return res


def feedback(method: RecapConfig, params: FeedbackParams, run: StudyRun) -> StudyResult:
    """Gains by feedback round (Fig. 6), the memorization-score filter: queries saved vs ROUGE-L lost (Fig. 8 /
    App. U.2), passages by category incl. non-training books and the hint audit (Fig. 8 / App. S)."""
    res = StudyResult()
    bench, _, books = _benchmark(method, run.catalog, run.out_dir, res, run.progress)
    rs, tol, recs = method.recap, method.passage_tolerance, bench["records"]
    gains = E.feedback_gains(recs, variant=rs.score_variant, stop_score=rs.stop_score)
    boot = {"n_resamples": method.bootstrap.n_resamples, "seed": method.seed}  # as the tables' bootstraps
    gsum = res.table("feedback_gains", E.gains_summary(gains))
    # members vs non-members of the targets trained here: on a book the target never saw, a gain is the hints' doing
    res.table("feedback_gains_by_split", E.gains_summary(gains, by=("target", "split")))
    if len(gsum):
        res.figure("feedback_gains", plots.feedback_gains(gsum, gains, **boot))
    fev = E.filter_events(recs, variant=rs.score_variant)
    tr = res.table("filter_tradeoff", E.filter_tradeoff(fev, list(method.memscore.thresholds)))
    res.table("filter_tradeoff_by_target", E.filter_tradeoff_by_target(fev, list(method.memscore.thresholds)))
    if len(tr):
        res.figure("filter_tradeoff", plots.filter_tradeoff(tr, fev, paper=paper_mark("recap_filter_hybrid"), **boot))
    by_cat = (books[books.method.isin(["recap", "echo", "echo_fb"])].groupby(["target", "category", "group", "method"])
              .agg(books=("book", "nunique"), passages=(f"passages_m{tol}", "sum"),
                   passages_overlap=(f"passages_overlap_m{tol}", "sum"), rouge_l=("rouge_l", "mean"))
              .reset_index().assign(statistic=f"rouge_l: plain mean over books; passages m={tol}: "
                                              f"{E.PASSAGE_RULE['ours']}; passages_overlap: {E.PASSAGE_RULE['overlap']}"))
    res.table("passages_by_category", by_cat)
    audit = res.table("hint_audit", E.contamination(recs, overlap_threshold=params.contamination_overlap))
    nt = by_cat[(by_cat.category == "non_training") & (by_cat.method == "recap")]
    res.metric(non_training_recap_passages=int(nt.passages.sum()) if len(nt) else None,
               metadata_flagged=float(audit.metadata_flagged.mean()) if len(audit) else None,
               feedback_flagged=float(audit.feedback_flagged.mean()) if len(audit) else None,
               **{f"filter/{r.signal}/{r.threshold}/queries_saved": r.queries_saved for r in tr.itertuples()},
               **{f"filter/{r.signal}/{r.threshold}/rouge_l_lost": r.rouge_l_lost for r in tr.itertuples()},
               **{f"gains/{r.target}/round{r.round}": r.mean_gain for r in gsum.itertuples()})
    # per book and per event, for the paper-vs-ours rules (memlab.methods.recap.claims); not displayed
    res.table("book_scores", books, show=False)
    res.table("feedback_gains_events", gains, show=False)
    res.table("filter_events", fev, show=False)
    res.metric(bootstrap_seed=method.seed, bootstrap_resamples=method.bootstrap.n_resamples, passage_tolerance=tol,
               agents=agents_label("llm" if method.agents.llm else "deterministic", bench["agent_stats"]),
               max_rounds=rs.max_rounds)
    return res
