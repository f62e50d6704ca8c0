"""arXiv LaTeX source → plain-text sections (seed 000, App. C.2).

Pipeline, in the order the paper describes it:

1. open the source: a ``.tar``/``.tar.gz``/``.tgz`` archive, a folder, or a single ``.tex`` file;
2. find the main file: the ``.tex`` file containing ``\\begin{document}`` (ties: the one named
   ``main.tex``/``ms.tex``/``paper.tex``, else the largest);
3. inline ``\\input{..}``, ``\\include{..}`` and ``\\subfile{..}`` recursively (cycle-safe, ``.tex`` added
   when missing, a missing file is logged and dropped), bounded: at most ``max_depth`` levels deep and
   ``max_chars`` characters inlined in all (``method.echotrace.papers.max_input_depth`` / ``max_source_chars``),
   so a deep chain or a fan-out that repeats files is one error naming the file, never a hang;
4. strip comments (an unescaped ``%`` to end of line), ``figure``/``table``/``algorithm`` environments (and
   their starred forms);
5. expand simple user macros: ``\\newcommand``/``\\renewcommand``/``\\def`` with 0–9 arguments and no
   optional-argument default;
6. keep the text between ``\\begin{document}`` and the bibliography (``\\bibliography``,
   ``\\begin{thebibliography}``, ``\\printbibliography``) or ``\\end{document}``;
7. split at ``\\section`` (a preamble before the first section becomes "Abstract"/"Front matter") and
   convert each section to plain text with ``pylatexenc``.

Nothing here downloads anything: real arXiv sources are user-supplied archives or folders.
"""

from __future__ import annotations

import logging
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from memlab.errors import MemlabError

log = logging.getLogger(__name__)

_INCLUDE_RE = re.compile(r"\\(input|include|subfile)\s*\{([^}]+)\}")
_FLOAT_ENVS = ("figure", "table", "algorithm", "wrapfigure", "wraptable", "lstlisting")
_BIB_RE = re.compile(r"\\bibliography\s*\{|\\begin\{thebibliography\}|\\printbibliography")
_SECTION_RE = re.compile(r"\\section\*?\s*\{")
_MAIN_NAMES = ("main.tex", "ms.tex", "paper.tex", "article.tex")


@dataclass
class LatexSection:
    title: str
    text: str


@dataclass
class LatexDocument:
    """A parsed paper: title (if ``\\title`` was found), sections in order, and the files that were inlined."""

    title: str
    sections: list[LatexSection]
    main_file: str
    files_used: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(f"{s.title}\n\n{s.text}" for s in self.sections)


# ---------------------------------------------------------------------------------------------- reading
def _read_tree(source: Path) -> dict[str, str]:
    """All text files of the source as {relative posix path: text}."""
    files: dict[str, str] = {}
    if source.is_dir():
        for p in sorted(source.rglob("*")):
            if p.is_file() and p.suffix in (".tex", ".sty", ".cls", ".bbl", ".ltx", ""):
                files[p.relative_to(source).as_posix()] = _decode(p.read_bytes(), str(p))
    elif source.is_file() and (source.suffix in (".tex", ".ltx")):
        files[source.name] = _decode(source.read_bytes(), str(source))
    elif source.is_file():
        try:
            with tarfile.open(source, "r:*") as tar:
                for m in tar.getmembers():
                    if m.isfile() and Path(m.name).suffix in (".tex", ".ltx", ".bbl", ""):
                        fh = tar.extractfile(m)
                        if fh is not None:
                            files[Path(m.name).as_posix().lstrip("./")] = _decode(fh.read(), m.name)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as err:  # truncated .tar.gz: EOFError
            why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise MemlabError(f"{source} is not a readable LaTeX folder, .tex file or tar archive ({why}); "
                              "pass a whole arXiv source archive or its unpacked folder") from None
    else:
        raise MemlabError(f"LaTeX source {source} does not exist; pass an arXiv source archive or folder")
    return files


def _decode(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("%s is not UTF-8; decoded as latin-1 (every byte kept)", name)
        return raw.decode("latin-1")


def find_main_file(files: dict[str, str]) -> str:
    """The file holding ``\\begin{document}`` (see module docstring for ties)."""
    cands = [n for n, t in files.items() if n.endswith((".tex", ".ltx")) and "\\begin{document}" in strip_comments(t)]
    if not cands:
        tex = [n for n in files if n.endswith((".tex", ".ltx"))]
        if len(tex) == 1:
            return tex[0]
        raise MemlabError("no .tex file with \\begin{document} found in the LaTeX source; "
                          "point the loader at the paper's main file")
    for name in _MAIN_NAMES:
        for c in cands:
            if Path(c).name == name:
                return c
    return max(cands, key=lambda n: len(files[n]))


# ---------------------------------------------------------------------------------------------- cleaning
def strip_comments(tex: str) -> str:
    """Remove ``%`` comments (not ``\\%``); a line that was only a comment disappears entirely."""
    out = []
    for line in tex.splitlines():
        m = re.search(r"(?<!\\)%", line)
        if m:
            if not line[: m.start()].strip():
                continue
            line = line[: m.start()]
        out.append(line)
    return "\n".join(out)


@dataclass
class InlineBudget:
    """Bounds of ``\\input`` inlining: levels deep, and characters inlined in all (repeats counted again)."""

    max_depth: int
    max_chars: int
    used_chars: int = 0


def inline_includes(files: dict[str, str], name: str, _stack: tuple[str, ...] = (),
                    used: list[str] | None = None, budget: InlineBudget | None = None) -> str:
    """Text of ``name`` with every ``\\input``/``\\include``/``\\subfile`` replaced by the file's text; MemlabError
    naming the file when ``budget`` (depth or total size) is exceeded."""
    used = used if used is not None else []
    used.append(name)
    base = str(Path(name).parent) if "/" in name else ""
    if name in _stack:
        log.warning("include cycle at %s; dropped", name)
        return ""
    if budget is not None:
        _spend(budget, name, files[name], _stack)
    text = strip_comments(files[name])

    def resolve(target: str) -> str | None:
        target = target.strip()
        for cand in (target, target + ".tex"):
            for root in ((base + "/" + cand) if base else cand, cand):
                root = str(Path(root).as_posix())
                if root in files:
                    return root
        return None

    def repl(m: re.Match) -> str:
        found = resolve(m.group(2))
        if found is None:
            log.warning("%s: \\%s{%s} not found in the source; dropped", name, m.group(1), m.group(2))
            return ""
        body = inline_includes(files, found, _stack + (name,), used, budget)
        if m.group(1) == "subfile":  # a subfile is a full document; keep only its body
            body = _between_document(body) or body
        return "\n" + body + "\n"

    return _INCLUDE_RE.sub(repl, text)


def _spend(budget: InlineBudget, name: str, text: str, stack: tuple[str, ...]) -> None:
    if len(stack) > budget.max_depth:
        raise MemlabError(f"{name}: \\input nested more than {budget.max_depth} levels deep (via "
                          f"{' -> '.join(stack[:3])} ...); raise method.echotrace.papers.max_input_depth if the "
                          "paper really nests that deep")
    budget.used_chars += len(text)
    if budget.used_chars > budget.max_chars:
        raise MemlabError(f"{name}: inlining \\input files exceeds {budget.max_chars} characters (a file included "
                          "over and over?); raise method.echotrace.papers.max_source_chars if the paper is that long")


def strip_floats(tex: str) -> str:
    """Drop figure/table/algorithm environments (and starred forms), including nested content."""
    for env in _FLOAT_ENVS:
        tex = re.sub(r"\\begin\{" + env + r"\*?\}.*?\\end\{" + env + r"\*?\}", "", tex, flags=re.S)
    return tex


def _balanced(tex: str, i: int) -> tuple[str, int]:
    """The ``{...}`` group starting at ``tex[i] == '{'`` and the index after it."""
    assert tex[i] == "{"
    depth = 0
    for j in range(i, len(tex)):
        c = tex[j]
        if c == "\\":
            continue
        if c == "{" and (j == 0 or tex[j - 1] != "\\"):
            depth += 1
        elif c == "}" and tex[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return tex[i + 1 : j], j + 1
    raise ValueError(f"unbalanced braces: the group opened at line {tex.count(chr(10), 0, i) + 1} never closes")


def collect_macros(tex: str) -> tuple[dict[str, tuple[int, str]], str]:
    """Find simple macro definitions; return ({name: (n_args, body)}, tex without the definitions)."""
    macros: dict[str, tuple[int, str]] = {}
    pat = re.compile(r"\\(?:re)?newcommand\*?\s*(\{\\[A-Za-z@]+\}|\\[A-Za-z@]+)\s*(\[(\d)\])?\s*(\[[^\]]*\])?\s*\{"
                     r"|\\def\s*(\\[A-Za-z@]+)\s*((?:#\d)*)\s*\{")
    out, pos = [], 0
    for m in pat.finditer(tex):
        if m.start() < pos:
            continue
        try:
            body, end = _balanced(tex, m.end() - 1)
        except ValueError:
            continue
        if m.group(1):
            name = m.group(1).strip("{}")
            nargs = int(m.group(3) or 0)
            if m.group(4):  # optional-argument default: not a "simple" macro, leave it alone
                continue
        else:
            name, nargs = m.group(5), len(m.group(6) or "") // 2
        macros[name[1:]] = (nargs, body)
        out.append(tex[pos : m.start()])
        pos = end
    out.append(tex[pos:])
    return macros, "".join(out)


def expand_macros(tex: str, macros: dict[str, tuple[int, str]], max_passes: int = 5) -> str:
    """Replace uses of the collected macros (arguments read as balanced ``{..}`` groups)."""
    if not macros:
        return tex
    names = sorted(macros, key=len, reverse=True)
    pat = re.compile(r"\\(" + "|".join(re.escape(n) for n in names) + r")(?![A-Za-z@])")
    for _ in range(max_passes):
        out, pos, changed = [], 0, False
        for m in pat.finditer(tex):
            if m.start() < pos:
                continue
            nargs, body = macros[m.group(1)]
            j, args = m.end(), []
            ok = True
            for _k in range(nargs):
                while j < len(tex) and tex[j].isspace():
                    j += 1
                if j < len(tex) and tex[j] == "{":
                    try:
                        arg, j = _balanced(tex, j)
                    except ValueError:
                        ok = False
                        break
                elif j < len(tex):
                    arg, j = tex[j], j + 1
                else:
                    ok = False
                    break
                args.append(arg)
            if not ok:
                continue
            rep = body
            for k, a in enumerate(args, 1):
                rep = rep.replace(f"#{k}", a)
            out.append(tex[pos : m.start()])
            out.append(rep)
            pos, changed = j, True
        out.append(tex[pos:])
        tex = "".join(out)
        if not changed:
            break
    return tex


def _between_document(tex: str) -> str | None:
    m = re.search(r"\\begin\{document\}", tex)
    if not m:
        return None
    end = re.search(r"\\end\{document\}", tex[m.end():])
    return tex[m.end() : m.end() + end.start()] if end else tex[m.end():]


def cut_bibliography(body: str) -> str:
    m = _BIB_RE.search(body)
    return body[: m.start()] if m else body


def to_plain_text(tex: str) -> str:
    """LaTeX fragment → plain text (pylatexenc), whitespace normalised; math kept as its LaTeX source."""
    from pylatexenc.latex2text import LatexNodes2Text

    tex = re.sub(r"\\(cite[pt]?|citep|citet|ref|eqref|label|cref|Cref|autoref)\*?(\[[^\]]*\])?\{[^}]*\}", "", tex)
    try:
        txt = LatexNodes2Text(math_mode="verbatim", strict_latex_spaces=True).latex_to_text(tex)
    except Exception as err:  # pylatexenc is lenient, but never lose a section to a parser corner case
        log.warning("pylatexenc failed (%s); keeping the raw LaTeX of this section", err)
        txt = tex
    paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", txt)]
    return "\n\n".join(p for p in paras if p)


def split_sections(body: str) -> list[LatexSection]:
    """Split at ``\\section``; text before the first section is the abstract/front matter."""
    sections: list[LatexSection] = []
    starts = list(_SECTION_RE.finditer(body))
    pre = body[: starts[0].start()] if starts else body
    abstract = re.search(r"\\begin\{abstract\}(.*?)\\end\{abstract\}", pre, flags=re.S)
    front = abstract.group(1) if abstract else re.sub(r"\\(maketitle|title|author)\b(\{[^}]*\})?", "", pre)
    front_txt = to_plain_text(front)
    if front_txt:
        sections.append(LatexSection("Abstract" if abstract else "Front matter", front_txt))
    for k, m in enumerate(starts):
        title, after = _balanced(body, m.end() - 1)
        end = starts[k + 1].start() if k + 1 < len(starts) else len(body)
        text = to_plain_text(body[after:end])
        if text:
            sections.append(LatexSection(to_plain_text(title) or f"Section {k + 1}", text))
    return sections


def parse_latex_source(source: str | Path, *, max_depth: int, max_chars: int) -> LatexDocument:
    """The full App. C.2 pipeline on a local archive, folder or ``.tex`` file (see module docstring); any fault of
    the source is a MemlabError naming the file (the caller skips that paper with a note)."""
    source = Path(source)
    try:
        return _parse(source, InlineBudget(int(max_depth), int(max_chars)))
    except ValueError as err:  # unbalanced braces in a \section title, a \title, ...
        raise MemlabError(f"{source}: {err}; check the LaTeX source's braces") from None
    except RecursionError:
        raise MemlabError(f"{source}: the LaTeX nests too deeply to parse; lower "
                          "method.echotrace.papers.max_input_depth or check the source") from None


def _parse(source: Path, budget: InlineBudget) -> LatexDocument:
    files = _read_tree(source)
    if not files:
        raise MemlabError(f"no LaTeX files in {source}; pass an arXiv source archive or folder")
    main = find_main_file(files)
    used: list[str] = []
    full = inline_includes(files, main, used=used, budget=budget)
    macros, full = collect_macros(full)
    full = strip_floats(full)
    tm = re.search(r"\\title\s*(\[[^\]]*\])?\s*\{", full)
    title = ""
    if tm:
        try:
            title = to_plain_text(expand_macros(_balanced(full, tm.end() - 1)[0], macros))
        except ValueError:
            title = ""
    body = _between_document(full)
    if body is None:
        body = full  # a body-only file (e.g. a chapter): take it all
    body = cut_bibliography(body)
    body = expand_macros(body, macros)
    body = strip_floats(body)  # macros may have expanded into floats
    sections = split_sections(body)
    if not sections:
        raise MemlabError(f"{source}: the LaTeX body is empty after cleaning; check the main file {main}")
    return LatexDocument(title=title or Path(main).stem, sections=sections, main_file=main,
                         files_used=list(dict.fromkeys(used)))
