"""The audit's parts in the order it runs them, and each part's planned work units, for the runner's overall line
(``part 3/4 RECAP · units 22/28 · ETA 0:40``, :class:`memlab.progress.Parts`): PEARL's documents under each task,
the documents the MIA scores, RECAP's events, SimpleTrace's prompts."""

from __future__ import annotations

from memlab.methods.recap.config import RecapConfig
from memlab.methods.trace.propme import SETTINGS

PEARL, MIA, RECAP, TRACE = "PEARL", "MIA", "RECAP", "SimpleTrace"


def planned_units(sources: dict[str, list], tasks: list[str], recap: RecapConfig, categories: list[str],
                  events_per_book: int | None, trace_prompts: int, trace_corpora: int) -> dict[str, int]:
    """Each part's work units: ``sources`` are PEARL's and the MIA's documents (by source), ``recap`` RECAP's
    settings with the model's ``categories`` and ``events_per_book``, SimpleTrace ``trace_prompts`` per prompt
    setting and corpus."""
    docs = sum(len(d) for d in sources.values())
    return {PEARL: docs * len(tasks), MIA: docs, RECAP: recap_events(recap, categories, events_per_book),
            TRACE: trace_prompts * len(SETTINGS) * trace_corpora}


def recap_events(recap: RecapConfig, categories: list[str], events_per_book: int | None) -> int:
    """RECAP's planned events: the books ``recap.echotrace`` names in ``categories``, each its first
    ``events_per_book`` events (else the first ``recap.max_events_per_book``, else one)."""
    books = {category: 0 for category in categories}
    for category, n in named_books(recap.echotrace.spec()).items():
        if category in books:
            books[category] += n
    per_book = events_per_book or recap.max_events_per_book or 1
    return sum(books.values()) * per_book


def named_books(spec: dict) -> dict[str, int]:
    """How many books each category of an EchoTrace-mini spec names (:func:`memlab.data.echotrace.echotrace_mini`
    reads them; a missing package's books are fewer, the part then ends early)."""
    pd, cp, nt = (spec.get(k) or {} for k in ("public_domain", "copyrighted", "non_training"))
    counts = {"public_domain": len(pd.get("kjv_books") or []),
              "copyrighted": len(cp.get("licences") or []) + len(cp.get("wiki") or []),
              "non_training": int(nt.get("n_docs") or 0),
              "papers": len((spec.get("papers") or {}).get("paths") or [])}
    for f in spec.get("files") or []:
        category = f.get("category", "public_domain")
        counts[category] = counts.get(category, 0) + 1
    return counts
