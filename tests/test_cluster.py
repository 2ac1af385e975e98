"""The Dask cluster path (``--scheduler``): workers that must be refused, workers lost mid-run.

A scheduler runs in this process (``LocalCluster`` without workers, on 127.0.0.1); each
worker is a ``dask worker`` process of its own, started here and ended here by its id, so
that a test can give it other code, kill it or freeze it. The command line runs as a real
``python -m mambazip`` process, so that what it prints is what a user would see. Every wait
is bounded: a test that would hang fails instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TINY_FLAGS, TINY_MODEL

import mambazip
from mambazip import codec, workers

distributed = pytest.importorskip("dask.distributed")

FLAGS = (*TINY_FLAGS, "--mix", "none", "-q")
PACKAGE = Path(mambazip.__file__).resolve().parent  # the code this test runs
WAIT = 180  # seconds any one step may take before the test fails (never reached when well)

# Blocks every import of mambazip in the worker that preloads it, as if it were not installed.
NO_MAMBAZIP = """\
import sys


class _NoMambazip:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "mambazip" or name.startswith("mambazip."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMambazip)
"""


def _text(lines):
    return b"".join(b"line %d of a log: frames code on the cluster\n" % i for i in range(lines))


@pytest.fixture(scope="module", autouse=True)
def _kernels_compiled():
    """Code once here first, so that a cold Numba cache is filled before workers load it."""
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="none")
    assert mambazip.decompress(mambazip.compress(_text(50), settings)) == _text(50)


@pytest.fixture
def work(tmp_path):
    """The folder the command line runs in (workers keep their files elsewhere)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def scheduler():
    """A scheduler without workers on 127.0.0.1; its address."""
    with distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster:  # fmt: skip
        yield cluster.scheduler_address


@pytest.fixture
def client(scheduler):
    """A client of ``scheduler``, to watch it."""
    with distributed.Client(scheduler, timeout="30s", set_as_default=False) as c:
        yield c


@pytest.fixture
def start_workers(scheduler, client, tmp_path):
    """``start_workers(n, package_root=PACKAGE.parent, preload=None) -> [Popen]``: ``n``
    one-thread ``dask worker`` processes of ``scheduler`` that import mambazip from
    ``package_root``, all of them joined; killed (stopped ones too) when the test ends."""
    started = []

    def start(n, package_root=PACKAGE.parent, preload=None):
        before = len(client.nthreads())
        args = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--no-nanny",
                "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
                "--local-directory", tmp_path / "dask"]  # fmt: skip
        if preload is not None:
            args += ["--preload", preload]
        env = {**os.environ, "PYTHONPATH": str(package_root)}
        args = list(map(str, args))
        new = []
        for _ in range(n):
            new.append(subprocess.Popen(args, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))  # fmt: skip
            started.append(new[-1])
        client.wait_for_workers(before + n, timeout=WAIT)
        return new

    yield start
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT)


def _mambazip(*args, cwd, timeout=WAIT):
    """``python -m mambazip ARGS`` in ``cwd``, importing the mambazip under test."""
    proc = subprocess.run([sys.executable, "-m", "mambazip", *map(str, args)], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
                          stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout)  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr.decode()


def _one_line(stderr):
    assert "Traceback" not in stderr, stderr
    line = stderr.removesuffix("\n")
    assert line.startswith("mambazip: ") and "\n" not in line, stderr
    return line


@pytest.fixture
def start_compress(scheduler):
    """``start_compress(src, *extra) -> Popen``: ``mambazip compress`` of ``src`` (in its
    folder) into frames of 2 KiB on ``scheduler``'s cluster, in the background; killed if
    still running when the test ends."""
    started = []

    def start(src, *extra):
        proc = subprocess.Popen(
            [sys.executable, "-m", "mambazip", "compress", *FLAGS, "--frame-size", "2KiB",
             "--scheduler", scheduler, *extra, src.name],
            cwd=src.parent, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=WAIT)


def _finish(proc):
    """(exit code, stdout, stderr) of ``proc``, which must end within WAIT seconds."""
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"mambazip still running after {WAIT} s") from None
    return proc.returncode, out, err.decode()


def _busy_workers(client, proc):
    """The addresses of the workers coding frames of ``proc``, once there are any."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        busy = [w for w, keys in client.processing().items() if keys]
        if busy:
            return busy
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("no frame reached a worker")


def _worker_process(client, address, procs):
    """Which of ``procs`` is the worker at ``address``."""
    pid = client.run(os.getpid, workers=[address])[address]
    [proc] = [p for p in procs if p.pid == pid]
    return proc


def _only_input_left(src):
    """Nothing but the input in its folder: no output, no temporary file."""
    assert sorted(p.name for p in src.parent.iterdir()) == [src.name]


def test_workers_of_this_code_compress_and_decompress(scheduler, start_workers, work):
    start_workers(2)
    src = work / "in.txt"
    src.write_bytes(_text(200))
    code, _, err = _mambazip("compress", *FLAGS, "--frame-size", "2KiB", "--scheduler",
                             scheduler, src.name, cwd=work)  # fmt: skip
    assert (code, err) == (0, "")
    blob = (work / "in.txt.mz").read_bytes()
    assert mambazip.decompress(blob) == src.read_bytes()
    code, out, err = _mambazip("decompress", "-c", "--scheduler", scheduler,
                               "--scheduler-timeout", "100", "in.txt.mz", cwd=work)  # fmt: skip
    assert (code, err) == (0, "")
    assert out == src.read_bytes()


def test_frames_longer_than_the_timeout_finish_on_live_workers(scheduler, start_workers, work):
    """Progress is also a worker heard from while it codes one of our frames: a frame may
    take longer than --scheduler-timeout (a real one takes minutes). Here each of two frames
    takes longer than the timeout (about 5 s), with a Mamba larger than the tiny one."""
    start_workers(2)
    src = work / "in.txt"
    src.write_bytes(_text(6000)[: 256 << 10])
    code, _, err = _mambazip("compress", "--d-model", "64", "--n-layer", "2", "--mix", "none",
                             "-q", "--frame-size", "128KiB", "--scheduler", scheduler,
                             "--scheduler-timeout", "3", src.name, cwd=work)  # fmt: skip
    assert (code, err) == (0, "")
    assert (work / "in.txt.mz").exists()


def test_a_worker_of_other_code_is_refused_with_one_line_naming_both_digests(
    scheduler, start_workers, work, tmp_path
):
    """A worker that imports a copy of this package with one byte more in one file."""
    other = _other_code(tmp_path)
    theirs = workers.digest_of(other / "mambazip")
    ours = workers.code_digest()
    assert theirs != ours
    start_workers(1)  # one of ours too: a single odd worker is enough to refuse
    start_workers(1, package_root=other)
    src = work / "in.txt"
    src.write_bytes(_text(100))
    code, out, err = _mambazip("compress", *FLAGS, "--frame-size", "1KiB", "--scheduler",
                               scheduler, src.name, cwd=work)  # fmt: skip
    line = _one_line(err)
    assert (code, out) == (1, b"")
    assert theirs[:12] in line and ours[:12] in line, line
    assert "same mambazip" in line
    _only_input_left(src)


def _other_code(tmp_path):
    """A copy of this package with one byte more in one file (as an install of another
    commit would be): its digest differs although its version does not."""
    other = tmp_path / "other"
    shutil.copytree(PACKAGE, other / "mambazip", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "mambazip" / "codec.py", "a") as f:
        f.write("\n")
    return other


def test_a_worker_of_other_code_joining_mid_run_is_refused_by_its_first_frame(
    client, start_workers, start_compress, work, tmp_path
):
    """Only the workers there at the start are checked as the run begins; one that joins
    later checks itself in each frame it takes, so it never codes one. Its code here codes
    the same bytes, so without that check the run would succeed."""
    other = _other_code(tmp_path)
    start_workers(1)
    src = work / "in.txt"
    src.write_bytes(_text(20000)[: 600 << 10])  # 300 frames: far more than one worker's start
    proc = start_compress(src)
    _busy_workers(client, proc)
    start_workers(1, package_root=other)
    code, out, err = _finish(proc)
    line = _one_line(err)
    assert (code, out) == (1, b"")
    assert "runs other mambazip code" in line and "joined after the start" in line, line
    assert workers.digest_of(other / "mambazip")[:12] in line
    _only_input_left(src)


def test_a_worker_without_mambazip_is_refused_with_one_line(
    scheduler, start_workers, work, tmp_path
):
    preload = tmp_path / "no_mambazip.py"
    preload.write_text(NO_MAMBAZIP)
    start_workers(1, preload=preload)
    src = work / "in.txt"
    src.write_bytes(_text(100))
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="none")
    with open(src, "rb") as f, open(work / "in.txt.mz", "wb") as out:
        codec.compress_stream(f, out, settings, frame_size=1024)
    for args in (("compress", *FLAGS, "--frame-size", "1KiB", "-o", "new.mz", "in.txt"),
                 ("decompress", "-q", "-o", "out.txt", "in.txt.mz")):  # fmt: skip
        code, out, err = _mambazip(*args, "--scheduler", scheduler, cwd=work)
        line = _one_line(err)
        assert (code, out) == (1, b""), args
        assert "cannot import mambazip" in line and "No module named 'mambazip'" in line, line
        assert sorted(p.name for p in work.iterdir()) == ["in.txt", "in.txt.mz"], args


def test_a_worker_killed_mid_run_ends_in_one_line_or_the_right_output(
    client, start_workers, start_compress, work
):
    """One of two workers dies with frames in flight: the other finishes them (Dask runs a
    dead worker's frames again), or the run fails with one line and writes nothing."""
    procs = start_workers(2)
    src = work / "in.txt"
    src.write_bytes(_text(600))
    proc = start_compress(src)
    busy = _busy_workers(client, proc)
    os.kill(_worker_process(client, busy[0], procs).pid, signal.SIGKILL)
    code, out, err = _finish(proc)
    assert out == b""
    if code == 0:
        assert err == ""
        assert mambazip.decompress((work / "in.txt.mz").read_bytes()) == src.read_bytes()
    else:
        assert code == 1
        assert "Dask cluster" in _one_line(err)
        _only_input_left(src)


def test_every_worker_killed_mid_run_is_one_line_and_no_output(
    client, start_workers, start_compress, work
):
    procs = start_workers(2)
    src = work / "in.txt"
    src.write_bytes(_text(600))
    proc = start_compress(src, "--scheduler-timeout", "5")
    _busy_workers(client, proc)
    for worker in procs:
        os.kill(worker.pid, signal.SIGKILL)
    code, out, err = _finish(proc)
    line = _one_line(err)
    assert (code, out) == (1, b"")
    # Dask notices the dead workers and drops the model they held; were it to wait for
    # workers instead, --scheduler-timeout would end the wait.
    assert "lost every worker" in line or "no frame finished" in line, line
    _only_input_left(src)


def test_frozen_workers_time_out_with_one_line_and_no_output(
    client, start_workers, start_compress, work
):
    """Workers that stop answering (a machine down, a network cut: frozen here by SIGSTOP)
    stay on the scheduler's list for minutes; the client gives up after
    --scheduler-timeout seconds without a finished frame instead of waiting forever."""
    procs = start_workers(2)
    src = work / "in.txt"
    src.write_bytes(_text(600))
    proc = start_compress(src, "--scheduler-timeout", "5")
    _busy_workers(client, proc)
    for worker in procs:
        os.kill(worker.pid, signal.SIGSTOP)
    code, out, err = _finish(proc)
    line = _one_line(err)
    assert (code, out) == (1, b"")
    assert "no frame finished" in line and "in 5 s" in line, line
    assert "--scheduler-timeout" in line
    _only_input_left(src)


def test_the_scheduler_timeout_must_be_positive(run_cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"x")
    result = run_cli("compress", *FLAGS, "--scheduler", "tcp://127.0.0.1:9",
                     "--scheduler-timeout", "0", src)  # fmt: skip
    assert result.exit_code == 2
    assert "--scheduler-timeout" in result.stderr
    _only_input_left(src)


@pytest.mark.parametrize("command", ["compress", "decompress"])
def test_a_scheduler_timeout_without_a_scheduler_is_refused(run_cli, tmp_path, command):
    """A timeout alone would be silently ignored: the user meant a cluster and gets none."""
    src = tmp_path / "in.txt"
    src.write_bytes(b"x")
    flags = FLAGS if command == "compress" else ("-q",)
    result = run_cli(command, *flags, "--scheduler-timeout", "5", src)
    assert result.exit_code == 2
    assert "--scheduler-timeout needs --scheduler" in result.stderr
    assert result.stderr.count("\n") == 1
    _only_input_left(src)
