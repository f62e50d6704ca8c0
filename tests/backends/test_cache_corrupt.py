"""A corrupt response cache (garbage bytes, a truncated database, a text file) is moved aside with one line
saying where it went and what to do; the run goes on with an empty cache and nothing is lost."""

from __future__ import annotations

import sqlite3

import pytest

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend


def _good_cache(path, micro_family):
    api = build_backend(micro_family.model_cfg, {"name": "sqlite", "path": str(path)})
    api.generate([Req(prompt=f"In the beginning {i}", max_new_tokens=4) for i in range(40)])
    api.close()
    con = sqlite3.connect(str(path))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("corruption", ["garbage", "truncated", "text"])
def test_corrupt_cache_is_moved_aside_with_one_line(tmp_path, micro_family, capsys, corruption):
    path = tmp_path / "responses.sqlite"
    if corruption == "garbage":
        path.write_bytes(bytes(range(256)) * 64)
    elif corruption == "text":
        path.write_text("these are my notes, not a database\n" * 50)
    else:
        whole = _good_cache(path, micro_family)
        assert len(whole) > 3 * 4096
        path.write_bytes(whole[: len(whole) // 2])
    original = path.read_bytes()
    api = build_backend(micro_family.model_cfg, {"name": "sqlite", "path": str(path)})
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cache=null" in err and str(path) in err, err
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == original  # kept for inspection, byte for byte
    g = api.generate([Req(prompt="In the beginning", max_new_tokens=4)])[0]  # the run goes on
    assert g.text and len(api) == 1
