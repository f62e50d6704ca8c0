"""An executed notebook must hash the same on every rerun: papermill's random id for the injected parameters cell,
its clocks and the kernel's stderr must not reach the saved file (memlab.provenance.settle_notebook)."""

import json

from memlab.provenance import settle_notebook


def _executed(cell_id: str, start: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"papermill": {"start_time": start, "duration": 1.5}},
            "cells": [{"id": cell_id, "cell_type": "code", "source": "cfg = {'root': '/repo/x'}",
                       "metadata": {"papermill": {"duration": 0.1}, "execution": {"a": start}},
                       "outputs": [{"output_type": "stream", "name": "stderr", "text": f"took {start}"},
                                   {"output_type": "stream", "name": "stdout", "text": "42"}]}]}


def test_two_runs_of_one_config_settle_to_the_same_bytes(tmp_path):
    a, b = tmp_path / "a" / "nb.ipynb", tmp_path / "b" / "nb.ipynb"
    for path, cell_id, start in ((a, "4a035f66", "10:00"), (b, "3521819c", "11:00")):
        path.parent.mkdir()
        path.write_text(json.dumps(_executed(cell_id, start)))
        settle_notebook(path, "/repo")
    assert a.read_bytes() == b.read_bytes()
    assert b"/repo" not in a.read_bytes() and b"took" not in a.read_bytes() and b"42" in a.read_bytes()
    assert (a.parent / "run.log").read_text().endswith("took 10:00")
