"""SIGTERM and SIGHUP stop a run as Ctrl-C does: the temporary output is removed, one line
says why, and the exit code is 128 + the signal's number. A Ctrl-C while Python is still
importing NumPy and Numba (the first half second) prints no traceback either.

Each test runs ``python -m mambazip`` in a subprocess and sends the signal once the run is
under way (its temporary file exists), or, for the start-up case, as soon as the handlers
are installed (read from /proc: the process catches SIGTERM from then on).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import TINY_FLAGS

import mambazip
from mambazip import files, signals

MESSAGES = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


def start(args, cwd):
    return subprocess.Popen(
        [sys.executable, "-m", "mambazip", *map(str, args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for_temporary_file(proc, directory):
    deadline = time.monotonic() + 300
    while not any(p.name.endswith(".tmp") for p in Path(directory).iterdir()):
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "no temporary file appeared"
        time.sleep(0.02)


def finish(proc):
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr.decode()


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """4 MB of random bytes: minutes of work for the tiny model, so a signal finds it busy."""
    path = tmp_path_factory.mktemp("input") / "big.bin"
    path.write_bytes(os.urandom(4 << 20))
    return path


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_during_compress_removes_the_temporary_file_and_exits_128_plus_signal(
    tmp_path, big_input, snapshot, signum
):
    source = tmp_path / "big.bin"
    source.write_bytes(big_input.read_bytes())
    before = snapshot(tmp_path)
    proc = start(["compress", "-q", *TINY_FLAGS, source], tmp_path)
    wait_for_temporary_file(proc, tmp_path)
    proc.send_signal(signum)
    code, stderr = finish(proc)
    assert code == 128 + signum, stderr
    assert stderr == f"mambazip: {MESSAGES[signum]}\n"
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def slow_mz(tmp_path_factory, tiny_settings):
    """200 KB of compressible text as .mz: the decoder takes seconds over it (one compiled
    call per byte), so a signal finds it busy."""
    data = b"".join(b"line %d: the quick brown fox %d\n" % (i, i * i % 977) for i in range(6000))
    path = tmp_path_factory.mktemp("mz") / "text.mz"
    path.write_bytes(mambazip.compress(data, tiny_settings))
    return path


def test_sigterm_during_decompress_removes_the_temporary_file(tmp_path, slow_mz, snapshot):
    packed = tmp_path / "text.mz"
    packed.write_bytes(slow_mz.read_bytes())
    before = snapshot(tmp_path)
    proc = start(["decompress", "-q", packed], tmp_path)
    wait_for_temporary_file(proc, tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, stderr = finish(proc)
    assert code == 128 + signal.SIGTERM, stderr
    assert stderr == "mambazip: terminated\n"
    assert snapshot(tmp_path) == before


def catches(pid, signum):
    """Whether process ``pid`` has a handler for ``signum`` (SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_start_up_imports_prints_one_line_and_no_traceback(
    tmp_path, sample_file, signum
):
    proc = start(["compress", *TINY_FLAGS, sample_file], tmp_path)
    deadline = time.monotonic() + 30
    while not catches(proc.pid, signal.SIGTERM):  # Python alone catches only SIGINT
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "the handlers were never installed"
        time.sleep(0.001)
    proc.send_signal(signum)
    code, stderr = finish(proc)
    assert "Traceback" not in stderr
    assert code == 128 + signum, stderr
    assert stderr == f"mambazip: {MESSAGES[signum]}\n"
    assert not sample_file.with_name("sample.txt.mz").exists()


def test_a_signal_as_the_temporary_file_is_created_still_removes_it(tmp_path, monkeypatch):
    """The window CI hit: SIGHUP sent the moment the temporary file appeared, before the
    clean-up that removes it was entered. Here the signal comes from inside mkstemp itself,
    right after the file is created."""
    real_mkstemp = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        created = real_mkstemp(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)
        return created

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    previous = signals.install()
    try:
        with (
            pytest.raises(signals.Interrupted) as stopped,
            files.atomic_output(tmp_path / "out.mz") as f,
        ):
            f.write(b"never")
    finally:
        signals.restore(previous)
    assert stopped.value.signum == signal.SIGHUP
    assert list(tmp_path.iterdir()) == []
