"""JupyterLab leaves the tracked notebooks as committed: ``make lab`` saves them without what running them adds.

``make lab`` starts JupyterLab with ``lab/jupyter_server_config.py``, which installs :func:`pre_save_hook`. Every
save of a notebook under ``notebooks/`` (autosave included) goes through :func:`strip_run_state`: outputs,
execution counts and the cell metadata Lab adds while running (timings, collapsed/scrolled state) are dropped, and
the notebook-level metadata stays the one in the file on disk (a kernel adds its own ``language_info``). So running
a notebook in Lab leaves ``git status`` clean and the notebook's DVC stage current; editing a cell still saves the
edit. What a notebook run in Lab computes is written by the notebook itself to ``results/<experiment>/interactive/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRACKED_DIR = "notebooks"  # API paths (relative to Lab's root, the repo with `make lab`) whose notebooks are tracked
# cell metadata that running or viewing a notebook sets; anything else (tags: `parameters`) is the author's
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "jupyter", "trusted", "ExecuteTime")


def strip_run_state(nb: dict[str, Any], on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
    """``nb`` (a notebook as a JSON dict) without outputs, execution counts and volatile cell metadata; its
    notebook metadata replaced by ``on_disk``'s when given. Changes ``nb`` in place and returns it."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.get("metadata") or {}
        for key in VOLATILE_CELL_METADATA:
            meta.pop(key, None)
        cell["metadata"] = meta
    if on_disk is not None and "metadata" in on_disk:
        nb["metadata"] = on_disk["metadata"]
    return nb


def is_tracked(api_path: str) -> bool:
    parts = Path(api_path.strip("/")).parts
    return len(parts) >= 2 and parts[0] == TRACKED_DIR and parts[-1].endswith(".ipynb")


def pre_save_hook(model: dict[str, Any], path: str, contents_manager=None, **kwargs) -> None:
    """Jupyter server's ``FileContentsManager.pre_save_hook``: strip a tracked notebook before it is written."""
    if model.get("type") != "notebook" or not is_tracked(path) or not isinstance(model.get("content"), dict):
        return
    on_disk = None
    root = getattr(contents_manager, "root_dir", None)
    if root is not None:
        target = Path(root) / path.strip("/")
        if target.is_file():
            try:
                on_disk = json.loads(target.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # an unreadable file on disk: keep the saved metadata
                on_disk = None
    strip_run_state(model["content"], on_disk)
