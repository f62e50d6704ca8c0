"""arXiv LaTeX parser (seed 000 App. C.2) on small multi-file documents written here."""

import logging
import tarfile

import pytest

from memlab.data.latex import collect_macros, expand_macros, parse_latex_source, strip_comments

LIMITS = {"max_depth": 8, "max_chars": 2_000_000}  # conf/method/recap.yaml echotrace.papers
from memlab.errors import MemlabError

MAIN = r"""\documentclass{article}
\usepackage{graphicx}
\newcommand{\sys}{Zorblax}
\newcommand{\emphx}[1]{\textbf{#1}}
\renewcommand{\pair}[2]{(#1, #2)}
\def\half{one half}
\title{On \sys{} Systems}
\begin{document}
\maketitle
\begin{abstract}
We present \sys. % hidden remark
\end{abstract}
\input{sections/intro}
\include{sections/method.tex}
\subfile{appendix}
\bibliographystyle{plain}
\bibliography{refs}
\section{Ghost}
Text after the bibliography must vanish.
\end{document}
"""
INTRO = r"""\section{Introduction}
The \emphx{quick} idea of \sys{} costs 5\% and takes \pair{a}{b} steps, about \half.
% a full comment line
\begin{figure}[t]\centering FIGURE-SECRET \caption{cap}\end{figure}
\input{sections/nested}
"""
NESTED = r"""A nested paragraph with a citation \cite{x} stays."""
METHOD = r"""\section{Method}
We keep inline math $x^2$.
\begin{table*}TABLE-SECRET\end{table*}
\begin{algorithm}ALGO-SECRET\end{algorithm}
"""
APPX = r"""\documentclass[main.tex]{subfiles}
\begin{document}
\section{Appendix}
Extra material.
\end{document}
"""


def _write(root):
    (root / "sections").mkdir(parents=True)
    (root / "main.tex").write_text(MAIN)
    (root / "sections" / "intro.tex").write_text(INTRO)
    (root / "sections" / "nested.tex").write_text(NESTED)
    (root / "sections" / "method.tex").write_text(METHOD)
    (root / "appendix.tex").write_text(APPX)
    (root / "other.tex").write_text("\\section{Unused}\nnot included")
    return root


def test_folder_pipeline(tmp_path):
    doc = parse_latex_source(_write(tmp_path / "paper"), **LIMITS)
    assert doc.main_file == "main.tex"
    assert doc.title == "On Zorblax Systems"
    assert [s.title for s in doc.sections] == ["Abstract", "Introduction", "Method", "Appendix"]
    text = doc.text
    assert "We present Zorblax." in text and "hidden remark" not in text and "full comment" not in text
    assert "quick idea of Zorblax costs 5% and takes (a, b) steps, about one half" in text
    assert "A nested paragraph" in text  # \input inside an \input
    for gone in ("FIGURE-SECRET", "TABLE-SECRET", "ALGO-SECRET", "Ghost", "must vanish", "\\cite"):
        assert gone not in text
    assert "$x^2$" in text
    assert set(doc.files_used) >= {"main.tex", "sections/intro.tex", "sections/nested.tex", "appendix.tex"}


def test_tarball_equals_folder(tmp_path):
    root = _write(tmp_path / "paper")
    tgz = tmp_path / "2101.00001.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        for p in root.rglob("*"):
            tar.add(p, arcname=str(p.relative_to(root)))
    assert parse_latex_source(tgz, **LIMITS).text == parse_latex_source(root, **LIMITS).text


def test_missing_include_and_latin1_are_logged(tmp_path, caplog):
    (tmp_path / "main.tex").write_bytes(
        b"\\begin{document}\n\\section{A}\nCaf\xe9 text.\n\\input{nowhere}\n\\end{document}\n")
    with caplog.at_level(logging.WARNING):
        doc = parse_latex_source(tmp_path, **LIMITS)
    assert "Café text." in doc.text
    assert any("nowhere" in r.message for r in caplog.records)
    assert any("not UTF-8" in r.message for r in caplog.records)


def test_bad_sources_raise_one_line(tmp_path):
    with pytest.raises(MemlabError):
        parse_latex_source(tmp_path / "missing", **LIMITS)
    (tmp_path / "x.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(MemlabError):
        parse_latex_source(tmp_path / "x.tar.gz", **LIMITS)


def test_macro_helpers():
    macros, rest = collect_macros(r"\newcommand{\R}{\mathbb{R}}\newcommand\vx[2]{#2-#1}body \R \vx{a}{b}")
    assert rest == r"body \R \vx{a}{b}"
    assert expand_macros(rest, macros) == r"body \mathbb{R} b-a"
    assert strip_comments("a % c\n% only\nb \\% d") == "a \nb \\% d"


def test_papers_category_in_echotrace_mini(tmp_path):
    from memlab.data.echotrace import echotrace_mini

    books, notes = echotrace_mini({"papers": {"paths": [str(_write(tmp_path / "paper")), str(tmp_path / "nope")],
                                              "max_input_depth": 8, "max_source_chars": 2_000_000}})
    assert len(books) == 1 and books[0].category == "papers" and books[0].title == "On Zorblax Systems"
    assert [c.title for c in books[0].chapters] == ["Abstract", "Introduction", "Method", "Appendix"]
    assert any("nope" in n and "skipped" in n for n in notes)
