"""Instruction data for the aligned tiny RECAP target (issue 29): the corpus ``recap_instruct``.

A base model trained only on raw text cannot follow RECAP's prompts, and no model we can run here refuses
anything, so neither the extraction prompt nor the jailbreak can do what the paper measures. The zoo family
``kjv_aligned`` (conf/zoo/kjv_aligned.yaml) continues the KJV model that memorized its member books on the
documents built here, from text that is neither a member nor a non-member of any RECAP split:

* ``follow``: the plain DSP prompt of an event (``extraction_plain.txt`` + ``plain_suffix.txt``: book title, event
  title, characters, summary bullets, "Passage:", the opening line — exactly what the plain-style extraction agent
  sends) followed by the rest of the event's own text: the target learns to continue a described passage without
  ever being shown a member passage in this format;
* ``refuse``: the same prompt for a book of the refused category (licence texts and Wikipedia articles, the
  copyright-like category of EchoTrace-mini) followed by the refusal line: the target learns to refuse a direct
  request for that category.

Every setting (books, licences, segmentation, refusal text) comes from the family file's corpus options.
"""

from __future__ import annotations

from memlab.data.echotrace import Book, kjv_books, licence_books, wiki_books
from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.methods.recap.extraction import event_fields, plain_prompt
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.summary import SectionSummaryAgent

KINDS = ("follow", "refuse")


def _segmented(books: list[Book], agent: SectionSummaryAgent) -> list[Book]:
    for b in books:
        for ch in b.chapters:
            ch.events = agent.segment(ch, b.title)
    return books


def _document(kind: str, book: Book, prompts: Prompts, event, refusal: str) -> Document:
    fields = event_fields(book, event)
    prompt = plain_prompt(prompts, prompts.fill("extraction_plain", **fields), fields)
    # follow: the event's own words after the opening line (the prompt ends with it); refuse: the refusal line
    answer = event.text[len(event.first_sentence):] if kind == "follow" else " " + refusal
    return Document(id=f"recap_instruct/{kind}/{event.id}", text=prompt + answer, source=f"memlab:{book.source}",
                    licence=book.licence, meta={"corpus": "recap_instruct", "kind": kind, "book": book.id})


def load_recap_instruct(*, follow_kjv_books: list[str], follow_max_chapters: int, refuse_licences: list[str],
                        refuse_max_words: int, refuse_wiki: list[str], refuse_wiki_max_words: int, refusal: str,
                        prompts_dir: str, segmentation: dict) -> list[Document]:
    """The instruction documents: ``follow`` ones from the KJV books ``follow_kjv_books`` (first
    ``follow_max_chapters`` chapters each), ``refuse`` ones from the licences ``refuse_licences`` (first
    ``refuse_max_words`` words each) and the Wikipedia articles ``refuse_wiki`` (first ``refuse_wiki_max_words``),
    events cut by the deterministic section summary agent with ``segmentation`` = {target_words, min_words,
    n_characters, n_keywords, ngram_guard}."""
    if not refusal.strip():
        raise ConfigError("recap_instruct: the refusal line is empty")
    prompts = Prompts(prompts_dir)
    agent = SectionSummaryAgent(llm=None, prompts=prompts, max_new_tokens=0, **segmentation)
    follow = kjv_books(list(follow_kjv_books), follow_max_chapters)
    notes: list[str] = []
    refuse = licence_books({"licences": list(refuse_licences), "max_words": refuse_max_words}, notes)
    refuse += wiki_books({"wiki": list(refuse_wiki), "wiki_max_words": refuse_wiki_max_words}, notes)
    if notes:
        raise ConfigError(f"recap_instruct: {'; '.join(notes)}")
    docs = [_document("follow", b, prompts, e, refusal) for b in _segmented(follow, agent) for e in b.events]
    docs += [_document("refuse", b, prompts, e, refusal) for b in _segmented(refuse, agent) for e in b.events]
    return docs
