"""RECAP with no usable book (issue 33): every configured book refused ended in ``KeyError: 'target'`` from the
empty tables; now one line names the refused files and why, and the fix, before any model is opened."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memlab.data.echotrace import echotrace_mini
from memlab.errors import ConfigError
from memlab.methods.recap.study import require_books

NO_BUILTIN = ["method.echotrace.public_domain.kjv_books=[]", "method.echotrace.copyrighted.licences=[]",
              "method.echotrace.non_training.n_docs=0"]


def _file(path, category):
    return f"{{path:'{path}',category:{category},format:plain,title:null,licence:null,date:null}}"


def _spec(files):
    return {"public_domain": {}, "copyrighted": {}, "non_training": {}, "papers": {"paths": []},
            "files": [{"path": str(p), "category": "public_domain", "format": "plain"} for p in files]}


def test_recap_with_every_book_refused_is_one_line_before_any_model(tmp_path):
    stray, binary = tmp_path / "stray.txt", tmp_path / "scan.bin"
    stray.write_text("a stray line\n")
    binary.write_bytes(b"\x00\x01\x02\x03 not a book")
    files = f"method.echotrace.files=[{_file(stray, 'public_domain')},{_file(binary, 'copyrighted')}]"
    r = subprocess.run([sys.executable, "-m", "memlab.run", "experiment=recap_table3",
                        f"paths.results={tmp_path}/results", f"paths.cache={tmp_path}/cache", "logger=null",
                        *NO_BUILTIN, files], capture_output=True, text=True, timeout=600)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr and "KeyError" not in r.stderr, r.stderr
    assert len(errors) == 1 and "no usable book" in errors[0], r.stderr
    assert f"{stray} skipped (book file {stray} has 3 words)" in errors[0], errors[0]
    assert f"{binary} skipped (book file {binary} is not text" in errors[0], errors[0]
    assert "method.echotrace.files" in errors[0] and "kjv_books" in errors[0]  # the fix
    failed = list((tmp_path / "results" / "recap_table3").glob("*.failed"))
    assert len(failed) == 1 and not (failed[0] / "events.jsonl").exists()  # no target was run


def test_one_usable_file_beside_a_refused_one_is_kept(tmp_path):  # the negative control, same loader
    stray, book = tmp_path / "stray.txt", tmp_path / "book.txt"
    stray.write_text("a stray line\n")
    book.write_text("\n\n".join(" ".join(f"word{i}x{j}" for j in range(40)) + "." for i in range(6)))
    books, notes = echotrace_mini(_spec([stray, book]))
    require_books(books, notes, "is refused or missing")  # does not raise
    assert [b.title for b in books] == ["book"] and any(str(stray) in n for n in notes)
    with pytest.raises(ConfigError, match="no usable book"):
        require_books([], notes, "is refused or missing")
