"""The command line: file naming, stdin/stdout, keeping and removing inputs, messages,
``info``, and a header that makes ``decompress`` need no flags.

Most tests run the real entry point in process (``run_cli``, see conftest.py); piping
through stdin and stdout, and ``python -m mambazip`` itself, run as subprocesses.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import mambazip
from mambazip import container
from mambazip.cli import progress as cli_progress
from mambazip.frames import DEFAULT_FRAME


def header_settings(path):
    with open(path, "rb") as f:
        return container.read_header(f)["settings"]


# ------------------------------------------------------------------------- round trip


def test_compress_then_decompress_restores_the_file(run_cli, tiny_flags, sample_file, sample):
    packed = sample_file.with_name("packed.mz")
    restored = sample_file.with_name("restored.txt")
    assert run_cli("compress", *tiny_flags, sample_file, "-o", packed).exit_code == 0
    assert run_cli("decompress", packed, "-o", restored).exit_code == 0
    assert restored.read_bytes() == sample


def test_compress_names_its_output_input_dot_mz(run_cli, tiny_flags, sample_file, sample):
    result = run_cli("compress", *tiny_flags, sample_file)
    assert result.exit_code == 0, result.stderr
    out = sample_file.with_name("sample.txt.mz")
    assert mambazip.decompress(out.read_bytes()) == sample


def test_decompress_names_its_output_input_without_mz(run_cli, mz_file, sample, snapshot):
    result = run_cli("decompress", mz_file)
    assert result.exit_code == 0, result.stderr
    assert mz_file.with_name("sample.txt").read_bytes() == sample
    assert set(snapshot(mz_file.parent)) == {"sample.txt", "sample.txt.mz"}


def test_output_option_names_the_compressed_file(run_cli, tiny_flags, sample_file, sample):
    out = sample_file.with_name("chosen-name")
    assert run_cli("compress", *tiny_flags, "-o", out, sample_file).exit_code == 0
    assert mambazip.decompress(out.read_bytes()) == sample
    assert not sample_file.with_name("sample.txt.mz").exists()


def test_output_option_names_the_decompressed_file(run_cli, mz_file, sample):
    out = mz_file.with_name("chosen-name")
    assert run_cli("decompress", "-o", out, mz_file).exit_code == 0
    assert out.read_bytes() == sample
    assert not mz_file.with_name("sample.txt").exists()


def test_stdout_flag_writes_compressed_data_to_stdout_and_no_file(
    run_cli, tiny_flags, sample_file, sample, snapshot
):
    before = snapshot(sample_file.parent)
    result = run_cli("compress", *tiny_flags, "-c", sample_file)
    assert result.exit_code == 0, result.stderr
    assert mambazip.decompress(result.stdout) == sample
    assert snapshot(sample_file.parent) == before


def test_stdout_flag_writes_decompressed_data_to_stdout_and_no_file(
    run_cli, mz_file, sample, snapshot
):
    before = snapshot(mz_file.parent)
    result = run_cli("decompress", "-c", mz_file)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == sample
    assert snapshot(mz_file.parent) == before


@pytest.mark.parametrize("stdin_args", [["-"], []], ids=["dash", "no-file-argument"])
def test_stdin_is_compressed_to_stdout_and_decompressed_back(
    run_process, tiny_flags, sample, stdin_args
):
    packed = run_process("compress", *tiny_flags, *stdin_args, input=sample)
    assert packed.returncode == 0, packed.stderr
    assert packed.stderr == ""
    # No transform changes the sample: version 6's short form, as version 7 writes it.
    assert container.read_header(io.BytesIO(packed.stdout))["version"] == container.COMPACT
    unpacked = run_process("decompress", *stdin_args, input=packed.stdout)
    assert unpacked.returncode == 0, unpacked.stderr
    assert unpacked.stderr == ""
    assert unpacked.stdout == sample


# ------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("keep_args", [[], ["-k"]], ids=["default", "-k"])
def test_compress_keeps_its_input(run_cli, tiny_flags, sample_file, sample, keep_args):
    assert run_cli("compress", *tiny_flags, *keep_args, sample_file).exit_code == 0
    assert sample_file.read_bytes() == sample


@pytest.mark.parametrize("keep_args", [[], ["-k"]], ids=["default", "-k"])
def test_decompress_keeps_its_input(run_cli, mz_file, keep_args):
    packed = mz_file.read_bytes()
    assert run_cli("decompress", *keep_args, mz_file).exit_code == 0
    assert mz_file.read_bytes() == packed


def test_rm_removes_the_input_after_compressing(run_cli, tiny_flags, sample_file, sample):
    assert run_cli("compress", *tiny_flags, "--rm", sample_file).exit_code == 0
    assert not sample_file.exists()
    out = sample_file.with_name("sample.txt.mz")
    assert mambazip.decompress(out.read_bytes()) == sample


def test_rm_removes_the_input_after_decompressing(run_cli, mz_file, sample):
    assert run_cli("decompress", "--rm", mz_file).exit_code == 0
    assert not mz_file.exists()
    assert mz_file.with_name("sample.txt").read_bytes() == sample


# ------------------------------------------------------------------------- checking


def test_test_flag_checks_a_good_file_and_writes_nothing(run_cli, mz_file, snapshot):
    before = snapshot(mz_file.parent)
    result = run_cli("decompress", "-t", mz_file)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == b""
    assert snapshot(mz_file.parent) == before


def test_test_flag_fails_on_a_corrupt_file_and_writes_nothing(run_cli, mz_file, snapshot):
    blob = bytearray(mz_file.read_bytes())
    # The last byte of the stored CRC32 of the original data (of its one frame, before the
    # seek index).
    located = container.index_from_end(io.BytesIO(bytes(blob)))
    last = located[1].frames[-1] if located else None
    index_len = len(blob) - last.packed_offset - last.packed_size if located else 0
    blob[-1 - index_len] ^= 0x01
    mz_file.write_bytes(bytes(blob))
    before = snapshot(mz_file.parent)
    result = run_cli("decompress", "-t", mz_file)
    line = result.error_line(1)
    assert "checksum" in line
    assert snapshot(mz_file.parent) == before


# ------------------------------------------------------------------------- messages


@pytest.mark.usefixtures("slow_machine_ok")
def test_verbose_compress_prints_one_summary_line_on_stderr(
    run_cli, tiny_flags, sample_file, sample
):
    result = run_cli("compress", *tiny_flags, "-v", sample_file)
    assert result.exit_code == 0
    size = sample_file.with_name("sample.txt.mz").stat().st_size
    line = result.stderr.removesuffix("\n")
    assert "\n" not in line
    assert "sample.txt" in line
    assert re.search(rf"\b{len(sample)}\b", line)
    assert re.search(rf"\b{size}\b", line)
    assert f"{8 * size / len(sample):.4f} bits/byte" in line


@pytest.fixture
def slow_machine_ok(monkeypatch):
    """-v prints a progress line every PROGRESS_LINE_SECONDS off a terminal: on a machine
    loaded enough to take that long, it would be a line more than these tests are about."""
    monkeypatch.setattr(cli_progress, "PROGRESS_LINE_SECONDS", 1e9)


@pytest.mark.usefixtures("slow_machine_ok")
def test_verbose_decompress_prints_one_summary_line_on_stderr(run_cli, mz_file, sample):
    result = run_cli("decompress", "-v", mz_file)
    assert result.exit_code == 0
    line = result.stderr.removesuffix("\n")
    assert "\n" not in line
    assert "sample.txt.mz" in line
    assert re.search(rf"\b{len(sample)}\b", line)
    assert re.search(rf"\b{mz_file.stat().st_size}\b", line)


@pytest.mark.usefixtures("slow_machine_ok")
def test_verbose_test_prints_ok(run_cli, mz_file):
    result = run_cli("decompress", "-t", "-v", mz_file)
    assert result.exit_code == 0
    assert "OK" in result.stderr
    assert result.stderr.count("\n") == 1


def test_quiet_compress_and_decompress_print_nothing_on_stderr(
    run_cli, tiny_flags, sample_file, sample
):
    packed = run_cli("compress", *tiny_flags, "-q", sample_file)
    sample_file.unlink()
    unpacked = run_cli("decompress", "-q", sample_file.with_name("sample.txt.mz"))
    assert (packed.exit_code, packed.stderr) == (0, "")
    assert (unpacked.exit_code, unpacked.stderr) == (0, "")
    assert sample_file.read_bytes() == sample


def test_info_shows_sizes_and_model_config(run_cli, mz_file, sample, tiny_settings):
    result = run_cli("info", mz_file)
    assert result.exit_code == 0, result.stderr
    text = result.stdout.decode()
    assert re.search(rf"original size\s+{len(sample)} bytes", text)
    assert re.search(rf"compressed size\s+{mz_file.stat().st_size} bytes", text)
    model = tiny_settings.model
    for name in ("d_model", "n_layer", "d_inner", "dt_rank", "d_state", "d_conv"):
        assert f"{name}={getattr(model, name)}" in text
    assert "optimizer=adam" in text
    assert f"lr={tiny_settings.train.lr}" in text
    assert f"bptt={tiny_settings.train.bptt}" in text


def test_info_shows_bptt_1_for_a_format_1_file_whose_header_leaves_it_out(run_cli):
    golden = Path(__file__).parent / "golden" / "v1" / "tiny-adam.mz"
    result = run_cli("info", golden)
    assert result.exit_code == 0, result.stderr
    text = result.stdout.decode()
    assert re.search(r"format version\s+1\n", text)
    assert "bptt=1" in text and "scope=all" in text


@pytest.mark.parametrize(
    "args", [[], ["compress"], ["decompress"]], ids=["group", "compress", "decompress"]
)
def test_module_help_works_and_documents_exit_codes(run_process, args):
    result = run_process(*args, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.decode().split())
    assert "Exit codes: 0 success, 1 error in data or files" in text
    assert "2 usage error" in text


# ------------------------------------------------------------------------- the header


@pytest.mark.parametrize(
    ("flags", "field", "expected"),
    [
        (["--lr", "0.003"], "train.lr", 0.003),
        (["--optimizer", "sgd"], "train.optimizer", "sgd"),
        (["--scope", "head,bias"], "train.scope", ("head", "bias")),
        (["--clip", "0.5"], "train.clip", 0.5),
        (["--warmup", "100"], "train.warmup", 100),
        (["--decay", "1000"], "train.decay", 1000),
        (["--seed", "7"], "seed", 7),
        (["--d-model", "12"], "model.d_model", 12),
        (["--n-layer", "2"], "model.n_layer", 2),
        (["--d-inner", "24"], "model.d_inner", 24),
        (["--d-state", "5"], "model.d_state", 5),
        (["--d-conv", "2"], "model.d_conv", 2),
        (["--dt-rank", "2"], "model.dt_rank", 2),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_header_records_each_option(run_cli, tiny_flags, sample_file, flags, field, expected):
    result = run_cli("compress", *tiny_flags, *flags, sample_file)
    assert result.exit_code == 0, result.stderr
    value = header_settings(sample_file.with_name("sample.txt.mz"))
    for part in field.split("."):
        value = getattr(value, part)
    assert value == expected


def test_decompress_needs_no_flags_for_a_file_made_with_options(
    run_cli, tiny_flags, sample_file, sample
):
    options = ["--lr", "0.003", "--seed", "7", "--d-model", "12"]
    made_with = sample_file.with_name("with-options.mz")
    made_without = sample_file.with_name("without-options.mz")
    assert run_cli("compress", *tiny_flags, *options, "-o", made_with, sample_file).exit_code == 0
    assert run_cli("compress", *tiny_flags, "-o", made_without, sample_file).exit_code == 0
    assert made_with.read_bytes() != made_without.read_bytes()  # the options change the code

    result = run_cli("decompress", "-c", made_with)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == sample


def test_explicit_options_override_the_preset(run_cli, sample_file):
    preset = mambazip.resolve_settings("default")
    args = ["--preset", "default", "--d-model", "8", "--n-layer", "1", "--optimizer", "sgd"]
    result = run_cli("compress", *args, sample_file)
    assert result.exit_code == 0, result.stderr
    settings = header_settings(sample_file.with_name("sample.txt.mz"))
    # overridden, and the sizes derived from d_model follow it as in Mamba
    assert (settings.model.d_model, settings.model.n_layer) == (8, 1)
    assert (settings.model.d_inner, settings.model.dt_rank) == (16, 1)
    assert settings.train.optimizer == "sgd"
    assert (preset.model.d_model, preset.model.n_layer, preset.train.optimizer) != (8, 1, "sgd")
    # everything not given comes from the preset
    assert settings.model.d_state == preset.model.d_state
    assert settings.model.d_conv == preset.model.d_conv
    assert settings.train.lr == preset.train.lr
    assert settings.seed == preset.seed


def test_library_and_cli_write_the_same_bytes(run_cli, tiny_flags, sample_file, tiny_settings):
    """The CLI adds to the library's call only what it knows of the file (gzip's -N
    default): its name, mtime and size; it always allows stored blocks and cuts frames of
    the default size."""
    result = run_cli("compress", *tiny_flags, "-c", sample_file)
    assert result.exit_code == 0
    out = io.BytesIO()
    st = sample_file.stat()
    extras = {"name": "sample.txt", "mtime": int(st.st_mtime), "size": st.st_size}
    mambazip.compress_stream(io.BytesIO(sample_file.read_bytes()), out, tiny_settings,
                             stored_blocks=True, frame_size=DEFAULT_FRAME, **extras)  # fmt: skip
    assert result.stdout == out.getvalue()


def test_library_and_cli_write_the_same_bytes_from_stdin(
    run_cli, tiny_flags, sample, tiny_settings
):
    result = run_cli("compress", *tiny_flags, input=sample)
    assert result.exit_code == 0
    out = io.BytesIO()
    mambazip.compress_stream(io.BytesIO(sample), out, tiny_settings, stored_blocks=True,
                             frame_size=DEFAULT_FRAME)  # fmt: skip
    assert result.stdout == out.getvalue()


def test_bptt_option_is_recorded_and_replay_chunk_changes_no_byte(
    run_cli, tiny_flags, sample_file, sample
):
    whole = sample_file.parent / "whole.mz"
    chunked = sample_file.parent / "chunked.mz"
    flags = (*tiny_flags, "--bptt", "8")
    assert run_cli("compress", *flags, "-o", whole, sample_file).exit_code == 0
    assert (
        run_cli("compress", *flags, "--replay-chunk", "3", "-o", chunked, sample_file).exit_code
        == 0
    )
    assert chunked.read_bytes() == whole.read_bytes()
    with open(whole, "rb") as f:
        assert container.read_header(f)["settings"].train.bptt == 8
    restored = sample_file.parent / "restored"
    result = run_cli("decompress", "--replay-chunk", "1", "-o", restored, whole)
    assert result.exit_code == 0
    assert restored.read_bytes() == sample


@pytest.mark.parametrize("option", [("--bptt", "0"), ("--replay-chunk", "0")])
def test_segment_options_below_one_are_usage_errors(run_cli, tiny_flags, sample_file, option):
    run_cli("compress", *tiny_flags, *option, sample_file).error_line(2)
