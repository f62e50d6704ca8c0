"""Python standard-library source files of the running interpreter (PSF-2.0).

Every ``*.py`` under ``sysconfig.get_paths()["stdlib"]`` except test suites, ``site-packages``, IDLE and
the ``lib2to3``/``ensurepip`` bundles. Ids: ``stdlib/<path relative to the stdlib folder>``.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document
from memlab.errors import MissingSourceError

_SKIP = {"test", "tests", "idle_test", "site-packages", "dist-packages", "idlelib", "lib2to3", "ensurepip",
         "__pycache__", "turtledemo", "__phello__"}


@corpus_loader("stdlib")
def load_stdlib(root: str | Path | None = None, min_chars: int = 200) -> list[Document]:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not (root / "os.py").is_file():
        raise MissingSourceError(f"stdlib: no Python standard library at {root}; install it with "
                                 f"`apt-get install libpython{sys.version_info.major}.{sys.version_info.minor}-stdlib`")
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    docs = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        # (_sysconfigdata* and config-*/ are generated build config holding machine paths: not source)
        if any(part in _SKIP or part.startswith("config-") for part in rel.parts[:-1]) or rel.name.startswith(("_test", "test_", "__hello__", "_sysconfigdata")):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if len(text) < min_chars:
            continue
        docs.append(Document(id=f"stdlib/{rel.as_posix()}", text=text, source=f"python-{version}:Lib/{rel.as_posix()}",  # no machine path
                             licence="PSF-2.0", date=None,
                             meta={"corpus": "stdlib", "module": rel.with_suffix("").as_posix().replace("/", "."),
                                   "python": version}))
    return docs
