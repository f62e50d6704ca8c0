"""lib/memlab's import graph: no circles between modules, no import from a lower layer into a higher one.

The layers, lowest first, written down only here (docs/architecture.md explains them in one paragraph). A module
belongs to the layer of the longest prefix below that names it; a module may import its own layer or any lower one.

    0 foundations   memlab (the package: pins the numeric path), errors, progress, numerics, gguf_parse,
                    wandb_log, lab, zoo_layout, plugins -- import nothing of memlab above themselves
    1 config        config, schema, comparison -- conf/, its typed nodes, the claim rules' registry
    2 parts         data, metrics, backends, plots -- corpora, measures, model backends, figures
    3 model config  model_use -- the models a run reads (it asks the backends' registry of kinds)
    4 models        models -- the zoo and converted checkpoints (built from data, loaded through backends)
    5 study frame   study_run, results, report -- what every study runs inside and hands back
    6 methods       methods.* -- each method (pearl, recap, trace, the memorization curve) is its own package: a
                    method never imports another method
    7 audit         audit -- the audit runs the methods
    8 runner        runner.* (plan: one run point resolved once, which the runner reads; keys, known_keys,
                    preflight, execute, run_lock, sweeps, sweep_effects), run (its command), provenance, pipeline,
                    summary, reproduce, bench, cli
    9 presentation  site

Imports are read with ``ast`` from every lib/memlab/**/*.py: ``import``/``from ... import`` anywhere in a file
(lazy imports inside functions are imports), relative imports resolved, and string constants naming a module
(``"memlab.pkg.module"``, or a code pointer ``"memlab.pkg.module.function"`` counting as its module, which importlib
loads) count too.
A module importing its own package's ``__init__`` (``memlab.numerics`` -> ``memlab``) is the import system at
work, not a circle: only edges into a *parent package* are left out of the circle check, and a real circle through
a package's ``__init__`` (an ``__init__`` importing a module that imports another module of it back) is still one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib"
ROOT = LIB / "memlab"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundations", ("memlab", "memlab.errors", "memlab.yaml_text", "memlab.progress", "memlab.numerics",
                     "memlab.gguf_parse", "memlab.wandb_log", "memlab.lab", "memlab.zoo_layout", "memlab.plugins")),
    ("config", ("memlab.config", "memlab.schema", "memlab.comparison")),
    ("parts", ("memlab.data", "memlab.metrics", "memlab.backends", "memlab.plots")),
    ("model config", ("memlab.model_use",)),
    ("models", ("memlab.models",)),
    ("study frame", ("memlab.study_run", "memlab.results", "memlab.report")),
    ("methods", ("memlab.methods",)),
    ("audit", ("memlab.audit",)),
    ("runner", ("memlab.runner", "memlab.run", "memlab.provenance", "memlab.pipeline", "memlab.summary",
                "memlab.reproduce", "memlab.bench", "memlab.cli")),
    ("presentation", ("memlab.site",)),
]

# Known violations not yet fixed (issue 48), each with why: none left. The test fails when one is added. The last two
# were string registries naming higher code from a lower module: the claim rules (an experiment's YAML now names its
# rules module, `rules:`, as it names its study) and the aligned target's corpus (its zoo YAML names the recap
# method's loader as "<module>.<function>").
ALLOWED_UPWARD: set[tuple[str, str]] = set()
ALLOWED_CIRCLES: set[frozenset[str]] = set()

_NAMED = re.compile(r"memlab(\.\w+)+")   # a module, or a code pointer <module>.<function> (its owner)


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(LIB).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The module of ``name`` (a module, or a name inside one: ``memlab.config.compose`` -> ``memlab.config``)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, mods: dict[str, Path]) -> dict[str, int]:
    """memlab modules ``module`` imports, each with the line of its first import."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(name: str, line: int):
        owner = _owner(name, mods) if name == "memlab" or name.startswith("memlab.") else None
        if owner and owner != module:
            found.setdefault(owner, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for a in node.names:  # `from pkg import module` imports that module; `from module import name` the module
                add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAMED.fullmatch(node.value):
            add(node.value, node.lineno)
    return found


def graph() -> dict[str, dict[str, int]]:
    mods = modules()
    return {m: imports(m, p, mods) for m, p in mods.items()}


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def _is_parent(pkg: str, module: str) -> bool:
    return module.startswith(pkg + ".")


def circles(g: dict[str, dict[str, int]]) -> list[tuple[str, ...]]:
    """Each strongly connected set of modules (Tarjan), as one readable chain ``a -> b -> ... -> a``. Edges into a
    module's own parent package are left out (importing ``memlab.x`` runs ``memlab/__init__``)."""
    edges = {m: sorted(t for t in ts if not _is_parent(t, m)) for m, ts in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_chain(c, edges) for c in sorted(comps)]


def _chain(comp: list[str], edges: dict[str, list[str]]) -> tuple[str, ...]:
    """A shortest circle through the component's first module, e.g. (a, b, a); the component's other modules (on
    other circles through it) after it, as ``+ module``."""
    start, members = comp[0], set(comp)
    paths = {start: (start,)}
    todo = [start]
    while todo:
        nxt = []
        for v in todo:
            for w in edges[v]:
                if w == start:
                    return paths[v] + (start,) + tuple(f"+ {m}" for m in comp if m not in paths[v])
                if w in members and w not in paths:
                    paths[w] = paths[v] + (w,)
                    nxt.append(w)
        todo = nxt
    return tuple(comp)


def _readable(circle: tuple[str, ...]) -> str:
    chain = [m for m in circle if not m.startswith("+ ")]
    rest = [m[2:] for m in circle if m.startswith("+ ")]
    return " -> ".join(chain) + (f"   (on other circles with them: {', '.join(rest)})" if rest else "")


def upward(g: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    """Imports from a lower layer into a higher one, and from one method package into another."""
    out = []
    for m, targets in sorted(g.items()):
        for t, line in sorted(targets.items()):
            if layer_of(t) > layer_of(m) or _other_method(m, t):
                out.append((m, t, line))
    return out


def _method(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[1] == "methods" else None


def _other_method(m: str, t: str) -> bool:
    return _method(m) is not None and _method(t) is not None and _method(m) != _method(t)


def test_every_module_has_a_layer():
    for m in modules():
        layer_of(m)


def _members(circle: tuple[str, ...]) -> frozenset[str]:
    return frozenset(m.removeprefix("+ ") for m in circle)


def test_no_import_circles():
    now = circles(graph())
    found = [c for c in now if _members(c) not in ALLOWED_CIRCLES]
    assert not found, f"{len(found)} import circle(s) between lib/memlab modules:\n" + "\n".join(
        "  " + _readable(c) for c in found)
    gone = ALLOWED_CIRCLES - {_members(c) for c in now}
    assert not gone, f"allowed circles now gone, drop them from ALLOWED_CIRCLES: {[sorted(c) for c in gone]}"
    assert len(ALLOWED_CIRCLES) == 0, "the allow-list of known circles only shrinks"


def test_no_upward_imports():
    names = [name for name, _ in LAYERS]
    bad = upward(graph())
    found = [(m, t, line) for m, t, line in bad if (m, t) not in ALLOWED_UPWARD]
    head = f"{len(found)} import(s) from a lower layer into a higher one (or between methods):\n"
    assert not found, head + "\n".join(
        f"  {m} ({names[layer_of(m)]}) imports {t} ({names[layer_of(t)]}) at line {line}" for m, t, line in found)
    gone = ALLOWED_UPWARD - {(m, t) for m, t, _ in bad}
    assert not gone, f"allowed upward imports now gone, drop them from ALLOWED_UPWARD: {sorted(gone)}"
    assert len(ALLOWED_UPWARD) == 0, "the allow-list of known upward imports only shrinks"


def test_the_checker_sees_what_it_must(tmp_path):
    """The reader finds lazy, relative and string imports, and a planted circle and upward import are reported."""
    g = {"memlab.errors": {"memlab.runner.execute": 1}, "memlab.runner.execute": {"memlab.errors": 2}, "memlab": {}}
    assert circles(g) == [("memlab.errors", "memlab.runner.execute", "memlab.errors")]
    assert upward(g) == [("memlab.errors", "memlab.runner.execute", 1)]
    assert circles({"memlab": {"memlab.numerics": 1}, "memlab.numerics": {"memlab": 2}}) == []
    src = ROOT / "data" / "corpora.py"
    assert set(imports("memlab.data.corpora", src, modules())) >= {"memlab.data.sources", "memlab.errors"}  # strings too
    assert "memlab.runner.sweeps" in imports("memlab.runner.execute", ROOT / "runner" / "execute.py", modules())  # a lazy import inside main()
    rel = tmp_path / "corpus_stream.py"
    rel.write_text("from .base import checked_doc\n\ndef f():\n    from .. import simpletrace\n")
    assert set(imports("memlab.methods.trace.index.corpus_stream", rel, modules())) == {
        "memlab.methods.trace.index.base", "memlab.methods.trace.simpletrace"}
