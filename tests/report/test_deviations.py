"""conf/deviations/<paper>.yaml: every entry complete, every `restore` override composes with the real config and
changes it (a restore that composes to the embedded config would restore nothing); the site renders one page per
paper with one row per entry."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from memlab.config import CONF_DIR, compose
from memlab.site import deviations

ALL = deviations.load(CONF_DIR)
ENTRIES = [(paper, d) for paper, entries in ALL.items() for d in entries]


def test_every_paper_has_deviations():
    papers = {p.stem for p in (CONF_DIR / "paper").glob("*.yaml")}
    assert set(ALL) == papers
    assert all(len(entries) >= 5 for entries in ALL.values())
    ids = [d["id"] for _, d in ENTRIES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("paper,entry", ENTRIES, ids=[d["id"] for _, d in ENTRIES])
def test_restore_composes_and_changes_the_config(paper, entry):
    parsed = deviations.restore_overrides(entry["restore"])
    if parsed is None:
        assert entry["restore"].split(":", 1)[1].strip(), "a restore that can't be done says why"
        return
    experiment, overrides = parsed
    assert overrides, entry["id"]
    restored = OmegaConf.to_container(compose(experiment, overrides), resolve=False)
    default = OmegaConf.to_container(compose(experiment), resolve=False)
    assert restored != default, f"{entry['id']}: {overrides} changes nothing"


def test_bad_restore_is_a_one_line_error():
    from memlab.errors import ConfigError

    with pytest.raises(ConfigError, match="one experiment"):
        deviations.restore_overrides("method.samples=10")


def test_page_lists_every_entry():
    for paper, entries in ALL.items():
        html = deviations.page(paper, paper, entries)
        assert html.count('<tr id="dev-') == len(entries)


def test_every_deviation_a_claim_names_is_on_its_papers_deviations_page():
    import yaml

    from memlab.config import CONF_DIR

    known = {}
    for f in (CONF_DIR / "deviations").glob("*.yaml"):
        spec = yaml.safe_load(f.read_text())
        known[spec["paper"]] = {d["id"] for d in spec["deviations"]}
    named = [(c["paper"], c["id"], d) for f in (CONF_DIR / "paper").glob("*.yaml")
             for c in yaml.safe_load(f.read_text())["claims"] for d in c.get("deviations") or []]
    assert named, "no claim names a deviation"
    same_page = {"001_pearl": "003_pearl"}  # both PEARL seeds share one deviations page (one setup)
    missing = [(claim, d) for paper, claim, d in named if d not in known.get(same_page.get(paper, paper), set())]
    assert not missing
