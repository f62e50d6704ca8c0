"""Where the zoo keeps its models — the folder layout, written only here. It imports nothing of memlab, so
memlab.config's resolvers (``${zoo_checkpoint:...}``, ``${zoo_membership:...}``) can use it without making every
pipeline stage depend on the zoo's code."""

from __future__ import annotations

from pathlib import Path


def family_dir(models_dir: str | Path, family: str) -> Path:
    """``<models>/tiny-neox/<family>``: where a family's sizes, tokenizer and records live."""
    return Path(models_dir) / "tiny-neox" / family


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
