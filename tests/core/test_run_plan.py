"""One run plan (issue 48): a run point is resolved once into a frozen :class:`memlab.plan.RunPlan`, which the
runner, run.json, W&B and the notebook kernel read; a model preset is read from its own files, not composed."""

from __future__ import annotations

import pytest

from memlab.config import CONF_DIR, compose, to_plain
from memlab.model_use import preset

PRESETS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
PROFILES = sorted(p.stem for p in (CONF_DIR / "numerics").glob("*.yaml"))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_read_from_its_file_is_the_composed_one(name, profile):
    composed = compose(overrides=[f"model={name}", f"numerics={profile}"])
    assert preset(name, composed.paths, {"name": profile}) == to_plain(composed.model)
    assert list(preset(name, composed.paths, {"name": profile})) == list(to_plain(composed.model))
