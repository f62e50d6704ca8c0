"""Sensitivity (seed 001 eq. 3), GFD (seed 003 eq. 3), decision and calibration, on hand-computed values."""


import pytest

from memlab.errors import ConfigError, MemlabError
from memlab.methods.pearl.calibration import calibrate_alpha, fpr_curve
from memlab.methods.pearl.scores import gfd, level_means, memorized, sensitivity


def test_sensitivity_signed_and_absolute():
    x = [0.9, 0.85, 0.3, 0.35, 0.34, 0.1]
    assert sensitivity(x, "signed") == pytest.approx(0.55)
    rising = [0.2, 0.5, 0.5, 0.55, 0.6, 0.6]
    assert sensitivity(rising, "signed") == pytest.approx(0.0)
    assert sensitivity(rising, "absolute") == pytest.approx(0.3)
    assert sensitivity([0.5, 0.6], "signed") == pytest.approx(-0.1)
    with pytest.raises(ConfigError):
        sensitivity(x, "relative")


def test_gfd_level_and_sample_units():
    per_sample = [[0.9, 0.9], [0.8, 0.62], [0.5, 0.6], [0.9, 0.2], [0.85, 0.85], [0.1, 0.1]]
    assert level_means(per_sample).tolist() == pytest.approx([0.9, 0.71, 0.55, 0.55, 0.85, 0.1])
    # level means drop by 0.19, 0.35, 0.35, 0.05, 0.8 -> > 0.2 at three of five levels
    assert gfd(per_sample, 0.2, "level") == pytest.approx(3 / 5)
    # samples drop by 0.1,0.28, 0.4,0.3, 0.0,0.7, 0.05,0.05, 0.8,0.8 -> 6 of 10 above 0.2
    assert gfd(per_sample, 0.2, unit="sample") == pytest.approx(6 / 10)
    assert gfd(per_sample, 0.9, "level") == 0.0


def test_decision_is_strict():
    assert memorized(0.21, 0.2) and not memorized(0.2, 0.2)


def test_fpr_curve_and_alpha_at_target_fpr():
    s = [0.0, 0.05, 0.1, 0.1, 0.2, 0.3, 0.3, 0.4, 0.5, 0.9]
    rows = fpr_curve(s, [0.0, 0.1, 0.3, 1.0])
    assert [r["fpr"] for r in rows] == pytest.approx([0.9, 0.6, 0.3, 0.0])
    a = calibrate_alpha(s, 0.1)
    assert a == 0.5 and sum(v > a for v in s) / len(s) <= 0.1
    assert calibrate_alpha([-0.2, -0.1], 0.5) == 0.0  # floor
    with pytest.raises(MemlabError):
        fpr_curve([], [0.1])
