"""Models made by transformers and mamba_ssm load and predict what those libraries predict.

The fixtures in tests/fixtures/hf/ were made by scripts/make_hf_fixtures.py with
transformers' MambaForCausalLM (float32, CPU), which also computed their reference logits;
torch is not needed here.

Tolerance of the logits: LOGIT_TOL = 1e-5 absolute. The logits are of magnitude ~1-2, where
a float32 ulp is 1.2e-7 to 2.4e-7; ours and torch's differ only in summation order and in
our own exp/log/softplus (a few ulps each), and measured they agree to within 5.4e-7 on
every fixture. 1e-5 leaves 20x headroom for other CPUs while a real mistake, such as a
config field not read (see the layer_norm_epsilon test), moves logits by far more.
"""

import json
import math
import os
import pickle
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from mambazip import checkpoint
from mambazip.model import Model

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
NAMES = sorted(p.name for p in FIXTURES.iterdir())
LOGIT_TOL = 1e-5


def our_logits(ckpt, text):
    """Logits of the loaded model for inputs [0, text[:-1]], as the reference has them."""
    model = Model(ckpt.config, ckpt.params)
    rows = []
    for byte in [0, *text[:-1]]:
        model.forward(byte)
        rows.append(model.logits.copy())
    return np.array(rows)


def reference(name):
    return dict(np.load(FIXTURES / name / "reference.npz"))


def header_of(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n])


def test_fixtures_cover_every_variant_the_loader_handles():
    assert set(NAMES) == {
        "bf16", "fp16", "mamba-ssm", "mamba-ssm-bin", "no-conv-bias", "padded-vocab",
        "sharded", "tied-bias-eps", "untied",
    }  # fmt: skip
    dtypes = {
        name: {h["dtype"] for k, h in header_of(FIXTURES / name / "model.safetensors").items()
               if k != "__metadata__"}
        for name in ("fp16", "bf16", "untied")
    }  # fmt: skip
    assert dtypes == {"fp16": {"F16"}, "bf16": {"BF16"}, "untied": {"F32"}}
    assert "backbone.embedding.weight" in load_file(FIXTURES / "mamba-ssm" / "model.safetensors")
    with zipfile.ZipFile(FIXTURES / "mamba-ssm-bin" / "pytorch_model.bin") as archive:
        assert any(n.endswith("/data.pkl") for n in archive.namelist())
    assert len(list((FIXTURES / "sharded").glob("model-*-of-*.safetensors"))) > 1
    assert not (FIXTURES / "sharded" / "model.safetensors").exists()


@pytest.mark.parametrize("name", NAMES)
def test_logits_match_the_transformers_reference(name):
    ref = reference(name)
    ckpt = checkpoint.load(str(FIXTURES / name))
    logits = our_logits(ckpt, ref["input"].tobytes())
    # A padded vocabulary is cut to 256: compare the byte values' logits.
    error = np.abs(logits - ref["logits"][:, :256]).max()
    assert error <= LOGIT_TOL, f"{name}: max abs logits error {error:.3g}"


@pytest.mark.parametrize("name", NAMES)
def test_score_without_training_reproduces_the_reference_total_bits(name, run_cli):
    ref = reference(name)
    result = run_cli(
        "score", "-", "--model", FIXTURES / name, "--mix", "none", "--optimizer", "none",
        "--json", "-q",
        input=ref["input"].tobytes(),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    expected_bits = -ref["logprobs"].astype(np.float64).sum() / math.log(2)
    # log-softmax moves by at most twice the largest logit change, so each byte's bits by
    # 2 * LOGIT_TOL / ln 2; float32 rounding of p itself adds at most 2^-23 relative.
    n = len(ref["input"])
    bound = n * (2 * LOGIT_TOL + 2.0**-23) / math.log(2)
    assert report["bytes"] == n
    assert abs(report["ideal_bits"] - expected_bits) <= bound


def test_a_single_file_without_config_gets_its_shape_from_the_tensors():
    ref = reference("untied")
    folder = checkpoint.load(str(FIXTURES / "untied"))
    single = checkpoint.load(str(FIXTURES / "untied" / "model.safetensors"))
    assert single.config == folder.config
    error = np.abs(our_logits(single, ref["input"].tobytes()) - ref["logits"]).max()
    assert error <= LOGIT_TOL


def test_config_json_is_read_and_a_missed_field_would_show():
    # This fixture's layer_norm_epsilon is 1e-3; its bare weights file says nothing about it,
    # so loading it alone assumes transformers' default 1e-5, which must miss the reference.
    ref = reference("tied-bias-eps")
    folder = checkpoint.load(str(FIXTURES / "tied-bias-eps"))
    single = checkpoint.load(str(FIXTURES / "tied-bias-eps" / "model.safetensors"))
    assert folder.config.norm_eps == 1e-3
    assert single.config.norm_eps == 1e-5
    error = np.abs(our_logits(single, ref["input"].tobytes()) - ref["logits"]).max()
    assert error > 10 * LOGIT_TOL


def test_a_padded_vocabulary_is_cut_to_256_with_a_notice(run_cli, tmp_path):
    result = run_cli("convert", FIXTURES / "padded-vocab", tmp_path / "out.safetensors")
    assert result.exit_code == 0, result.stderr
    assert "vocabulary of 264 symbols cut to the 256 byte values" in result.stderr
    tensors = load_file(tmp_path / "out.safetensors")
    assert tensors["backbone.embeddings.weight"].shape == (256, 8)
    assert tensors["lm_head.weight"].shape == (256, 8)


def test_a_vocabulary_below_256_is_refused(run_cli, tmp_path):
    tensors = load_file(FIXTURES / "untied" / "model.safetensors")
    for name in ("backbone.embeddings.weight", "lm_head.weight"):
        tensors[name] = tensors[name][:200]
    save_file(tensors, tmp_path / "small.safetensors")
    result = run_cli("convert", tmp_path / "small.safetensors", tmp_path / "out.safetensors")
    line = result.error_line(1)
    assert "vocabulary of 200 symbols is smaller than the 256 byte values" in line
    assert not (tmp_path / "out.safetensors").exists()


def broken_copy(tmp_path, change):
    """The untied fixture as one file, with ``change(tensors)`` applied."""
    tensors = load_file(FIXTURES / "untied" / "model.safetensors")
    change(tensors)
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(FIXTURES / "untied" / "config.json", folder)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_a_wrong_shape_is_named_with_the_expected_shape(run_cli, tmp_path):
    name = "backbone.layers.1.mixer.x_proj.weight"

    def change(t):
        t[name] = t[name][:, :-1].copy()

    result = run_cli("convert", broken_copy(tmp_path, change), tmp_path / "out.safetensors")
    line = result.error_line(1)
    # d_inner 16 (expand 2 x hidden 8) inputs; dt_rank 1 + 2 x state 4 outputs.
    assert f"tensor {name} has shape (9, 15), expected (9, 16)" in line


def test_a_missing_tensor_is_named(run_cli, tmp_path):
    name = "backbone.layers.1.mixer.D"
    result = run_cli(
        "convert", broken_copy(tmp_path, lambda t: t.pop(name)), tmp_path / "out.safetensors"
    )
    assert f"missing tensor {name}" in result.error_line(1)


def test_a_missing_shard_is_named(run_cli, tmp_path):
    folder = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "sharded", folder)
    (folder / "model-00002-of-00003.safetensors").unlink()
    result = run_cli("convert", folder, tmp_path / "out.safetensors")
    line = result.error_line(1)
    assert "shard model-00002-of-00003.safetensors" in line
    assert "missing" in line


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_a_pytorch_file_that_would_run_code_is_refused(run_cli, tmp_path):
    path = tmp_path / "pytorch_model.bin"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"x": _RunsCode()}, protocol=2))
    result = run_cli("convert", path, tmp_path / "out.safetensors")
    line = result.error_line(1)
    assert "refusing to load posix.system: not a plain tensor" in line
    assert "must never run" not in result.stderr


def test_a_pytorch_tensor_reaching_past_its_storage_is_refused(run_cli, tmp_path):
    # The fixture with one storage's buffer cut short: every view must stay inside it.
    path = tmp_path / "pytorch_model.bin"
    with (
        zipfile.ZipFile(FIXTURES / "mamba-ssm-bin" / "pytorch_model.bin") as src,
        zipfile.ZipFile(path, "w") as dst,
    ):
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data[:-4] if info.filename.endswith("/data/0") else data)
    line = run_cli("convert", path, tmp_path / "out.safetensors").error_line(1)
    assert "reaches past its storage" in line


def test_a_file_that_is_neither_safetensors_nor_pytorch_is_refused(run_cli, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not really a zip")
    line = run_cli("convert", folder, tmp_path / "out.safetensors").error_line(1)
    assert "not a PyTorch zip checkpoint" in line


def test_converted_weights_equal_the_widened_half_precision_tensors(tmp_path, run_cli):
    # fp16 -> float32 is exact, so numpy's widening is an independent expectation.
    out = tmp_path / "fp16.safetensors"
    assert run_cli("convert", FIXTURES / "fp16", out).exit_code == 0
    ours = load_file(out)
    theirs = load_file(FIXTURES / "fp16" / "model.safetensors")
    assert theirs["backbone.norm_f.weight"].dtype == np.float16
    for name, value in theirs.items():
        assert ours[name].dtype == np.float32
        np.testing.assert_array_equal(ours[name], value.astype(np.float32), err_msg=name)


def test_a_file_compressed_from_a_model_folder_decompresses_with_that_folder(
    run_cli, tmp_path, sample_file, sample
):
    folder = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "sharded", folder)
    made = run_cli("compress", sample_file, "--model", folder, "--lr", "0.003")
    assert made.exit_code == 0, made.stderr
    info = run_cli("info", f"{sample_file}.mz")
    assert "starting model   sha256 " in info.stdout.decode()
    assert "(--model, or a prior this installation does not ship)" in info.stdout.decode()
    sample_file.unlink()
    back = run_cli("decompress", f"{sample_file}.mz", "--model", folder)
    assert back.exit_code == 0, back.stderr
    assert sample_file.read_bytes() == sample
    # Any shard changed makes it another model.
    shard = folder / "model-00003-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:-4] + b"\0\0\0\0")
    line = run_cli("decompress", f"{sample_file}.mz", "-o", tmp_path / "x", "--model", folder)
    assert "wrong model" in line.error_line(1)


def test_a_config_without_the_model_size_is_a_clear_error(run_cli, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "untied", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    line = run_cli("convert", folder, tmp_path / "out.safetensors").error_line(1)
    assert "unusable model config: no 'hidden_size' in config.json" in line


@pytest.mark.parametrize("name", ["mamba-ssm", "mamba-ssm-bin", "bf16", "sharded"])
def test_convert_writes_our_checkpoint_of_the_same_weights(run_cli, tmp_path, name):
    out = tmp_path / "out.safetensors"
    result = run_cli("convert", FIXTURES / name, out, "-v")
    assert result.exit_code == 0, result.stderr
    assert "weights only" in result.stderr
    original = checkpoint.load(str(FIXTURES / name))
    converted = checkpoint.load(str(out))
    assert converted.config == original.config
    np.testing.assert_array_equal(converted.params.flat, original.params.flat)
    assert converted.moments is None and converted.step == 0


def test_convert_refuses_to_overwrite_without_force(run_cli, tmp_path):
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"keep me")
    line = run_cli("convert", FIXTURES / "untied", out).error_line(1)
    assert "already exists; use -f" in line
    assert out.read_bytes() == b"keep me"
    assert run_cli("convert", FIXTURES / "untied", out, "-f").exit_code == 0
    assert checkpoint.load(str(out)).config == checkpoint.load(str(FIXTURES / "untied")).config
