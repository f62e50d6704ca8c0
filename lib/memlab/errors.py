"""User-facing errors.

Anything the user can fix (bad config value, missing package, missing API key, unreachable server)
raises :class:`MemlabError` with a one-line message that names the fix. Entry points print that line and
exit with status 2 instead of showing a traceback.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


class MemlabError(Exception):
    """An error the user can fix; the message is one line and names the fix."""


class MissingSourceError(MemlabError):
    """A corpus or model source is not installed; the message names the package to install."""


class ConfigError(MemlabError):
    """A config value is malformed or names something that does not exist."""


class BackendError(MemlabError):
    """A backend could not be reached or refused the request."""


def one_line_errors(fn: F) -> F:
    """Decorate a CLI entry point: a MemlabError becomes one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MemlabError as err:
            print(f"memlab: error: {err}", file=sys.stderr)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
