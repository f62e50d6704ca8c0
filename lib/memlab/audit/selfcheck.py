"""The audit audited (issue 47): the audit's own procedure — its PEARL tasks and fixed α, its MIA scores with
thresholds fitted at its target FPR on a same-domain known-unseen control, the blind baseline — run blind on zoo
checkpoints whose training set we know, then scored against that truth.

Per checkpoint, a seeded sample of its family's members and non-members (no shared text: the family's split) makes
three sources, all of the family's one domain: ``members + non-members`` (a blind mix, judged), ``non-members only``
(judged: the audit must not call it memorized) and ``known-unseen`` (the control, as large as the audit's own
known-unseen sets, split into a calibration half that fits thresholds and an evaluation half that gives its FPR).
The outputs are the realized rates the audit page prints beside its findings (``selfcheck_rates``: recall on
members, FPR on non-members, n, Wilson intervals, per method, pooled over checkpoints and per checkpoint) and each
checkpoint's truth vs the audit's conclusion (``selfcheck_conclusions``).

One audit is one model and one draw of its control: which known-unseen texts fit the threshold is itself random, and
with a small control it moves the realized FPR more than the model does. So each checkpoint's documents are scored
once and the audit's decisions are redrawn ``draws`` times over seeded reassignments of its non-members to control
(calibration / evaluation halves) and judged sources; the band the page prints spans the central ``band`` share of
the intervals those (checkpoint, draw) audits realized (:func:`spread`), and :func:`held_out` checks each
checkpoint against the band the *other* checkpoints' audits give. RECAP's audits are redrawn over the target's books,
as many per category as the audit judges (:func:`recap_runs`)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from memlab.audit import decide, judge, parts
from memlab.audit.study import AuditParams
from memlab.errors import ConfigError
from memlab.methods.pearl.engine import PearlConfig
from memlab.metrics.intervals import wilson
from memlab.results import StudyResult
from memlab.schema import check
from memlab.study_run import StudyRun

MIX, NULL, CONTROL = "members + non-members", "non-members only", "known-unseen"
CONTROLS = {MIX: CONTROL, NULL: CONTROL, CONTROL: CONTROL}
TRUTH = {MIX: "contains members", NULL: "no members"}


@dataclass(frozen=True)
class Checkpoint:
    family: str                  # a conf/zoo family
    size: str
    epoch: str                   # "final" or a 1-based epoch


@dataclass(frozen=True)
class RecapCheck:
    target: str                  # a target of methods.recap.targets trained here (its membership known)
    family: str                  # its zoo family (the pipeline builds it first)


@dataclass(frozen=True)
class SelfCheckParams(AuditParams):
    """The audit's params (the procedure under test) and the checkpoints it is run on blind."""

    checkpoints: list[Checkpoint] = field(metadata=check(nonempty=True))
    n_members: int = field(metadata=check(ge=1))       # per checkpoint: members in the judged mix
    n_nonmembers: int = field(metadata=check(ge=2))    # per checkpoint, besides the control: half in the mix, half alone
    recap_targets: list[RecapCheck]                     # RECAP as the audit runs it, on these zoo targets
    draws: int = field(metadata=check(ge=1))            # control draws per checkpoint (draw 0: the seeded one)
    band: float = field(metadata=check(gt=0, le=1))     # central share of the audits' rates the page prints

    @property
    def n_control(self) -> int:
        """The control's size: the audit's own known-unseen text set (``sources[calibration_sources.text].n``)."""
        return self.sources[self.calibration_sources["text"]].n


def blind_sources(members: list, nonmembers: list, n_members: int, n_nonmembers: int, n_control: int, seed: str):
    """The three sources of one checkpoint and the control's halves: ``n_control`` non-members as the control (the
    size of the audit's own known-unseen sets), the other sampled non-members split between the mix and the
    non-members-only source; members/non-members keep their ``split``."""
    from memlab.data.sampling import sample_docs
    from memlab.methods.pearl.tables import split_halves

    if len(nonmembers) < n_control + 2:
        raise ConfigError(f"the audit's self-check needs ≥ {n_control + 2} non-members per checkpoint ({n_control} "
                          f"for the control, as the audit's, and 2 to judge), got {len(nonmembers)}")
    m = sample_docs(members, min(n_members, len(members)), seed)   # a small family gives all it has
    nm = sample_docs(nonmembers, min(n_control + n_nonmembers, len(nonmembers)), seed)
    random.Random(f"{seed}:split").shuffle(nm)
    control, rest = nm[:n_control], nm[n_control:]
    half = len(rest) // 2
    sources = {MIX: m + rest[:half], NULL: rest[half:], CONTROL: control}
    return sources, split_halves([d.id for d in control], f"{seed}:halves")


def redraw(sources: dict, seed: str) -> tuple[dict, dict]:
    """The same documents as :func:`blind_sources` gave, with another seeded choice of which non-members are the
    control (and its halves) and which are judged in the mix or alone: the members stay in the mix, every source
    keeps its size."""
    from memlab.methods.pearl.tables import split_halves

    members = [d for d in sources[MIX] if d.split == "member"]
    nm = sorted((d for docs in sources.values() for d in docs if d.split != "member"), key=lambda d: d.id)
    random.Random(f"{seed}:split").shuffle(nm)
    n_control, n_mix = len(sources[CONTROL]), len(sources[MIX]) - len(members)
    control, rest = nm[:n_control], nm[n_control:]
    drawn = {MIX: members + rest[:n_mix], NULL: rest[n_mix:], CONTROL: control}
    return drawn, split_halves([d.id for d in control], f"{seed}:halves")


def score_blind(pearl: PearlConfig, p: AuditParams, backend, sources: dict, model: str, reference=None,
                progress: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The audit's per-document PEARL and MIA/blind/extraction scores of every document of ``sources`` on one model
    (and the reference attack's, with a ``reference`` backend)."""
    from memlab.methods.pearl.study import prompt_style

    domains = dict.fromkeys(sources, "text")
    style = "chat" if prompt_style(backend) == "chat" else "raw"
    pdf = decide.pearl_frame(pearl, p.tasks, sources, domains, backend, style, model)
    mdf = decide.mia_frame(backend, sources, settings=dataclasses.asdict(p.mia), max_words=p.mia.max_words,
                           progress=progress, reference=reference, extraction=p.extraction)
    return pdf, mdf


def parent(catalog, family, checkpoint: Checkpoint):
    """The reference model of a checkpoint, as mia_low_fpr takes it: its family's parent at the same size (epoch 0 of
    a family continued from another: it never saw the family's members or non-members); a family trained from
    scratch has none (its reference attack is not measured)."""
    from contextlib import nullcontext

    if family.recipe.init_from is None:
        return nullcontext(None)
    return catalog.checkpoint(checkpoint.family, checkpoint.size, 0)


def decide_blind(pearl: PearlConfig, p: AuditParams, scores: tuple[pd.DataFrame, pd.DataFrame], sources: dict,
                 halves: dict) -> pd.DataFrame:
    """The audit's decisions for the documents of ``scores`` placed in ``sources`` (judged against
    :data:`CONTROLS`; thresholds fitted on the control's calibration ``halves``), with each document's truth
    (``member``)."""
    from memlab.methods.pearl.study import with_halves

    where = {d.id: name for name, docs in sources.items() for d in docs}
    pdf, mdf = (with_halves(df.assign(source=df.doc_id.map(where)), halves) for df in scores)
    out = decide.decisions(pdf, mdf, CONTROLS, score=pearl.decision_score, alpha=pearl.alpha,
                           target_fpr=p.mia.target_fpr, extraction=p.extraction)
    truth = {d.id: d.split == "member" for docs in sources.values() for d in docs}
    out["member"] = out.doc_id.map(truth)
    out["half"] = out.half.where(out.source == CONTROL, "judged")
    return out


def rates(decisions: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Recall on members and FPR on non-members of the judged sources (the control's documents only fit and check
    thresholds), with n and Wilson 95 % intervals."""
    rows = []
    judged = decisions[decisions.source != CONTROL]
    for key, g in judged.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        m, n = g[g.member], g[~g.member]
        row = dict(zip(by, key))
        for what, part in (("recall", m), ("fpr", n)):
            k, total = int(part.flagged.sum()), len(part)
            lo, hi = wilson(k, total) if total else (None, None)
            row.update({f"{what}_k": k, f"{what}_n": total, what: k / total if total else None,
                        f"{what}_low": lo, f"{what}_high": hi})
        rows.append(row)
    return pd.DataFrame(rows)


def recap_blind(recap, p: AuditParams, catalog, check_: RecapCheck, out_dir: Path, progress: bool) -> pd.DataFrame:
    """RECAP as the audit runs it (its categories, events per book and target settings; a book counts as extracted
    with ≥ 1 recovered passage) on a zoo target: the audit's own books plus the target's member and non-member books,
    one event each, scored against the target's membership (books of unknown membership are left out)."""
    from memlab.methods.recap import evaluate as E
    from memlab.methods.recap.study import run_recap

    t = recap.targets.get(check_.target)
    if t is None or t.membership is None:
        raise ConfigError(f"params.recap_targets: {check_.target!r} must be a target of methods.recap.targets with "
                          f"a membership (one trained here), got {sorted(recap.targets)}")
    if f"/{check_.family}/" not in t.membership.file:
        raise ConfigError(f"params.recap_targets: {check_.target!r} reads {t.membership.file}, not family "
                          f"{check_.family!r}")
    target = dataclasses.replace(t, **dataclasses.asdict(p.recap), membership=dataclasses.replace(
        t.membership, events_per_book=p.recap.events_per_book))
    cfg = dataclasses.replace(recap, targets={check_.target: target})
    run = run_recap(cfg, catalog, out_dir / check_.target, progress=progress)
    books = E.book_scores(E.events_frame(run["all_records"]), cfg.recap.score_variant)
    books = books[(books.method == "recap") & books.split.isin(["member", "nonmember"])]
    col = f"passages_m{cfg.passage_tolerance}"
    return pd.DataFrame({"checkpoint": check_.target, "method": "RECAP", "source": books.category.to_numpy(),
                         "doc_id": books.book.to_numpy(), "half": "judged", "rule": f"{col} ≥ 1",
                         "flagged": (books[col] >= 1).to_numpy(), "member": (books.split == "member").to_numpy()})


def recap_runs(decisions: pd.DataFrame, books_per_row: dict[str, int], draws: int, seed: str) -> pd.DataFrame:
    """RECAP as one audit judges it: each category is one row of the audit page judging the few books the audit's
    EchoTrace names in it (``books_per_row``, e.g. 2 public-domain books), so one audit's RECAP rate has that n, not
    the target's 47 books. Each of ``draws`` seeded draws takes, per category, that many of the target's member books
    (its recall) and as many of its non-member books (its FPR); their spread is the band the page prints, as the
    control draws' are for the other methods (one run of all the books gave a band a 4-book target fell outside of
    by chance: 0.83^4 = 0.47)."""
    out = []
    for draw in range(draws):
        rng = random.Random(f"{seed}:recap:{draw}")
        for source, g in decisions.groupby("source", sort=True):
            n = books_per_row.get(source, 0)
            if not n:
                continue   # the audit names no book of this category: it never judges it
            pick = [rng.sample(sorted(part.doc_id), min(n, len(part))) for part in (g[g.member], g[~g.member])]
            out.append(rates(g[g.doc_id.isin(pick[0] + pick[1])], ["checkpoint", "method"]).assign(draw=draw))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def pooled_rates(decisions: pd.DataFrame, runs: pd.DataFrame, band: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per checkpoint (its seeded draw), and pooled per method: recall and FPR with n and Wilson intervals. The pooled
    rows also hold the range one audit's rate took over ``runs`` (``rates`` of every (checkpoint, draw) audit:
    ``*_runs_min/max``) and the band the page prints beside a finding (``*_band_low/high``: the central ``band``
    share of those audits' Wilson bounds: :func:`spread` — one audit is one model and one control draw, so it is
    their spread, not the pooled interval, that says what one audit realizes)."""
    per_run = rates(decisions, ["checkpoint", "method"])
    return per_run, rates(decisions, ["method"]).merge(spread(runs, band), on="method")


def spread(runs: pd.DataFrame, band: float) -> pd.DataFrame:
    """Per method over ``runs``: min/max of recall and FPR; the band, from the ``(1 - band) / 2`` quantile of the
    runs' lower Wilson bounds to the ``(1 + band) / 2`` quantile of their upper ones, each taken outward (an observed
    bound, never interpolated inward; with band 1: the lowest and highest bound; a run's interval carries the
    sampling noise of its few judged documents, the quantiles the spread over models and control draws); the
    number of checkpoints and runs, and ``band`` itself."""
    tail = (1 - band) / 2
    cols = {}
    for what in ("recall", "fpr"):
        cols |= {f"{what}_runs_min": (what, "min"), f"{what}_runs_max": (what, "max"),
                 f"{what}_band_low": (f"{what}_low", lambda x: x.quantile(tail, interpolation="lower")),
                 f"{what}_band_high": (f"{what}_high", lambda x: x.quantile(1 - tail, interpolation="higher"))}
    out = runs.groupby("method", sort=False).agg(**cols, checkpoints=("checkpoint", "nunique"),
                                                  runs=("checkpoint", "size"))
    return out.reset_index().assign(band=band)


def held_out(decisions: pd.DataFrame, runs: pd.DataFrame, band: float) -> pd.DataFrame:
    """Per checkpoint and method: its realized recall and FPR (its seeded draw) beside the band the page would print
    had this checkpoint never been measured (the *other* checkpoints' audits), whether it lies inside (``*_within``:
    None where no other checkpoint ran the rule), and the share of this checkpoint's own draws inside
    (``*_draws_within``)."""
    rows = []
    for name in decisions.checkpoint.unique():
        mine = rates(decisions[decisions.checkpoint == name], ["method"]).set_index("method")
        rest = spread(runs[runs.checkpoint != name], band).set_index("method")
        own = runs[runs.checkpoint == name]
        for method, r in mine.iterrows():
            row = {"checkpoint": name, "method": method}
            drawn = own[own.method == method]
            for what in ("recall", "fpr"):
                value, n = r[what], int(r[f"{what}_n"])
                lo, hi = ((rest.loc[method, f"{what}_band_low"], rest.loc[method, f"{what}_band_high"])
                          if method in rest.index and n else (None, None))
                known = lo is not None and not pd.isna(lo)
                inside = drawn[what].between(lo, hi).mean() if known and len(drawn) else None
                row.update({what: value, f"{what}_n": n, f"{what}_printed_low": lo if known else None,
                            f"{what}_printed_high": hi if known else None,
                            f"{what}_within": bool(lo <= value <= hi) if known else None,
                            f"{what}_draws_within": inside})
            rows.append(row)
    return pd.DataFrame(rows)


def conclusions(decisions: pd.DataFrame, checkpoint: str) -> list[dict]:
    """Each judged source's conclusion beside its truth."""
    rows = []
    for r in judge.judged_rows(decisions, CONTROLS):
        if r["source"] == CONTROL:
            continue
        said = r["conclusion"] == judge.ABOVE
        rows.append({"checkpoint": checkpoint, **r, "truth": TRUTH[r["source"]],
                     "agrees": said == (r["source"] == MIX)})
    return rows


def selfcheck(method: PearlConfig, params: SelfCheckParams, run: StudyRun) -> StudyResult:
    """The audit's PEARL, MIA and blind rows run blind on every checkpoint of ``params.checkpoints``, each scored
    once and decided over ``params.draws`` control draws."""
    from memlab.audit import plots

    p, catalog, frames, said, runs = params, run.catalog, [], [], []
    for c in p.checkpoints:
        fam = catalog.family(c.family)
        if not fam.nonmembers:
            raise ConfigError(f"audit_selfcheck: zoo family {c.family!r} has no non-members to judge against")
        name = f"{c.family}/{c.size}/{c.epoch}"
        seed = f"{method.seed}:{name}"
        sources, halves = blind_sources(fam.members, fam.nonmembers, p.n_members, p.n_nonmembers, p.n_control, seed)
        epoch = c.epoch if c.epoch == "final" else int(c.epoch)
        with catalog.checkpoint(c.family, c.size, epoch) as backend, parent(catalog, fam, c) as reference:
            scores = score_blind(method, p, backend, sources, name, reference, progress=run.progress)
        for draw in range(p.draws):
            drawn = (sources, halves) if draw == 0 else redraw(sources, f"{seed}:draw:{draw}")
            d = decide_blind(method, p, scores, *drawn).assign(checkpoint=name)
            runs.append(rates(d, ["method"]).assign(checkpoint=name, draw=draw))
            if draw == 0:
                frames.append(d)
                said += conclusions(d, name)
    recap_cfg = run.typed("methods.recap")
    recap = [recap_blind(recap_cfg, p, catalog, r, Path(run.out_dir) / "recap", run.progress) for r in p.recap_targets]
    per_row = parts.named_books(recap_cfg.echotrace.spec())
    runs += [recap_runs(r, per_row, p.draws, f"{method.seed}:{c.target}") for r, c in zip(recap, p.recap_targets)]
    df, runs = pd.concat(frames + recap, ignore_index=True), pd.concat(runs, ignore_index=True)
    per_run, pooled = pooled_rates(df, runs, p.band)
    res = StudyResult()
    res.table("selfcheck_rates", pooled.round(4))
    res.table("selfcheck_rates_by_checkpoint", per_run.round(4), show=False)
    res.table("selfcheck_draws", runs.round(4), show=False)
    within = held_out(df, runs, p.band)
    res.table("selfcheck_held_out", within.round(4))
    verdicts = pd.DataFrame(said)
    res.table("selfcheck_conclusions", verdicts.round(4))
    res.table("selfcheck_decisions", df, show=False)
    res.figure("selfcheck", plots.selfcheck(pooled), caption=plots.SELFCHECK_CAPTION)
    res.metric(**{f"recall/{r.method}": r.recall for r in pooled.itertuples()},
               **{f"fpr/{r.method}": r.fpr for r in pooled.itertuples()},
               conclusions_agreeing=int(verdicts.agrees.sum()), conclusions=len(verdicts),
               held_out_fpr_within=int(within.fpr_within.fillna(True).sum()),
               held_out_recall_within=int(within.recall_within.fillna(True).sum()), held_out_rows=len(within),
               held_out_draws_within=round(float(pd.concat([within.recall_draws_within,
                                                            within.fpr_draws_within]).mean()), 4))
    return res
