"""Run keys: which command-line overrides name a run's folder, and a sweep's points. Shared by the runner
(:mod:`memlab.runner.execute`) and the sweep summaries (:mod:`memlab.runner.sweeps`, :mod:`memlab.runner.sweep_effects`); imports nothing of
memlab."""

from __future__ import annotations

import hashlib
import re


# overrides that don't change results (where things go, how they're logged/cached) stay out of the run key
NON_RESULT_KEYS = ("experiment", "logger", "cache", "paths", "hydra")


def run_key(overrides: list[str] | str) -> str:
    """A filesystem-safe folder name for a run from its command-line overrides ('default' when none):
    :func:`folder_key` of them."""
    if isinstance(overrides, str):
        overrides = [o for o in overrides.split(",") if o]
    return folder_key(overrides, empty="default")


def sweep_key(overrides: list[str]) -> str:
    """The folder name of a sweep (``results/<experiment>/sweeps/<key>``) from its command line, swept values and
    all ('sweep' when none): :func:`folder_key`, the run folders' rule."""
    return folder_key(overrides, empty="sweep")


def folder_key(overrides: list[str], *, empty: str) -> str:
    """The one naming rule of run and sweep folders. Every override that can change a result is in it (sorted), so
    the runs of a sweep never collide; launcher flags (``-m``) and the groups of NON_RESULT_KEYS (``hydra/launcher``
    included) are not; ``params.`` is dropped from keys; a path or URL value keeps its last component and a hash
    (never the directories or the host); a name longer than 160 characters is shortened to a prefix plus a hash of
    the whole name."""
    kept = sorted(o for o in overrides if not o.startswith("-") and _group(o) not in NON_RESULT_KEYS)
    if not kept:
        return empty
    key = ",".join(_located(o.removeprefix("params.")) for o in kept)  # params.*: most of a sweep, keys short
    key = re.sub(r"[^A-Za-z0-9=,._+\-\[\]]", "_", key)
    if len(key) > 160:
        key = f"{key[:140]}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    return key


def _group(override: str) -> str:
    """The top-level config group or key an override sets (``+model.path=x`` → model, ``hydra/launcher=ray`` →
    hydra)."""
    return override.lstrip("+~").split("=", 1)[0].split(".", 1)[0].split("/", 1)[0]


def _located(override: str) -> str:
    """A path or URL value as its last component plus a hash of the whole value: the key tells the runs of two
    folders apart without carrying the user's directories or a server's address into folder names and reports."""
    name, sep, value = override.partition("=")
    if not sep or "/" not in value or value.startswith("["):
        return override
    tail = next((part for part in reversed(value.split("/")) if part), "root")
    return f"{name}={tail}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def expand(overrides: list[str]) -> tuple[dict[str, list[str]], list[list[str]]]:
    """(swept key → its values, every point's overrides) — the points in Hydra's basic-sweeper order."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    swept = {o.key_or_group: list(o.sweep_string_iterator()) for o in parsed if o.is_sweep_override()}
    points = [p for batch in BasicSweeper.split_arguments(parsed, None) for p in batch]
    return swept, points


def experiment_of(point: list[str]) -> str | None:
    """The experiment a sweep point's overrides name (``experiment=<e>``), None when none does."""
    return next((o.split("=", 1)[1] for o in point if o.startswith("experiment=")), None)
