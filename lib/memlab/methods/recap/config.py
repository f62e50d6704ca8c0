"""``conf/method/recap.yaml`` as typed dataclasses: every RECAP setting, once, no defaults in code.

The YAML is the single source of every value; :func:`memlab.schema.typed` builds :class:`RecapConfig` from it
(the runner does so at compose time), so a missing key or an out-of-range value is a one-line
:class:`~memlab.errors.ConfigError` naming the key. ``memlab.config.method_config("recap", [...])`` gives the
same object for tests and interactive use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from memlab.errors import ConfigError
from memlab.methods.recap.agents import REFUSAL_JUDGE_RULES, REFUSAL_KEYWORD_RULES, VERIFIER_TEMPLATES
from memlab.methods.recap.memscore import ParrotConfig
from memlab.methods.recap.pipeline import RecapSettings
from memlab.schema import check

PROMPT_STYLES = ("chat", "plain")
# who a target is, for the claims (conf/paper/000_recap.yaml ``scope``): models trained elsewhere, judged as
# "off-the-shelf small models"; the zoo's instruction-tuned target with known membership; the zoo's base model,
# shown beside them as the control that can neither follow nor refuse a request (issue 29)
TARGET_GROUPS = ("off_the_shelf", "ground_truth_aligned", "ground_truth_base")
JAILBREAKS = ("narrative_tool", "past_tense")
CATEGORIES = ("public_domain", "copyrighted", "non_training", "papers")


# -- EchoTrace-mini (the benchmark; memlab.data.echotrace.echotrace_mini reads it as a plain spec) -------------
@dataclass(frozen=True)
class PublicDomain:
    kjv_books: list[str]                 # KJV books (public domain)
    max_chapters: int | None = field(metadata=check(ge=1))   # null = every chapter


@dataclass(frozen=True)
class Copyrighted:
    licences: list[str]                  # licence texts stand in for copyrighted books
    max_words: int | None = field(metadata=check(ge=1))
    wiki: list[str]                      # and Wikipedia articles (CC BY-SA, the gensim sample), by title
    wiki_max_words: int | None = field(metadata=check(ge=1))


@dataclass(frozen=True)
class NonTraining:
    n_docs: int = field(metadata=check(ge=0))
    max_words: int | None = field(metadata=check(ge=1))
    min_date: str                        # release notes dated on/after this are unseen by every target
    download: bool


@dataclass(frozen=True)
class Papers:
    paths: list[str]                     # arXiv LaTeX sources (tarball / folder / .tex)
    max_input_depth: int = field(metadata=check(ge=1, le=200))  # \input levels inlined at most
    max_source_chars: int = field(metadata=check(ge=1))           # characters inlined in all (repeats count again)


@dataclass(frozen=True)
class BookFile:
    path: str
    category: str = field(metadata=check(choices=CATEGORIES))
    format: str = field(metadata=check(choices=("plain", "gutenberg")))
    title: str | None
    licence: str | None
    date: str | None


@dataclass(frozen=True)
class EchoTraceSpec:
    public_domain: PublicDomain
    copyrighted: Copyrighted
    non_training: NonTraining
    papers: Papers
    files: list[BookFile]

    def spec(self) -> dict:
        """The plain spec :func:`memlab.data.echotrace.echotrace_mini` reads (unset file fields left out)."""
        d = dataclasses.asdict(self)
        d["files"] = [{k: v for k, v in f.items() if v is not None} for f in d["files"]]
        return d


# -- agents ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SummaryConfig:
    use_llm: bool                        # true = the agents.llm model segments and summarizes (summary.txt)
    target_words: int = field(metadata=check(ge=1))   # event length in words
    min_words: int = field(metadata=check(ge=1))      # shorter segments are skipped
    n_characters: int = field(metadata=check(ge=0))   # characters named per event (deterministic agent)
    n_keywords: int = field(metadata=check(ge=0))     # keywords per summary bullet (deterministic agent)
    temperature: float = field(metadata=check(ge=0))  # the LLM summary agent's sampling temperature (paper: 1.0)


@dataclass(frozen=True)
class AgentTokens:
    """Generation budgets of the LLM agents (unused by the deterministic agents)."""

    summary: int = field(metadata=check(ge=1))
    verifier: int = field(metadata=check(ge=1))
    jailbreak: int = field(metadata=check(ge=1))
    feedback: int = field(metadata=check(ge=1))


@dataclass(frozen=True)
class AgentsConfig:
    llm: str | dict | None               # null = deterministic agents; else a conf/model name (or an inline node)
    jailbreak: str = field(metadata=check(choices=JAILBREAKS))
    ngram_guard: int = field(metadata=check(ge=1))    # hints sharing a reference word n-gram are rejected
    max_retries: int = field(metadata=check(ge=0))
    verifier_min_words: int = field(metadata=check(ge=0))
    verifier_max_echo: float = field(metadata=check(ge=0, le=1))
    verifier_input: str = field(metadata=check(choices=tuple(VERIFIER_TEMPLATES)))  # what the LLM judge reads
    refusal_judge: str = field(metadata=check(choices=REFUSAL_JUDGE_RULES))       # alone = the authors' code
    refusal_keywords: str = field(metadata=check(choices=REFUSAL_KEYWORD_RULES))  # the rule's refusal phrases
    max_new_tokens: AgentTokens
    price_in: float = field(metadata=check(ge=0))     # USD / 1M tokens of the agent LLM (App. V)
    price_out: float = field(metadata=check(ge=0))


# -- memorization score -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemscoreConfig:
    enabled: bool
    parrot: ParrotConfig
    thresholds: list[float] = field(metadata=check(ge=0, le=1))   # filter thresholds of the trade-off table
    cache_dir: str                       # trained Parrots, keyed by book and config


@dataclass(frozen=True)
class BootstrapConfig:
    n_resamples: int = field(metadata=check(ge=1))


# -- targets ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Membership:
    """A target trained here with exact membership: member and non-member KJV books are added for it."""

    file: str                            # the family's membership.json
    books: int = field(metadata=check(ge=1))          # member and non-member books added (each)
    events_per_book: int | None = field(metadata=check(ge=1))   # null = every event


@dataclass(frozen=True)
class TargetConfig:
    """One target model (a Table 3 column, named by its key in ``targets``)."""

    model: str | dict                    # a conf/model name, or an inline model node (tests)
    prompt_style: str = field(metadata=check(choices=PROMPT_STYLES))
    budget_factor: float = field(metadata=check(gt=0))         # output budget = ceil(factor · gold tokens)
    max_new_tokens: int | None = field(metadata=check(ge=1))   # cap of the output budget (null = context only)
    tokens_per_word: float = field(metadata=check(gt=0))       # gold tokens ≈ words · this without a tokenizer
    max_context_tokens: int | None = field(metadata=check(ge=1))   # null = the model's own context
    min_prompt_tokens: int = field(metadata=check(ge=1))       # prompt room kept when the budget meets the context
    price_in: float = field(metadata=check(ge=0))              # USD / 1M tokens (App. V); local runs cost 0
    price_out: float = field(metadata=check(ge=0))
    categories: list[str] | None = field(metadata=check(choices=CATEGORIES))   # null = every category
    events_per_book: int | None = field(metadata=check(ge=1))  # of the shared books (null = max_events_per_book)
    membership: Membership | None
    group: str = field(metadata=check(choices=TARGET_GROUPS))   # the claims that judge it (scope)


@dataclass(frozen=True)
class RecapConfig:
    """``conf/method/recap.yaml`` (seed 000) — every value lives there."""

    seed: int
    prompts_dir: str
    echotrace: EchoTraceSpec
    max_events_per_book: int | None = field(metadata=check(ge=1))   # null = every event
    summary: SummaryConfig
    agents: AgentsConfig
    recap: RecapSettings
    memscore: MemscoreConfig
    bootstrap: BootstrapConfig
    passage_tolerance: int = field(metadata=check(ge=0))   # mismatch tolerance of the per-book passage tables
    targets: dict[str, TargetConfig] = field(metadata=check(nonempty=True))

    def __post_init__(self) -> None:
        if self.passage_tolerance not in self.recap.tolerances:
            raise ConfigError(f"config key method.passage_tolerance={self.passage_tolerance}: must be one of "
                              f"method.recap.tolerances ({', '.join(map(str, self.recap.tolerances))})")
