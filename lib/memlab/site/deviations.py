"""Departures from each paper's setup (``conf/deviations/<paper>.yaml``), one page per paper.

Each entry: ``{id, what, paper_setting, ours, restore}``; ``restore`` is either the command-line overrides that
bring the paper's setting back (``experiment=<name> key=value …``) or ``"not possible offline: <why>"``.
"""

from __future__ import annotations

from pathlib import Path

from memlab.errors import ConfigError
from memlab.site.markup import e, shell

FIELDS = ("id", "what", "paper_setting", "ours", "restore")
OFFLINE = "not possible"  # "not possible offline: why" (or "not possible here: why")


def load(conf: Path) -> dict[str, list[dict]]:
    """paper id → its deviations, from ``conf/deviations/*.yaml`` (each entry checked for every field)."""
    import yaml

    out = {}
    for p in sorted((conf / "deviations").glob("*.yaml")):
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        entries = data.get("deviations") or []
        for i, d in enumerate(entries):
            missing = [f for f in FIELDS if not str(d.get(f) or "").strip()]
            if missing:
                raise ConfigError(f"{p.name}: deviation {i} ({d.get('id', '?')}) lacks {', '.join(missing)}")
        out[str(data.get("paper", p.stem))] = entries
    return out


def restore_overrides(restore: str) -> tuple[str, list[str]] | None:
    """(experiment, overrides) of a ``restore`` text; None when it says the setting can't be restored offline."""
    text = restore.strip()
    if text.startswith(OFFLINE):
        return None
    words = text.split()
    exp = [w.split("=", 1)[1] for w in words if w.startswith("experiment=")]
    if len(exp) != 1:
        raise ConfigError(f"restore '{text}' must name one experiment=<name> or start with '{OFFLINE}: '")
    return exp[0], [w for w in words if not w.startswith("experiment=")]


def page(paper: str, title: str, entries: list[dict]) -> str:
    rows = []
    for d in entries:
        restore = str(d["restore"]).strip()
        shown = (f"<code>python -m memlab.run {e(restore)}</code>" if restore_overrides(restore) else e(restore))
        rows.append(f'<tr id="dev-{e(d["id"])}"><td><code>{e(d["id"])}</code></td><td>{e(d["what"])}</td>'
                    f"<td>{e(d['paper_setting'])}</td><td>{e(d['ours'])}</td><td>{shown}</td></tr>")
    cols = "".join(f'<col style="width:{w}%">' for w in (13, 20, 22, 22, 23))
    body = (f"<h1>Departures from {e(title)}</h1><p>{len(entries)} departures of memlab's setup from the paper's "
            f"(<code>conf/deviations/{e(paper)}.yaml</code>). A claim's <em>deviations</em> column names the ones "
            "that bear on it. The last column restores the paper's setting, or says why that can't be done here.</p>"
            f'<table class="wrap deviations"><colgroup>{cols}</colgroup><thead><tr><th>id</th><th>what</th>'
            "<th>the paper</th><th>ours</th><th>to restore the paper's setting</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")
    return shell(f"Departures from {title}", body, "index.html")


def file_name(paper: str) -> str:
    return f"deviations-{paper}.html"
