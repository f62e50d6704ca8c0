"""The aligned tiny RECAP target's instruction data (corpus ``recap_instruct``, conf/zoo/kjv_aligned.yaml)."""

from __future__ import annotations

import pytest
import yaml

from memlab.data.corpora import load_corpus
from memlab.errors import ConfigError
from memlab.methods.recap.extraction import event_fields, plain_prompt
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.summary import SectionSummaryAgent

SEGMENTATION = dict(target_words=60, min_words=8, n_characters=6, n_keywords=5, ngram_guard=6)
REFUSAL = "I cannot reproduce this text: it is under copyright."


def _options(repo_root, **over) -> dict:
    return dict(follow_kjv_books=["Nahum"], follow_max_chapters=1, refuse_licences=["BSD"], refuse_max_words=200,
                refusal=REFUSAL, prompts_dir=str(repo_root / "prompts" / "recap"), segmentation=SEGMENTATION) | over


def test_documents_are_the_plain_prompt_then_the_passage_or_the_refusal(repo_root):
    from memlab.data.echotrace import kjv_books, licence_books

    docs = load_corpus("recap_instruct", **_options(repo_root))
    follow = [d for d in docs if d.meta["kind"] == "follow"]
    refuse = [d for d in docs if d.meta["kind"] == "refuse"]
    assert follow and refuse and len(follow) + len(refuse) == len(docs)
    prompts = Prompts(repo_root / "prompts" / "recap")
    agent = SectionSummaryAgent(llm=None, prompts=prompts, max_new_tokens=0, **SEGMENTATION)
    book = kjv_books(["Nahum"], 1)[0]
    events = agent.segment(book.chapters[0], book.title)
    assert len(events) == len(follow)
    for d, e in zip(follow, events):
        fields = event_fields(book, e)
        prompt = plain_prompt(prompts, prompts.fill("extraction_plain", **fields), fields)
        # exactly what the plain-style extraction agent sends, then the event's own words after the opening line
        assert d.text.startswith(prompt) and d.text.endswith(e.text.rstrip())
        assert d.text == prompt + e.text[len(e.first_sentence):]
        assert REFUSAL not in d.text
    lic = licence_books({"licences": ["BSD"], "max_words": 200}, [])[0]
    for d in refuse:
        assert d.text.endswith(" " + REFUSAL) and d.text.startswith(lic.title + "\n")
        # the refused passage itself is never shown: only the opening line the prompt gives anyway
        body = d.text[: -len(REFUSAL)].split("Passage:\n", 1)[1].strip()
        assert body and len(body.split()) < 40


def test_bad_options_are_one_line_errors(repo_root):
    with pytest.raises(ConfigError, match="refusal line is empty"):
        load_corpus("recap_instruct", **_options(repo_root, refusal="  "))
    with pytest.raises(ConfigError, match="not found"):
        load_corpus("recap_instruct", **_options(repo_root, refuse_licences=["No-Such-Licence"]))
    with pytest.raises(ConfigError, match="recap_instruct"):
        load_corpus("recap_instruct", **_options(repo_root, colour="red"))


def test_the_aligned_family_keeps_its_instruction_text_apart_from_every_recap_split(repo_root):
    """The follow books and refused licences are neither members nor non-members of the target, and the
    non-members pass the split guard against everything the aligned model (and its parent) trained on."""
    from memlab.models.zoo import load_family

    raw = yaml.safe_load((repo_root / "conf" / "zoo" / "kjv_aligned.yaml").read_text())
    inst = next(g for g in raw["members"] if g["corpus"] == "recap_instruct")["options"]
    fam = load_family("kjv_aligned", repo_root / "conf" / "zoo", repo_root / "models")
    split_ids = {d.id for d in fam.nonmembers} | {i for i in fam.training_ids() if not i.startswith("recap_instruct/")}
    books = {i.split("/")[-1] for i in split_ids}
    assert not books & set(inst["follow_kjv_books"]) and not books & set(inst["refuse_licences"])
    over = fam.check_split()
    assert max(o.ngram8 for o in over.values()) <= raw["split"]["max_shared_8gram"]
    assert {"licences/MPL-2.0", "licences/Artistic", "kjv/book/Joel"} <= set(over)
