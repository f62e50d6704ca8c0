"""A membership score that never looks at the model (issue 47's blind baseline): if it separates two sets of texts as
well as an MIA score does, the MIA separated text distributions, not members and non-members."""

from __future__ import annotations

import zlib

NAME = "blind (zlib compressibility)"   # the audit's row label
COLUMN = "blind"                        # its column in the tables that score documents (the audit, mia_low_fpr)


def zlib_compressibility(text: str) -> float:
    """1 − (zlib-compressed size / raw size) of the text's UTF-8 bytes (level 9): higher = more redundant text,
    read as "more likely member" like the MIA scores; 0.0 for an empty text."""
    raw = text.encode("utf-8")
    return 1.0 - len(zlib.compress(raw, 9)) / len(raw) if raw else 0.0
