"""Sweeps on the site: every ``results/<experiment>/sweeps/<sweep-id>/`` that :mod:`memlab.runner.sweeps` wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

from memlab.site.data import read_json
from memlab.site.markup import csv_page, e, href


def sweep_folders(results: Path, experiment: str) -> list[Path]:
    root = results / experiment / "sweeps"
    return sorted(p for p in root.iterdir() if (p / "sweep.csv").exists()) if root.is_dir() else []


def section(results: Path, experiment: str, site: Path, index: Path) -> str:
    """Copy every sweep of ``experiment`` into the site and return its part of the experiment's section."""
    blocks = []
    for folder in sweep_folders(results, experiment):
        dest = site / experiment / "sweeps" / folder.name
        dest.mkdir(parents=True, exist_ok=True)
        for p in sorted(folder.iterdir()):
            if p.suffix in (".csv", ".png", ".json"):
                shutil.copy2(p, dest / p.name)
        meta = read_json(folder / "sweep.json")
        title = f"{experiment}: sweep {folder.name}"
        (dest / "sweep.html").write_text(
            csv_page(dest / "sweep.csv", title, href(index, dest / "sweep.html"), _note(meta)), encoding="utf-8")
        fig = ""
        if meta.get("degenerate"):  # a flat or empty figure says nothing: a sentence instead
            fig = f"<p><em>No figure: {e(meta['degenerate'])}.</em></p>"
        elif (dest / "sweep.png").exists():
            fig = (f'<figure><img src="{href(dest / "sweep.png", index)}" alt="{e(title)}">'
                   f"<figcaption>{e(meta.get('caption', ''))}</figcaption></figure>")
        blocks.append(f'<div class="sweep" id="sweep-{e(experiment)}-{e(folder.name)}"><h4>{e(folder.name)}</h4>'
                      f"{_note(meta)}<p><a href=\"{href(dest / 'sweep.html', index)}\">every point (table)</a> · "
                      f"<a href=\"{href(dest / 'sweep.csv', index)}\" download>CSV</a></p>{fig}</div>")
    return f"<h3>Sweeps</h3>{''.join(blocks)}" if blocks else ""


def _note(meta: dict) -> str:
    if not meta:
        return ""
    swept = ", ".join(f"{k} ∈ {{{', '.join(map(str, v))}}}" for k, v in (meta.get("swept") or {}).items())
    idle = "".join(f"<p class=\"problem\">{e(line[:1].upper() + line[1:])}.</p>" for line in meta.get("idle") or [])
    failed = f" ({e(meta['failed'])} failed in this sweep)" if meta.get("failed") else ""
    return (f"<p>Swept {e(swept)}; {e(meta.get('points', '?'))} points, {e(meta.get('missing', 0))} missing{failed}. "
            f"<code>{e(meta.get('command', ''))}</code></p>{idle}")
