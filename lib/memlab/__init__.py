"""memlab: a reproducible lab for measuring what language models memorized."""

__version__ = "0.1.0"
