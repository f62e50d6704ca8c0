"""Which swept keys changed nothing a sweep's summary shows: after ``python -m memlab.run -m …``, a swept key whose
points wrote byte-identical ``metrics.json`` is one warning line naming the tables that did change.

A scalar key often acts on one table only (``method.alpha`` is the threshold of PEARL's flag tables): the sweep's
summary, built from ``metrics.json``, then shows flat lines, and the warning says where the effect is. Points are
compared within each combination of the other swept keys' values; points that did not run in this sweep are left out
(:func:`point_status`), and a key is judged only when some combination has two points that ran.
"""

from __future__ import annotations

import sys
from pathlib import Path


def point_status(folder: Path, since: float | None = None) -> str:
    """What a sweep point's run folder holds for a sweep that started at ``since`` (epoch seconds; None: unknown):
    "failed" (its last run failed: the runner keeps ``<key>.failed/`` beside it and removes that folder when a run
    of the key succeeds), "missing" (no ``metrics.json``), "stale" (numbers from a run that started before this
    sweep: never shown as this sweep's) or "ran"."""
    failed = folder.with_name(f"{folder.name}.failed")
    if failed.is_dir() and (since is None or failed.stat().st_mtime >= since - 1):
        return "failed"
    if not (folder / "metrics.json").is_file():
        return "missing"
    if since is not None and _started(folder) < int(since):  # run.json's start is whole seconds
        return "stale"
    return "ran"


def _started(folder: Path) -> float:
    """When the run in ``folder`` started (run.json), else when it wrote metrics.json."""
    import json
    from datetime import datetime

    try:
        return datetime.fromisoformat(json.loads((folder / "run.json").read_text())["started"]).timestamp()
    except (OSError, ValueError, KeyError, TypeError):
        return (folder / "metrics.json").stat().st_mtime


def idle_keys(results: Path, experiment: str, overrides: list[str],
              since: float | None = None) -> dict[str, dict[str, tuple[int, int]]]:
    """Swept key → {table file name → (rows that differ, rows)} for every swept key that changed no byte of
    ``metrics.json`` across the points that ran in this sweep (:func:`point_status`; {} as the tables when no table
    differs either)."""
    from memlab.runner.keys import expand, experiment_of, run_key

    swept, points = expand(overrides)
    points = [p for p in points if experiment_of(p) in (None, experiment)]
    folders = {tuple(p): results / experiment / run_key(p) for p in points}
    out = {}
    for key in (k for k in swept if k != "experiment"):
        groups: dict[tuple, list[Path]] = {}
        for p in points:
            rest = tuple(o for o in p if o.split("=", 1)[0] in swept and o.split("=", 1)[0] != key)
            if point_status(folders[tuple(p)], since) == "ran":
                groups.setdefault(rest, []).append(folders[tuple(p)])
        groups = {g: fs for g, fs in groups.items() if len(fs) > 1}
        if not groups or any(_differ([f / "metrics.json" for f in fs]) for fs in groups.values()):
            continue
        out[key] = _changed_tables(list(groups.values()))
    return out


def _differ(files: list[Path]) -> bool:
    return len({f.read_bytes() if f.is_file() else None for f in files}) > 1


def _changed_tables(groups: list[list[Path]]) -> dict[str, tuple[int, int]]:
    """Table file name → (data rows that differ at the same position in some group, most data rows of a point)."""
    changed = {}
    for folders in groups:
        names = sorted({t.name for f in folders for t in (f / "tables").glob("*.csv")})
        for name in names:
            files = [f / "tables" / name for f in folders]
            if not _differ(files):
                continue
            lines = [f.read_bytes().splitlines()[1:] if f.is_file() else [] for f in files]
            n = max(len(ls) for ls in lines)
            rows = sum(len({ls[i] if i < len(ls) else None for ls in lines}) > 1 for i in range(n))
            old = changed.get(name, (0, 0))
            changed[name] = (max(old[0], rows), max(old[1], n))
    return changed


def warn_idle_keys(results: Path, experiment: str, overrides: list[str], since: float | None = None) -> list[str]:
    """Print (and return) one warning line per swept key that changed no metric in ``metrics.json``."""
    lines = []
    for key, tables in idle_keys(results, experiment, overrides, since).items():
        where = ", ".join(f"tables/{name} ({rows} of {n} rows)" for name, (rows, n) in tables.items())
        lines.append(f"memlab: warning: sweeping {key} changed no metric in metrics.json; it changed "
                     + (where or "nothing at all") + _judged_on(results, experiment, overrides, since))
        print(lines[-1], file=sys.stderr)
    return lines


def _judged_on(results: Path, experiment: str, overrides: list[str], since: float | None) -> str:
    """" (judged on the 3 of 4 points that ran in this sweep)" when some point did not run, else ""."""
    from memlab.runner.keys import expand, experiment_of, run_key

    _, points = expand(overrides)
    points = [p for p in points if experiment_of(p) in (None, experiment)]
    ran = sum(point_status(results / experiment / run_key(p), since) == "ran" for p in points)
    return "" if ran == len(points) else f" (judged on the {ran} of {len(points)} points that ran in this sweep)"
