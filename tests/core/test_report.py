"""The notebook helper writes tables, figures and metrics where the config says."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from memlab.config import compose  # noqa: E402
from memlab.report import Report  # noqa: E402


def _cfg(tmp_path, **params):
    cfg = OmegaConf.to_container(compose("memorization_curve", ["logger=null"]), resolve=True)
    cfg["run"] = {"key": "t", "out_dir": str(tmp_path / "run")}
    cfg["params"].update(params)
    return cfg


def test_outputs_land_in_run_folder(tmp_path):
    rep = Report(_cfg(tmp_path), experiment="memorization_curve")
    rep.table("t1", pd.DataFrame({"a": [1, 2]}), show=False)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    rep.figure("f1", fig, show=False)
    rep.metrics(x=1.5, y={"z": 2})
    rep.metrics(w=3)
    out = tmp_path / "run"
    assert (out / "tables" / "t1.csv").read_text().splitlines() == ["a", "1", "2"]
    assert (out / "figures" / "f1.png").stat().st_size > 0
    assert json.loads((out / "metrics.json").read_text()) == {"w": 3, "x": 1.5, "y": {"z": 2}}


def test_figures_are_byte_identical_across_runs(tmp_path):
    paths = []
    for i in range(2):
        rep = Report(_cfg(tmp_path / str(i)), experiment="memorization_curve")
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [0, 1, 4])
        paths.append(rep.figure("f", fig, show=False))
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_wrong_experiment_is_refused(tmp_path):
    import pytest

    from memlab.errors import ConfigError

    with pytest.raises(ConfigError):
        Report(_cfg(tmp_path), experiment="something_else")
