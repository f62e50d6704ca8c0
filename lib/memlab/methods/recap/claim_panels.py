"""How the RECAP rules (:mod:`memlab.methods.recap.claims`) read a study's tables: the claim's scope (the targets
it judges), Table 3's paired book-level bootstrap panels, intervals, and the setting each row states.

Intervals are book-level bootstraps (:mod:`memlab.metrics.bootstrap`, the paper's §4.1 protocol) seeded with the
run's ``method.seed`` with ``method.bootstrap.n_resamples`` resamples (its typed config,
:attr:`memlab.results.StudyResult.method`), so they are deterministic.
A category's "Avg." is computed exactly as the study's Table 3: each target's books are resampled (the same indices
for every method, so method differences are paired), and each resample's per-target means are averaged over
targets; the mean of these resampled averages is Table 3's "Avg." (a bootstrap mean, as the paper prints).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from memlab.comparison import Claim, Finding, full_command, rule, untestable
from memlab.errors import ConfigError
from memlab.methods.recap.agents import agents_label
from memlab.methods.recap.config import TARGET_GROUPS
from memlab.metrics.bootstrap import resample_indices
from memlab.metrics.intervals import expanded_level, n_to_decide, quantile_ci, sign_flip_p
from memlab.zoo_layout import family_of
from memlab.results import StudyResult

METHODS = ("prefix", "dsp", "dsp_jb", "recap")
NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP"}
CATEGORY = {"public_domain": "public-domain", "copyrighted": "copyright-category (stand-in)",
            "non_training": "non-training"}
# each method's echo floor (book_scores methods): what its hints alone score against the gold
FLOOR = {"dsp": "echo", "dsp_jb": "echo", "recap": "echo_fb"}
FLOOR_NAMES = {"echo": "metadata echo", "echo_fb": "metadata + feedback echo"}
# the tables the rules read per target: each must carry a target column to be scoped
PER_TARGET = ("book_scores", "refusals", "feedback_gains_events", "filter_events")
NO_BOOKS = "the run scored no {} books with every method, so the claim cannot be tested"


# -- scope: the targets a claim judges ----------------------------------------------------------------------------
def scoped(res, claim: Claim):
    """``res`` restricted to the targets of ``claim.scope`` (a target group, ``method.targets.<t>.group``): every
    table with a ``target`` column keeps those targets' rows only, so off-the-shelf models and the aligned
    ground-truth target are judged apart (issue 29). A claim without a scope judges every target."""
    if claim.scope is None:
        return res
    if claim.scope not in TARGET_GROUPS:
        raise ConfigError(f"claim {claim.id!r}: scope must be one of {TARGET_GROUPS}, got {claim.scope!r}")
    method = res.method
    keep = {name for name, t in method.targets.items() if t.group == claim.scope}
    unscoped = [k for k in PER_TARGET if k in res.tables and "target" not in res.tables[k].columns]
    if unscoped:
        raise ValueError(f"claim {claim.id!r} judges the {claim.scope} targets, but table(s) {', '.join(unscoped)} "
                         "have no target column: rerun the study")
    return with_tables(res, {k: v[v["target"].isin(keep)] if "target" in getattr(v, "columns", ()) else v
                             for k, v in res.tables.items()})


def with_tables(res, tables: dict):
    """A copy of ``res`` holding ``tables``, with the same metrics and the same run config (its typed method)."""
    out = StudyResult(tables=tables, metrics=res.metrics)
    out.attach(res.config, {"method": res.method})
    return out


def scoped_rule(*claim_ids: str):
    """Register a rule for ``claim_ids``; each judges the targets of its own claim's scope (:func:`scoped`)."""
    def register(fn):
        @functools.wraps(fn)
        def judge(res, claim: Claim) -> Finding:
            f = fn(scoped(res, claim), claim)
            if f.verdict == "inconclusive" and claim.scope and claim.scope.startswith("ground_truth") \
                    and not f.more_data:
                f = dataclasses.replace(f, more_data=trained_books(res, claim))
            return f
        return rule(*claim_ids)(judge)
    return register


def trained_books(res, claim: Claim) -> str:
    """The next step of an undecided ground-truth claim: its targets' member books are the ones their zoo family
    was trained on (``membership.file``), and profile=full adds no member book beyond them."""
    recipes = sorted({f"conf/zoo/{family_of(t.membership.file)}.yaml" for t in res.method.targets.values()
                      if t.group == claim.scope and t.membership is not None})
    return (f"the target's member books are those its zoo family trained on and profile=full adds none: train it "
            f"on more member books ({', '.join(recipes)}), then python -m memlab.run experiment={claim.experiment}")


# -- helpers ----------------------------------------------------------------------------------------------------
def run_seed(res) -> tuple[int, int]:
    """The run's bootstrap seed and resamples: ``method.seed``, ``method.bootstrap.n_resamples``."""
    m = res.method
    return m.seed, m.bootstrap.n_resamples


def resampled(x: np.ndarray, w: np.ndarray | None, seed: int, n: int) -> np.ndarray:
    """(n × k) weighted column means of ``x`` (units × k) over ``n`` book-level resamples drawn with ``seed``."""
    out = []
    for idx in resample_indices(len(x), n, seed):
        xs = x[idx]                                        # (b, units, k)
        if w is None:
            out.append(xs.mean(axis=1))
        else:
            ws = w[idx][..., None]
            out.append((ws * xs).sum(axis=1) / ws.sum(axis=1))
    return np.concatenate(out)


def boot_ci(stats: np.ndarray, level: float, units: int | None = None) -> tuple[float, float]:
    """Percentile interval of bootstrap draws; with ``units`` (books resampled per target) the expanded percentile
    interval, so that few books give a wide interval rather than a falsely narrow one."""
    return quantile_ci(stats, expanded_level(level, max(2, units)) if units else level)


def units_per_target(n_pairs: int, targets) -> int:
    return max(1, n_pairs // max(1, len(targets)))


def nonmember_rows(books) -> "np.ndarray":
    """Rows of ``book_scores`` known to lie outside their target's training set: the tiny model's held-out KJV
    books (``split`` = nonmember, ``group`` = "<category> (non-members)"). Either column suffices; a table with
    neither cannot tell members from non-members and is refused rather than pooled."""
    if "split" not in books.columns and "group" not in books.columns:
        raise ValueError("book_scores has neither a split nor a group column: members and non-members of the "
                         "tiny model cannot be told apart")
    held = np.zeros(len(books), bool)
    if "split" in books.columns:
        held |= (books["split"].astype(str) == "nonmember").to_numpy()
    if "group" in books.columns:
        held |= books["group"].astype(str).str.endswith("(non-members)").to_numpy()
    return held


def member_events(res):
    """Events below the stop score of books in their target's training set as a (target, event) × round table of
    gains, and the number left out: where a target's membership is known (the tiny model: some of its events are
    split member/nonmember) only its member events stay — its non-members and the books no split names (release
    notes, published after every model here) are books it never saw; a target of unknown membership keeps all."""
    g = res.tables.get("feedback_gains_events")
    if g is None or not len(g):
        return None, 0
    held = np.zeros(len(g), bool)
    if "split" in g.columns:
        split = g["split"].astype(str)
        known = split.isin(["member", "nonmember"]).groupby(g["target"]).transform("any")
        held = (known & (split != "member")).to_numpy()
    dropped = len(g[held].drop_duplicates(["target", "event"]))
    g = g[~held]
    if g.empty:
        return None, dropped
    wide = g.pivot_table(index=["target", "event"], columns="round", values="gain", aggfunc="first")
    return wide.ffill(axis=1), dropped   # an event that stopped after round r keeps its round-r gain


def scores(res, category: str, methods=METHODS, members_only: bool = False, target: str | None = None):
    """(target, book) × method ROUGE-L of ``category`` (books scored by every method), or None."""
    books = res.tables.get("book_scores")
    if books is None or not len(books):
        return None
    sub = books[books.category == category]
    if target is not None:
        sub = sub[sub.target == target]
    if members_only:
        sub = sub[~nonmember_rows(sub)]
    if sub.empty:
        return None
    wide = sub.pivot_table(index=["target", "book"], columns="method", values="rouge_l", aggfunc="mean")
    wide = wide.reindex(columns=list(methods)).dropna()
    return None if wide.empty else wide


def paired_p(res, a: str, b: str, scale: float = 1.0) -> float:
    """Sign-flip p of the per-(target, book) differences a − ``scale`` · b on the copyright category: the units the
    interval it guards resamples (:func:`copyright_panel`: member books scored by every method), paired."""
    w = scores(res, "copyrighted", METHODS, members_only=True)
    seed, B = run_seed(res)
    return sign_flip_p((w[a] - scale * w[b]).to_numpy(float), n_resamples=B, seed=seed)


def panel(res, category: str, methods=METHODS, seed_offset: int = 0, members_only: bool = False,
           target: str | None = None):
    """Table 3 "Avg." of ``methods`` on ``category``, as the study computes it: for each target, its books are
    resampled ``bootstrap_resamples`` times with ``resample_indices(n_books, B, seed)`` (the same indices for every
    method: paired), each resample's per-target means are averaged over targets. Returns the (B × methods) matrix of
    resampled averages — its column means are Table 3's "Avg." row — the targets and the number of (target, book)
    pairs; None when no target has books scored by every method. ``members_only`` drops books known to be outside
    a target's training set (:func:`nonmember_rows`: the tiny model's held-out KJV books), so a target's members
    and non-members are never pooled."""
    wide = scores(res, category, methods, members_only, target)
    if wide is None:
        return None
    seed, B = run_seed(res)
    targets = list(dict.fromkeys(wide.index.get_level_values("target")))
    per_target = [resampled(wide.xs(t, level="target").to_numpy(float), None, seed + seed_offset, B)
                  for t in targets]
    return np.mean(per_target, axis=0), targets, len(wide)


def agents_used(res) -> str:
    """The agents' label: the kind the run configured (``method.agents.llm``), with the fallbacks it measured
    (``agent_fallbacks/<role>`` metrics)."""
    return agents_label("llm" if res.method.agents.llm else "deterministic", res.metrics)


def setting_text(res, targets, category: str, n: int, extra: str = "") -> str:
    agents = agents_used(res)
    s = (f"targets: {', '.join(targets)}; {CATEGORY.get(category, category)} books, n = {n} (target, book) pairs; "
         f"EchoTrace-mini; {agents} agents")
    return s + (f"; {extra}" if extra else "")


def copyright_panel(res):
    """Table 3 'Avg.' per method on the copyright category (bootstrap means), each method's paired bootstrap draws
    (``{method: draws}``), the targets and n; a "not testable here" :class:`Finding` when no book there was scored by
    every method. Members only: a target trained here (the aligned tiny target) also scores held-out licences, which
    no claim about extracting training books may pool."""
    p = panel(res, "copyrighted", members_only=True)
    if p is None:
        return untestable("no copyright-category books", NO_BOOKS.format("copyright"), full_command("recap_table3"))
    stats, targets, n = p
    return dict(zip(METHODS, stats.mean(axis=0))), {m: stats[:, k] for k, m in enumerate(METHODS)}, targets, n


def n_if_open(d: float, ci: tuple[float, float], n: int, verdict: str, least: int | None = None) -> int | None:
    """Units an open (inconclusive) test needs (:func:`memlab.metrics.intervals.n_to_decide`), never fewer than
    ``least``: the fewest units at which the rule's own guarding test can reach its level at all
    (:func:`memlab.metrics.intervals.sign_flip_min_n` / ``permutation_min_n`` at the test's level)."""
    if verdict != "inconclusive":
        return None
    need = n_to_decide(d, ci, n, 0.0)
    return max(need, least) if need and least is not None else need

