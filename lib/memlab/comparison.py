"""Paper vs ours: every published number we compare with, judged by a rule written in code.

* The papers' numbers live once, in ``conf/paper/<paper>.yaml`` (a list of ``claims``; each names the experiment
  that tests it). :func:`load_claims` reads them.
* Each method judges its claims in ``memlab/methods/<method>/claims.py`` (the demo: ``memorization_curve``) with
  functions registered by ``@rule("<claim id>")``. A rule receives the study's
  :class:`~memlab.results.StudyResult` (its tables and metrics) and the :class:`Claim`, and returns a
  :class:`Finding`: our value, its 95 % interval where one exists, the setting it was measured in, and a verdict —
  ``reproduced`` (the claim holds in our setting), ``not reproduced`` (it fails; ``reason`` says what we see
  instead) or ``not comparable`` (different model or data; ``reason`` says why). Verdicts are never typed by hand.
* :func:`comparison_table` is what :meth:`memlab.report.Report.save` adds to every run as ``tables/comparison.csv``
  (shown first); the report site (``make report``) and W&B read that table.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from memlab.errors import ConfigError

VERDICTS = ("reproduced", "not reproduced", "not comparable")
COLUMNS = ["claim_id", "paper", "where", "claim", "paper_value", "unit", "our_value", "ci_low", "ci_high", "setting",
           "verdict", "reason"]
# the module holding each experiment family's rules, by experiment-name prefix
RULE_MODULES = {"pearl_": "memlab.methods.pearl.claims", "recap_": "memlab.methods.recap.claims",
                "trace_": "memlab.methods.trace.claims", "memorization_curve": "memlab.methods.memorization_claims"}


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str           # the seed file's short name, e.g. 003_pearl
    where: str           # table / figure / section
    row: str
    column: str
    value: Any           # the published number (None when the claim is qualitative)
    unit: str
    claim: str           # the claim in one line
    section: str
    experiment: str


@dataclass(frozen=True)
class Finding:
    our_value: float | None
    ci: tuple[float, float] | None
    setting: str         # model, data, sizes, n
    verdict: str
    reason: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


RULES: dict[str, Callable[[Any, Claim], Finding]] = {}


def rule(claim_id: str):
    """Register the function that judges claim ``claim_id``."""
    def register(fn):
        RULES[claim_id] = fn
        return fn
    return register


def paper_dir() -> Path:
    from memlab.config import CONF_DIR

    return CONF_DIR / "paper"


def load_claims(experiment: str | None = None) -> list[Claim]:
    """Every claim in conf/paper/*.yaml (those of ``experiment`` only, when given), in file order."""
    out: list[Claim] = []
    for path in sorted(paper_dir().glob("*.yaml")):
        for c in (yaml.safe_load(path.read_text()) or {}).get("claims", []):
            try:
                claim = Claim(**c)
            except TypeError as err:
                raise ConfigError(f"{path.name}: claim {c.get('id', '?')!r}: {err}") from None
            if experiment is None or claim.experiment == experiment:
                out.append(claim)
    return out


def rules_for(experiment: str) -> None:
    """Import the rule module of ``experiment`` (it registers its rules)."""
    for prefix, module in RULE_MODULES.items():
        if experiment.startswith(prefix):
            importlib.import_module(module)
            return


def comparison_table(experiment: str, result):
    """One row per claim of ``experiment``: paper value, our value and interval, setting, verdict, reason."""
    import pandas as pd

    rules_for(experiment)
    rows = []
    for c in load_claims(experiment):
        if c.id not in RULES:
            raise ConfigError(f"claim {c.id!r} ({c.paper}) has no rule: add @rule({c.id!r}) to "
                              f"{next((m for p, m in RULE_MODULES.items() if experiment.startswith(p)), '?')}")
        f = RULES[c.id](result, c)
        rows.append({"claim_id": c.id, "paper": c.paper, "where": c.where, "claim": c.claim, "paper_value": c.value,
                     "unit": c.unit, "our_value": f.our_value, "ci_low": f.ci[0] if f.ci else None,
                     "ci_high": f.ci[1] if f.ci else None, "setting": f.setting, "verdict": f.verdict,
                     "reason": f.reason})
    return pd.DataFrame(rows, columns=COLUMNS)


def claim_dict(c: Claim) -> dict:
    return asdict(c)
