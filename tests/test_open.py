"""``mambazip.open`` (issue 27): the file object ``gzip.open`` and ``lzma.open`` taught, over
the one coder: every mode round trips, text by line, seek through the seek index decoding
only the frame needed, memory bounded by a frame, and no byte of a damaged frame handed out
before the error (an OSError) is raised."""

import io
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from conftest import TINY_FLAGS, TINY_MODEL

import mambazip
from mambazip import container, frames

FRAME = 4096
ENWIK6 = Path("/work/shared/bench/corpus/enwik8/enwik6")


def text(n):
    lines = b"".join(b"%05d the quick brown fox, %x\n" % (i, i * 7919) for i in range(n // 20 + 1))
    return lines[:n]


@pytest.fixture(scope="module")
def original():
    return text(4 * FRAME - 500)  # four frames, the last one short


@pytest.fixture(scope="module")
def four_frames(tmp_path_factory, original, tiny_settings):
    """``original`` compressed in frames of FRAME bytes: four of them."""
    path = tmp_path_factory.mktemp("open") / "four.mz"
    with path.open("wb") as out:
        mambazip.compress_stream(io.BytesIO(original), out, tiny_settings, frame_size=FRAME)
    return path


@pytest.fixture
def frames_decoded(monkeypatch):
    """How many frames were decoded since the test began (``FrameJob.decode_stream`` calls)."""
    calls = []
    decode = frames.FrameJob.decode_stream

    def counting(self, *args, **kwargs):
        calls.append(1)
        return decode(self, *args, **kwargs)

    monkeypatch.setattr(frames.FrameJob, "decode_stream", counting)
    return calls


class Pipe(io.RawIOBase):
    """What a pipe offers: read, no seek."""

    def __init__(self, data):
        self.data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, b):
        return self.data.readinto(b)


# ----------------------------------------------------------------------------- modes


def test_wb_then_rb_round_trips(tmp_path, original, tiny_settings):
    path = tmp_path / "a.mz"
    with mambazip.open(path, "wb", settings=tiny_settings, frame_size=FRAME) as f:
        f.write(original[:1000])
        f.write(memoryview(original[1000:]))
    with mambazip.open(path) as f:
        assert f.read() == original
    assert mambazip.decompress(path.read_bytes()) == original


def test_wb_writes_the_bytes_of_the_compress_command(tmp_path, original, tiny_settings):
    path = tmp_path / "a.mz"
    with mambazip.open(path, "wb", settings=tiny_settings) as f:
        f.write(original)
    cli = subprocess.run([sys.executable, "-m", "mambazip", "compress", "-n", *TINY_FLAGS],
                         input=original, capture_output=True, timeout=600)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert path.read_bytes() == cli.stdout


def test_xb_writes_a_new_file_and_refuses_an_existing_one(tmp_path, tiny_settings):
    path = tmp_path / "x.mz"
    with mambazip.open(path, "xb", settings=tiny_settings) as f:
        f.write(b"new")
    with pytest.raises(FileExistsError):
        mambazip.open(path, "xb", settings=tiny_settings)
    assert mambazip.decompress(path.read_bytes()) == b"new"


def test_ab_appends_a_stream_and_the_streams_read_as_one(tmp_path, original, tiny_settings):
    path = tmp_path / "a.mz"
    for part in (original[:5000], original[5000:]):
        with mambazip.open(path, "ab", settings=tiny_settings, frame_size=FRAME) as f:
            f.write(part)
    with mambazip.open(path) as f:
        assert f.read() == original
        f.seek(4000)  # no index covers both streams: read in order, from the start again
        assert f.read(2000) == original[4000:6000]


def test_text_modes_round_trip_with_encoding_and_newline(tmp_path, tiny_settings):
    path = tmp_path / "t.mz"
    lines = ["première ligne\n", "second, with a tab\t\n", "last, no newline"]
    with mambazip.open(path, "wt", settings=tiny_settings, encoding="utf-8", newline="\r\n") as f:
        f.writelines(lines)
    assert mambazip.decompress(path.read_bytes()) == "".join(lines).replace("\n", "\r\n").encode(
        "utf-8"
    )
    with mambazip.open(path, "rt", encoding="utf-8", newline="") as f:
        assert [line.replace("\r\n", "\n") for line in f] == lines
    with mambazip.open(path, "rt", encoding="ascii", errors="replace") as f:
        assert "\ufffd" in f.read()


def test_file_objects_round_trip(original, tiny_settings):
    buffer = io.BytesIO()
    with mambazip.open(buffer, "wb", settings=tiny_settings, frame_size=FRAME) as f:
        f.write(original)
    assert not buffer.closed  # a file object given is the caller's to close
    with mambazip.open(io.BytesIO(buffer.getvalue())) as f:
        assert f.read() == original


def test_a_mode_it_does_not_have_is_refused(tmp_path):
    with pytest.raises(ValueError):
        mambazip.open(tmp_path / "a.mz", "r+b")


# ---------------------------------------------------------------------------- reading


def test_read_readinto_peek_and_tell(four_frames, original):
    with mambazip.open(four_frames) as f:
        assert f.read(10) == original[:10]
        buffer = bytearray(100)
        assert f.readinto(buffer) == 100
        assert bytes(buffer) == original[10:110]
        assert f.peek(5)[:5] == original[110:115]
        assert f.tell() == 110
        assert f.read() == original[110:]


def test_lines_of_enwik6_are_the_files_lines(tmp_path, tiny_settings):
    # Its first 128 KiB (the tiny model codes some 50 KB/s); where it is not, text like it.
    data = ENWIK6.read_bytes()[: 1 << 17] if ENWIK6.exists() else text(1 << 17)
    path = tmp_path / "enwik6.mz"
    with mambazip.open(path, "wb", settings=tiny_settings, frame_size=1 << 15) as f:
        f.write(data)
    with mambazip.open(path, "rt", encoding="utf-8") as f:
        assert list(f) == data.decode("utf-8").splitlines(keepends=True)


def test_seek_into_the_fourth_frame_decodes_that_frame_only(four_frames, original, frames_decoded):
    with mambazip.open(four_frames) as f:
        target = 3 * FRAME + 100
        assert f.seek(target) == target
        assert f.read(50) == original[target : target + 50]
        assert len(frames_decoded) == 1
        f.seek(-10, io.SEEK_END)
        assert f.read() == original[-10:]
        assert f.tell() == len(original)
        assert len(frames_decoded) == 1  # the end is in the frame at hand


def test_a_pipe_is_read_forward_only(four_frames, original):
    with mambazip.open(Pipe(four_frames.read_bytes())) as f:
        assert not f.seekable()
        assert [*f] == original.splitlines(keepends=True)
        with pytest.raises(io.UnsupportedOperation):
            f.seek(0)


def test_memory_reading_every_frame_stays_within_one_frame_and_two_more(tmp_path):
    """The peak of what Python and NumPy allocate (tracemalloc) while reading a file of 8
    frames in order exceeds the peak of reading its first frame only by less than two
    frames (the one handed out, the next decoding): memory is bounded by the frame, not the
    file, within the issue's "under twice one frame's reading". The tiny Mamba alone, so that
    the frames, not a predictor's tables, are what would grow, and without overlapped
    updates, whose second weights and segment are a constant of each learner (the next
    test). (Peak RSS would mostly measure the interpreter, NumPy and Numba themselves.)"""
    size = 1 << 15
    data = text(8 * size)
    peak = _frames_read(tmp_path, data, size, {"overlap": False})
    peak(lambda f: f.read(1))  # warm: imports and caches are not what is measured
    one = peak(lambda f: f.read(1))
    chunks = []
    every = peak(lambda f: chunks.append(sum(len(c) for c in iter(lambda: f.read(8192), b""))))
    assert chunks == [len(data)]
    assert every < 2 * one, (every, one)
    assert every - one < 2 * size, (every, one)


def test_memory_reading_frames_with_overlapped_updates_does_not_grow_with_the_file(tmp_path):
    """Each frame's learner has an update thread and second buffers: reading 12 frames in
    order peaks less than a frame above reading 4, so they end with their frame (a learner
    kept would add its weights and segments, about 100 KB, a frame)."""
    size = 1 << 15
    peaks = []

    def read_all(f):
        return [None for _ in iter(lambda: f.read(8192), b"")]

    for n in (4, 12):
        peak = _frames_read(tmp_path, text(n * size), size, {"overlap": True})
        # Warm with a whole read, not one byte: what a frame's end and the next frame's
        # update thread allocate the first time they run in the process (measured: the
        # 4-frame peak moved by 170 KB with the tests run before this one) is not growth.
        peak(read_all)
        peaks.append(peak(read_all))
    assert peaks[1] - peaks[0] < size, peaks


def _frames_read(tmp_path, data, size, train):
    """Write ``data`` in frames of ``size`` with the tiny Mamba alone and the recipe
    ``train``; return peak(read): the tracemalloc peak of read(f) over the file opened."""
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="none", train=train)
    path = tmp_path / f"{len(data) // size}.mz"
    with mambazip.open(path, "wb", settings=settings, frame_size=size) as f:
        f.write(data)

    def peak(read):
        tracemalloc.start()
        try:
            with mambazip.open(path) as f:
                read(f)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return peak


# ------------------------------------------------------------------------------ damage


def read_until_error(f):
    """What ``f`` hands out in reads of 1000 bytes before it raises; and the error."""
    got = bytearray()
    try:
        while chunk := f.read(1000):
            got += chunk
    except Exception as exc:
        return bytes(got), exc
    return bytes(got), None


def third_frame(path):
    _, index = container.index_from_end(io.BytesIO(path.read_bytes()))
    return index.frames[2]


@pytest.mark.parametrize("as_pipe", [False, True], ids=["file", "pipe"])
@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_damage_raises_before_any_byte_of_the_damaged_frame(four_frames, original, damage,
                                                            as_pipe):  # fmt: skip
    blob = bytearray(four_frames.read_bytes())
    fr = third_frame(four_frames)
    middle = fr.packed_offset + fr.packed_size // 2
    if damage == "truncated":
        del blob[middle:]
    else:
        blob[middle] ^= 0x10
    source = Pipe(bytes(blob)) if as_pipe else io.BytesIO(bytes(blob))
    with mambazip.open(source) as f:
        got, error = read_until_error(f)
    assert isinstance(error, mambazip.BadMzFileError), error
    assert isinstance(error, OSError)
    assert isinstance(error, mambazip.MambazipError)
    assert len(got) <= fr.offset  # nothing of the third frame
    assert got == original[: len(got)]


def test_a_file_that_is_not_mz_is_refused_as_an_oserror(tmp_path):
    path = tmp_path / "plain.mz"
    path.write_bytes(b"just text, not compressed\n")
    with pytest.raises(OSError, match=r"not a mambazip file|magic"):
        mambazip.open(path).read()


GOLDEN = sorted((Path(__file__).parent / "golden").glob("v*/*.mz"))
SMALL_GOLDEN = [p for p in GOLDEN if p.stem.startswith(("tiny", "empty"))]


@pytest.mark.parametrize("as_pipe", [False, True], ids=["file", "pipe"])
@pytest.mark.parametrize("path", SMALL_GOLDEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_format_version_reads_as_it_decompresses(path, as_pipe):
    blob = path.read_bytes()
    with mambazip.open(Pipe(blob) if as_pipe else io.BytesIO(blob)) as f:
        assert f.read() == path.with_suffix(".bin").read_bytes()


def test_a_short_input_written_under_a_preset_codes_as_mambazip_compress_codes_it():
    """As ``mambazip.compress``: a preset's input of at most container.SMALL_INPUT bytes
    codes with the preset's small-input counterpart, named in the header."""
    data = text(300)
    out = io.BytesIO()
    with mambazip.open(out, "wb") as f:
        f.write(data)
    written = out.getvalue()
    assert written == mambazip.compress(data)
    settings = container.read_header(io.BytesIO(written))["settings"]
    assert settings == container.small_input_settings(mambazip.resolve_settings("default"), 300)
    assert mambazip.decompress(written) == data
