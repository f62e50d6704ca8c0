"""Both RECAP notebooks (thin: one study call each) run end to end on tiny settings (composed from the real config
with profile=smoke), micro model target; nothing copyrighted is written."""

import json

import nbformat
from omegaconf import OmegaConf

from memlab.config import compose
from memlab.data.corpora import load_corpus
from memlab.schema import validate_tree

NOTEBOOKS = ("recap_table3", "recap_feedback")


def _cfg(name, micro_family, tmp_path):
    cfg = compose(name, ["profile=smoke"])   # the small sizes: conf/scale/method/recap_smoke.yaml
    # the micro model is the only target (no zoo, no pretrained model); the benchmark is replaced whole
    OmegaConf.update(cfg, "method.targets", {"micro": {
        "model": dict(micro_family.model_cfg), "prompt_style": "plain", "max_new_tokens": 20,
        "budget_factor": 2.0, "tokens_per_word": 1.3, "max_context_tokens": 96, "min_prompt_tokens": 32, "price_in": 0.27, "price_out": 1.1, "categories": None, "events_per_book": None,
        "membership": None, "group": "ground_truth_base"}}, merge=False)
    OmegaConf.update(cfg, "method.echotrace", {
        "public_domain": {"kjv_books": ["Ruth"], "max_chapters": 1},
        "copyrighted": {"licences": ["GPL-3"], "max_words": 150, "wiki": [], "wiki_max_words": 300},
        "non_training": {"n_docs": 1, "max_words": 150, "min_date": "2025-01-01", "download": False},
        "papers": {"paths": [], "max_input_depth": 8, "max_source_chars": 2000000}, "files": []},
        merge=False)
    OmegaConf.update(cfg, "method.max_events_per_book", 2)   # ≥ 4 events in all (asserted below)
    OmegaConf.update(cfg, "cache.path", str(tmp_path / "responses.sqlite"))
    OmegaConf.update(cfg, "paths.cache", str(tmp_path / "cache"))
    c = OmegaConf.to_container(cfg, resolve=True)
    c["run"] = {"key": "test", "out_dir": str(tmp_path / name)}
    return c


def _execute(name, cfg):
    nb = nbformat.read(f"notebooks/{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].metadata.get("tags") == ["parameters"] and code[0].source == "cfg = {}"
    assert f'rep = Report(cfg, experiment="{name}")' in code[1].source
    assert all(not c.get("outputs") for c in code)  # outputs stripped
    # thin: the notebook only calls the study function and saves what it returns
    assert sum(len(c.source.splitlines()) for c in code) <= 10 and "for " not in "".join(c.source for c in code)
    validate_tree(cfg)  # as the runner does: the inline target and every setting typed before any model loads
    ns = {}
    for k, cell in enumerate(code):
        exec(compile(cell.source, f"{name}[{k}]", "exec"), ns)
        if k == 0:
            ns["cfg"] = cfg
    return ns


def test_notebooks_run_and_redact(micro_family, tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    outs = {}
    for name in NOTEBOOKS:
        cfg = _cfg(name, micro_family, tmp_path)
        _execute(name, cfg)
        outs[name] = tmp_path / name
    t = outs["recap_table3"]
    for table in ("table3", "book_scores", "passages_per_book", "tolerance_sweep", "cost", "coverage"):
        assert (t / "tables" / f"{table}.csv").is_file(), table
    metrics = json.loads((t / "metrics.json").read_text())
    assert metrics["events"] >= 4 and metrics["event_errors"] == 0
    f = outs["recap_feedback"]
    for table in ("feedback_gains", "filter_tradeoff", "hint_audit", "passages_by_category"):
        assert (f / "tables" / f"{table}.csv").is_file(), table
    # copyright-safe: no 8-word window of the GPL text appears in anything written
    gpl = " ".join(d.text for d in load_corpus("licences") if d.id.endswith("/GPL-3")).split()[:150]
    windows = {" ".join(gpl[i:i + 8]) for i in range(0, len(gpl) - 8)}
    for p in list(t.rglob("*")) + list(f.rglob("*")):
        if p.is_file() and p.suffix in (".csv", ".json", ".jsonl"):
            text = " ".join(p.read_text().split())
            assert not any(w in text for w in windows), p
