"""Every library module and function stays small (issue 30 item 5): a module ≤ 450 lines, a function ≤ 60."""

from __future__ import annotations

import ast

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def test_modules_and_functions_are_small(repo_root):
    """Every .py under lib/memlab (``__pycache__`` skipped): the module has ≤ 450 lines, counted as
    ``src.count("\\n")``, and every function and async function (methods and nested ones included) ≤ 60 lines,
    counted as ``node.end_lineno - node.lineno + 1``: from its ``def`` line to its last line inclusive, docstring
    included, decorators not. Every offender is named as file:function (line count)."""
    lib = repo_root / "lib" / "memlab"
    files = sorted(p for p in lib.rglob("*.py") if "__pycache__" not in p.parts)
    assert files, f"no modules under {lib}"
    too_long = []
    for path in files:
        rel = path.relative_to(repo_root)
        src = path.read_text()
        if src.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {src.count(chr(10))} lines (module)")
        for node in ast.walk(ast.parse(src, filename=str(rel))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.name} {n} lines (line {node.lineno})")
    assert not too_long, (f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function:\n"
                          + "\n".join(too_long))
