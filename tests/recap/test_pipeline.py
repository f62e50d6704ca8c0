"""The RECAP loop end to end on the micro GPT-NeoX (exact membership), resume, redaction, failures."""

import dataclasses
import json

import pytest

from memlab.backends.base import Backend
from memlab.backends.factory import build_backend
from memlab.data.echotrace import book_from_documents
from memlab.methods.recap import evaluate as E
from memlab.methods.recap.extraction import ExtractionAgent
from memlab.methods.recap.pipeline import Agents, RecapRunner, ResultStore, Target
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
                         budget_factor=2.0, tokens_per_word=1.3, max_context_tokens=96, min_prompt_tokens=32,
                         seed=METHOD.seed)
    settings = dataclasses.replace(RS, **kw)
    membership = {"ruth": "member", "ruth2": "member", "jonah": "nonmember"}
    return RecapRunner(Target("micro", ex, 1.0, 2.0, membership), build_agents(METHOD)[1], settings, store)


def _table(records):
    return E.book_scores(E.events_frame(records), RS.score_variant).to_dict("records")


def test_ladder_rules_and_membership(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = _runner(hf, store).run(books, progress=False)
    assert len(recs) == sum(len(b.events) for b in books) == 9
    for r in recs:
        m = r["methods"]
        # DSP + JB is the DSP output unless DSP was blocked, then the jailbreak output (one more target call)
        if m["dsp"]["blocked"]:
            assert m["dsp_jb"]["target_calls"] == m["dsp"]["target_calls"] + 1
        else:
            assert m["dsp_jb"]["output_sha256"] == m["dsp"]["output_sha256"]
            assert m["dsp_jb"]["target_calls"] == m["dsp"]["target_calls"]
        # RECAP = the last accepted round's output, else DSP + JB's
        accepted = [rd for rd in r["rounds"] if rd["accepted"]]
        want = accepted[-1] if accepted else m["dsp_jb"]
        assert m["recap"]["recall"] == want["recall"] and m["recap"]["output_sha256"] == want["output_sha256"]
        assert len(r["rounds"]) <= 2
        for k, rd in enumerate(r["rounds"]):
            assert rd["accepted"] == (not rd["blocked"] and rd["recall"] > rd["best_before"] + 0.02)
            if not rd["accepted"]:
                assert k == len(r["rounds"]) - 1  # stop at the first round without gain
        assert m["recap"]["target_calls"] == m["dsp_jb"]["target_calls"] + len(r["rounds"])
        assert set(m["prefix"]["passages"]) == set(m["prefix"]["passages_overlap"]) == {"0", "1", "2", "3", "4", "5"}
        for d in [*m.values(), *r["rounds"]]:  # blocked => scored 0, the raw score kept
            if d["blocked"]:
                assert d["recall"] == 0.0 and d["f1"] == 0.0
        if m["dsp"]["blocked"] and m["dsp_jb"]["blocked"]:  # both blocked: no feedback loop (authors)
            assert not r["rounds"] and r["feedback_skipped"] == "dsp_and_jailbreak_blocked"
        # floors: the echo of the hints; the feedback reports only add to the candidate
        assert 0 <= r["baselines"]["echo"]["recall"] <= r["baselines"]["echo_fb"]["recall"] <= 1
        assert r["gold_target_tokens"] > 0 and r["output_budget"] >= 2 * r["gold_target_tokens"] or \
            r["output_budget"] == 24  # 2 × gold, or the configured cap
    df = E.events_frame(recs)
    books_df = E.book_scores(df, RS.score_variant)
    t3 = E.table3(books_df, n_resamples=200, seed=METHOD.seed, targets=None, variant=RS.score_variant, stem=RS.stem)
    assert set(t3["method"]) == set(E.METHOD_NAMES.values()) and "micro" in t3.columns
    # members and non-members never share a row: Ruth/Ruth2 (members) and Jonah (non-member) of public_domain
    assert {"public_domain (members)", "public_domain (non-members)", "copyrighted (members)"} == set(t3["group"])
    row = t3[(t3.group == "public_domain (non-members)") & (t3.method == "RECAP")].iloc[0]
    assert row["micro"].endswith("n=1") and "[" in row["micro"] and "bootstrap" in row["statistic"]
    mem = E.membership_table(books_df, tolerance=METHOD.passage_tolerance, n_resamples=200, seed=METHOD.seed)
    assert set(mem["split"]) == {"member", "nonmember"} and {"echo", "echo_fb"} <= set(mem["method"])
    assert (mem.ci_low <= mem.rouge_l_boot_mean + 1e-12).all() and (mem.rouge_l_boot_mean <= mem.ci_high + 1e-12).all()
    # the micro model memorized Ruth, not Jonah: prefix-probing recovers more of the member book
    pre = books_df[books_df.method == "prefix"].set_index("book")["rouge_l"]
    assert pre["ruth"] > pre["jonah"]
    # the events table carries the summary agent's leakage per event (content-word coverage of the gold)
    ev = E.events_table(df, RS.score_variant)
    assert len(ev) == 9 and ev.summary_leakage.between(0, 1).all() and ev.summary_leakage.gt(0).any()
    # cost: feedback rounds are RECAP's target calls; deterministic agents send no tokens
    cost = E.cost_table(df, agent_price_in=1.0, agent_price_out=1.0).set_index("method")
    n_rounds = sum(len(r["rounds"]) for r in recs)
    assert cost.loc["RECAP", "target_prompts"] - cost.loc["DSP + Jailbreak", "target_prompts"] == n_rounds
    assert (cost.agent_in == 0).all() and set(cost.agent_tokens) == {"none sent (deterministic agents)"}
    stage = E.cost_by_stage(recs).set_index("stage")
    assert stage.loc["verifier_fb", "calls"] == n_rounds and "DSP + Jailbreak" not in stage.loc["verifier_fb", "charged_to"]
    _ladder_sanity_passes_on(books_df)


def _ladder_sanity_passes_on(books_df):
    """Issue 49: RECAP ≥ DSP + JB ≥ DSP holds per book on real pipeline output (the loop keeps its best attempt, the
    jailbreak replaces only blocked outputs scored 0), so the two sanity checks pass on it: why no claim rule may
    show these steps contradicted."""
    from memlab.comparison import RULES, load_claims, rules_for
    from memlab.config import compose
    from memlab.results import StudyResult

    rules_for("recap_table3")
    res = StudyResult(tables={"book_scores": books_df}, config=compose("recap_table3", ["logger=null"]))
    for c in load_claims("recap_table3", kind="sanity"):
        k = RULES[c.id](res, c)
        assert k.passed and k.value == 1.0, k.reason


def test_error_events_score_zero_not_dropped(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = _runner(hf, store).run(books[:1], progress=False)
    ok = E.book_scores(E.events_frame(recs), RS.score_variant)
    err = {**{k: recs[0][k] for k in ("target", "book_id", "book_title", "category", "split", "gold_tokens")},
           "event_id": "ruth/extra", "status": "error", "error": "TimeoutError"}
    both = E.book_scores(E.events_frame(recs + [err]), RS.score_variant)
    for m in ("prefix", "recap"):
        a, b = (x[(x.method == m)].iloc[0] for x in (ok, both))
        assert b["events"] == a["events"] + 1
        if a["rouge_l"] > 0:
            assert b["rouge_l"] < a["rouge_l"]  # the error event weighs in with score 0


def test_budget_and_multi_turn_requests(hf):
    pr = Prompts(METHOD.prompts_dir)
    fields = {"book_title": "B", "event_title": "T", "characters": "A", "characters_list": "[]",
              "summary_bullets": "- x", "summary_list": "[]", "opening_line": "In the beginning", "n_words": 50,
              "gold_tokens": 70}

    class Chat(Backend):
        model_id, revision, has_chat_template = "chat", "0", True

        def generate(self, requests, *, progress=False):
            raise AssertionError("not called")

    chat = ExtractionAgent(backend=Chat(), style="chat", prompts=pr, max_new_tokens=None, budget_factor=2.0,
                           tokens_per_word=1.3, max_context_tokens=None, min_prompt_tokens=32, seed=0)
    req = chat.reattempt_request("base prompt", [("out 1", "report 1"), ("out 2", "report 2")], fields)
    assert req.max_new_tokens == 140  # 2 × gold tokens, no cap
    roles = [m.role for m in req.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m.content for m in req.messages if m.role == "assistant"] == ["out 1", "out 2"]
    assert "report 1" in req.messages[3].content and "report 2" in req.messages[5].content
    # plain: the same content as text, oldest round first, the opening line last; a short context caps the budget
    plain = ExtractionAgent(backend=hf, style="plain", prompts=pr, max_new_tokens=None, budget_factor=2.0,
                            tokens_per_word=1.3, max_context_tokens=96, min_prompt_tokens=32, seed=0)
    wide = dataclasses.replace(plain, max_context_tokens=10_000)
    text = wide.reattempt_request("base prompt", [("out 1", "report 1"), ("out 2", "report 2")], fields).prompt
    assert text.index("out 1") < text.index("report 1") < text.index("out 2") < text.index("base prompt")
    assert text.rstrip().endswith("In the beginning")
    big = plain.reattempt_request("base prompt " * 40, [("out 1", "report 1")], fields)
    assert big.max_new_tokens == 96 - 32 and plain.budget_capped == 1  # yields to the context, down to 64
    assert big.prompt_token_ids is not None and len(big.prompt_token_ids) == 32 and plain.truncated == 1


def test_redaction_keeps_no_protected_text(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = _runner(hf, store).run(books, progress=False)
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
    recs = _runner(CachedBackend(clean, ref_cache["path"]), ResultStore(tmp_path / "a.jsonl")).run(books,
                     progress=False)
    expected = _table(recs)

    killed = Counting(hf, budget=7)
    cache = tmp_path / "c.sqlite"
    with pytest.raises(KeyboardInterrupt):
        _runner(CachedBackend(killed, cache), ResultStore(tmp_path / "b.jsonl")).run(books, progress=False)
    done_before = len(ResultStore(tmp_path / "b.jsonl").rows())
    assert 0 < done_before < len(recs)  # killed mid-way, some events saved
    again = Counting(hf)
    recs2 = _runner(CachedBackend(again, cache), ResultStore(tmp_path / "b.jsonl")).run(books, progress=False)
    assert _table(recs2) == expected
    assert killed.requests + again.requests == clean.requests  # no target request computed twice
    # a finished run reruns with no model call at all
    idle = Counting(hf)
    _runner(CachedBackend(idle, cache), ResultStore(tmp_path / "b.jsonl")).run(books, progress=False)
    assert idle.calls == 0


def test_target_failure_is_recorded_and_retried(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    _runner(Counting(hf, fail_with=TimeoutError("server timed out")), store).run(books[:1], progress=False)
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert lines and all(x["status"] == "error" and "timed out" in x["error"] for x in lines)
    recs = _runner(hf, ResultStore(tmp_path / "events.jsonl")).run(books[:1], progress=False)
    assert len(recs) == len(books[0].events) and all(r["status"] == "ok" for r in recs)


def test_truncated_store_line_is_redone(hf, books, tmp_path):
    store = ResultStore(tmp_path / "events.jsonl")
    recs = _runner(hf, store).run(books[:1], progress=False)
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
    recs = runner.run(books[:1], progress=False)
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
        recs = _runner(hf, ResultStore(tmp_path / "e.jsonl")).run([empty, tiny, books[0]], progress=False)
    assert len(recs) == len(books[0].events)
    assert any("empty" in r.message and "no events" in r.message for r in caplog.records)
