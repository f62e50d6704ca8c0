"""The section summary agent (seed 000 §3.1): a chapter → events with their metadata (the dynamic soft prompt).

With an LLM (``method.summary.use_llm``) it runs ``prompts/recap/summary.txt``; otherwise (and on any LLM
failure) the deterministic implementation described in :mod:`memlab.methods.recap.agents`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from memlab.data.echotrace import Chapter, Event
from memlab.methods.recap.agents import Agent, AgentFailure, parse_json
from memlab.methods.recap.text import keywords, leaked_ngrams, names, sentences

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class SectionSummaryAgent(Agent):
    target_words: int
    min_words: int
    ngram_guard: int
    n_characters: int
    n_keywords: int
    leaks_removed: int = 0

    def segment(self, chapter: Chapter, book_title: str) -> list[Event]:
        """Events of one chapter (empty chapter → no events; a chapter shorter than one event → one event)."""
        if self.llm is not None:
            try:
                return self._segment_llm(chapter, book_title)
            except AgentFailure as err:
                self._fail(f"summary agent ({chapter.id})", err)
        return self._segment_rule(chapter)

    # -- deterministic
    def _groups(self, text: str) -> list[tuple[int, int]]:
        sents = sentences(text)
        groups: list[list] = []
        cur: list = []
        n = 0
        for s in sents:
            cur.append(s)
            n += len(s.text.split())
            if n >= self.target_words:
                groups.append(cur)
                cur, n = [], 0
        if cur:
            if groups and n < self.target_words / 2:
                groups[-1].extend(cur)
            else:
                groups.append(cur)
        return [(g[0].start, g[-1].end) for g in groups]

    def _segment_rule(self, chapter: Chapter) -> list[Event]:
        events = []
        for k, (a, b) in enumerate(self._groups(chapter.text)):
            text = chapter.text[a:b]
            if len(text.split()) < self.min_words:
                log.warning("%s: a %d-word segment is shorter than min_words=%d; skipped", chapter.id,
                            len(text.split()), self.min_words)
                continue
            events.append(self._event(chapter, len(events), text, None, None))
        return events

    def _opening(self, text: str) -> tuple[str, str]:
        sents = sentences(text)
        words = text.split()
        first = sents[0].text if sents else text
        if len(sents) < 2 or len(first.split()) > len(words) / 2:
            # one long sentence: the opening line is its first few words (a prefix of the text)
            k = max(3, min(12, len(words) // 3))
            first = " ".join(words[:k])
            first = text[: text.find(words[k - 1], len(" ".join(words[:k - 1]))) + len(words[k - 1])] \
                if text.startswith(words[0]) else first
        last = sents[-1].text if sents else text
        return first, last

    def _event(self, chapter: Chapter, k: int, text: str, title: str | None, meta: dict | None) -> Event:
        first, last = self._opening(text)
        meta = meta or {}
        chars = meta.get("characters") or names(text, top=self.n_characters)
        bullets = meta.get("detailed_summary") or self._bullets(text, chars)
        bullets = [self._guard(b, text, [first]) for b in bullets]  # only the opening line is given anyway
        bullets = [b for b in bullets if b.strip()]
        return Event(id=f"{chapter.id}/e{k + 1}", title=title or meta.get("title") or f"{chapter.title}, part {k + 1}",
                     characters=[str(c) for c in chars], detailed_summary=bullets, first_sentence=first,
                     last_sentence=last, text=text)

    def _bullets(self, text: str, chars: list[str]) -> list[str]:
        toks = text.split()
        thirds = [" ".join(toks[i * len(toks) // 3:(i + 1) * len(toks) // 3]) for i in range(3)]
        exclude = {c.lower() for c in chars}
        out = []
        for label, part in zip(("Beginning", "Middle", "End"), thirds):
            if not part.strip():
                continue
            who = [c for c in chars if c in part]
            kw = keywords(part, top=self.n_keywords, exclude=exclude)
            bits = []
            if who:
                bits.append("involves " + ", ".join(who))
            if kw:
                bits.append("topics: " + ", ".join(kw))
            if bits:
                out.append(f"{label}: " + "; ".join(bits))
        return out

    def _guard(self, bullet: str, text: str, allowed: list[str]) -> str:
        """Drop words of ``bullet`` until it shares no n-gram with ``text`` outside the opening line (which the
        target is given anyway; the last sentence is gold text and gets no exemption)."""
        for _ in range(50):
            leak = leaked_ngrams(bullet, text, self.ngram_guard, allowed=allowed)
            if not leak:
                return bullet
            self.leaks_removed += 1
            gram = sorted(leak)[0]
            # remove the middle word of the first leaked n-gram (case-insensitive, whole word)
            bullet = re.sub(r"\b" + re.escape(gram[len(gram) // 2]) + r"\b", "", bullet, count=1, flags=re.I)
        return ""

    # -- LLM
    def _segment_llm(self, chapter: Chapter, book_title: str) -> list[Event]:
        prompt = self.prompts.fill("summary", target_words=self.target_words, chapter_title=chapter.title,
                                   book_title=book_title, chapter_text=chapter.text)
        self.prompt_chars += len(prompt)
        items = parse_json(self._ask([prompt])[0])
        if not isinstance(items, list) or not items:
            raise AgentFailure("summary answer is not a non-empty JSON list")
        events, pos = [], 0
        starts = []
        for it in items:
            first = str(it.get("first_sentence", "")).strip() if isinstance(it, dict) else ""
            i = chapter.text.find(first, pos) if first else -1
            if i < 0:
                raise AgentFailure(f"boundary sentence not found in the chapter: {first[:60]!r}")
            starts.append(i)
            pos = i + 1
        starts[0] = 0  # cover the chapter from its start
        for k, it in enumerate(items):
            end = starts[k + 1] if k + 1 < len(items) else len(chapter.text)
            text = chapter.text[starts[k]:end].strip()
            if len(text.split()) < self.min_words:
                continue
            meta = {"title": str(it.get("title") or ""), "characters": list(it.get("characters") or []),
                    "detailed_summary": [str(b) for b in (it.get("detailed_summary") or [])]}
            events.append(self._event(chapter, len(events), text, meta["title"] or None, meta))
        return events
