"""The audit audited (issue 47): the audit's own procedure — its PEARL tasks and fixed α, its MIA scores with
thresholds fitted at its target FPR on a same-domain known-unseen control, the blind baseline — run blind on zoo
checkpoints whose training set we know, then scored against that truth.

Per checkpoint, a seeded sample of its family's members and non-members (no shared text: the family's split) makes
three sources, all of the family's one domain: ``members + non-members`` (a blind mix, judged), ``non-members only``
(judged: the audit must not call it memorized) and ``known-unseen`` (the control, as large as the audit's own
known-unseen sets, split into a calibration half that fits thresholds and an evaluation half that gives its FPR). The outputs are the realized rates the audit
page prints beside its findings (``selfcheck_rates``: recall on members, FPR on non-members, n, Wilson intervals,
per method, pooled over checkpoints and per checkpoint) and each checkpoint's truth vs the audit's conclusion
(``selfcheck_conclusions``)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from memlab.audit import decide, judge
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


def audit_blind(pearl: PearlConfig, p: AuditParams, backend, sources: dict, halves: dict, model: str,
                progress: bool = False) -> pd.DataFrame:
    """The audit's decisions on one model for ``sources`` (judged against :data:`CONTROLS`), with each document's
    truth (``member``)."""
    from memlab.methods.pearl.study import prompt_style, with_halves

    domains = dict.fromkeys(sources, "text")
    style = "chat" if prompt_style(backend) == "chat" else "raw"
    pdf = with_halves(decide.pearl_frame(pearl, p.tasks, sources, domains, backend, style, model), halves)
    mdf = with_halves(decide.mia_frame(backend, sources, settings=dataclasses.asdict(p.mia),
                                       max_words=p.mia.max_words, progress=progress), halves)
    out = decide.decisions(pdf, mdf, CONTROLS, score=pearl.decision_score, alpha=pearl.alpha,
                           target_fpr=p.mia.target_fpr)
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


def pooled_rates(decisions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per checkpoint, and pooled per method: recall and FPR with n and Wilson intervals; the pooled rows also hold
    the range one audit's rate took across checkpoints (``*_runs_min/max``) and the band the page prints beside a
    finding (``*_band_low/high``: the lowest Wilson bound to the highest over checkpoints — one audit is one run on
    one model, so it is the spread across models, not the pooled interval, that says what one audit realizes)."""
    per_run = rates(decisions, ["checkpoint", "method"])
    spread = per_run.groupby("method", sort=False).agg(
        recall_runs_min=("recall", "min"), recall_runs_max=("recall", "max"),
        fpr_runs_min=("fpr", "min"), fpr_runs_max=("fpr", "max"),
        recall_band_low=("recall_low", "min"), recall_band_high=("recall_high", "max"),
        fpr_band_low=("fpr_low", "min"), fpr_band_high=("fpr_high", "max"), checkpoints=("checkpoint", "nunique"))
    return per_run, rates(decisions, ["method"]).merge(spread.reset_index(), on="method")


def held_out(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint and method: its realized recall and FPR beside the band the page would print had this
    checkpoint never been measured (the *other* checkpoints' ``*_band_low/high``), and whether it lies inside
    (``*_within``: the checkpoint behaves as the printed rates say; None where no other checkpoint ran the rule)."""
    rows = []
    for name in decisions.checkpoint.unique():
        mine = rates(decisions[decisions.checkpoint == name], ["method"]).set_index("method")
        _, rest = pooled_rates(decisions[decisions.checkpoint != name])
        rest = rest.set_index("method")
        for method, r in mine.iterrows():
            row = {"checkpoint": name, "method": method}
            for what in ("recall", "fpr"):
                value, n = r[what], int(r[f"{what}_n"])
                lo, hi = ((rest.loc[method, f"{what}_band_low"], rest.loc[method, f"{what}_band_high"])
                          if method in rest.index and n else (None, None))
                known = lo is not None and not pd.isna(lo)
                row.update({what: value, f"{what}_n": n, f"{what}_printed_low": lo if known else None,
                            f"{what}_printed_high": hi if known else None,
                            f"{what}_within": bool(lo <= value <= hi) if known else None})
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
    """The audit's PEARL, MIA and blind rows run blind on every checkpoint of ``params.checkpoints``."""
    from memlab.audit import plots

    p, catalog, frames, said = params, run.catalog, [], []
    for c in p.checkpoints:
        fam = catalog.family(c.family)
        if not fam.nonmembers:
            raise ConfigError(f"audit_selfcheck: zoo family {c.family!r} has no non-members to judge against")
        name = f"{c.family}/{c.size}/{c.epoch}"
        sources, halves = blind_sources(fam.members, fam.nonmembers, p.n_members, p.n_nonmembers, p.n_control,
                                        f"{method.seed}:{name}")
        epoch = c.epoch if c.epoch == "final" else int(c.epoch)
        with catalog.checkpoint(c.family, c.size, epoch) as backend:
            d = audit_blind(method, p, backend, sources, halves, name, progress=run.progress)
        frames.append(d.assign(checkpoint=name))
        said += conclusions(d, name)
    recap = [recap_blind(run.typed("methods.recap"), p, catalog, r, Path(run.out_dir) / "recap", run.progress)
             for r in p.recap_targets]
    df = pd.concat(frames + recap, ignore_index=True)
    per_run, pooled = pooled_rates(df)
    res = StudyResult()
    res.table("selfcheck_rates", pooled.round(4))
    res.table("selfcheck_rates_by_checkpoint", per_run.round(4), show=False)
    within = held_out(df)
    res.table("selfcheck_held_out", within.round(4))
    verdicts = pd.DataFrame(said)
    res.table("selfcheck_conclusions", verdicts.round(4))
    res.table("selfcheck_decisions", df, show=False)
    res.figure("selfcheck", plots.selfcheck(pooled), caption=plots.SELFCHECK_CAPTION)
    res.metric(**{f"recall/{r.method}": r.recall for r in pooled.itertuples()},
               **{f"fpr/{r.method}": r.fpr for r in pooled.itertuples()},
               conclusions_agreeing=int(verdicts.agrees.sum()), conclusions=len(verdicts),
               held_out_fpr_within=int(within.fpr_within.fillna(True).sum()),
               held_out_recall_within=int(within.recall_within.fillna(True).sum()), held_out_rows=len(within))
    return res
