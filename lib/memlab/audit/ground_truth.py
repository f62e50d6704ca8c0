"""Each audited method's error rates on the tiny ground-truth zoo, read from ``make reproduce``'s runs
(``results/<experiment>/default``) and named by their run (commit, key): PEARL, the MIA scores, the blind baseline
and RECAP from the audit's own procedure run blind on zoo models (``audit_selfcheck``); SimpleTrace from the
tracer's validation (its decision, an exact match in the index, is the same in both). When the run is missing, or
did not measure a rule, the row says why instead of a number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memlab.metrics import blind
from memlab.metrics.intervals import wilson


@dataclass(frozen=True)
class Rates:
    """Error rates of one decision rule on ground truth: recall on members, FPR on non-members (counts kept)."""

    rule: str
    members_flagged: int | None
    members: int | None
    nonmembers_flagged: int | None
    nonmembers: int | None
    run: str                      # the zoo run the rates come from, or why there are none
    recall_band: tuple[float, float] | None = None   # the band one audit's rate took across zoo models and control
    fpr_band: tuple[float, float] | None = None      # draws, printed instead of the pooled Wilson interval

    def row(self) -> dict:
        rec, rec_lo, rec_hi = share(self.members_flagged, self.members)
        fpr, fpr_lo, fpr_hi = share(self.nonmembers_flagged, self.nonmembers)
        if rec is not None and self.recall_band is not None:
            rec_lo, rec_hi = self.recall_band
        if fpr is not None and self.fpr_band is not None:
            fpr_lo, fpr_hi = self.fpr_band
        flagged = (self.members_flagged or 0) + (self.nonmembers_flagged or 0)
        prec = self.members_flagged / flagged if rec is not None and fpr is not None and flagged else None
        return {"gt_rule": self.rule, "gt_recall": rec, "gt_recall_low": rec_lo, "gt_recall_high": rec_hi,
                "gt_fpr": fpr, "gt_fpr_low": fpr_lo, "gt_fpr_high": fpr_hi, "gt_precision": prec,
                "gt_n": f"{self.members} members + {self.nonmembers} non-members" if rec is not None else None,
                "gt_run": self.run}


def share(k: int | None, n: int | None) -> tuple[float | None, float | None, float | None]:
    """k of n as a share with its Wilson 95 % bounds; (None, None, None) when there is nothing to count."""
    if k is None or not n:
        return None, None, None
    return (k / n, *wilson(k, n))


def missing(rule: str, why: str) -> Rates:
    return Rates(rule, None, None, None, None, why)


ZOO_RATES = Path(__file__).resolve().parent / "zoo_rates"   # the committed copy `make reproduce` writes (ship)
SHIPPED_TABLES = {"audit_selfcheck": ["selfcheck_rates.csv"], "trace_validation": ["validation.csv", "negative_control.csv"],
                  "mia_low_fpr": ["low_fpr.csv"]}


def _run(results: Path, experiment: str) -> tuple[Path | None, str]:
    """The run the rates come from: this folder's ``results/<experiment>/default``, else the copy shipped with the
    package (an installed ``memlab`` run outside a checkout), else why there is none."""
    folder = results / experiment / "default"
    info = folder / "run.json"
    if info.exists():
        meta = json.loads(info.read_text())
        return folder, f"{experiment} [{meta.get('key', 'default')}] at {str(meta.get('commit') or '?')[:7]}"
    shipped = ZOO_RATES / experiment
    if (shipped / "source.json").exists():
        src = json.loads((shipped / "source.json").read_text())
        return shipped, f"{experiment} as shipped with memlab (make reproduce: {src['lock']})"
    return None, (f"not measured: results/{experiment}/default has no run (make reproduce, or "
                  f"python -m memlab.run experiment={experiment})")


def ship(root: Path, dest: Path = ZOO_RATES) -> list[Path]:
    """Copy the tables the audit reads its ground truth from (:data:`SHIPPED_TABLES`) out of the checkout's default
    runs into ``dest`` (committed: the installed command prints them without the zoo), each named by the md5 its
    stage's ``tables`` output has in dvc.lock (CI checks the copy is what a clean ``make reproduce`` gives)."""
    from memlab import yaml_text

    lock = yaml_text.safe_load((root / "dvc.lock").read_text())["stages"]
    written = []
    for experiment, names in SHIPPED_TABLES.items():
        tables = f"results/{experiment}/default/tables"
        outs = {o["path"]: o.get("md5") for o in (lock.get(f"exp-{experiment}") or {}).get("outs", [])}
        if tables not in outs or not all((root / tables / n).exists() for n in names):
            continue
        out = dest / experiment / "tables"
        out.mkdir(parents=True, exist_ok=True)
        for n in names:
            (out / n).write_bytes((root / tables / n).read_bytes())
        (dest / experiment / "source.json").write_text(json.dumps({"experiment": experiment, "lock": f"{tables} "
                                                                   f"{outs[tables][:12]}"}) + "\n")
        written += [out / n for n in names] + [dest / experiment / "source.json"]
    return written


def selfcheck_rates(results: Path, experiment: str) -> dict[str, Rates]:
    """Each PEARL / MIA / blind rule's recall and FPR as the audit itself realized them, run blind on zoo
    checkpoints with known members (``audit_selfcheck``'s ``selfcheck_rates``), keyed by the audit's row label."""
    folder, run = _run(results, experiment)
    if folder is None:
        return {"": missing("the audit's own rule, blind on the zoo", run)}
    df = pd.read_csv(folder / "tables" / "selfcheck_rates.csv")
    def zoo(method: str, n: int) -> str:   # RECAP's rows come from the zoo's RECAP targets, the others' checkpoints
        return (f"{n} zoo RECAP targets (their member and held-out KJV books, licences, Wikipedia articles)"
                if method == "RECAP" else f"{n} zoo checkpoints (KJV text)")

    def draws(method: str) -> str:         # what one audit redraws (audit_selfcheck: recap_runs, redraw)
        return ("targets × draws of as many books per category as the audit judges" if method == "RECAP"
                else "checkpoints × control draws")

    return {r.method: Rates(f"the audit's own rule and control, blind on {zoo(r.method, r.checkpoints)}: "
                            f"pooled rates, and beside them the band that holds the central {r.band * 100:g} % of the "
                            f"Wilson bounds {r.runs} single audits realized ({draws(r.method)}; their "
                            f"rates: recall "
                            f"{r.recall_runs_min:.2f}–{r.recall_runs_max:.2f}, FPR {r.fpr_runs_min:.2f}–"
                            f"{r.fpr_runs_max:.2f})",
                            int(r.recall_k), int(r.recall_n), int(r.fpr_k), int(r.fpr_n), run,
                            recall_band=_band(r.recall_band_low, r.recall_band_high),
                            fpr_band=_band(r.fpr_band_low, r.fpr_band_high))
            for r in df.itertuples()}


def _band(low, high) -> tuple[float, float] | None:
    return None if pd.isna(low) or pd.isna(high) else (float(low), float(high))


@dataclass(frozen=True)
class LowFpr:
    """One attack's true-positive rate at low false-positive rates on the zoo family sized for it (``mia_low_fpr``:
    threshold fitted on a calibration half of the non-members, TPR on every member, exact 95 % intervals) and its
    AUC — or why there is none. ``tpr``: target FPR -> (TPR, low, high), None where that FPR is not resolvable."""

    attack: str | None
    tpr: dict
    auc: tuple[float, float, float] | None
    n: str | None
    run: str

    def row(self) -> dict:
        out = {}
        for t in LOW_FPRS:
            v = self.tpr.get(t) or (None, None, None)
            out.update({f"gt_tpr_at_fpr_{t:g}": v[0], f"gt_tpr_at_fpr_{t:g}_low": v[1],
                        f"gt_tpr_at_fpr_{t:g}_high": v[2]})
        auc = self.auc or (None, None, None)
        return {**out, "gt_auc": auc[0], "gt_auc_low": auc[1], "gt_auc_high": auc[2], "gt_low_fpr_attack": self.attack,
                "gt_low_fpr_n": self.n, "gt_low_fpr_run": self.run}


LOW_FPRS = (0.01, 0.001)   # the FPRs the audit page reads TPR at (mia_low_fpr's params.target_fprs)
# besides "MIA (<score>)" -> <score>
LOW_FPR_ATTACKS = {"PEARL (completion)": "pearl_sensitivity", blind.NAME: blind.COLUMN}


def low_fpr_rates(results: Path, experiment: str) -> dict[str, LowFpr]:
    """Each audit row's attack read at low FPR on the zoo (``mia_low_fpr``'s ``low_fpr`` table), keyed by the audit's
    row label (``MIA (<score>)``; PEARL's completion task: PEARL's sensitivity under bit flips, the attack
    mia_low_fpr runs; the blind baseline); ``""`` -> why there is none when the run is missing."""
    folder, run = _run(results, experiment)
    if folder is None:
        return {"": LowFpr(None, {}, None, None, run)}
    df = pd.read_csv(folder / "tables" / "low_fpr.csv")
    out = {}
    for attack, g in df.groupby("attack", sort=False):
        tpr = {t: (float(r.tpr), float(r.tpr_ci_low), float(r.tpr_ci_high)) for r in g.itertuples()
               for t in LOW_FPRS if abs(r.target_fpr - t) < 1e-12 and bool(r.resolvable)}
        r = g.iloc[0]
        n = (f"{int(r.n_members)} members vs {int(r.n_evaluation)} held-out non-members, threshold fitted on "
             f"{int(r.n_calibration)} others; {'every document' if r.documents == 'all' else r.documents}")
        label = next((k for k, v in LOW_FPR_ATTACKS.items() if v == attack), f"MIA ({attack})")
        out[label] = LowFpr(attack, tpr, (float(r.auc), float(r.auc_ci_low), float(r.auc_ci_high)), n, run)
    return out


def low_fpr_lookup(rates: dict[str, LowFpr], method: str) -> LowFpr:
    """``method``'s low-FPR rates, or why there are none."""
    if method in rates:
        return rates[method]
    why = rates[""].run if "" in rates else "not measured: mia_low_fpr does not run this rule"
    return LowFpr(None, {}, None, None, why)


def lookup(rates: dict[str, Rates], method: str) -> Rates:
    """``method``'s rates, or why there are none (the run is missing, or it did not measure that rule)."""
    if method in rates:
        return rates[method]
    why = rates[""].run if "" in rates else "not measured: the self-check did not run this rule"
    return missing("the audit's own rule, blind on the zoo", why)


def trace_rates(results: Path, experiment: str) -> Rates:
    """SimpleTrace: exact matches of spans taken from the index (recall) vs false exact matches of spans that are
    not in it (``trace_validation``)."""
    rule = "exact match of a traced span in the index"
    folder, run = _run(results, experiment)
    if folder is None:
        return missing(rule, run)
    val = pd.read_csv(folder / "tables" / "validation.csv")
    neg = pd.read_csv(folder / "tables" / "negative_control.csv")
    hits = int(round((val.exact_match_rate * val.queries).sum()))
    false = int(round((neg.false_exact_match_rate * neg.queries).sum()))
    return Rates(rule, hits, int(val.queries.sum()), false, int(neg.queries.sum()), run)
