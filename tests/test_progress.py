"""Progress: a bar on stderr when it is a terminal and the input is worth waiting for,
showing bytes, speed and bits/byte; never with -q or for small inputs; off a terminal only
with -v, as a plain line every few seconds. Sizes count in 1000 bytes everywhere. A run whose
kernels are not in Numba's cache says that it is compiling them."""

import dataclasses
import io
import os
import subprocess
import sys

import numba
import pytest
from conftest import TINY_FLAGS

from mambazip import codec, kernel_cache
from mambazip.cli import progress as cli_progress
from mambazip.config import TrainConfig


def bar_output(monkeypatch, total, quiet=False, tty=True):
    """What the progress reporter writes to stderr for one 500 kB chunk at 2 bits/byte.
    (Without a bar the reporter still exists: it is where a deferred Ctrl-C is raised.)"""
    stream = io.StringIO()
    stream.isatty = lambda: tty
    monkeypatch.setattr(cli_progress.sys, "stderr", stream)
    with cli_progress.progress_bar(total, "notes.txt", quiet) as update:
        update(500_000, 2.0 * 500_000)
    return stream.getvalue()


def test_bar_shows_name_bytes_and_bits_per_byte_on_a_terminal(monkeypatch):
    text = bar_output(monkeypatch, 1 << 20)
    assert "notes.txt" in text and "2.000 bits/byte" in text and "500k" in text.lower()


def test_no_bar_when_quiet(monkeypatch):
    assert bar_output(monkeypatch, 1 << 20, quiet=True) == ""


def test_no_bar_off_a_terminal(monkeypatch):
    assert bar_output(monkeypatch, 1 << 20, tty=False) == ""


def test_no_bar_for_small_inputs(monkeypatch):
    assert bar_output(monkeypatch, 1000) == ""


def test_bar_for_input_of_unknown_size(monkeypatch):
    text = bar_output(monkeypatch, None)
    assert "notes.txt" in text and "2.000 bits/byte" in text


# ------------------------------------------------------------------------- -v off a terminal


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def line_output(monkeypatch, total, steps, verbose=True, quiet=False):
    """stderr (not a terminal) of a reporter fed ``steps`` of (seconds later, bytes, bits)."""
    stream = io.StringIO()
    stream.isatty = lambda: False
    monkeypatch.setattr(cli_progress.sys, "stderr", stream)
    clock = Clock()
    progress = cli_progress.Progress(total, "notes.txt", quiet, verbose, clock=clock)
    for seconds, n_bytes, bits in steps:
        clock.now += seconds
        progress(n_bytes, bits)
    progress.close()
    return stream.getvalue()


def test_verbose_off_a_terminal_prints_a_plain_line_every_few_seconds(monkeypatch):
    every = cli_progress.PROGRESS_LINE_SECONDS
    steps = [(every / 2, 100_000, 200_000.0)] * 6  # three intervals
    lines = line_output(monkeypatch, 1_000_000, steps).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("mambazip: notes.txt: ")
    assert lines[0] == (
        f"mambazip: notes.txt: 200.0 kB of 1.00 MB (20 %), 2.000 bits/byte, "
        f"{200_000 / 1000 / every:.2f} KB/s"
    )
    assert all("\r" not in line and "\x1b" not in line for line in lines)


def test_no_progress_lines_off_a_terminal_without_verbose(monkeypatch):
    steps = [(60.0, 100_000, 200_000.0)] * 3
    assert line_output(monkeypatch, 1_000_000, steps, verbose=False) == ""


def test_no_progress_lines_when_quiet_even_with_verbose(monkeypatch):
    steps = [(60.0, 100_000, 200_000.0)] * 3
    assert line_output(monkeypatch, 1_000_000, steps, quiet=True) == ""


def test_progress_line_of_unknown_size_has_no_percentage(monkeypatch):
    steps = [(cli_progress.PROGRESS_LINE_SECONDS, 5_000, 0.0)]
    (line,) = line_output(monkeypatch, None, steps).splitlines()
    assert "%" not in line and "bits/byte" not in line and "5.0 kB" in line


# ------------------------------------------------------------------------- totals and units


def test_decompress_bar_gets_its_total_once_the_header_tells_the_size(monkeypatch):
    stream = io.StringIO()
    stream.isatty = lambda: True
    monkeypatch.setattr(cli_progress.sys, "stderr", stream)
    with cli_progress.progress_bar(None, "notes.txt", False) as progress:
        progress.set_total(1_000_000)
        progress(500_000, 0.0)
        assert progress.bar.total == 1_000_000
    assert "50%" in stream.getvalue() and "1.00M" in stream.getvalue()


def test_bar_counts_in_units_of_1000_bytes(monkeypatch):
    text = bar_output(monkeypatch, 2_000_000)
    assert "500k/2.00M" in text


# ------------------------------------------------------------------------- compiling note


@pytest.mark.parametrize(("cached", "quiet"), [(False, False), (True, False), (False, True)])
def test_a_run_with_no_compiled_kernels_says_so_once(
    run_cli, monkeypatch, tmp_path, sample, cached, quiet
):
    monkeypatch.setattr(cli_progress, "kernels_cached", lambda settings: cached)
    monkeypatch.setattr(cli_progress, "_compile_noted", [])
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(sample)
    flags = ["-q"] if quiet else []
    result = run_cli("compress", *TINY_FLAGS, *flags, tmp_path / "a", tmp_path / "b")
    assert result.exit_code == 0
    note = "mambazip: note: compiling kernels (about a minute, once)\n"
    assert result.stderr == (note if not cached and not quiet else "")


def test_the_compiling_note_comes_before_the_output_file_exists(run_cli, monkeypatch, tmp_path,
                                                                sample):  # fmt: skip
    """A Ctrl-C as soon as the temporary output appears must find the note already said."""
    seen = []

    def cached(settings):
        seen.extend(p.name for p in tmp_path.iterdir() if p.name != "a")
        return False

    monkeypatch.setattr(cli_progress, "kernels_cached", cached)
    monkeypatch.setattr(cli_progress, "_compile_noted", [])
    (tmp_path / "a").write_bytes(sample)
    result = run_cli("compress", *TINY_FLAGS, tmp_path / "a")
    assert result.exit_code == 0
    assert (tmp_path / "a.mz").exists() and seen == []


def test_an_empty_numba_cache_is_seen_as_not_compiled(tmp_path, tiny_settings):
    code = (
        "import mambazip, sys; from mambazip.cli import progress; "
        "sys.exit(0 if progress.kernels_cached(mambazip.resolve_settings()) else 3)"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=120)
    assert proc.returncode == 3


def test_a_finished_run_marks_its_kernels_compiled_in_this_cache(monkeypatch, tmp_path,
                                                                  tiny_settings):  # fmt: skip
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    step = dataclasses.replace(tiny_settings, train=TrainConfig(bptt=1))
    assert not kernel_cache.cached(tiny_settings)
    codec.compress_stream(io.BytesIO(b"abc"), io.BytesIO(), tiny_settings)
    assert kernel_cache.cached(tiny_settings)
    assert not kernel_cache.cached(step)  # another loop, which that run did not compile
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "elsewhere"))
    assert not kernel_cache.cached(tiny_settings)
