"""A GGUF given as ``model.path`` converts once (memlab.models.convert.converted_gguf): the safetensors folder is
kept under ``paths.gguf/<sha256[:16]>`` of the file's bytes, and every later open loads that folder without parsing
the GGUF again. The GGUF parse is replaced by the micro model here (the real SmolLM2 timing is in the report)."""

import shutil

import pytest

from memlab.backends.hf import weights_revision
from memlab.data.records import sha256_file
from memlab.models import convert
from memlab.models.catalog import Catalog


@pytest.fixture
def counted_loads(monkeypatch, micro_family):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    calls = []

    def load(path):
        calls.append(path)
        return (AutoModelForCausalLM.from_pretrained(micro_family.final_dir),
                AutoTokenizer.from_pretrained(micro_family.final_dir))

    monkeypatch.setattr(convert, "load_gguf", load)
    return calls


def _gguf(folder, name="Mine.Q4_1.gguf", payload=b"one"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"GGUF" + payload)
    return folder / name


def test_a_gguf_converts_once_and_the_second_load_reuses_the_folder(tmp_path, counted_loads):
    gguf, cache = _gguf(tmp_path / "in"), tmp_path / "cache"
    node = {"backend": "hf", "path": str(gguf), "gguf_file": None, "name": "Mine.Q4_1", "threads": 1}
    first = convert.gguf_as_folder(node, cache)
    folder = cache / sha256_file(gguf)[:16]
    assert first["path"] == str(folder) and first["gguf_file"] is None and first["name"] == "Mine.Q4_1"
    weights, stamp = weights_revision(folder), (folder / "model.safetensors").stat().st_mtime_ns
    second = convert.gguf_as_folder(node, cache)
    assert second == first and len(counted_loads) == 1                  # no second conversion
    assert weights_revision(folder) == weights and (folder / "model.safetensors").stat().st_mtime_ns == stamp
    # the same bytes elsewhere, given as folder + gguf_file: the same cached folder; other bytes: a new one
    shutil.copy(gguf, tmp_path / "copy.gguf")
    again = convert.gguf_as_folder({**node, "path": str(tmp_path), "gguf_file": "copy.gguf"}, cache)
    assert again["path"] == str(folder) and len(counted_loads) == 1
    other = convert.gguf_as_folder({**node, "path": str(_gguf(tmp_path / "b", payload=b"two"))}, cache)
    assert other["path"] != str(folder) and len(counted_loads) == 2


def test_nodes_without_a_gguf_file_are_left_alone(tmp_path, counted_loads):
    folder = {"backend": "hf", "path": str(tmp_path), "gguf_file": None, "name": "x"}
    missing = {**folder, "path": str(tmp_path / "absent.gguf")}            # the backend reports a missing file
    served = {"backend": "openai", "model_id": "m.gguf", "name": "m"}
    for node in (folder, missing, served):
        assert convert.gguf_as_folder(node, tmp_path / "cache") == node
    assert not counted_loads


def test_the_catalog_opens_a_gguf_from_its_converted_folder(tmp_path, counted_loads, micro_family):
    gguf = _gguf(tmp_path / "in")
    node = {**micro_family.model_cfg, "path": str(gguf), "name": "Mine.Q4_1"}
    catalog = Catalog(None, None, {"models": str(tmp_path), "zoo": str(tmp_path), "gguf": str(tmp_path / "gguf")})
    for _ in range(2):
        with catalog.using(node) as backend:
            assert backend.model_id == "Mine.Q4_1"
            assert backend.revision == weights_revision(tmp_path / "gguf" / sha256_file(gguf)[:16])
    assert len(counted_loads) == 1


def test_a_first_conversion_reports_the_file_and_a_tensor_count_and_a_cached_one_nothing(
        tmp_path, monkeypatch, micro_family):
    """Under the runner (``MEMLAB_PROGRESS`` set) the conversion shows on the console: the file being read, then the
    tensors dequantized k/n, counted from the loop transformers runs (here the stand-in loader runs that same
    ``tqdm`` over 7 tensors, as transformers' GGUF loader does over the file's tensors)."""
    import inspect
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer, modeling_gguf_pytorch_utils as gguf_utils

    # the hook point: transformers counts the GGUF's tensors with this module's tqdm (an upgrade that drops it fails
    # here instead of silently losing the count)
    assert "tqdm(reader.tensors" in inspect.getsource(gguf_utils.load_gguf_checkpoint)

    def load(path):
        assert list(gguf_utils.tqdm(range(7), desc="de-quantizing")) == list(range(7))
        return (AutoModelForCausalLM.from_pretrained(micro_family.final_dir),
                AutoTokenizer.from_pretrained(micro_family.final_dir))

    monkeypatch.setattr(convert, "load_gguf", load)
    log = tmp_path / "progress.jsonl"
    monkeypatch.setenv("MEMLAB_PROGRESS", str(log))
    gguf = _gguf(tmp_path / "in")
    node = {**micro_family.model_cfg, "path": str(gguf), "name": "Mine.Q4_1"}
    catalog = Catalog(None, None, {"models": str(tmp_path), "zoo": str(tmp_path), "gguf": str(tmp_path / "gguf")})
    with catalog.using(node):
        pass
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["label"].startswith("read Mine.Q4_1.gguf (0 MB; converted once")
    counted = [x for x in lines if x["label"] == "dequantize Mine.Q4_1.gguf: tensors"]
    assert counted[0]["total"] == 7 and counted[-1]["done"] == 7
    assert convert.load_gguf is load and gguf_utils.tqdm.__module__.startswith("tqdm")  # both restored
    log.unlink()
    with catalog.using(node):                                          # converted already: nothing to report
        pass
    assert not log.exists()
