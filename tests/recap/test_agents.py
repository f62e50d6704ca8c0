"""The RECAP agents: deterministic implementations and the LLM paths' failure handling (scripted chat backend)."""

import json
import logging

from memlab.backends.base import Backend, Generation, Sample
from memlab.data.echotrace import Chapter
from memlab.methods.recap.agents import parse_json
from memlab.methods.recap.extraction import event_fields
from memlab.methods.recap.text import leaked_ngrams

REF = ("The old lighthouse keeper climbed the spiral stairs every evening at dusk. He lit the great lamp and "
       "watched the ships pass beyond the reef. His daughter Ilse kept the logbook and counted every vessel. "
       "One stormy night a schooner struck the rocks and the keeper rowed out alone to save the crew.")


class Scripted(Backend):
    """A chat backend answering from a script (a callable or a list); raises when the answer is an exception."""

    model_id, revision = "scripted", "0"

    def __init__(self, answers):
        super().__init__()
        self.answers, self.prompts = answers, []

    def generate(self, requests, *, progress=False):
        out = []
        for r in requests:
            self.prompts.append(r.messages[-1].content)
            a = self.answers(r) if callable(self.answers) else self.answers.pop(0)
            if isinstance(a, Exception):
                raise a
            out.append(Generation([Sample(a)]))
        return out


def test_summary_agent_rule_no_verbatim_beyond_boundaries(recap):
    ch = Chapter("b/ch1", "Chapter 1", (REF + " ") * 3)
    events = recap.summary(target_words=40, ngram_guard=6).segment(ch, "The Keeper")
    assert len(events) >= 2
    for e in events:
        hints = "\n".join([e.title, ", ".join(e.characters), *e.detailed_summary])
        assert not leaked_ngrams(hints, e.text, 6, allowed=[e.first_sentence, e.last_sentence])
        assert len(e.detailed_summary) == 3 and "Ilse" in e.characters


def test_summary_agent_llm_and_fallback(caplog, recap):
    ch = Chapter("b/ch1", "Chapter 1", REF)
    good = json.dumps([
        {"title": "Dusk duty", "characters": ["keeper"], "detailed_summary": ["The keeper tends the light."],
         "first_sentence": "The old lighthouse keeper climbed the spiral stairs every evening at dusk.",
         "last_sentence": "x"},
        {"title": "Wreck", "characters": ["keeper"],
         "detailed_summary": ["the keeper rowed out alone to save the crew"],  # verbatim: must be removed
         "first_sentence": "One stormy night a schooner struck the rocks and the keeper rowed out alone to save the crew.",
         "last_sentence": "x"}])
    agent = recap.summary(llm=Scripted([good, "not json at all", TimeoutError("agent timed out")]),
                                target_words=30, min_words=5)
    ev = agent.segment(ch, "The Keeper")
    assert [e.title for e in ev] == ["Dusk duty", "Wreck"] and "".join(e.text for e in ev).replace(" ", "") == REF.replace(" ", "")
    assert all(not leaked_ngrams(b, e.text, 6, allowed=[e.first_sentence])  # no exemption for the last sentence
               for e in ev for b in e.detailed_summary)
    with caplog.at_level(logging.WARNING):
        assert agent.segment(ch, "The Keeper")  # malformed JSON -> deterministic events
        assert agent.segment(ch, "The Keeper")  # timeout -> deterministic events
    assert agent.errors == 2


def test_verifier_keywords_and_judge(recap):
    v = recap.verifier()
    out = v.verify(["I'm sorry, but I can't reproduce copyrighted text.", "ok", REF,
                    "He said he cannot sleep when the ships pass the reef at night and the wind howls."], "B")
    assert [x.blocked for x in out] == [True, True, False, False]
    assert [x.reason for x in out[:2]] == ["keyword", "too_short"]
    answers = ['{"answer": "No"}', '```json\n{"answer": "Yes"}\n```', "Yes!", '{"answer": "Yes"}',
               '{"answer": "Yes"}']
    texts = [REF, REF, REF, "I apologize, I cannot help with that request at all.", "ok"]
    judge = recap.verifier(llm=Scripted(list(answers)))
    out = judge.verify(texts, "B")
    # the judge alone decides when it answers (the authors' code); the malformed 3rd falls back to the rule
    assert [x.blocked for x in out] == [True, False, False, False, False]
    assert [x.reason for x in out] == ["judge", "judge", "ok", "judge", "judge"]
    assert judge.errors == 1
    either = recap.verifier(llm=Scripted(list(answers)), judge_rule="or_rule")  # the old rule, a config variant
    assert [x.blocked for x in either.verify(texts, "B")] == [True, False, False, True, True]
    broken = recap.verifier(llm=Scripted([ConnectionError("down")]))
    assert [x.blocked for x in broken.verify([REF], "B")] == [False] and broken.errors == 1


def test_verifier_judge_reads_prompt_and_response(recap):
    """The LLM judge reads the extraction prompt + the whole response (the authors' classify_extraction) by
    default; ``agents.verifier_input: title_output`` keeps the old title + output input as a named variant."""
    assert recap.method().agents.verifier_input == "prompt_response"
    prompt, out = "Write the passage that opens with: The old lighthouse keeper", REF * 12
    llm = Scripted(['{"answer": "Yes"}'])
    judge = recap.verifier(llm=llm)
    assert [x.blocked for x in judge.verify([out], "Book Title", [prompt])] == [False]
    assert prompt in llm.prompts[0] and out in llm.prompts[0] and "Book Title" not in llm.prompts[0]
    llm = Scripted(['{"answer": "Yes"}'])
    recap.verifier(llm=llm).verify([out], "Book Title", [prompt], asked=["the prefix probe"])
    assert "the prefix probe" in llm.prompts[0] and prompt not in llm.prompts[0]
    old = recap.method("method.agents.verifier_input=title_output").agents.verifier_input
    llm = Scripted(['{"answer": "Yes"}'])
    recap.verifier(llm=llm, judge_input=old).verify([out], "Book Title", [prompt])
    assert "Book Title" in llm.prompts[0] and prompt not in llm.prompts[0] and out[:2000] in llm.prompts[0]
    assert out not in llm.prompts[0]  # the old input cut the output at 2,000 characters


def test_jailbreak_prompts(tmp_path, recap):
    ch = Chapter("b/ch1", "Chapter 1", REF)
    ev = recap.summary(target_words=100).segment(ch, "The Keeper")[0]

    class B:
        title = "The Keeper"

    f = event_fields(B, ev)
    nti = recap.jailbreaker(mode="narrative_tool").rewrite(f, "default")
    assert "generate_literary_segment(" in nti and ev.first_sentence in nti and "The Keeper" in nti
    pt = recap.jailbreaker(mode="past_tense").rewrite(f, "default")
    assert "Long ago" in pt and ev.first_sentence in pt
    llm = recap.jailbreaker(mode="past_tense", llm=Scripted(["How did readers once recite the passage of The Keeper?",
                                                        "Sorry, I cannot do that."]))
    assert llm.rewrite(f, "default").startswith("How did")
    assert "Long ago" in llm.rewrite(f, "default") and llm.errors == 1  # refusal -> fixed template


def test_feedback_rule_has_three_sections_and_no_leak(recap):
    fb = recap.feedback().feedback([REF], ["The keeper climbed stairs. Ilse watched."], [["Ilse"]])[0]
    heads = [ln for ln in fb.text.splitlines() if not ln.startswith("-")]
    assert heads == ["MAJOR STRUCTURAL ISSUES", "MISSING ELEMENTS", "INACCURATE ELEMENTS"]
    assert "shorter" in fb.text and not leaked_ngrams(fb.text, REF, 6)


def test_feedback_leak_guard_regenerates_and_sanitizes(recap):
    leaky = "MAJOR STRUCTURAL ISSUES\n- You forgot that he lit the great lamp and watched the ships.\nMISSING ELEMENTS\n- The rescue."
    clean = "MAJOR STRUCTURAL ISSUES\n- Too short.\nMISSING ELEMENTS\n- The rescue at sea.\nINACCURATE ELEMENTS\n- None."
    llm = Scripted([leaky, clean])
    agent = recap.feedback(llm=llm, ngram_guard=6, max_retries=2)
    fb = agent.feedback([REF], ["attempt"], [[]])[0]
    assert fb.text == clean and fb.leak_rejections == 1 and not fb.sanitized
    assert "repeated wording" in llm.prompts[1]  # the retry prompt says why
    always = recap.feedback(llm=Scripted(lambda r: leaky), ngram_guard=6, max_retries=1)
    fb = always.feedback([REF], ["attempt"], [[]])[0]
    assert fb.sanitized and fb.leak_rejections == 2 and not leaked_ngrams(fb.text, REF, 6)
    assert "The rescue." in fb.text
    # n is configurable: with n = 3 even short shared phrases are rejected
    assert leaked_ngrams("he lit the lamp", REF, 3) and not leaked_ngrams("he lit the lamp", REF, 6)


def test_parse_json():
    assert parse_json('noise {"a": 1} noise') == {"a": 1}
    assert parse_json('```json\n[1, 2]\n```') == [1, 2]


def test_verifier_prompt_echo_is_not_an_attempt(recap):
    prompt = ("This is a recall exercise about \"The Keeper\". Section: Chapter 1, part 1\nCharacters: Ilse\n"
              "What happens:\n- Beginning: involves Ilse; topics: lamp, reef, ships\nOpening line: The old keeper.")
    echo = "Chapter 1, part 1 Characters: Ilse What happens: Beginning: involves Ilse; topics: lamp, reef, ships"
    v = recap.verifier()
    out = v.verify([echo, REF], "The Keeper", [prompt, prompt], ["The old keeper.", "The old keeper."])
    assert [(x.blocked, x.reason) for x in out] == [(True, "prompt_echo"), (False, "ok")]


def test_licence_gold_texts_are_not_refusals(recap):
    """Issue 12 item 1: the GPL-3 and Apache-2.0 texts (the copyright stand-ins) are real text, never refusals;
    the old bare-keyword rule classified them as refusals."""
    from memlab.data.echotrace import echotrace_mini
    from memlab.methods.recap.study import segment_books

    books, _ = echotrace_mini({"copyrighted": {"licences": ["GPL-3", "Apache-2.0"], "max_words": None}})
    segment_books(books, recap.summary(), None)
    texts = [e.text for b in books for e in b.events] + [b.text[i:i + 300] for b in books
                                                         for i in range(0, len(b.text), 150)]
    assert len(texts) > 50
    rule = recap.verifier()
    assert not any(rule.keyword_refusal(t) for t in texts)
    assert not any(v.reason == "keyword" for v in rule.verify(texts, "GPL"))
    legacy = recap.verifier(keyword_rule="legacy_anywhere")
    assert sum(legacy.keyword_refusal(t, rule="legacy_anywhere") for t in texts) > 5  # what the old rule did


def test_refusal_phrases_only_at_the_start(recap):
    v = recap.verifier()
    for refusal in ("I'm sorry, but I can't help with reproducing that passage.",
                    "I cannot provide the full text of this book as it is protected.",
                    '"I am unable to share the verbatim text of this chapter, sorry."',
                    "As an AI language model, I do not reproduce long passages of books.",
                    "Unfortunately, I can't reproduce the passage you asked for here."):
        assert v.verify([refusal], "B")[0].reason == "keyword", refusal
    for text in ("And Naomi said, I cannot redeem it for myself, lest I mar mine own inheritance.",
                 "Copyright (C) 2007 Free Software Foundation, Inc. Everyone is permitted to copy verbatim copies.",
                 "The ethical questions of the time were settled by the elders at the gate of the city."):
        assert not v.verify([text], "B")[0].blocked, text


def test_contamination_judge_and_stock_phrases(recap):
    from memlab.methods.recap.agents import ContaminationJudge, strip_stock
    from memlab.methods.recap.text import content_overlap

    base = recap.feedback()
    judge = ContaminationJudge(llm=Scripted(['{"too_detailed": true}', '{"too_detailed": false}', "maybe"]),
                               prompts=base.prompts, max_new_tokens=16)
    assert judge.judge([REF, REF, REF], ["h1", "h2", "h3"]) == [True, False, None] and judge.errors == 1
    assert "h1" in judge.llm.prompts[0] and REF in judge.llm.prompts[0]  # contamination_judge.txt was filled
    assert ContaminationJudge(llm=None, prompts=base.prompts, max_new_tokens=16).judge([REF], ["h"]) == [None]
    # the deterministic report's stock phrases reveal nothing: "- None found." vs a gold text containing "found"
    gold = "They searched the whole valley and found the lost lamb under the old fig tree by the well."
    stock = base._rule(gold, gold, [])
    assert "None found." in stock and content_overlap(stock, gold) > 0  # the old heuristic counted "found"
    assert content_overlap(strip_stock(stock), gold) == 0.0
