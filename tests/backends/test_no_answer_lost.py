"""Nothing thrown away (issue 33): answers in flight when a batch fails are committed; a cache file deleted
during a run is noticed and recreated; a full disk while opening a cache is a disk-full line (the file is never
renamed); a cache path naming a directory is refused. Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend
from memlab.errors import BackendError, MemlabError
from tests.backends.openai_presets import served_node
from tests.backends.scripted import ScriptedServer, api_error, completion


def _Server(answer) -> ScriptedServer:  # noqa: N802
    """`answer(body) -> (status, text, delay)`; `answered` lists the prompts answered 200."""
    answered: list[str] = []

    def post(body):
        status, text, delay = answer(body)
        time.sleep(delay)
        if status != 200:
            return status, api_error(text)
        answered.append(body["prompt"])
        return 200, completion(text)
    server = ScriptedServer(post)
    server.answered = answered
    return server


def _cfg(url: str) -> dict:
    return served_node(name="m", base_url=url, model_id="m", chat=False, concurrency=4, max_retries=0, timeout=30)


def _rows(path) -> set[str]:
    con = sqlite3.connect(str(path))
    try:
        return {json.loads(v)["text"] for (v,) in con.execute("SELECT value FROM responses")}
    finally:
        con.close()


def test_http_400_mid_batch_keeps_every_answer_in_flight(tmp_path):
    # p3 is refused at once while p0..p2 are still being answered: those three answers must reach the cache
    server = _Server(lambda b: (400, "bad request", 0.0) if b["prompt"] == "p3" else (200, "t-" + b["prompt"], 0.5))
    path = tmp_path / "c.sqlite"
    try:
        api = build_backend(_cfg(server.url), {"name": "sqlite", "path": str(path)})
        with pytest.raises(BackendError, match="HTTP 400") as e:
            api.generate([Req(prompt=f"p{i}", max_new_tokens=2) for i in range(12)])
        assert "\n" not in str(e.value)
        assert len(server.answered) >= 3  # the calls in flight were answered ...
        assert _rows(path) == {f"t-{p}" for p in server.answered}  # ... and every answer received was committed
        assert "t-p3" not in _rows(path) and len(server.answered) < 12  # no new call started after the failure
    finally:
        server.close()


def test_cache_file_deleted_during_a_run_is_noticed_and_recreated(tmp_path, capsys):
    server = _Server(lambda b: (200, "t-" + b["prompt"], 0.0))
    path = tmp_path / "c.sqlite"
    try:
        api = build_backend(_cfg(server.url), {"name": "sqlite", "path": str(path)})
        api.generate([Req(prompt=f"a{i}", max_new_tokens=2) for i in range(3)])
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"c.sqlite{suffix}").unlink(missing_ok=True)  # the user deletes the cache mid-run
        capsys.readouterr()
        api.generate([Req(prompt=f"b{i}", max_new_tokens=2) for i in range(3)])
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "deleted" in err[0] and str(path) in err[0], err
        api.generate([Req(prompt="b3", max_new_tokens=2)])
        assert capsys.readouterr().err.strip() == ""  # said once
        assert path.exists() and _rows(path) == {"t-b0", "t-b1", "t-b2", "t-b3"}  # answers after the deletion kept
    finally:
        server.close()


def test_cache_path_naming_a_directory_is_refused_and_never_renamed(tmp_path):
    folder = tmp_path / "my-notes"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(MemlabError) as e:
        build_backend(_cfg("http://127.0.0.1:9/v1"), {"name": "sqlite", "path": str(folder)})
    assert "\n" not in str(e.value) and "directory" in str(e.value) and str(folder) in str(e.value)
    assert (folder / "keep.txt").read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["my-notes"]


FULL_DISK = r"""
import json, os, sqlite3, sys
from memlab.backends.factory import build_backend
from memlab.errors import MemlabError
path = sys.argv[1] + "/c.sqlite"
con = sqlite3.connect(path)  # a healthy cache, not in WAL mode yet: opening it must write
con.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, method TEXT NOT NULL, value TEXT NOT NULL)")
con.execute("INSERT INTO responses VALUES ('k', 'generate', '{}')")
con.commit(); con.close()
before = open(path, "rb").read()
f = open(sys.argv[1] + "/filler", "wb", buffering=0)  # fill the disk
try:
    while True:
        f.write(b"x" * 4096)
except OSError:
    pass
f.close()
cfg = json.loads(PRESET)  # PRESET: the llama-cpp preset's node, written above
try:
    build_backend(cfg, {"name": "sqlite", "path": path})
    print("OPENED")
except MemlabError as err:
    print("ERROR", err)
print("FILES", sorted(os.listdir(sys.argv[1])), open(path, "rb").read() == before)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare for a small tmpfs")
def test_full_disk_while_opening_the_cache_is_a_disk_full_line(tmp_path):
    script = tmp_path / "client.py"
    node = served_node(name="m", base_url="http://127.0.0.1:9/v1", model_id="m", chat=False)
    script.write_text(f"PRESET = {json.dumps(node)!r}\n" + FULL_DISK)
    mnt = tmp_path / "disk"
    mnt.mkdir()
    cmd = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=256k tmpfs "{mnt}" && '
           f'exec "{sys.executable}" "{script}" "{mnt}"']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if "mount" in r.stderr and r.returncode != 0:
        pytest.skip(f"no user mount namespace here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    error = next(line for line in r.stdout.splitlines() if line.startswith(("ERROR", "OPENED")))
    assert error.startswith("ERROR") and "disk" in error and "full" in error and "corrupt" not in error, r.stdout
    files = next(line for line in r.stdout.splitlines() if line.startswith("FILES"))
    assert "corrupt" not in files and files.endswith("True"), files  # the user's file: same name, same bytes
