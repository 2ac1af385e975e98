"""Frames (format version 4): independent frames, every core, a Dask cluster, random access.

The input is cut every frame_size bytes; each frame is coded from the same start by a fresh
predictor and listed in a seek index at the end. These tests use the tiny Mamba with the
small tables of ``predictor.SMALL``, so that a frame's fresh tables cost little.
"""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from conftest import TINY_FLAGS, TINY_MODEL

import mambazip
from mambazip import checkpoint, codec, container, frames, predict
from mambazip.errors import ChecksumError, FormatError, RangeError
from mambazip.predictor import SMALL

TEXT = b"".join(b"line %d of a log: frames code apart and decode alone\n" % i for i in range(80))
SMALL_FLAGS = (*TINY_FLAGS, "--mix", "none")


@pytest.fixture(scope="module")
def settings():
    base = mambazip.resolve_settings(model=TINY_MODEL, mix="full")
    return dataclasses.replace(base, mix=SMALL)


def framed(data, settings, frame_size, jobs=1, block_size=256, **kwargs):
    """Version 5 unless asked otherwise: version 6 writes an input of one block without
    frames (its long form's frames are version 5's, tests/test_format_v6.py)."""
    kwargs.setdefault("version", 5)
    out = io.BytesIO()
    stats = codec.compress_stream(io.BytesIO(data), out, settings, block_size,
                                  frame_size=frame_size, jobs=jobs, **kwargs)  # fmt: skip
    return out.getvalue(), stats


def unpack(blob, jobs=1):
    out = io.BytesIO()
    codec.decompress_stream(io.BytesIO(blob), out, jobs=jobs)
    return out.getvalue()


def test_output_bytes_do_not_depend_on_the_number_of_jobs(settings):
    blobs = {jobs: framed(TEXT, settings, 1000, jobs)[0] for jobs in (1, 2, 3)}
    assert blobs[1] == blobs[2] == blobs[3]
    assert all(unpack(blobs[1], jobs) == TEXT for jobs in (1, 2, 3))


@pytest.mark.parametrize(
    ("length", "frame_size"),
    [(1000, 300), (901, 300), (900, 300), (299, 300), (300, 300), (5, 1), (2, 1)],
    ids=["not-dividing", "last-frame-1-byte", "dividing", "shorter", "exact", "1-byte", "2x1"],
)
def test_frame_sizes_round_trip_and_every_frame_but_the_last_is_full(settings, length,
                                                                     frame_size):  # fmt: skip
    data = TEXT[:length]
    blob, stats = framed(data, settings, frame_size, block_size=128)
    assert unpack(blob) == data
    _, index = container.index_from_end(io.BytesIO(blob))
    sizes = [fr.size for fr in index.frames]
    tail = [length % frame_size] if length % frame_size else []
    assert sizes == [frame_size] * (length // frame_size) + tail
    assert stats.frames == len(sizes)
    assert [fr.offset for fr in index.frames] == [i * frame_size for i in range(len(sizes))]


def test_each_frame_is_coded_as_if_it_were_alone(settings):
    """A frame of a framed file holds the same bytes as that slice compressed alone: every
    frame starts from a fresh predictor."""
    blob, _ = framed(TEXT, settings, 1000)
    _, index = container.index_from_end(io.BytesIO(blob))
    for fr in index.frames:
        alone, _ = framed(TEXT[fr.offset : fr.offset + fr.size], settings, 1000)
        _, alone_index = container.index_from_end(io.BytesIO(alone))
        [only] = alone_index.frames
        piece = alone[only.packed_offset : only.packed_offset + only.packed_size]
        assert blob[fr.packed_offset : fr.packed_offset + fr.packed_size] == piece


def test_frame_size_zero_is_one_frame_of_any_length(settings):
    blob, stats = framed(TEXT, settings, 0)
    assert stats.frames == 1
    assert unpack(blob, jobs=2) == TEXT


def test_an_empty_input_is_the_short_empty_stream_of_version_3(settings):
    blob, _ = framed(b"", settings, 1000)
    assert container.read_header(io.BytesIO(blob))["version"] == 3
    assert unpack(blob) == b""


def test_stdin_to_stdout_with_frames_round_trips(run_cli):
    packed = run_cli("compress", *SMALL_FLAGS, "--frame-size", "1KiB", "-T", "2", input=TEXT)
    assert packed.exit_code == 0, packed.stderr
    assert container.read_header(io.BytesIO(packed.stdout))["frame_size"] == 1024
    back = run_cli("decompress", "-T", "2", input=packed.stdout)
    assert back.exit_code == 0, back.stderr
    assert back.stdout == TEXT


@pytest.fixture(scope="module")
def framed_file(tmp_path_factory, settings):
    """A 4,000-byte framed file of 1,000-byte frames, and its original."""
    path = tmp_path_factory.mktemp("frames") / "log.txt.mz"
    path.write_bytes(framed(TEXT[:4000], settings, 1000)[0])
    return path, TEXT[:4000]


@pytest.mark.parametrize(
    "span",
    ["999:1001", "1000:2000", "0:1", "3999:4000", "1500:1500", "0:4000", "2500:", ":10", ":"],
)
def test_range_writes_exactly_that_slice(run_cli, framed_file, span):
    path, data = framed_file
    first, _, last = span.partition(":")
    expected = data[int(first) if first else 0 : int(last) if last else None]
    result = run_cli("decompress", "--range", span, path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def test_range_decodes_only_the_frames_that_hold_it(framed_file, monkeypatch):
    path, data = framed_file
    decoded = []
    original = frames.FrameJob.decode_stream

    def counting(self, blocks, dst, progress=None):
        result = original(self, blocks, dst, progress)
        decoded.append(result[:2])
        return result

    monkeypatch.setattr(frames.FrameJob, "decode_stream", counting)
    out = io.BytesIO()
    with open(path, "rb") as f:
        codec.decompress_range(f, out, 1990, 2010)
    assert out.getvalue() == data[1990:2010]
    assert decoded == [(1000, zlib.crc32(data[1000:2000])), (1000, zlib.crc32(data[2000:3000]))]
    decoded.clear()
    with open(path, "rb") as f:
        codec.decompress_range(f, io.BytesIO(), 1500, 1500)
    assert decoded == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_range_of_a_file_of_one_frame_of_any_size(settings, jobs):
    blob, _ = framed(TEXT, settings, 0)
    out = io.BytesIO()
    codec.decompress_range(io.BytesIO(blob), out, 100, 2100, jobs=jobs)
    assert out.getvalue() == TEXT[100:2100]


def test_frame_size_zero_with_a_scheduler_codes_here_and_never_loses_the_input(settings):
    """Found in review: frames of any length went to the cluster path, which read frames of
    0 bytes and wrote an empty file. They stream here instead (no worker should hold one)."""
    blob, stats = framed(TEXT, settings, 0, scheduler="tcp://127.0.0.1:9")
    assert stats.frames == 1
    assert unpack(blob) == TEXT


def test_a_range_past_the_end_is_one_line_and_writes_nothing(run_cli, framed_file, tmp_path):
    path, _ = framed_file
    out = tmp_path / "piece"
    line = run_cli("decompress", "--range", "3990:4001", "-o", out, path).error_line(1)
    assert "past the end" in line and "4000 bytes" in line
    assert not out.exists()
    with open(path, "rb") as f, pytest.raises(RangeError):
        codec.decompress_range(f, io.BytesIO(), 4001, None)


@pytest.mark.parametrize("span", ["10", "5:3", "a:b", "-1:4"])
def test_a_malformed_range_is_a_usage_error(run_cli, framed_file, span):
    path, _ = framed_file
    assert "START:END" in run_cli("decompress", "--range", span, path).error_line(2)


def test_range_with_rm_is_refused_and_keeps_the_input(run_cli, framed_file):
    path, _ = framed_file
    before = path.read_bytes()
    run_cli("decompress", "--range", "0:10", "--rm", "-o", "-", path).error_line(2)
    assert path.read_bytes() == before


def test_range_from_a_pipe_is_refused(run_process, framed_file):
    path, _ = framed_file
    result = run_process("decompress", "--range", "0:10", input=path.read_bytes())
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.startswith("mambazip: ") and "seek" in result.stderr
    assert result.stderr.count("\n") == 1


def test_range_of_an_older_version_file_decodes_it_from_the_start():
    golden = Path(__file__).parent / "golden" / "v3" / "tiny-mix-full.mz"
    data = golden.with_suffix(".bin").read_bytes()
    out = io.BytesIO()
    with open(golden, "rb") as f:
        codec.decompress_range(f, out, 100, 300)
    assert out.getvalue() == data[100:300]


def test_range_of_concatenated_framed_streams_spans_both(settings):
    a, b = TEXT[:1500], TEXT[1500:2600]
    blob = framed(a, settings, 1000)[0] + framed(b, settings, 1000)[0]
    assert unpack(blob) == a + b
    out = io.BytesIO()
    codec.decompress_range(io.BytesIO(blob), out, 1400, 1600)
    assert out.getvalue() == (a + b)[1400:1600]


def _flip_in_frame(blob, number):
    _, index = container.index_from_end(io.BytesIO(blob))
    fr = index.frames[number]
    at = fr.packed_offset + fr.packed_size // 2
    return blob[:at] + bytes([blob[at] ^ 0x55]) + blob[at + 1 :]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_corrupt_frame_is_named_with_its_place_in_the_original(settings, jobs):
    blob = _flip_in_frame(framed(TEXT[:4000], settings, 1000)[0], 2)
    with pytest.raises((FormatError, ChecksumError), match=r"frame 3 \(from original byte 2000\)"):
        unpack(blob, jobs)


def test_a_corrupt_frame_on_the_command_line_is_one_line_and_no_output(run_cli, framed_file,
                                                                       tmp_path):  # fmt: skip
    path, _ = framed_file
    bad = tmp_path / "bad.mz"
    bad.write_bytes(_flip_in_frame(path.read_bytes(), 1))
    line = run_cli("decompress", "-o", tmp_path / "out", bad).error_line(1)
    assert "frame 2" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mz"]


def test_a_short_frame_before_the_last_is_refused(settings):
    """Frames are cut at the frame size, so a short frame that is not the last cannot be
    this stream's, even behind a valid index."""
    short, full = TEXT[:500], TEXT[500:1500]
    pieces = []
    for data in (short, full):
        blob = framed(data, settings, 1000)[0]
        _, index = container.index_from_end(io.BytesIO(blob))
        [fr] = index.frames
        pieces.append((blob[fr.packed_offset : fr.packed_offset + fr.packed_size], fr))
    head = framed(short, settings, 1000)[0][: index.frames[0].packed_offset]
    out = io.BytesIO()
    out.write(head)
    for raw, _ in pieces:
        out.write(raw)
    entries = [(fr.packed_size, fr.size, fr.crc) for _, fr in pieces]
    container.write_index(out, entries, 1500, zlib.crc32(short + full))
    with pytest.raises(FormatError, match="shorter than the frame size"):
        unpack(out.getvalue())


@pytest.mark.parametrize("cut", [1, 5, 20, 39, 41])
def test_a_truncated_index_is_one_line(run_cli, framed_file, tmp_path, cut):
    path, _ = framed_file
    bad = tmp_path / "cut.mz"
    bad.write_bytes(path.read_bytes()[:-cut])
    for command in (("decompress", "-o", tmp_path / "out"), ("info",)):
        assert "Traceback" not in run_cli(*command, bad).error_line(1)
    assert not (tmp_path / "out").exists()


def test_an_index_that_does_not_match_the_frames_is_refused(settings):
    blob = framed(TEXT[:3000], settings, 1000)[0]
    _, index = container.index_from_end(io.BytesIO(blob))
    start = index.frames[-1].packed_offset + index.frames[-1].packed_size
    out = io.BytesIO()
    out.write(blob[:start])
    entries = [(fr.packed_size, fr.size, fr.crc ^ (i == 1)) for i, fr in enumerate(index.frames)]
    container.write_index(out, entries, index.length, index.crc)
    with pytest.raises(FormatError, match="corrupt index"):
        unpack(out.getvalue())
    with pytest.raises(FormatError, match="does not match"):
        codec.decompress_range(io.BytesIO(out.getvalue()), io.BytesIO(), 1500, 1600)


def test_an_index_whose_sizes_are_not_the_cuts_of_the_frame_size_is_refused(settings):
    """Found by the fuzzer: entry sizes that agree with each other, the total and the index
    CRC but not with the frame size would place a slice's frames at the wrong offsets."""
    data = TEXT[:2500]
    blob = framed(data, settings, 1000)[0]
    _, index = container.index_from_end(io.BytesIO(blob))
    start = index.frames[-1].packed_offset + index.frames[-1].packed_size
    out = io.BytesIO()
    out.write(blob[:start])
    entries = [(fr.packed_size, fr.size, fr.crc) for fr in index.frames]
    entries[0] = (entries[0][0], 1, entries[0][2])
    container.write_index(out, entries, sum(e[1] for e in entries), index.crc)
    with pytest.raises(FormatError, match="corrupt index"):
        codec.decompress_range(io.BytesIO(out.getvalue()), io.BytesIO(), 993, 1007)


def test_info_lists_the_frames(run_cli, framed_file):
    path, _ = framed_file
    result = run_cli("info", path)
    assert result.exit_code == 0, result.stderr
    text = result.stdout.decode()
    assert "frames           4 of 1000 bytes" in text
    assert "frame 4      original 3000-3999" in text


def test_save_model_with_frames_is_refused_before_any_work(run_cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    line = run_cli("compress", *SMALL_FLAGS, "--frame-size", "1KiB", "--save-model",
                   tmp_path / "m.safetensors", src).error_line(2)  # fmt: skip
    assert "--frame-size 0" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_save_model_codes_one_frame_and_saves_the_model_the_input_ends_in(run_cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    saved = tmp_path / "m.safetensors"
    result = run_cli("compress", *SMALL_FLAGS, "--save-model", saved, "-o", tmp_path / "a.mz",
                     src)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert run_cli("info", tmp_path / "a.mz").stdout.decode().count("    frame ") == 1
    unframed = codec.compress_stream(
        io.BytesIO(TEXT), io.BytesIO(), mambazip.resolve_settings(model=TINY_MODEL, mix="none")
    )
    assert saved.read_bytes() == checkpoint.Checkpoint.from_learner(unframed.learner).to_bytes()


def test_decompress_save_model_of_several_frames_is_one_line(run_cli, framed_file, tmp_path):
    path, _ = framed_file
    out, model = tmp_path / "out", tmp_path / "m.safetensors"
    line = run_cli("decompress", "--save-model", model, "-o", out, path).error_line(1)
    assert "4 frames" in line
    assert not out.exists() and not model.exists()


def test_jobs_are_as_many_as_memory_and_frames_allow(settings):
    mib = 1 << 20
    job = frames.FrameJob(settings, 1 << 16, mib)
    per_job = predict.memory_bytes(settings) + 3 * (mib + container.max_frame_bytes(mib, 1 << 16))
    assert frames.plan_jobs(job, 8, memlimit=100 * per_job) == 8
    assert frames.plan_jobs(job, 8, memlimit=3 * per_job + 1) == 3
    assert frames.plan_jobs(job, 8, memlimit=per_job) == 1
    assert frames.plan_jobs(job, 8, size=mib) == 1
    assert frames.plan_jobs(job, 8, size=2 * mib + 1) == 3
    assert frames.plan_jobs(frames.FrameJob(settings, 1 << 16, 0), 8) == 1


def test_a_local_dask_cluster_codes_the_same_bytes(settings):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:  # fmt: skip
        blob, stats = framed(TEXT, settings, 1000, scheduler=cluster.scheduler_address)
        assert stats.frames == 5
        assert blob == framed(TEXT, settings, 1000)[0]
        out = io.BytesIO()
        codec.decompress_stream(io.BytesIO(blob), out, scheduler=cluster.scheduler_address)
        assert out.getvalue() == TEXT


def test_an_unreachable_scheduler_is_one_line(run_cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    line = run_cli("compress", *SMALL_FLAGS, "--frame-size", "1KiB", "--scheduler",
                   "tcp://127.0.0.1:9", src).error_line(1)  # fmt: skip
    assert "Dask scheduler" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_sigterm_during_parallel_compression_leaves_nothing_and_ends_the_workers(tmp_path):
    proc = _compress_in_two_workers(tmp_path)  # the workers have started and are coding
    children = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.decode().strip() == "mambazip: terminated"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in children):
        assert time.monotonic() < deadline, "a worker outlived the command"
        time.sleep(0.1)


def _compress_in_two_workers(tmp_path):
    """``mambazip compress -T 2`` of 100 frames in a subprocess, once its workers code (40
    frames took about 4.6 s in all with format 5's faster mixing: they could end before)."""
    src = tmp_path / "big.txt"
    src.write_bytes(TEXT * 200)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mambazip", "compress", *TINY_FLAGS, "--frame-size", "8KiB",
         "-T", "2", str(src)],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(4.0)
    return proc


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_a_worker_that_dies_is_one_line_not_a_hang(tmp_path):
    """Found in review: a pool worker killed (the OOM killer, kill -9) left the parent
    waiting forever for its frame."""
    proc = _compress_in_two_workers(tmp_path)
    workers = [pid for pid in _children(proc.pid) if b"spawn_main" in _cmdline(pid)]
    os.kill(workers[-1], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert err.decode().count("\n") == 1 and "worker process died" in err.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def test_a_pool_ends_after_its_idle_workers_were_killed(tmp_path):
    """Found by a clean-clone CI run: a worker killed while it waited for a task died holding
    the task queue's lock, and ending the pool (Pool.terminate) waited for it forever."""
    script = (
        "import os, signal\n"
        "from mambazip import workers\n"
        "if __name__ == '__main__':\n"
        "    pool = workers.Processes(None, 2)\n"
        "    pool.pool.apply_async(os.getpid).get(60)\n"
        "    for process in pool.started:\n"
        "        os.kill(process.pid, signal.SIGKILL)\n"
        "    pool.abort()\n"
        "    print(sum(process.is_alive() for process in pool.started))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == b"0"


def test_a_version_4_stream_with_no_frames_is_refused(settings):
    """The writer codes an empty input as the empty stream of version 3, never so."""
    out = io.BytesIO()
    container.write_header(out, settings, frame_size=1000)
    container.write_index(out, [], 0, 0)
    with pytest.raises(FormatError, match="no frames"):
        unpack(out.getvalue())
