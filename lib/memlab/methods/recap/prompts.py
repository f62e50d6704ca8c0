"""Prompt templates for RECAP, read from ``prompts/recap/*.txt`` (never code strings).

Templates use ``str.format`` fields (``{book_title}``); literal braces are doubled. A missing template or
field raises :class:`~memlab.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import functools
from pathlib import Path

from memlab.errors import ConfigError


@functools.lru_cache(maxsize=None)
def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"prompt template {p} is missing; restore it or set method.prompts_dir")
    return p.read_text(encoding="utf-8")


class Prompts:
    """Loads and fills the templates of one prompts folder (``method.prompts_dir``)."""

    def __init__(self, prompts_dir: str | Path) -> None:
        self.dir = Path(prompts_dir)

    def raw(self, name: str) -> str:
        return _read(str(self.dir / f"{name}.txt"))

    def fill(self, name: str, **fields) -> str:
        try:
            return self.raw(name).format(**fields).strip("\n")
        except KeyError as err:
            raise ConfigError(f"prompt {self.dir / name}.txt uses field {err} that RECAP does not provide") from None
