"""memlab: a reproducible lab for measuring what language models memorized."""

__version__ = "0.1.0"

# Before anything loads torch or numpy: the numeric path of conf/numerics/ (memlab.numerics explains why).
from memlab import numerics as _numerics  # noqa: E402


def _pin_or_exit() -> None:
    """Pin the numeric path; a bad profile (MEMLAB_NUMERICS=fast) under ``python -m memlab.<tool>`` is the entry
    points' one line and exit status 2 (Python sets ``sys.argv[0]`` to "-m" while it imports the tool's package);
    an import from any other program raises as before."""
    import sys

    from memlab.errors import ConfigError

    try:
        _numerics.pin()
    except ConfigError as err:
        if sys.argv[:1] != ["-m"]:
            raise
        print(f"memlab: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


_pin_or_exit()
