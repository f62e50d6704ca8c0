"""comparison.paper_mark: the figures draw the paper's number from conf/paper (written once), never a copy."""

from __future__ import annotations

import pytest
import yaml

from memlab.comparison import paper_dir, paper_mark
from memlab.errors import ConfigError


def test_paper_mark_reads_the_claims_value_and_where():
    claims = {c["id"]: c for f in paper_dir().glob("*.yaml") for c in yaml.safe_load(f.read_text())["claims"]}
    c = claims["pearl_calibration_low_fpr"]
    assert paper_mark(c["id"]) == (float(c["value"]), f"paper, {c['where']}")
    numberless = next(i for i, c in claims.items() if not isinstance(c.get("value"), (int, float)))
    assert paper_mark(numberless) is None


def test_unknown_claim_is_a_config_error():
    with pytest.raises(ConfigError, match="no claim 'nope'"):
        paper_mark("nope")
