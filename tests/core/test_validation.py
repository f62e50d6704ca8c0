"""Every experiment's params are checked at compose time, before any model loads (issue 9): a value keeps the
type of the experiment's default, named keys stay in range, typed ``_schema_`` nodes are built; one line each."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from memlab.config import compose, experiment_names, to_plain
from memlab.errors import ConfigError
from memlab.schema import check_like_defaults, validate_tree


@pytest.mark.parametrize("experiment", experiment_names())
def test_shipped_configs_pass_in_every_profile(experiment):
    default = to_plain(compose(experiment))["params"]
    for profile in ("embedded", "full", "smoke"):
        check_like_defaults(default, to_plain(compose(experiment, [f"profile={profile}"]))["params"], "params")


@pytest.mark.parametrize("override,message", [
    ("params.target_fpr=1.5", "config key params.target_fpr=1.5: must be ≤ 1"),
    ("method.alpha=5", "config key method.alpha=5.0: must be ≤ 1"),
    ("method.tau_b=-1", "config key method.tau_b=-1.0: must be ≥ 0"),
    ("method.study.n_members=abc", "config key method.study.n_members='abc': must be an integer"),
    ("method.study.epochs=[0,x]", "config key method.study.epochs[1]='x': must be an integer"),
])
def test_bad_values_are_refused_naming_key_value_and_range(override, message):
    cfg = to_plain(compose("pearl_mia", [override]))
    with pytest.raises(ConfigError) as e:
        validate_tree(cfg)
    assert str(e.value) == message


def test_cli_refuses_before_loading_any_model(tmp_path):
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "memlab.run", "experiment=pearl_mia", "params.target_fpr=1.5",
                        "logger=null", f"paths.results={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "memlab: error: config key params.target_fpr=1.5: must be ≤ 1"
    assert not any(tmp_path.iterdir())  # nothing started: no run folder, no kernel, no model
    assert time.time() - t0 < 60
