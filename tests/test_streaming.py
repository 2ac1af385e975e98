"""Streaming: several inputs per call, and output written block by block as input arrives,
never more than one segment of the input in memory."""

import io
import itertools

import pytest

import mambazip
from mambazip.blocks import SEGMENT
from mambazip.codec import compress_stream, decompress_stream


def test_several_inputs_each_get_their_own_mz(run_cli, tiny_flags, tmp_path):
    names = ["a.txt", "b.txt", "c.txt"]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(b"file %d " % i * 100)
    run_cli("compress", *tiny_flags, *(tmp_path / n for n in names))
    for i, name in enumerate(names):
        blob = (tmp_path / f"{name}.mz").read_bytes()
        assert mambazip.decompress(blob) == b"file %d " % i * 100


def test_a_failing_input_does_not_stop_the_others(run_cli, tiny_flags, tmp_path):
    (tmp_path / "good.txt").write_bytes(b"good " * 50)
    result = run_cli("compress", *tiny_flags, tmp_path / "missing.txt", tmp_path / "good.txt")
    assert "missing.txt" in result.error_line(1)
    assert mambazip.decompress((tmp_path / "good.txt.mz").read_bytes()) == b"good " * 50


class Recorder(io.RawIOBase):
    """A source that logs each read and a sink that logs each write, in one shared journal."""

    def __init__(self, journal, data=b""):
        self.journal = journal
        self.source = io.BytesIO(data)
        self.written = bytearray()

    def read(self, n=-1):
        data = self.source.read(n)
        self.journal.append(("read", len(data)))
        return data

    def write(self, data):
        self.journal.append(("write", len(data)))
        self.written += data
        return len(data)


def test_compression_writes_each_block_before_reading_the_next(tiny_settings):
    journal = []
    data = bytes(range(256)) * 40  # 10 KB: ten blocks of 1000 bytes
    src, dst = Recorder(journal, data), Recorder(journal)
    compress_stream(src, dst, tiny_settings, block_size=1000, transforms=False)
    reads = [i for i, (kind, n) in enumerate(journal) if kind == "read" and n]
    writes = [i for i, (kind, _) in enumerate(journal) if kind == "write"]
    # Between any two reads of input there is output: nothing waits for the whole input.
    assert all(any(a < w < b for w in writes) for a, b in itertools.pairwise(reads))
    assert mambazip.decompress(bytes(dst.written)) == data


class _FirstWriteError(Exception):
    pass


class _StopAtFirstWrite(Recorder):
    def write(self, data):
        super().write(data)
        raise _FirstWriteError


def test_with_transforms_compression_reads_one_segment_before_writing(tiny_settings):
    """A transform must see a whole deflate stream: the first segment (SEGMENT bytes, rounded
    up to whole blocks) is read before the header is written, and no more."""
    journal = []
    block = 1 << 16
    data = bytes(range(256)) * ((SEGMENT + 3 * block) // 256)
    src, dst = Recorder(journal, data), _StopAtFirstWrite(journal)
    with pytest.raises(_FirstWriteError):
        compress_stream(src, dst, tiny_settings, block_size=block, frame_size=4 * SEGMENT)
    read_before = sum(n for kind, n in journal if kind == "read")
    assert read_before == -(-SEGMENT // block) * block


def test_decompression_writes_each_block_before_reading_the_next(tiny_settings):
    data = bytes(range(256)) * 40
    blob = io.BytesIO()
    compress_stream(io.BytesIO(data), blob, tiny_settings, block_size=1000)
    journal = []
    src, dst = Recorder(journal, blob.getvalue()), Recorder(journal)
    decompress_stream(src, dst)
    first_write = next(i for i, (kind, _) in enumerate(journal) if kind == "write")
    last_read = max(i for i, (kind, n) in enumerate(journal) if kind == "read" and n)
    assert first_write < last_read
    assert bytes(dst.written) == data
