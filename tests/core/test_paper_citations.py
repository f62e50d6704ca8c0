"""Every claim in conf/paper/*.yaml cites its paper faithfully (issue 49): its ``paper_quote`` occurs verbatim in
the named seed's full text, and its ``section`` names sections that exist in that seed.

Verbatim up to layout: whitespace runs, hyphenation at line breaks, unicode quotes / dashes / non-breaking hyphens,
and the seeds' inline LaTeX (``$\\tau_b = 0.2$`` reads as ``τ_b = 0.2``) are normalized on both sides, nothing else.
A ``section`` is one or more parts joined by " / "; a part may name its seed (``001 §4.2 …``, ``003 §5 …``,
``001 Annex 1``), else it is in the claim's own paper; "Heading, Paragraph title" names a paragraph title inside a
heading; a trailing "(…)" is our annotation (e.g. "(RQ1)", "(Table 4)") and is not looked up.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

from memlab.comparison import load_claims

SEEDS = Path("/work/shared/seeds")

pytestmark = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"paper seeds folder {SEEDS} is absent on this machine")

LATEX = {r"\alpha": "α", r"\tau": "τ", r"\simeq": "≃", r"\leq": "≤", r"\geq": "≥", r"\approx": "≈", r"\times": "×",
         r"\%": "%", r"\_": "_", r"\!": ""}
CHARS = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2010": "-", "\u2011": "-", "\u2012": "-",
         "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u00a0": " ", "\u202f": " "}


def normalize(text: str) -> str:
    """Layout-free text: unicode quotes/dashes unified, inline math unwrapped, line-break hyphenation joined,
    whitespace collapsed (and none kept inside brackets)."""
    text = unicodedata.normalize("NFKC", text)
    for a, b in CHARS.items():
        text = text.replace(a, b)
    text = re.sub(r"\$([^$]*)\$", lambda m: f" {m.group(1)} ", text)
    text = re.sub(r"\\(?:mathrm|text|textit|mathit)\{([^}]*)\}", r"\1", text)
    for a, b in LATEX.items():
        text = text.replace(a, b)
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)       # hyphenation at a line break
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"([(\[]) ", r"\1", text)
    text = re.sub(r" ([)\],.;:])", r"\1", text)
    return text.strip()


@lru_cache(maxsize=None)
def seed_text(number: str) -> str:
    found = sorted(SEEDS.glob(f"{number}_*.txt"))
    assert found, f"no seed {number}_*.txt in {SEEDS}"
    return found[0].read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def seed_normalized(number: str) -> str:
    return normalize(seed_text(number))


def _title(line: str) -> str:
    """A line as a heading candidate: markdown marks dropped, "4.2." numbering read as "4.2", lower case."""
    line = normalize(re.sub(r"</?u>", "", line)).replace("*", "").lstrip("#").strip()
    line = re.sub(r"^(\d+(?:\.\d+)*)\.(\s)", r"\1\2", line)
    return line.lower()


@lru_cache(maxsize=None)
def seed_lines(number: str) -> tuple[str, ...]:
    return tuple(t for t in (_title(l) for l in seed_text(number).splitlines()) if t)


def has_heading(number: str, title: str) -> bool:
    """A line of the seed starts with ``title`` (heading, or a paragraph's run-in title), whole words only."""
    want = _title(title)
    return any(l.startswith(want) and (len(l) == len(want) or not l[len(want)].isalnum()) for l in seed_lines(number))


def section_parts(claim) -> list[tuple[str, list[str]]]:
    """(seed number, [heading, paragraph title, …]) for each " / " part of a claim's ``section``."""
    own = claim.paper.split("_")[0]
    parts = []
    for part in claim.section.split(" / "):
        m = re.match(r"^(\d{3})\s+§?\s*(.*)$", part.strip())
        number, rest = (m.group(1), m.group(2)) if m else (own, part.strip())
        rest = re.sub(r"\s*\([^()]*\)$", "", rest)             # our annotation, e.g. "(RQ1)"
        parts.append((number, [t.strip() for t in rest.split(", ") if t.strip()]))
    return parts


CLAIMS = load_claims()


def test_there_are_claims_to_check():
    assert len(CLAIMS) >= 20
    assert {c.paper for c in CLAIMS} >= {"000_recap", "001_pearl", "002_propme", "003_pearl"}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_paper_quote_is_verbatim_in_the_named_seed(claim):
    assert claim.paper_quote.strip(), f"{claim.id}: no paper_quote"
    number = claim.paper.split("_")[0]
    assert normalize(claim.paper_quote) in seed_normalized(number), (
        f"{claim.id}: paper_quote is not verbatim in seed {number} ({claim.paper}): {claim.paper_quote!r}")


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_section_exists_in_the_seed(claim):
    assert claim.section.strip(), f"{claim.id}: no section"
    for number, titles in section_parts(claim):
        assert titles, f"{claim.id}: empty section part in {claim.section!r}"
        for title in titles:
            assert has_heading(number, title), (
                f"{claim.id}: section {title!r} (of {claim.section!r}) is not a heading or paragraph title "
                f"of seed {number}")


def test_normalize_unwraps_layout_only():
    seed = "PEARL detects ( $\\simeq 2\\%$  at epoch #10) and de-\n tects the partial\u2011start (0.96)"
    assert normalize("PEARL detects (≃ 2% at epoch #10) and detects the partial-start (0.96)") == normalize(seed)
    assert normalize("PEARL detects (≃ 3% at epoch #10)") not in normalize(seed)


def test_a_wrong_section_or_seed_is_caught():
    assert has_heading("001", "4.2 Validation of PSH") and has_heading("001", "Annex 1")
    assert not has_heading("001", "4.2 Validation of IPSH") and not has_heading("003", "4.4 GPT-4o Memorizations")
