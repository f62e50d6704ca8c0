"""The numbers a note may quote: every experiment's verdicts and values from the default runs, stamped with the
``dvc.lock`` they belong to (its short sha256) and the commit, so anyone can check a quoted number against the
lock that produced it. ``make reproduce`` prints this at its end; ``python -m memlab.summary`` prints it again.
"""

from __future__ import annotations

import csv
import hashlib
import subprocess
import sys
from pathlib import Path

import yaml


def lock_stamp(root: Path) -> str:
    """``dvc.lock <sha256[:12]>`` and the commit, with whether the lock is the committed one."""
    lock = root / "dvc.lock"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:12] if lock.exists() else "missing"
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    changed = subprocess.run(["git", "status", "--porcelain", "--", "dvc.lock"], cwd=root, capture_output=True,
                             text=True).stdout.strip()
    state = "differs from the committed lock" if changed else "= the committed lock"
    return f"dvc.lock {digest} ({state}) at commit {commit}"


def _fmt(value: str) -> str:
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return value or "—"


def claim_rows(results: Path, name: str) -> list[dict] | None:
    """The rows of an experiment's default-run ``comparison.csv`` (None when there is no default run)."""
    table = results / name / "default" / "tables" / "comparison.csv"
    if not table.exists():
        return None
    with table.open(newline="") as f:
        return list(csv.DictReader(f))


def sanity_rows(results: Path, name: str) -> list[dict]:
    """The rows of an experiment's default-run ``sanity.csv`` (checks of the setup, apart from the claims)."""
    table = results / name / "default" / "tables" / "sanity.csv"
    if not table.exists():
        return []
    with table.open(newline="") as f:
        return list(csv.DictReader(f))


def claim_line(r: dict) -> str:
    """A claim as one line: verdict, id, our value [interval], n where known, the paper's value."""
    ci = f" [{_fmt(r.get('ci_low'))}, {_fmt(r.get('ci_high'))}]" if r.get("ci_low") not in (None, "") else ""
    n = f", n {_fmt(r['our_n'])}" if r.get("our_n") else ""
    return (f"    {r.get('verdict') or '?':<18s} {r.get('claim_id', '?')}: ours {_fmt(r.get('our_value'))}{ci}{n}"
            f" vs paper {_fmt(r.get('paper_value'))}")


def summary(root: Path) -> str:
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    counts: dict[str, int] = {}
    lines = [f"memlab: results of {lock_stamp(root)}"]
    for name in sorted(s.removeprefix("exp-") for s in stages if s.startswith("exp-")):
        rows, checks = claim_rows(root / "results", name), sanity_rows(root / "results", name)
        if rows is None and not checks:
            ran = (root / "results" / name / "default" / "run.json").exists()
            lines.append(f"  {name}: " + (f"no claims to judge (its findings: results/{name}/default)" if ran
                                          else "no default run"))
            continue
        lines.append(f"  {name}: {len(rows or [])} claim(s), {len(checks)} sanity check(s)")
        for r in rows or []:
            lines.append(claim_line(r))
            counts[r.get("verdict") or "?"] = counts.get(r.get("verdict") or "?", 0) + 1
        for c in checks:
            ok = "passed" if str(c.get("passed")).lower() == "true" else "FAILED"
            lines.append(f"    sanity {ok:<11s} {c.get('check_id', '?')}: {_fmt(c.get('value'))} "
                         f"(control {_fmt(c.get('control_value'))})")
    tally = ", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    lines.append(f"memlab: claims: {tally or 'none'}")
    return "\n".join(lines)


def main() -> None:
    from memlab.config import repo_root

    print(summary(repo_root()), file=sys.stderr)


if __name__ == "__main__":
    main()
