"""The RECAP loop end to end on the micro GPT-NeoX (exact membership), resume, redaction, failures."""

import dataclasses
import json

import pytest

from memlab.backends.base import Backend
from memlab.backends.factory import build_backend
from memlab.data.echotrace import book_from_documents
from memlab.methods.recap import evaluate as E
from memlab.methods.recap.extraction import ExtractionAgent
from memlab.methods.recap.pipeline import Agents, RecapRunner, ResultStore, Target, run_books
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.study import build_agents, segment_books
from memlab.schema import method_config

# the YAML's settings with this test's smaller loop (every other value from conf/method/recap.yaml)
METHOD = method_config("recap", ["method.recap.max_rounds=2", "method.recap.batch_events=2"])
RS = METHOD.recap


class Counting(Backend):
    """Wraps a backend; counts generated requests; raises KeyboardInterrupt (a kill) after ``budget`` calls."""

    def __init__(self, inner, budget=None, fail_with=None):
        super().__init__()
        self.inner, self.budget, self.fail_with = inner, budget, fail_with
        self.model_id, self.revision = inner.model_id, inner.revision
        self.has_chat_template = inner.has_chat_template
        self.requests = 0
        self.calls = 0

    def generate(self, requests, *, progress=False):
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        if self.budget is not None and self.calls > self.budget:
            raise KeyboardInterrupt("killed")
        self.requests += len(requests)
        return self.inner.generate(requests)

    def prompt_ids(self, request):
        return self.inner.prompt_ids(request)


@pytest.fixture(scope="module")
def hf(micro_family):
    return build_backend(micro_family.model_cfg, None)


@pytest.fixture()
def books(micro_family, recap):
    bs = [book_from_documents(micro_family.members[:1], book_id="ruth", title="Ruth", category="public_domain"),
          book_from_documents(micro_family.nonmembers[:1], book_id="jonah", title="Jonah", category="public_domain"),
          book_from_documents(micro_family.members[1:2], book_id="ruth2", title="Ruth", category="copyrighted")]
    return segment_books(bs, recap.summary(target_words=45), 3)


def _runner(backend, store, **kw):
    ex = ExtractionAgent(backend=backend, style="plain", prompts=Prompts(METHOD.prompts_dir), max_new_tokens=24,
                         tokens_per_word=1.3, max_context_tokens=96, seed=METHOD.seed)
    settings = dataclasses.replace(RS, **kw)
    membership = {"ruth": "member", "ruth2": "member", "jonah": "nonmember"}
    return RecapRunner(Target("micro", ex, 1.0, 2.0, membership), build_agents(METHOD)[1], settings, store)


def _table(records):
    return E.book_scores(E.events_frame(records), RS.score_variant).to_dict("records")


def test_ladder_rules_and_membership(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = run_books(_runner(hf, store), books, progress=False)
    assert len(recs) == sum(len(b.events) for b in books) == 9
    for r in recs:
        m = r["methods"]
        assert m["recap"]["recall"] >= m["dsp_jb"]["recall"]  # RECAP starts from DSP + JB, keeps the best
        assert m["dsp_jb"]["recall"] == (m["dsp"]["recall"] if not m["dsp"]["blocked"] else m["dsp_jb"]["recall"])
        assert len(r["rounds"]) <= 2
        for k, rd in enumerate(r["rounds"]):
            assert rd["accepted"] == (not rd["blocked"] and rd["recall"] > rd["best_before"] + 0.02)
            if not rd["accepted"]:
                assert k == len(r["rounds"]) - 1  # stop at the first round without gain
        assert m["recap"]["target_calls"] == m["dsp_jb"]["target_calls"] + len(r["rounds"])
        assert set(m["prefix"]["passages"]) == {"0", "1", "2", "3", "4", "5"}
    books_df = E.book_scores(E.events_frame(recs), RS.score_variant)
    t3 = E.table3(books_df, n_resamples=200, seed=METHOD.seed, targets=None, variant=RS.score_variant, stem=RS.stem)
    assert set(t3["method"]) == set(E.METHOD_NAMES.values()) and "micro" in t3.columns
    mem = E.membership_table(books_df, tolerance=METHOD.passage_tolerance)
    assert set(mem["split"]) == {"member", "nonmember"}
    # the micro model memorized Ruth, not Jonah: prefix-probing recovers more of the member book
    pre = books_df[books_df.method == "prefix"].set_index("book")["rouge_l"]
    assert pre["ruth"] > pre["jonah"]
    ag = METHOD.agents
    cost = E.cost_table(E.events_frame(recs), agent_price_in=ag.price_in, agent_price_out=ag.price_out,
                        agent_output_tokens_per_call=ag.output_tokens_per_call)
    assert (cost.set_index("method").loc["RECAP", "target_prompts"]
            >= cost.set_index("method").loc["DSP", "target_prompts"])
    assert E.contamination(recs, overlap_threshold=0.3)["metadata_flagged"].mean() <= 1.0


def test_redaction_keeps_no_protected_text(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = run_books(_runner(hf, store), books, progress=False)
    raw = (tmp_path / "events.jsonl").read_text()
    prot = [r for r in recs if r["category"] == "copyrighted"]
    assert prot and all(r["redacted"] and r["metadata"] is None for r in prot)
    for r in prot:
        assert all(m["output"] is None and len(m["output_sha256"]) == 64 for m in r["methods"].values())
        assert all(rd["feedback"] is None and rd["output"] is None for rd in r["rounds"])
    for ev in books[2].events:  # no sentence of the protected book is written anywhere
        for sent in (ev.first_sentence, ev.last_sentence, ev.reference[:60]):
            assert sent not in raw
    assert books[0].events[0].first_sentence in raw  # public domain keeps its metadata text


def test_killed_run_resumes_without_repeated_calls(hf, books, tmp_path):
    ref_cache = {"name": "sqlite", "path": str(tmp_path / "ref.sqlite")}
    from memlab.backends.cache import CachedBackend

    clean = Counting(hf)
    recs = run_books(_runner(CachedBackend(clean, ref_cache["path"]), ResultStore(tmp_path / "a.jsonl")), books,
                     progress=False)
    expected = _table(recs)

    killed = Counting(hf, budget=7)
    cache = tmp_path / "c.sqlite"
    with pytest.raises(KeyboardInterrupt):
        run_books(_runner(CachedBackend(killed, cache), ResultStore(tmp_path / "b.jsonl")), books, progress=False)
    done_before = len(ResultStore(tmp_path / "b.jsonl").rows())
    assert 0 < done_before < len(recs)  # killed mid-way, some events saved
    again = Counting(hf)
    recs2 = run_books(_runner(CachedBackend(again, cache), ResultStore(tmp_path / "b.jsonl")), books, progress=False)
    assert _table(recs2) == expected
    assert killed.requests + again.requests == clean.requests  # no target request computed twice
    # a finished run reruns with no model call at all
    idle = Counting(hf)
    run_books(_runner(CachedBackend(idle, cache), ResultStore(tmp_path / "b.jsonl")), books, progress=False)
    assert idle.calls == 0


def test_target_failure_is_recorded_and_retried(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    run_books(_runner(Counting(hf, fail_with=TimeoutError("server timed out")), store), books[:1], progress=False)
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert lines and all(x["status"] == "error" and "timed out" in x["error"] for x in lines)
    recs = run_books(_runner(hf, ResultStore(tmp_path / "events.jsonl")), books[:1], progress=False)
    assert len(recs) == len(books[0].events) and all(r["status"] == "ok" for r in recs)


def test_truncated_store_line_is_redone(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = run_books(_runner(hf, store), books[:1], progress=False)
    with (tmp_path / "events.jsonl").open("a") as f:
        f.write('{"target": "micro", "book_id": "ruth", "eve')  # a line cut by a kill
    again = ResultStore(tmp_path / "events.jsonl")
    assert len(again.rows()) == len(recs)


def test_llm_agents_on_a_real_backend_fall_back_cleanly(hf, books, tmp_path, recap):
    # any chat backend can be the agent; the micro model answers garbage: no JSON -> logged fallbacks
    agents = Agents(recap.verifier(llm=hf, max_new_tokens=8), recap.jailbreaker(llm=hf, mode="past_tense"),
                    recap.feedback(llm=hf, max_new_tokens=24, max_retries=1))
    runner = _runner(hf, ResultStore(tmp_path / "e.jsonl"))
    runner.a = agents
    recs = run_books(runner, books[:1], progress=False)
    assert len(recs) == len(books[0].events) and all(r["status"] == "ok" for r in recs)
    assert agents.verifier.errors > 0 and agents.verifier.calls > 0
    for r in recs:  # whatever the LLM wrote, no feedback that was kept leaks a 6-gram of the reference
        assert all(n == 0 for n in r["hint_audit"]["feedback_leaks"])


def test_empty_and_tiny_books_are_logged_not_fatal(hf, books, tmp_path, caplog, recap):
    import logging

    from memlab.data.echotrace import book_from_text

    empty = book_from_text("", book_id="empty", title="Empty", category="non_training")
    tiny = book_from_text("Two words.", book_id="tiny", title="Tiny", category="non_training")
    segment_books([empty, tiny], recap.summary(target_words=45), None)
    with caplog.at_level(logging.WARNING):
        recs = run_books(_runner(hf, ResultStore(tmp_path / "e.jsonl")), [empty, tiny, books[0]], progress=False)
    assert len(recs) == len(books[0].events)
    assert any("empty" in r.message and "no events" in r.message for r in caplog.records)
