"""Every config key is known (issue 33): misspelled keys, with or without ``+``, are one line naming the key, the
nearest known keys and the file documenting them, exit 2, before anything runs — in single runs and sweeps;
documented optional keys are accepted; a GPU device on a CPU-only machine is refused at compose time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memlab.runner.known_keys import check_overrides


def _runner(tmp_path, *args):
    cmd = [sys.executable, "-m", "memlab.run", *args, f"paths.results={tmp_path / 'results'}",
           f"paths.cache={tmp_path / 'cache'}", "logger=null"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("bad, near, doc", [
    ("+model.batchsize=8", "model.batch_size", "conf/model/tiny-neox.yaml"),
    ("method.samplez=3", "method.samples", "conf/method/pearl.yaml"),
    ("+cache.pth=x", "cache.path", "conf/cache/sqlite.yaml"),
])
def test_unknown_key_is_one_line_exit_2_and_nothing_runs(tmp_path, bad, near, doc):
    r = _runner(tmp_path, "experiment=pearl_mia", bad)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    key = bad.lstrip("+").split("=")[0]
    assert lines[0].startswith(f"memlab: error: unknown config key {key}") and near in lines[0] and doc in lines[0]
    assert not (tmp_path / "results").exists()  # nothing ran


def test_sweep_reports_every_bad_point_and_runs_none(tmp_path):
    # batch_size is an hf key: known for tiny-neox, unknown for the API preset
    r = _runner(tmp_path, "-m", "experiment=pearl_mia,pearl_calibration", "model=tiny-neox,gpt-4.1",
                "model.batch_size=3")
    bad = [ln for ln in r.stderr.splitlines() if "unknown config key" in ln]
    assert r.returncode == 2 and len(bad) == 2, r.stderr
    assert all("model=gpt-4.1" in ln and "openai_config.py" in ln for ln in bad)
    assert {("pearl_mia" in ln, "pearl_calibration" in ln) for ln in bad} == {(True, False), (False, True)}
    assert "no job of the sweep ran (4 points checked)" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()


def test_unknown_params_and_top_level_keys(capsys):
    for bad, doc in (("params.n_probez=3", "conf/experiment/pearl_mia.yaml"), ("+samplez=3", "conf/config.yaml")):
        with pytest.raises(SystemExit) as e:
            check_overrides(["experiment=pearl_mia", bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and doc in err[0], err


def test_documented_optional_key_is_accepted_with_or_without_plus():
    # every served preset lists every OpenAIConfig key (issue 30), so backoff_base is a key of the composed config:
    # as given without +, as ++ with + (add or override)
    for given, want in (("model.backoff_base=2", "model.backoff_base=2"), ("+model.backoff_base=2", None),
                        ("++model.backoff_base=2", None)):
        out = check_overrides(["experiment=pearl_mia", "model=gpt-4.1", given])
        assert out[-1] == (want or "++model.backoff_base=2")
    # a known key given with + works too (Hydra alone would refuse to append an existing key)
    assert check_overrides(["experiment=pearl_mia", "+method.samples=3"])[-1] == "++method.samples=3"
    assert check_overrides(["experiment=pearl_mia", "method.samples=3"])[-1] == "method.samples=3"


def test_optional_model_keys_are_the_fields_of_each_kinds_config(capsys):
    import dataclasses

    from memlab.backends.hf_config import HFBackendConfig
    from memlab.backends.registry import find_kind

    assert find_kind("hf").keys == tuple(f.name for f in dataclasses.fields(HFBackendConfig))
    # another kind's key is unknown: one line pointing at the served kind's config class
    with pytest.raises(SystemExit) as e:
        check_overrides(["experiment=pearl_mia", "model=gpt-4.1", "+model.kv_cache=static"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert "model.kv_cache" in err[0] and "lib/memlab/backends/openai_config.py (OpenAIConfig)" in err[0]


@pytest.mark.parametrize("device", ["cuda", "gpu", "cuda:1"])
def test_gpu_device_on_a_cpu_machine_is_one_line_at_compose_time(capsys, device):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the refusal only applies to CPU-only machines")
    with pytest.raises(SystemExit) as e:
        check_overrides(["experiment=pearl_mia", f"model.device={device}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and f"model.device={device}" in err[0] and "cpu" in err[0], err


def test_a_wandb_logger_without_its_settings_is_one_line_before_anything_runs(tmp_path):
    """The W&B settings come from conf/logger/wandb.yaml, never from defaults in code: a logger node that lost one
    (`~logger.project`) is refused in one line naming it, before the notebook runs; the full node (the control)
    passes this check (the run then fails later, on the absent test zoo, with another message)."""
    cmd = [sys.executable, "-m", "memlab.run", "experiment=pearl_mia", f"paths.results={tmp_path / 'results'}",
           f"paths.cache={tmp_path / 'cache'}", f"paths.models={tmp_path / 'no-models'}", "logger=wandb"]
    r = subprocess.run([*cmd, "~logger.project"], capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines == ["memlab: error: logger=wandb lacks project (see conf/logger/wandb.yaml)"], \
        r.stderr
    assert not (tmp_path / "results").exists()
    control = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert "lacks project" not in control.stderr and "memlab: running pearl_mia" in control.stderr, control.stderr
