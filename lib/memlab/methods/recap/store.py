"""RECAP's event records on disk: an append-only JSONL, resumable (see :mod:`memlab.methods.recap.pipeline`).

Each record is appended (flushed + fsynced) as soon as its event is done, so a killed run loses at most the
chunk in flight; a line cut by the kill is skipped (that event is redone) and the last record of a key wins.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResultStore:
    """Append-only JSONL of event records, keyed by (target, book, event); the last record of a key wins."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: dict[tuple[str, str, str], dict] = {}
        if self.path.is_file():
            with self.path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        r = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by a kill: the event is simply redone
                        log.warning("%s:%d is truncated; that event will be redone", self.path, n)
                        continue
                    self.records[(r["target"], r["book_id"], r["event_id"])] = r

    def done(self, target: str, book_id: str, event_id: str) -> bool:
        r = self.records.get((target, book_id, event_id))
        return r is not None and r.get("status") == "ok"

    def add(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[(record["target"], record["book_id"], record["event_id"])] = record

    def rows(self, status: str | None = "ok") -> list[dict]:
        return [r for r in self.records.values() if status is None or r.get("status") == status]
