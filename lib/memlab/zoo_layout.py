"""Where the zoo keeps its models — the folder layout, written only here. It imports nothing of memlab, so
memlab.config's resolvers (``${zoo_checkpoint:...}``, ``${zoo_membership:...}``) can use it without making every
pipeline stage depend on the zoo's code."""

from __future__ import annotations

import re
from pathlib import Path

ZOO = "tiny-neox"  # <models>/tiny-neox/<family>/<size>/{final, epoch-NNN}
_EPOCH = re.compile(r"(final|epoch-(\d+))")


def family_dir(models_dir: str | Path, family: str) -> Path:
    """``<models>/tiny-neox/<family>``: where a family's sizes, tokenizer and records live."""
    return Path(models_dir) / ZOO / family


def checkpoint_dir(models_dir: str | Path, family: str, size: str, epoch: int | str | None) -> Path:
    """The folder of ``family``'s ``size`` after ``epoch`` (1-based, or "final")."""
    size_dir = family_dir(models_dir, family) / size
    return size_dir / "final" if epoch in ("final", None) else size_dir / f"epoch-{int(epoch):03d}"


def membership_file(models_dir: str | Path, family: str, size: str) -> Path:
    """The membership record (members, non-members, lineage) of ``family``'s ``size``."""
    return family_dir(models_dir, family) / size / "membership.json"


def family_of(membership: str | Path) -> str:
    """The family whose :func:`membership_file` is ``membership`` (the inverse of the layout above)."""
    return Path(membership).parent.parent.name


def checkpoint_name(family: str, size: str, epoch: int | str | None) -> str:
    """The model name of a zoo checkpoint, ``tiny-neox-<family>-<size>-e<epoch>`` (``-final`` for the last)."""
    return f"{ZOO}-{family}-{size}-{'final' if epoch in ('final', None) else f'e{int(epoch)}'}"


def checkpoint_of(path: str | Path) -> tuple[str, str, int | str] | None:
    """(family, size, epoch) of a :func:`checkpoint_dir` folder (epoch an int, or "final"); None for any other path
    (a folder merely called ``final`` outside the zoo's layout included)."""
    parts = Path(path).parts
    found = _EPOCH.fullmatch(parts[-1]) if len(parts) >= 4 and parts[-4] == ZOO else None
    if found is None:
        return None
    return parts[-3], parts[-2], "final" if found.group(2) is None else int(found.group(2))
