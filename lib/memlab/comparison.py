"""Paper vs ours: every published claim we test, judged by a rule written in code (issue 27).

* The papers' claims live once, in ``conf/paper/<paper>.yaml`` (a list of ``claims``; each names the experiment
  that tests it, the paper's n, its sentence, and the deviations of our setting). :func:`load_claims` reads them.
  An entry with ``kind: sanity`` is not a claim but a check of our own setup (it cannot fail unless memlab is
  broken); it goes to ``tables/sanity.csv`` with a negative control, never to the verdicts.
* Each method judges its claims in ``memlab/methods/<method>/claims.py`` (the demo: ``memorization_claims``) with
  functions registered by ``@rule("<claim id>")``. A rule receives the study's :class:`~memlab.results.StudyResult`
  (its tables, its measured metrics, and the settings the run used as typed config: ``res.method``, ``res.params``
  — never a setting read back from metrics with a default) and the :class:`Claim`, states the claim as a hypothesis with a direction (and the paper's magnitude where it
  gives one) in its docstring's first paragraph, and decides on an interval of the effect (:func:`decide`):

  - ``reproduced``: the interval lies on the claim's side of the threshold;
  - ``contradicted``: it lies on the other side;
  - ``inconclusive``: it straddles; ``n_needed`` is the n at which the observed effect would decide;
  - ``not testable here``: the mechanism could not fire or the data was not produced; ``reason`` gives the
    command line that would test it.

  Several tests in one claim share its family-wise level (Bonferroni; :func:`combine`): ``alpha`` of the claim's
  paper file (conf/paper/<paper>.yaml, one per file), split over the claim's tests in one place: :func:`claim_level`.
* :func:`comparison_table` / :func:`sanity_table` are what :meth:`memlab.report.Report.save` writes as
  ``tables/comparison.csv`` and ``tables/sanity.csv``.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from memlab.errors import ConfigError

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable here")
COLUMNS = ["claim_id", "paper", "where", "claim", "paper_value", "unit", "statistic", "our_value", "ci_low",
           "ci_high", "p_value", "paper_n", "our_n", "n_needed", "setting", "profile", "deviations", "verdict",
           "reason", "rule", "paper_quote"]
SANITY_COLUMNS = ["check_id", "check", "value", "control", "control_value", "passed", "reason"]
KINDS = ("claim", "sanity")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str           # the seed file's short name, e.g. 003_pearl
    where: str           # table / figure / section
    row: str
    column: str
    value: Any           # the published number (None when the claim is qualitative)
    unit: str
    claim: str           # the claim in one line (marked "our reading" when no paper states it)
    section: str
    experiment: str
    kind: str = "claim"  # "claim" or "sanity"
    paper_n: Any = None  # the paper's n behind ``value`` (e.g. 1000 members, 100 samples per source)
    paper_quote: str = ""
    threshold: float | None = None   # the effect's threshold from the paper's magnitude or our stated reading
    stated_at: float | None = None   # the paper's decision threshold a claim is stated at, where it is not the run's (τ_b = 0.4)
    deviations: tuple[str, ...] = field(default_factory=tuple)   # ids in conf/deviations/<paper>.yaml
    scope: str | None = None   # the part of the run the claim judges, as its method names it (RECAP: a target group)
    alpha: float | None = None   # family-wise error rate of the claim's tests (its paper file's ``alpha``)


@dataclass(frozen=True)
class Finding:
    our_value: float | None
    ci: tuple[float, float] | None
    setting: str         # model, data, sizes
    verdict: str
    reason: str
    statistic: str = ""  # what our_value is (same unit as the paper's value, or why it can't be)
    p_value: float | None = None
    our_n: int | None = None
    n_needed: int | None = None
    more_data: str = ""  # how to get more data when the patient profile adds none (default: full_command)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Check:
    """A sanity check of our setup (``kind: sanity``), with its negative control."""
    value: float | None
    control: str
    control_value: float | None
    passed: bool
    reason: str


RULES: dict[str, Callable[[Any, Claim], Any]] = {}


def rule(*claim_ids: str):
    """Register the function that judges claim (or sanity check) ``claim_ids`` (one rule may judge several claims,
    e.g. one per ``scope``)."""
    def register(fn):
        for claim_id in claim_ids:
            RULES[claim_id] = fn
        return fn
    return register


def decide(ci: tuple[float, float] | None, threshold: float = 0.0, direction: str = "above") -> str:
    """The verdict of one interval against the claim's threshold: ``above`` claims the effect exceeds it,
    ``below`` that it falls short of it."""
    if ci is None:
        return "inconclusive"
    lo, hi = ci
    if direction == "above":
        return "reproduced" if lo > threshold else "contradicted" if hi < threshold else "inconclusive"
    if direction == "below":
        return "reproduced" if hi < threshold else "contradicted" if lo > threshold else "inconclusive"
    raise ValueError(f"direction must be 'above' or 'below', got {direction!r}")


def claim_level(claim: Claim, k: int = 1) -> float:
    """The two-sided level of each of a claim's ``k`` tests: Bonferroni at the claim's family-wise ``alpha``, set
    once per paper file (conf/paper/<paper>.yaml). The one place every rule splits its error rate."""
    if claim.alpha is None:
        raise ConfigError(f"claim {claim.id!r}: no alpha (the family-wise error rate of its tests) in "
                          f"conf/paper/{claim.paper}.yaml")
    return bonferroni_level(k, float(claim.alpha))


def bonferroni_level(k: int, alpha: float) -> float:
    """Two-sided confidence level of each of ``k`` intervals so that all hold jointly at 1 − alpha."""
    if k < 1:
        raise ValueError(f"need at least one test, got {k}")
    return 1 - alpha / k


def guard(verdict: str, p_value: float | None, level: float) -> str:
    """A bootstrap interval's verdict, kept only when the test of no difference agrees (p below 1 − level): with
    few units a percentile interval can exclude 0 when no permutation of the data could."""
    if verdict in ("reproduced", "contradicted") and p_value is not None and p_value >= 1 - level:
        return "inconclusive"
    return verdict


def combine(verdicts: list[str]) -> str:
    """One claim made of several tests that must all hold: contradicted if any test is, reproduced if all are."""
    if not verdicts:
        raise ValueError("no test to combine")
    if "contradicted" in verdicts:
        return "contradicted"
    return "reproduced" if all(v == "reproduced" for v in verdicts) else "inconclusive"


def untestable(setting: str, why: str, command: str) -> Finding:
    """``not testable here``: ``why`` the mechanism could not fire, and the ``command`` that would test it."""
    return Finding(None, None, setting, "not testable here", f"{why}; test it with: {command}")


def full_command(experiment: str) -> str:
    """The command line that runs ``experiment`` at the patient profile (conf/scale/<experiment>_full.yaml)."""
    return f"python -m memlab.run experiment={experiment} profile=full"


def rule_text(claim_id: str) -> str:
    """The rule's docstring's first paragraph, on one line: its hypothesis and decision."""
    doc = inspect.getdoc(RULES[claim_id]) or ""
    return " ".join(doc.split("\n\n")[0].split())


def paper_dir() -> Path:
    from memlab.config import CONF_DIR

    return CONF_DIR / "paper"


def load_claims(experiment: str | None = None, kind: str | None = None) -> list[Claim]:
    """Every claim in conf/paper/*.yaml (of ``experiment`` / of ``kind`` only, when given), in file order; each file
    is parsed once per process (:func:`memlab.config.read_yaml`)."""
    from memlab.config import read_yaml

    out: list[Claim] = []
    for path in sorted(paper_dir().glob("*.yaml")):
        try:
            doc = read_yaml(path) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path.name}: not valid YAML: {' '.join(str(err).split())}") from None
        shared = {"alpha": doc["alpha"]} if "alpha" in doc else {}   # the file's family-wise α, for every claim
        for c in doc.get("claims", []):
            try:
                claim = Claim(**{**shared, **c, "deviations": tuple(c.get("deviations") or ())})
            except TypeError as err:
                raise ConfigError(f"{path.name}: claim {c.get('id', '?')!r}: {err}") from None
            if claim.kind not in KINDS:
                raise ConfigError(f"{path.name}: claim {claim.id!r}: kind must be one of {KINDS}, got {claim.kind!r}")
            if (experiment is None or claim.experiment == experiment) and (kind is None or claim.kind == kind):
                out.append(claim)
    return out


def paper_mark(claim_id: str) -> tuple[float, str] | None:
    """A claim's paper value and a legend label naming where the paper gives it ("paper, Fig. 4 (a)"), for the
    figures that draw the paper's number beside ours; None when the claim gives no number."""
    found = [c for c in load_claims() if c.id == claim_id]
    if not found:
        raise ConfigError(f"no claim {claim_id!r} in {paper_dir()}")
    c = found[0]
    return (float(c.value), f"paper, {c.where}") if isinstance(c.value, (int, float)) else None


def rule_module(experiment: str) -> str | None:
    """The module whose @rule functions judge ``experiment``'s claims: its YAML's ``rules`` (as ``study`` names
    its study function), None when it has none."""
    from memlab.config import CONF_DIR, read_yaml

    path = CONF_DIR / "experiment" / f"{experiment}.yaml"
    if not path.is_file():
        raise ConfigError(f"no experiment {experiment!r}: {path} does not exist")
    return (read_yaml(path) or {}).get("rules")


def rules_for(experiment: str) -> None:
    """Import the rule module of ``experiment`` (it registers its rules)."""
    module = rule_module(experiment)
    if module is None and load_claims(experiment):
        raise ConfigError(f"experiment {experiment!r} has claims in conf/paper/ but names no rules module: set "
                          f"`rules:` in conf/experiment/{experiment}.yaml")
    if module is not None:
        importlib.import_module(module)


def _judge(experiment: str, c: Claim, result):
    if c.id not in RULES:
        raise ConfigError(f"claim {c.id!r} ({c.paper}) has no rule: add @rule({c.id!r}) to "
                          f"{rule_module(experiment)}")
    return RULES[c.id](result, c)


def comparison_table(experiment: str, result, profile: str | None = None):
    """One row per claim (``kind: claim``) of ``experiment``: paper value and ours in one statistic, interval,
    p-value, n, setting, deviations, verdict, reason, the rule's text and the paper's sentence."""
    import pandas as pd

    rules_for(experiment)
    rows = []
    for c in load_claims(experiment, kind="claim"):
        f = _judge(experiment, c, result)
        rows.append({"claim_id": c.id, "paper": c.paper, "where": c.where, "claim": c.claim, "paper_value": c.value,
                     "unit": c.unit, "statistic": f.statistic, "our_value": f.our_value,
                     "ci_low": f.ci[0] if f.ci else None, "ci_high": f.ci[1] if f.ci else None,
                     "p_value": f.p_value, "paper_n": c.paper_n, "our_n": f.our_n,
                     "n_needed": f.n_needed if f.verdict == "inconclusive" else None,   # only an open question has one
                     "setting": f.setting, "profile": profile, "deviations": ";".join(c.deviations),
                     "verdict": f.verdict, "reason": _with_next_step(experiment, f), "rule": rule_text(c.id),
                     "paper_quote": f"{c.paper_quote} ({c.section})" if c.paper_quote else c.section})
    return pd.DataFrame(rows, columns=COLUMNS)


def _with_next_step(experiment: str, f) -> str:
    """An open question says how to close it: an inconclusive row without a command gets the n that would decide at
    the observed effect (when the rule computed one) and the command that gets more data (the rule's, else the
    patient profile's)."""
    if f.verdict != "inconclusive" or "python -m memlab.run" in f.reason:
        return f.reason
    need = f"n ≈ {f.n_needed} would decide at the observed effect (ours {f.our_n}); " if f.n_needed else ""
    return f"{f.reason}; {need}more data: {f.more_data or full_command(experiment)}"


def sanity_table(experiment: str, result):
    """One row per sanity check (``kind: sanity``) of ``experiment``, with its negative control and pass/fail."""
    import pandas as pd

    rules_for(experiment)
    rows = []
    for c in load_claims(experiment, kind="sanity"):
        k = _judge(experiment, c, result)
        rows.append({"check_id": c.id, "check": c.claim, "value": k.value, "control": k.control,
                     "control_value": k.control_value, "passed": bool(k.passed), "reason": k.reason})
    return pd.DataFrame(rows, columns=SANITY_COLUMNS)


def claim_dict(c: Claim) -> dict:
    return asdict(c)
