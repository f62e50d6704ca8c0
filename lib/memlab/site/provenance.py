"""Each run's provenance (its ``run.json``, written by :mod:`memlab.runner.execute`) and whether it matches the checkout.

The rule for flagging a run, stated on every run page: a run is flagged when its ``run.json`` records no commit,
a commit other than the checkout's HEAD, or uncommitted changes (``dirty``) beyond ``dvc.lock``, which ``make
reproduce`` rewrites as it goes; and when the ``config.yaml`` in its folder no longer has the sha256 the run
recorded. We do not re-compose today's config to compare it with the
run's: a run at HEAD from a clean tree was made from HEAD's ``conf/``.
"""

from __future__ import annotations

import hashlib
import json

from memlab.site.data import REPRODUCE_WRITES, Checkout, Run
from memlab.site.markup import e

RULE = ("A run is flagged when its run.json records no commit, a commit other than the checkout's HEAD, or "
        "uncommitted changes (dirty) other than dvc.lock (which make reproduce rewrites as it goes), or when its "
        "config.yaml no longer has the sha256 the run recorded. Today's config is not re-composed: a clean run at "
        "HEAD was made from HEAD's conf/.")
# run.json keys in the order the page shows them; any other key follows, sorted
ORDER = ("commit", "dirty", "dirty_files", "diff_sha256", "config_sha256", "seed", "key", "started", "seconds",
         "numerics", "threads", "dtypes", "models", "packages", "debian")


def flags(run: Run, checkout: Checkout) -> list[str]:
    """Why this run is not plainly the checkout's (empty: it is)."""
    info = run.info
    if not info:
        return ["no run.json: the run was made before runs recorded their provenance"]
    out = []
    commit = info.get("commit")
    if not commit:
        out.append("run.json records no commit (made before runs recorded it)")
    elif checkout.changed is not None and commit != checkout.commit:
        out.append(f"made at commit {str(commit)[:7]}, the report is of {checkout.short}")
    changed = [str(f) for f in info.get("dirty_files") or []]
    if info.get("dirty") and (not changed or any(f not in REPRODUCE_WRITES for f in changed)):
        out.append(f"made with uncommitted changes ({', '.join(changed) or 'files not recorded'})")
    recorded = info.get("config_sha256")
    config = run.folder / "config.yaml" if run.folder else None
    if recorded and config and config.exists() and hashlib.sha256(config.read_bytes()).hexdigest() != recorded:
        out.append("its config.yaml differs from the one the run recorded (config_sha256)")
    return out


def flatten(value, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts as (dotted key, text) rows; lists joined with commas."""
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")]
        rows = []
        for k in sorted(value, key=str):
            rows += flatten(value[k], f"{prefix}.{k}" if prefix else str(k))
        return rows
    if isinstance(value, list):
        return [(prefix, ", ".join(str(v) for v in value) if value else "none")]
    return [(prefix, json.dumps(value) if isinstance(value, (bool, type(None))) else str(value))]


def table(info: dict) -> str:
    keys = [k for k in ORDER if k in info] + sorted(k for k in info if k not in ORDER)
    rows = []
    for k in keys:
        rows += flatten(info[k], k)
    body = "".join(f"<tr><th>{e(k)}</th><td><code>{e(v)}</code></td></tr>" for k, v in rows)
    return f'<table class="wrap" id="provenance"><colgroup><col style="width:16em"><col></colgroup>{body}</table>'


def section(run: Run, checkout: Checkout) -> str:
    """The provenance part of a run page: flags (or that there are none), the rule, every run.json field."""
    found = flags(run, checkout)
    if found:
        head = "<ul>" + "".join(f'<li><span class="flag">{e(f)}</span></li>' for f in found) + "</ul>"
    else:
        head = f"<p>Made at this report's commit <code>{e(checkout.short)}</code> from a clean tree.</p>"
    body = table(run.info) if run.info else '<p class="muted">no run.json in this run folder</p>'
    return (f'<section id="run-provenance"><h2>Provenance</h2>{head}<p class="muted">{e(RULE)}</p>'
            f"{body}</section>")


def short_flag(run: Run, checkout: Checkout) -> str:
    """One line for the index: the first flag, or an empty string."""
    found = flags(run, checkout)
    if not found:
        return ""
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return f'<span class="flag">{e(found[0])}{e(more)}</span>'
