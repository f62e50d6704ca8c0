"""The data stage is machine-independent: built twice in different roots it gives the same hashes, and no
corpus records a machine path or a machine-dependent source (issue 9: dvc.lock is shared through git)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _build(root: Path) -> dict:
    import shutil

    shutil.copytree(REPO / "conf" / "corpora", root / "conf" / "corpora")  # the pins are config: read from the root
    out = root / "data" / "corpora"
    env = {**os.environ, "MEMLAB_ROOT": str(root)}
    # the pinned sdists are downloaded once into the checkout's cache and verified by sha256
    subprocess.run([sys.executable, "-m", "memlab.data.prepare", "--out", str(out),
                    "--sdists", str(REPO / ".cache" / "sdists")], check=True, env=env, cwd=root,
                   capture_output=True, text=True)
    return json.loads((out / "manifest.json").read_text())


def test_data_stage_builds_identically_in_two_roots(tmp_path):
    a = _build(tmp_path / "first root")
    b = _build(tmp_path / "second-root")
    assert set(a["files"]) == set(b["files"]) and len(a["files"]) >= 10
    for name in a["files"]:
        assert a["files"][name]["sha256"] == b["files"][name]["sha256"], name
    assert (tmp_path / "first root" / "data" / "corpora" / "manifest.json").read_bytes() == \
        (tmp_path / "second-root" / "data" / "corpora" / "manifest.json").read_bytes()
    for name in a["files"]:  # no machine path leaks into any corpus
        text = (tmp_path / "first root" / "data" / "corpora" / name).read_text()
        assert str(tmp_path) not in text and sys.prefix not in text and sys.base_prefix not in text, name
    # every source is a pinned, versioned package: versions recorded per file, sdists with their sha256
    for name, entry in a["files"].items():
        assert entry["sources"] and all(v and v != "not installed" for v in entry["sources"].values()), name
    rn = a["files"]["release_notes.jsonl"]["sources"]
    assert rn["debian_changelogs"] == "False"
    assert all(v.startswith("sha256:") and len(v) == 71 for k, v in rn.items() if k.startswith("pypi-sdist:"))
    code = a["files"]["post_cutoff_code.jsonl"]
    assert code["documents"] >= 40 and code["date_range"][0] >= "2025-06-01"
    assert all(v.startswith("sha256:") for k, v in code["sources"].items() if k.startswith("pypi-sdist:"))
