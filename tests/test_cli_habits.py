"""The habits gzip and xz users bring: -d/-z/-l/-t on the main command, unmz and mzcat,
-V, -S, skipping inputs that are already compressed, refusing symlinks, devices and FIFOs
without -f, the stored name and mtime (-n, -N), --memlimit, info --test and info from stdin,
a short usage line for a bare ``mambazip`` at a terminal, and the warning for an output
larger than its input."""

import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TINY_FLAGS, CliResult

import mambazip
from mambazip import container, entry, frames

ROOT = Path(__file__).resolve().parent.parent


def run_entry(function, *args, input=None):
    """Run an entry point function of mambazip.entry (unmz, mzcat) in process."""
    runner = CliRunner()
    with runner.isolation(input=input) as (out, err, _):
        saved = sys.argv
        sys.argv = [function.__name__, *map(str, args)]
        try:
            function()
            code = 0
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.argv = saved
        return CliResult(code, out.getvalue(), err.getvalue().decode())


def compressed(path, sample):
    return mambazip.decompress(path.read_bytes()) == sample


# ------------------------------------------------------------------------- main command


def test_dash_d_on_the_main_command_decompresses(run_cli, mz_file, sample):
    assert run_cli("-d", mz_file).exit_code == 0
    assert mz_file.with_name("sample.txt").read_bytes() == sample


def test_bundled_dash_dc_decompresses_to_stdout(run_cli, mz_file, sample):
    result = run_cli("-dc", mz_file)
    assert (result.exit_code, result.stdout) == (0, sample)


def test_dash_z_on_the_main_command_compresses(run_cli, sample_file, sample):
    assert run_cli("-z", *TINY_FLAGS, sample_file).exit_code == 0
    assert compressed(sample_file.with_name("sample.txt.mz"), sample)


def test_dash_t_on_the_main_command_tests(run_cli, mz_file, snapshot):
    before = snapshot(mz_file.parent)
    assert run_cli("-t", mz_file).exit_code == 0
    assert snapshot(mz_file.parent) == before


def test_dash_l_lists_like_info(run_cli, mz_file, sample):
    result = run_cli("-l", mz_file)
    assert result.exit_code == 0, result.stderr
    assert re.search(rf"original size\s+{len(sample)} bytes", result.stdout.decode())


def test_info_reads_stdin(run_cli, mz_file, sample):
    for args in (["info", "-"], ["info"], ["-l"]):
        result = run_cli(*args, input=mz_file.read_bytes())
        assert result.exit_code == 0, result.stderr
        assert re.search(rf"original size\s+{len(sample)} bytes", result.stdout.decode())


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag_prints_the_version(run_cli, flag):
    result = run_cli(flag)
    assert result.exit_code == 0
    assert re.search(r"\d+\.\d+\.\d+", result.stdout.decode())


def test_no_arguments_at_a_terminal_print_a_short_usage_and_exit_2():
    """Without a file and with stdin a pipe, ``mambazip`` is a filter (tests/test_plugs_cli.py);
    at a terminal it would compress what is typed, which it refuses as zstd does."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "mambazip"], stdin=follower,
                              capture_output=True, timeout=600)  # fmt: skip
    finally:
        os.close(leader)
        os.close(follower)
    line = CliResult(proc.returncode, proc.stdout, proc.stderr.decode()).error_line(2)
    assert "usage: mambazip compress|decompress" in line


def test_a_compressed_file_in_place_of_a_command_is_left_alone_with_a_note(
    run_cli, mz_file, snapshot
):
    """``mambazip FILE`` compresses as ``mambazip compress FILE`` does: a .mz file is skipped."""
    before = snapshot(mz_file.parent)
    result = run_cli(mz_file)
    assert result.exit_code == 0
    assert "already ends in .mz" in result.stderr
    assert snapshot(mz_file.parent) == before


def test_a_reader_that_goes_away_ends_the_listing_quietly(mz_file):
    """``mambazip -l f.mz | head -1``: the reader has left before the listing is written (its
    end of the pipe is closed first, so the write fails every time); no "Broken pipe" line."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        lister = subprocess.run([sys.executable, "-m", "mambazip", "-l", mz_file],
                                stdout=write_end, stderr=subprocess.PIPE, timeout=300)  # fmt: skip
    finally:
        os.close(write_end)
    assert lister.stderr.decode() == ""
    assert lister.returncode != 0


def test_decompress_force_has_its_own_help(run_cli):
    def force_help(command):
        text = " ".join(run_cli(command, "--help").stdout.decode().split())
        return text.split("-f, --force", 1)[1].split(" -k,", 1)[0]

    assert "compress inputs that already end" in force_help("compress")
    assert "terminal" in force_help("decompress")
    assert force_help("compress") != force_help("decompress")
    assert "already end" not in force_help("decompress")


# ------------------------------------------------------------------------- unmz, mzcat


def test_unmz_decompresses(mz_file, sample):
    assert run_entry(entry.unmz, mz_file).exit_code == 0
    assert mz_file.with_name("sample.txt").read_bytes() == sample


def test_mzcat_decompresses_to_stdout(mz_file, sample, snapshot):
    before = snapshot(mz_file.parent)
    result = run_entry(entry.mzcat, mz_file)
    assert (result.exit_code, result.stdout) == (0, sample)
    assert snapshot(mz_file.parent) == before


def test_scripts_point_at_the_entry_module():
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {
        "mambazip": "mambazip.entry:main",
        "unmz": "mambazip.entry:unmz",
        "mzcat": "mambazip.entry:mzcat",
    }


# ------------------------------------------------------------------------- suffix, skipping


def test_suffix_option_names_the_compressed_file(run_cli, sample_file, sample):
    assert run_cli("compress", *TINY_FLAGS, "-S", ".mamba", sample_file).exit_code == 0
    assert compressed(sample_file.with_name("sample.txt.mamba"), sample)


def test_suffix_option_is_stripped_on_decompress(run_cli, mz_file, sample):
    renamed = mz_file.with_name("sample.txt.mamba")
    mz_file.rename(renamed)
    assert run_cli("decompress", "--suffix", ".mamba", renamed).exit_code == 0
    assert mz_file.with_name("sample.txt").read_bytes() == sample


def test_compress_skips_an_input_that_already_ends_in_mz_with_a_note(run_cli, mz_file, snapshot):
    before = snapshot(mz_file.parent)
    result = run_cli("compress", *TINY_FLAGS, mz_file)
    assert result.exit_code == 0
    assert result.stderr.count("\n") == 1 and "already ends in .mz" in result.stderr
    assert snapshot(mz_file.parent) == before


def test_compress_with_force_compresses_an_input_ending_in_mz(run_cli, mz_file):
    blob = mz_file.read_bytes()
    assert run_cli("compress", *TINY_FLAGS, "-f", mz_file).exit_code == 0
    assert mambazip.decompress(mz_file.with_name("sample.txt.mz.mz").read_bytes()) == blob


# ------------------------------------------------------------------------- special inputs


def special_inputs(tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to("sample.txt")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return {"symbolic link": link, "FIFO": fifo, "character device": Path(os.devnull)}


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "character device"])
def test_special_inputs_are_refused_without_force_and_the_others_done(
    run_cli, sample_file, sample, tmp_path, kind
):
    special = special_inputs(tmp_path)[kind]
    other = tmp_path / "other.txt"
    other.write_bytes(sample)
    result = run_cli("compress", *TINY_FLAGS, special, other)
    assert kind in result.error_line(1)
    assert compressed(tmp_path / "other.txt.mz", sample)
    assert not special.with_name(special.name + ".mz").exists()


def test_a_symlinked_input_is_followed_with_force(run_cli, sample_file, sample, tmp_path):
    link = special_inputs(tmp_path)["symbolic link"]
    assert run_cli("compress", *TINY_FLAGS, "-f", link).exit_code == 0
    assert compressed(tmp_path / "link.txt.mz", sample)
    assert link.is_symlink() and sample_file.read_bytes() == sample


# ------------------------------------------------------------------------- name and mtime


def test_decompress_restores_the_stored_mtime(run_cli, sample_file):
    os.utime(sample_file, (1_600_000_000, 1_500_000_000))
    assert run_cli("compress", *TINY_FLAGS, "--rm", sample_file).exit_code == 0
    assert run_cli("decompress", sample_file.with_name("sample.txt.mz")).exit_code == 0
    assert sample_file.stat().st_mtime == 1_500_000_000


def test_no_name_stores_neither_name_nor_mtime(run_cli, sample_file):
    assert run_cli("compress", *TINY_FLAGS, "-n", sample_file).exit_code == 0
    with open(sample_file.with_name("sample.txt.mz"), "rb") as f:
        header = container.read_header(f)
    assert (header["name"], header["mtime"]) == (None, None)


def test_no_name_on_decompress_does_not_restore_the_mtime(run_cli, sample_file):
    os.utime(sample_file, (1_600_000_000, 1_500_000_000))
    assert run_cli("compress", *TINY_FLAGS, "--rm", sample_file).exit_code == 0
    assert run_cli("decompress", "-n", sample_file.with_name("sample.txt.mz")).exit_code == 0
    assert sample_file.stat().st_mtime != 1_500_000_000


def test_dash_capital_n_names_the_output_by_the_stored_name(run_cli, sample_file, sample):
    packed = sample_file.with_name("x.mz")
    assert run_cli("compress", *TINY_FLAGS, "-o", packed, sample_file).exit_code == 0
    sample_file.unlink()
    assert run_cli("decompress", "-N", packed).exit_code == 0
    assert sample_file.read_bytes() == sample
    assert not sample_file.with_name("x").exists()


def test_a_stored_name_with_a_directory_part_is_refused_and_nothing_written(
    run_cli, tmp_path, sample, tiny_settings, snapshot
):
    out = io.BytesIO()
    # Version 5's JSON header (version 6's: tests/test_format_v6.py).
    mambazip.compress_stream(io.BytesIO(sample), out, tiny_settings, name="evil", version=5)
    blob = out.getvalue()
    # The writer refuses such a name, so a hostile file gets it by rewriting the header.
    (length,) = struct.unpack_from("<I", blob, 10)
    header = json.loads(blob[14 : 14 + length])
    header["name"] = "../../etc/evil"
    raw = json.dumps(header).encode()
    packed = tmp_path / "x.mz"
    packed.write_bytes(
        blob[:10] + struct.pack("<I", len(raw)) + raw + struct.pack("<I", zlib.crc32(raw))
        + blob[14 + length + 4 :]
    )  # fmt: skip
    before = snapshot(tmp_path)
    assert "stored file name" in run_cli("decompress", "-N", packed).error_line(1)
    assert snapshot(tmp_path) == before
    assert not (tmp_path.parent.parent / "etc" / "evil").exists()


def test_a_file_name_a_header_cannot_hold_is_not_stored(run_cli, tmp_path, sample):
    odd = tmp_path / "line\nbreak.txt"
    odd.write_bytes(sample)
    assert run_cli("compress", *TINY_FLAGS, odd).exit_code == 0
    packed = tmp_path / "line\nbreak.txt.mz"
    with open(packed, "rb") as f:
        assert container.read_header(f)["name"] is None
    odd.unlink()
    assert run_cli("decompress", packed).exit_code == 0
    assert odd.read_bytes() == sample


# ------------------------------------------------------------------------- memlimit


def test_memlimit_below_what_the_header_needs_is_one_line_and_no_output(run_cli, mz_file, snapshot):
    before = snapshot(mz_file.parent)
    line = run_cli("decompress", "--memlimit", "1K", mz_file).error_line(1)
    assert "--memlimit" in line
    assert snapshot(mz_file.parent) == before


def test_memlimit_below_what_compress_needs_is_one_line_and_no_output(
    run_cli, sample_file, snapshot
):
    before = snapshot(sample_file.parent)
    run_cli("compress", *TINY_FLAGS, "--memlimit", "1000", sample_file).error_line(1)
    assert snapshot(sample_file.parent) == before


@pytest.mark.parametrize("value", ["512M", "2G", "3000000000"])
def test_memlimit_accepts_sizes(run_cli, mz_file, sample, value):
    result = run_cli("decompress", "-c", "--memlimit", value, mz_file)
    assert (result.exit_code, result.stdout) == (0, sample), result.stderr


def test_memlimit_that_is_not_a_size_is_a_usage_error(run_cli, mz_file):
    run_cli("decompress", "--memlimit", "lots", mz_file).error_line(2)


# ------------------------------------------------------------------------- info --test


def test_info_test_says_ok_for_a_good_file(run_cli, mz_file):
    result = run_cli("info", "--test", mz_file)
    assert result.exit_code == 0, result.stderr
    assert re.search(r"test\s+OK\n", result.stdout.decode())


def test_info_test_names_what_is_wrong_with_a_corrupt_file(run_cli, mz_file):
    blob = bytearray(mz_file.read_bytes())
    # The stored CRC32 of the original data (of its one frame, before the seek index): the
    # header and the index still parse.
    located = container.index_from_end(io.BytesIO(bytes(blob)))
    last = located[1].frames[-1] if located else None
    index_len = len(blob) - last.packed_offset - last.packed_size if located else 0
    blob[-1 - index_len] ^= 0x01
    mz_file.write_bytes(bytes(blob))
    result = run_cli("info", "--test", mz_file)
    assert result.exit_code == 1
    assert re.search(r"test\s+failed: .*checksum", result.stdout.decode())
    assert result.stderr.count("\n") == 1 and "checksum" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------------- warning


def test_random_data_is_stored_as_it_is_without_a_warning(run_cli, sample_file):
    """Format 6 finds it incompressible and stores it: no model codes it badly."""
    data = os.urandom(20_000)
    sample_file.write_bytes(data)
    result = run_cli("compress", *TINY_FLAGS, sample_file)
    assert result.exit_code == 0
    assert result.stderr == ""
    with open(sample_file.with_name("sample.txt.mz"), "rb") as f:
        header = container.read_header(f)
        [(_, payload), _] = container.read_short(f, header)
    assert isinstance(payload, container.Skipped) and payload == data


@pytest.mark.parametrize("why", ["diverging lr"])
def test_output_larger_than_input_because_the_model_codes_badly_warns_once(
    run_cli, sample_file, tmp_path, why
):
    # The Mamba alone: mixed, the context models would make up for a diverging Mamba.
    lr = ["--lr", "10", "--mix", "none"]
    result = run_cli("compress", *TINY_FLAGS, *lr, sample_file)
    assert result.exit_code == 0
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("mambazip: warning: sample.txt:")
    assert "bits/byte" in result.stderr


def test_no_warning_when_quiet(run_cli, sample_file):
    result = run_cli("compress", *TINY_FLAGS, "--lr", "10", "-q", sample_file)
    assert (result.exit_code, result.stderr) == (0, "")


def test_no_warning_for_a_small_file_that_grows_by_its_header_only(run_cli, tmp_path):
    small = tmp_path / "small.txt"
    small.write_bytes(b"good " * 20)
    result = run_cli("compress", *TINY_FLAGS, small)
    assert (result.exit_code, result.stderr) == (0, "")
    assert (tmp_path / "small.txt.mz").stat().st_size > 100


# ------------------------------------------------------------------------- streams


def test_concatenated_mz_files_decompress_as_one_output(run_cli, tmp_path, sample, tiny_settings):
    both = mambazip.compress(sample, tiny_settings) + mambazip.compress(b"second", tiny_settings)
    result = run_cli("decompress", "-c", input=both)
    assert (result.exit_code, result.stdout) == (0, sample + b"second"), result.stderr
    packed = tmp_path / "both.mz"
    packed.write_bytes(both)
    listing = run_cli("info", "--test", packed)
    assert listing.exit_code == 0, listing.stderr
    text = listing.stdout.decode()
    assert re.search(r"streams\s+2", text) and re.search(r"test\s+OK", text)
    assert re.search(rf"original size\s+{len(sample) + 6} bytes", text)


def test_an_empty_file_round_trips_with_its_name_and_mtime(run_cli, tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    os.utime(empty, (1_600_000_000, 1_500_000_000))
    assert run_cli("compress", "--rm", empty).exit_code == 0
    result = run_cli("decompress", tmp_path / "empty.mz")
    assert result.exit_code == 0, result.stderr
    assert empty.read_bytes() == b"" and empty.stat().st_mtime == 1_500_000_000


def test_running_out_of_memory_is_one_line_and_leaves_nothing(run_cli, sample_file, monkeypatch):
    """A machine (or a ulimit) with less memory than --memlimit allows: one line, exit 1."""

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 419. MiB for an array with shape (110000000,)")

    monkeypatch.setattr(frames, "Predictor", no_memory)  # every stream's and frame's predictor
    before = sorted(p.name for p in sample_file.parent.iterdir())
    line = run_cli("compress", *TINY_FLAGS, sample_file).error_line(1)
    assert "out of memory" in line and "419. MiB" in line
    assert sorted(p.name for p in sample_file.parent.iterdir()) == before
