"""NCD and PEARL's completion score."""

from __future__ import annotations

import lzma
import zlib

import pytest

from memlab.metrics.ncd import completion_score, compressed_size, ncd

TEXT = "In the beginning God created the heaven and the earth. And the earth was without form, and void."
OTHER = "Quantum chromodynamics describes the strong interaction between quarks and gluons on a lattice."


@pytest.mark.parametrize("comp", ["zlib", "lzma"])
def test_formula(comp: str) -> None:
    c = {"zlib": lambda b: len(zlib.compress(b, 9)), "lzma": lambda b: len(lzma.compress(b, preset=9))}[comp]
    x, y = TEXT.encode(), OTHER.encode()
    expected = (c(x + y) - min(c(x), c(y))) / max(c(x), c(y))
    assert ncd(TEXT, OTHER, comp) == pytest.approx(expected, abs=0)
    assert compressed_size(TEXT, comp) == c(x)


@pytest.mark.parametrize("comp", ["zlib", "lzma"])
def test_identical_vs_unrelated(comp: str) -> None:
    long_text = TEXT * 5
    same = ncd(long_text, long_text, comp)
    diff = ncd(long_text, OTHER * 5, comp)
    assert same < 0.2 < diff
    assert completion_score(long_text, long_text, comp) == pytest.approx(1 - same)
    assert completion_score(long_text, OTHER * 5, comp) < completion_score(long_text, long_text, comp)


def test_edge_cases() -> None:
    assert ncd("", "") == 0.0  # documented value
    assert completion_score("", "") == 1.0
    assert 0.0 < ncd("", TEXT) <= 1.1  # empty vs text: the formula, finite
    assert ncd(b"abc", "abc") == ncd("abc", "abc")  # bytes accepted, str is UTF-8
    for bad in (None, 3, ["a"]):
        with pytest.raises(TypeError):
            ncd(bad, "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            completion_score("x", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ncd("a", "b", compressor="gzip")
