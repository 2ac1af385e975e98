"""No command loses a file: an output that is the input (the same path, a hard link, a
symlink to it) is refused with one line before anything is written, with or without -f;
and without -f the final rename never replaces a file that appeared during the run.

The commands of issue 15 are the specification: each of them exited 0 and left neither
file, or replaced the input with compressed data.
"""

import errno
import os
import stat
import subprocess
import sys
import threading

import pytest
from conftest import TINY_FLAGS

import mambazip
from mambazip import container, files


@pytest.fixture
def notes(tmp_path, sample):
    path = tmp_path / "notes.txt"
    path.write_bytes(sample)
    return path


def no_temporary_files(directory):
    return not [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_compress_force_rm_onto_its_own_input_is_refused_and_keeps_it(
    run_cli, notes, sample, snapshot
):
    before = snapshot(notes.parent)
    result = run_cli("compress", *TINY_FLAGS, "-f", "--rm", "-o", notes, notes)
    assert "is the input" in result.error_line(1)
    assert snapshot(notes.parent) == before
    assert notes.read_bytes() == sample


def test_decompress_force_rm_onto_its_own_input_is_refused_and_keeps_it(run_cli, mz_file, snapshot):
    before = snapshot(mz_file.parent)
    result = run_cli("decompress", "-f", "--rm", "-o", mz_file, mz_file)
    assert "is the input" in result.error_line(1)
    assert snapshot(mz_file.parent) == before


@pytest.mark.parametrize("force", [[], ["-f"]], ids=["plain", "-f"])
def test_output_option_naming_the_input_is_refused(run_cli, notes, snapshot, force):
    before = snapshot(notes.parent)
    run_cli("compress", *TINY_FLAGS, *force, "-o", notes, notes).error_line(1)
    assert snapshot(notes.parent) == before


@pytest.mark.parametrize("command", ["compress", "decompress"])
def test_output_that_is_a_hard_link_to_the_input_is_refused(
    run_cli, notes, mz_file, snapshot, command
):
    source = notes if command == "compress" else mz_file
    link = source.with_name("link")
    os.link(source, link)
    before = snapshot(source.parent)
    flags = TINY_FLAGS if command == "compress" else ()
    result = run_cli(command, *flags, "-f", "--rm", "-o", link, source)
    assert "is the input" in result.error_line(1)
    assert snapshot(source.parent) == before


@pytest.mark.parametrize("command", ["compress", "decompress"])
def test_output_that_is_a_symlink_to_the_input_is_refused(
    run_cli, notes, mz_file, snapshot, command
):
    source = notes if command == "compress" else mz_file
    link = source.with_name("link")
    link.symlink_to(source.name)
    before = snapshot(source.parent)
    flags = TINY_FLAGS if command == "compress" else ()
    result = run_cli(command, *flags, "-f", "--rm", "-o", link, source)
    assert "is the input" in result.error_line(1)
    assert snapshot(source.parent) == before
    assert link.is_symlink()


def test_compressed_name_that_is_a_symlink_to_the_input_is_refused(run_cli, notes, snapshot):
    """notes.txt.mz -> notes.txt: the derived output name leads back to the input."""
    notes.with_name("notes.txt.mz").symlink_to(notes.name)
    before = snapshot(notes.parent)
    run_cli("compress", *TINY_FLAGS, "-f", "--rm", notes).error_line(1)
    assert snapshot(notes.parent) == before


def test_stdout_redirected_to_the_input_is_refused(tmp_path, notes, sample):
    """``mambazip compress -c notes.txt >> notes.txt`` would read what it writes."""
    with open(notes, "ab") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "mambazip", "compress", *TINY_FLAGS, "-c", str(notes)],
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=600,
        )
    stderr = proc.stderr.decode()
    assert proc.returncode == 1, stderr
    assert stderr.count("\n") == 1 and "is the input" in stderr
    assert notes.read_bytes() == sample


def test_save_model_naming_the_input_is_refused(run_cli, notes, sample):
    result = run_cli("compress", *TINY_FLAGS, "-f", "--save-model", notes, notes)
    assert "names the input" in result.error_line(1)
    assert notes.read_bytes() == sample
    assert not notes.with_name("notes.txt.mz").exists()


def test_the_other_inputs_are_still_processed(run_cli, notes, sample, tmp_path):
    other = tmp_path / "other.txt"
    other.write_bytes(b"other " * 1000)
    (tmp_path / "notes.txt.mz").symlink_to("notes.txt")
    result = run_cli("compress", *TINY_FLAGS, "-f", notes, other)
    assert "is the input" in result.error_line(1)
    assert notes.read_bytes() == sample
    assert mambazip.decompress((tmp_path / "other.txt.mz").read_bytes()) == b"other " * 1000


# ------------------------------------------------------------------------- appearing outputs


@pytest.fixture
def intruder(monkeypatch):
    """Makes a file appear at ``path`` while the codec writes its last bytes, as a second
    run writing the same output would; returns a function that arms it for ``path``."""

    def arm(path, content=b"written by someone else meanwhile"):
        # The last write of a stream: its end, or the whole body of the short form (v6).
        for name in ("write_end", "write_short"):
            write = getattr(container, name)

            def write_and_intrude(*args, write=write, **kwargs):
                path.write_bytes(content)
                return write(*args, **kwargs)

            monkeypatch.setattr(container, name, write_and_intrude)
        return content

    return arm


def test_a_file_that_appears_at_the_output_during_the_run_is_not_replaced(
    run_cli, notes, sample, intruder
):
    out = notes.with_name("notes.txt.mz")
    content = intruder(out)
    result = run_cli("compress", *TINY_FLAGS, notes)
    assert "appeared while this ran; not replaced" in result.error_line(1)
    assert out.read_bytes() == content
    assert notes.read_bytes() == sample
    assert no_temporary_files(notes.parent)


def test_rm_keeps_the_input_when_the_output_could_not_be_placed(run_cli, notes, sample, intruder):
    intruder(notes.with_name("notes.txt.mz"))
    run_cli("compress", *TINY_FLAGS, "--rm", notes).error_line(1)
    assert notes.read_bytes() == sample


def test_with_force_a_file_that_appears_during_the_run_is_replaced(
    run_cli, notes, sample, intruder
):
    out = notes.with_name("notes.txt.mz")
    intruder(out)
    assert run_cli("compress", *TINY_FLAGS, "-f", notes).exit_code == 0
    assert mambazip.decompress(out.read_bytes()) == sample


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP])
def test_a_filesystem_without_hard_links_is_one_clear_error_naming_force(
    run_cli, notes, snapshot, monkeypatch, code
):
    def refuse(src, dst, *args, **kwargs):
        raise OSError(code, os.strerror(code), src, None, dst)

    monkeypatch.setattr(files.os, "link", refuse)
    before = snapshot(notes.parent)
    line = run_cli("compress", *TINY_FLAGS, notes).error_line(1)
    assert "refuses hard links" in line and "-f" in line
    assert snapshot(notes.parent) == before


def test_output_to_a_fifo_with_force_writes_into_it_and_renames_nothing_over_it(
    run_cli, mz_file, sample
):
    """-f -o FIFO (as -f -o /dev/null) writes into it; a file renamed over it would replace
    the FIFO or device itself."""
    fifo = mz_file.with_name("pipe")
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = run_cli("decompress", "-f", "-o", fifo, mz_file)
    reader.join(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert received == [sample]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
