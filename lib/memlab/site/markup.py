"""HTML building blocks of the site: the style sheet, escaping, number formatting, a page shell, a CSV as a table.

Static pages only: no JavaScript, no external fonts or requests; every link is relative to the page.
"""

from __future__ import annotations

import html
import os
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

# verdict → CSS class: today's vocabulary (memlab.comparison.VERDICTS) and the one older runs wrote
VERDICT_CLASS = {"reproduced": "ok", "contradicted": "bad", "inconclusive": "inc", "not testable here": "nc",
                 "not reproduced": "bad", "not comparable": "nc"}
VERDICT_ORDER = ("reproduced", "contradicted", "inconclusive", "not testable here")

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 78em; padding: 0 1em; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.5em; vertical-align: top; text-align: left;
         overflow-wrap: anywhere; }
th { background: #eee; }
table.wrap { width: 100%; table-layout: fixed; }
div.scroll { overflow-x: auto; max-width: 100%; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.verdict { font-weight: 600; }
tr.ok td.verdict, td.ok { background: #c8e6c9; } tr.bad td.verdict, td.bad { background: #ffcdd2; }
tr.inc td.verdict { background: #fff3c4; } tr.nc td.verdict { background: #e0e0e0; }
tr.none td { color: #666; font-style: italic; background: #fafafa; }
span.ok, span.bad, span.inc, span.nc, span.flag { padding: 0 0.4em; border-radius: 3px; }
span.ok { background: #c8e6c9; } span.bad, span.flag { background: #ffcdd2; } span.inc { background: #fff3c4; }
span.nc { background: #e0e0e0; }
details > summary { cursor: pointer; color: #1a4f8b; }
blockquote { margin: 0.3em 0 0.3em 0.5em; padding-left: 0.6em; border-left: 3px solid #ccc; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; padding: 0.5em; font-size: 0.85em; }
code { font-size: 0.95em; overflow-wrap: anywhere; } .muted { color: #666; }
.problem { border-left: 4px solid #b00; padding: 0 0.8em; background: #fff4f4; }
"""


def e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def num(text) -> str:
    """A number from a CSV cell, shortened to 4 significant digits; other text as is; empty for NaN/empty."""
    if text is None or str(text).strip() == "":
        return ""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return str(text)
    if v != v:
        return ""
    if v in (float("inf"), float("-inf")):   # e.g. a log-probability of 0 (a suffix the sampler never emits)
        return "∞" if v > 0 else "−∞"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}"


def href(target: Path, page: Path) -> str:
    """A relative, URL-quoted link from the page file ``page`` to ``target`` (both inside the site)."""
    return quote(Path(os.path.relpath(target, page.parent)).as_posix())


def when(started: str | None) -> str:
    """An ISO 8601 time as ``2026-11-23 12:54:21 UTC`` (as given when it does not parse)."""
    if not started:
        return "?"
    try:
        return datetime.fromisoformat(started).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return str(started)


def duration(seconds) -> str:
    s = float(seconds)
    return f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {int(s % 60):02d} s"


def verdict_span(verdict: str | None, text: str | None = None) -> str:
    return f'<span class="{VERDICT_CLASS.get(verdict or "", "nc")}">{e(text if text is not None else verdict)}</span>'


def shell(title: str, body: str, index: str | None = None) -> str:
    """A whole page; ``index`` is the relative link back to the site's index (None on the index itself)."""
    back = f'<p><a href="{e(index)}">← the report</a></p>\n' if index else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)}</title>
<style>{CSS}</style>
</head>
<body>
{back}{body}
</body>
</html>
"""


def rows_table(header: list[str], rows: list[dict], *, table_id: str | None = None, numeric: bool = True) -> str:
    """A list of dict rows as an HTML table (cells escaped; numbers shortened and right-aligned)."""
    ident = f' id="{e(table_id)}"' if table_id else ""
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = []
    for r in rows:
        cells = []
        for h in header:
            v = r.get(h)
            shown = num(v) if numeric else ("" if v is None else str(v))
            is_num = numeric and shown != "" and shown == num(v) and _is_number(v)
            cells.append(f'<td class="num">{e(shown)}</td>' if is_num else f"<td>{e(shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body)
            + "\n</tbody></table></div>")


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def csv_page(csv_path: Path, title: str, index: str, note: str = "") -> str:
    """A CSV table as a page of its own, with the CSV kept as a download beside it."""
    import csv

    with csv_path.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        header = list(reader.fieldnames or [])
    body = (f"<h1>{e(title)}</h1>{note}<p>{len(rows)} rows · "
            f'<a href="{e(quote(csv_path.name))}" download>download the CSV</a></p>\n' + rows_table(header, rows))
    return shell(title, body, index)
