"""`mambazip score`: the online loop of compress, measured instead of written."""

import io
import json

import numpy as np

import mambazip
from mambazip import codec
from mambazip.model import Model
from mambazip.params import init_params


def score_json(run_cli, *args):
    result = run_cli("score", *args, "--json", "-q")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def test_score_reports_what_compress_does_and_writes_no_file(
    run_cli, tiny_flags, tiny_settings, sample_file, sample, snapshot
):
    before = snapshot(sample_file.parent)
    (report,) = score_json(run_cli, sample_file, *tiny_flags)
    assert snapshot(sample_file.parent) == before
    stats = codec.compress_stream(io.BytesIO(sample), io.BytesIO(), tiny_settings)
    assert report["bytes"] == len(sample)
    assert report["ideal_bits"] == stats.ideal_bits
    assert report["coded_bytes"] == len(mambazip.compress(sample, tiny_settings))
    assert report["bits_per_byte"] == report["ideal_bits"] / len(sample)
    assert report["coded_bits_per_byte"] == 8 * report["coded_bytes"] / len(sample)
    assert report["seconds"] > 0


def test_per_byte_holds_each_bytes_bits_the_first_predicted_after_byte_0(
    run_cli, tiny_flags, tiny_settings, sample_file, sample, tmp_path
):
    (report,) = score_json(
        run_cli, sample_file, *tiny_flags, "--mix", "none", "--per-byte", tmp_path / "b.npy"
    )
    bits = np.load(tmp_path / "b.npy")
    assert bits.dtype == np.float64
    assert bits.shape == (len(sample),)
    assert abs(bits.sum() - report["ideal_bits"]) <= 1e-9 * report["ideal_bits"]
    # The untrained model's pdf after the priming byte 0 predicts the first byte.
    cfg = tiny_settings.model
    p = Model(cfg, init_params(cfg, tiny_settings.seed)).forward(0)
    assert bits[0] == -np.log2(np.float64(p[sample[0]]))


def test_each_file_is_scored_from_the_same_starting_model(run_cli, tiny_flags, sample_file):
    first, second = score_json(run_cli, sample_file, sample_file, *tiny_flags)
    assert first["ideal_bits"] == second["ideal_bits"]


def test_without_an_optimizer_the_model_does_not_learn(run_cli, tiny_flags, sample_file):
    # The Mamba alone: mixed, the context models would learn the sample without it.
    mamba = (*tiny_flags, "--mix", "none")
    (frozen,) = score_json(run_cli, sample_file, *mamba, "--optimizer", "none")
    # Per-byte steps at a fixed rate: the preset's 10 KB warm-up would barely start here.
    learning_flags = ("--lr", "0.01", "--bptt", "1", "--warmup", "0", "--decay", "0")
    (learning,) = score_json(run_cli, sample_file, *mamba, *learning_flags)
    # The sample repeats one line 50 times: a model that learns it codes it far better.
    assert learning["bits_per_byte"] < 0.8 * frozen["bits_per_byte"]


def test_score_text_output_is_one_line_per_file(run_cli, tiny_flags, sample_file, sample):
    result = run_cli("score", sample_file, *tiny_flags, "-q")
    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.decode().splitlines()
    assert line.startswith(f"{sample_file}: {len(sample)} bytes, ")
    assert "bits/byte" in line and "KB/s" in line


def test_per_byte_takes_one_input(run_cli, tiny_flags, sample_file, tmp_path):
    result = run_cli("score", sample_file, sample_file, *tiny_flags, "--per-byte",
                     tmp_path / "b.npy")  # fmt: skip
    assert "--per-byte takes one input file" in result.error_line(2)


def test_score_codes_a_short_input_as_compress_does_with_the_presets_small_input_model(
    run_cli, sample, tmp_path
):
    """compress codes a preset's input of at most container.SMALL_INPUT bytes with the
    preset's small-input counterpart; score reports what compress writes, so it does too."""
    data = sample[:300]
    path = tmp_path / "short.txt"
    path.write_bytes(data)
    (report,) = score_json(run_cli, path)
    assert report["coded_bytes"] == len(mambazip.compress(data))
    assert (
        report["ideal_bits"]
        < codec.compress_stream(
            io.BytesIO(data), io.BytesIO(), mambazip.resolve_settings("default")
        ).ideal_bits
    )
