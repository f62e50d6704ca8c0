"""Bounded LaTeX inputs (issue 33): unbalanced braces, a deep \\input chain, a 30-level \\input fan-out (2^30
files if inlined) and a truncated .tar.gz are each one error naming the file; in EchoTrace-mini the bad paper is
skipped with a note and the good ones are kept."""

from __future__ import annotations

import tarfile
import time

import pytest

from memlab.data.echotrace import echotrace_mini
from memlab.data.latex import parse_latex_source
from memlab.errors import MemlabError

LIMITS = {"max_depth": 8, "max_chars": 2_000_000}  # conf/method/recap.yaml echotrace.papers


def _good(root):
    root.mkdir(parents=True)
    (root / "main.tex").write_text("\\title{Good}\\begin{document}\n\\section{Intro}\nA good paper.\n\\end{document}\n")
    return root


def _unbalanced(root):
    root.mkdir(parents=True)
    (root / "main.tex").write_text("\\begin{document}\n\\section{Intro\nno closing brace\n\\end{document}\n")
    return root


def _deep_chain(root, levels=3000):
    root.mkdir(parents=True)
    (root / "main.tex").write_text("\\begin{document}\n\\section{A}\ntext \\input{f0}\n\\end{document}\n")
    for k in range(levels):
        (root / f"f{k}.tex").write_text(f"level {k} \\input{{f{k + 1}}}\n")
    return root


def _fan_out(root, levels=30, width=2):
    root.mkdir(parents=True)
    (root / "main.tex").write_text("\\begin{document}\n\\section{A}\n\\input{l0}\n\\end{document}\n")
    for k in range(levels):
        (root / f"l{k}.tex").write_text(" x ".join([f"\\input{{l{k + 1}}}"] * width) + "\n")
    (root / f"l{levels}.tex").write_text("leaf words\n")
    return root


def _truncated_tgz(tmp_path):
    src = _good(tmp_path / "src")
    (src / "big.tex").write_text("padding words " * 5000)
    tgz = tmp_path / "2101.00002.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        for p in src.iterdir():
            tar.add(p, arcname=p.name)
    whole = tgz.read_bytes()
    tgz.write_bytes(whole[: len(whole) // 2])
    return tgz


@pytest.mark.parametrize("fault, names", [
    (_unbalanced, "unbalanced braces"),
    (_deep_chain, "nested more than 8 levels"),
    (_fan_out, "nested more than 8 levels"),  # 30 levels, each including the next twice
    (lambda root: _fan_out(root, levels=7, width=10), "exceeds 2000000 characters"),  # 10^7 files within depth
])
def test_bad_latex_is_one_error_naming_the_file(tmp_path, fault, names):
    root = fault(tmp_path / "paper")
    t0 = time.monotonic()
    with pytest.raises(MemlabError) as e:
        parse_latex_source(root, **LIMITS)
    msg = str(e.value)
    assert "\n" not in msg and names in msg and (str(root) in msg or ".tex" in msg), msg
    assert time.monotonic() - t0 < 60  # bounded: the fan-out hung before


def test_deep_chain_within_the_limit_is_inlined(tmp_path):
    doc = parse_latex_source(_deep_chain(tmp_path / "paper", levels=5), **LIMITS)
    assert "level 4" in doc.text


def test_truncated_archive_is_one_error_naming_it(tmp_path):
    tgz = _truncated_tgz(tmp_path)
    with pytest.raises(MemlabError) as e:
        parse_latex_source(tgz, **LIMITS)
    assert str(tgz) in str(e.value) and "\n" not in str(e.value)


def test_one_bad_paper_is_skipped_with_a_note_and_the_rest_kept(tmp_path):
    good = _good(tmp_path / "good")
    bad = [_unbalanced(tmp_path / "u"), _deep_chain(tmp_path / "d"), _fan_out(tmp_path / "f"), _truncated_tgz(tmp_path)]
    books, notes = echotrace_mini({"papers": {"paths": [str(good), *map(str, bad)], "max_input_depth": 8,
                                              "max_source_chars": 2_000_000}})
    assert [b.title for b in books] == ["Good"]
    for p in bad:
        assert any(n.startswith(f"papers: {p} skipped") for n in notes), notes
