"""A truncated model.safetensors (issue 33) is one line naming the model folder and `make models`, not a
SafetensorError traceback."""

from __future__ import annotations

import shutil

import pytest

from memlab.backends.factory import build_backend
from memlab.errors import MemlabError


def test_truncated_safetensors_is_one_line_naming_the_folder_and_make_models(tmp_path, micro_family):
    folder = tmp_path / "model"
    shutil.copytree(micro_family.model_cfg["path"], folder)
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 3])
    cfg = {**micro_family.model_cfg, "path": str(folder), "revision": "truncated"}
    with pytest.raises(MemlabError) as e:
        build_backend(cfg)
    msg = str(e.value)
    assert "\n" not in msg and str(folder) in msg and "make models" in msg, msg
