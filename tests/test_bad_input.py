"""Bad input gets a clear error and loses nothing (DESIGN.md).

For every case: exactly one line on stderr (no traceback), the exit code the CLI documents
(1 for data and file errors, 2 for usage errors), and the directory exactly as it was:
no output file, no temporary ``.NAME.*.tmp`` file, every input byte-for-byte unchanged.
"""

from __future__ import annotations

import io
import re
import struct

import pytest

import mambazip
from mambazip import container


def assert_nothing_changed(before, after):
    """Directory snapshots (see conftest.py) equal: nothing created, removed or changed."""
    assert sorted(after) == sorted(before), "files appeared or disappeared"
    for name, content in before.items():
        assert after[name] == content, f"{name} was modified"


@pytest.fixture
def mz_file(tmp_path, sample, tiny_settings):
    """conftest's ``mz_file`` written as version 5, whose layout the offsets here name (the
    compact header of version 6 is mutated by tests/test_format_v6.py and fuzz_mz.py)."""
    path = tmp_path / "sample.txt.mz"
    out = io.BytesIO()
    mambazip.compress_stream(io.BytesIO(sample), out, tiny_settings, version=5)
    path.write_bytes(out.getvalue())
    return path


def layout(blob):
    """Byte offsets of the parts of a one-block .mz file (see mambazip/container.py); from
    version 4 the block is one frame's, a seek index of one entry follows its end."""
    magic_end = len(container.MAGIC)
    (version, header_len) = struct.unpack_from("<HI", blob, magic_end)
    header_start = magic_end + 2 + 4
    block_start = header_start + header_len + 4
    (n_words,) = struct.unpack_from("<I", blob, block_start + 4)
    payload_start = block_start + 8
    end_start = payload_start + 4 * n_words
    index = container.INDEX_FIXED + struct.calcsize("<QQI") if version >= 4 else 0
    assert len(blob) == end_start + 4 + 8 + 4 + index, "expected exactly one block"
    return {
        "header_start": header_start,
        "header_len": header_len,
        "block_start": block_start,
        "payload_start": payload_start,
        "n_words": n_words,
        "end_start": end_start,
    }


# Where to cut a file: name -> offset, given the layout. One cut inside every part.
CUTS = {
    "empty": lambda p: 0,
    "inside-magic": lambda p: 4,
    "inside-version": lambda p: 9,
    "inside-header-length": lambda p: 12,
    "inside-header": lambda p: p["header_start"] + p["header_len"] // 2,
    "inside-header-crc": lambda p: p["header_start"] + p["header_len"] + 2,
    "before-first-block": lambda p: p["block_start"],
    "inside-block-size": lambda p: p["block_start"] + 2,
    "inside-word-count": lambda p: p["block_start"] + 6,
    "inside-payload": lambda p: p["payload_start"] + 4 * (p["n_words"] // 2) + 1,
    "before-end-marker": lambda p: p["end_start"],
    "inside-end-marker": lambda p: p["end_start"] + 2,
    "inside-length": lambda p: p["end_start"] + 4 + 3,
    "inside-crc": lambda p: p["end_start"] + 4 + 8 + 2,
}


@pytest.fixture
def decompress_refused(run_cli, snapshot):
    """``decompress_refused(path, *args, exit_code=1) -> message``: run ``mambazip
    decompress ARGS PATH``, assert the failure contract and return the one line."""

    def run(path, *args, exit_code=1):
        before = snapshot(path.parent)
        result = run_cli("decompress", *args, path)
        line = result.error_line(exit_code)
        assert_nothing_changed(before, snapshot(path.parent))
        assert str(path) in line, "the message names the file"
        return line

    return run


# ------------------------------------------------------------------------- not ours


def test_a_file_that_is_not_mambazip_is_refused(tmp_path, decompress_refused):
    path = tmp_path / "notes.txt.mz"
    path.write_bytes(b"plain text, not compressed by mambazip\n" * 10)
    line = decompress_refused(path)
    assert "not a mambazip file" in line


def test_info_on_a_file_that_is_not_mambazip_is_refused(tmp_path, run_cli, snapshot):
    path = tmp_path / "notes.txt.mz"
    path.write_bytes(b"plain text, not compressed by mambazip\n" * 10)
    before = snapshot(tmp_path)
    line = run_cli("info", path).error_line(1)
    assert "not a mambazip file" in line
    assert_nothing_changed(before, snapshot(tmp_path))


# ------------------------------------------------------------------------- damaged


@pytest.mark.parametrize("cut", CUTS)
def test_a_truncated_file_is_refused(mz_file, decompress_refused, cut):
    blob = mz_file.read_bytes()
    offset = CUTS[cut](layout(blob))
    assert 0 <= offset < len(blob)
    mz_file.write_bytes(blob[:offset])
    line = decompress_refused(mz_file)
    if offset >= len(container.MAGIC):
        assert re.search("truncated|corrupt", line), line
    else:
        assert "not a mambazip file" in line or "truncated" in line, line


@pytest.mark.parametrize("cut", ["inside-header", "inside-payload", "inside-crc"])
def test_a_truncated_file_fails_the_test_flag(mz_file, decompress_refused, cut):
    blob = mz_file.read_bytes()
    mz_file.write_bytes(blob[: CUTS[cut](layout(blob))])
    decompress_refused(mz_file, "-t")


@pytest.mark.parametrize(
    "word", ["first", "middle", "last-but-one"], ids=lambda w: f"high-bit-of-{w}-payload-word"
)
def test_a_flipped_bit_in_the_payload_is_detected(mz_file, decompress_refused, word):
    """Not the last word: the range coder's seal writes a point of its final interval, which
    spans up to a whole word, so that word may carry no information at all (on this sample
    every one of its 32 bits flips to the same decoded bytes; the library-level test below
    accepts an unchanged decode). Every earlier word is pinned: a flip of any of its bits
    moves the point by at least 2^32 units of the last word, more than the interval spans."""
    blob = bytearray(mz_file.read_bytes())
    p = layout(blob)
    index = {"first": 0, "middle": p["n_words"] // 2, "last-but-one": p["n_words"] - 2}[word]
    blob[p["payload_start"] + 4 * index + 3] ^= 0x80  # words are little-endian u32
    mz_file.write_bytes(bytes(blob))
    line = decompress_refused(mz_file)
    assert re.search("checksum|corrupt", line), line


def test_a_flipped_bit_in_any_payload_word_raises_a_mambazip_error(tiny_settings, sample):
    """Library level, every word of a 1000-byte input's payload in turn (the CLI reports
    MambazipErrors in one line; anything else escapes as a traceback). Which words upset
    the range decoder itself depends on the exact coded bits, hence all of them."""
    data = sample[:1000]
    out = io.BytesIO()
    mambazip.compress_stream(io.BytesIO(data), out, tiny_settings, version=5)  # layout()'s
    blob = out.getvalue()
    p = layout(blob)
    escaped = []
    for index in range(p["n_words"]):
        damaged = bytearray(blob)
        damaged[p["payload_start"] + 4 * index + 3] ^= 0x80
        try:
            decoded = mambazip.decompress(bytes(damaged))
        except (mambazip.FormatError, mambazip.ChecksumError):
            continue
        except Exception as exc:
            escaped.append(f"word {index}: {type(exc).__name__}: {exc}")
        else:
            if decoded != data:
                escaped.append(f"word {index}: wrong data decoded without an error")
    assert not escaped, f"{len(escaped)} of {p['n_words']} flips: " + "; ".join(escaped[:3])


def test_a_flipped_bit_in_the_header_is_detected(mz_file, decompress_refused):
    blob = bytearray(mz_file.read_bytes())
    blob[layout(blob)["header_start"] + 5] ^= 0x04
    mz_file.write_bytes(bytes(blob))
    line = decompress_refused(mz_file)
    assert re.search("checksum|corrupt", line), line


def test_appended_garbage_is_detected(mz_file, decompress_refused):
    mz_file.write_bytes(mz_file.read_bytes() + b"\x00garbage")
    line = decompress_refused(mz_file)
    assert "corrupt" in line


def test_a_file_from_a_future_format_version_names_both_versions(mz_file, decompress_refused):
    future = container.VERSION + 41
    blob = bytearray(mz_file.read_bytes())
    struct.pack_into("<H", blob, len(container.MAGIC), future)
    mz_file.write_bytes(bytes(blob))
    line = decompress_refused(mz_file)
    numbers = re.findall(r"\d+", line.removeprefix(f"mambazip: {mz_file}:"))
    assert str(future) in numbers
    assert str(container.VERSION) in numbers


# ------------------------------------------------------------------------- files


@pytest.mark.parametrize("command", ["compress", "decompress", "info"])
def test_a_missing_input_file_is_reported(tmp_path, run_cli, snapshot, command):
    (tmp_path / "other").write_bytes(b"something else")
    missing = tmp_path / "missing.mz"
    before = snapshot(tmp_path)
    line = run_cli(command, missing).error_line(1)
    assert str(missing) in line
    assert "No such file" in line
    assert_nothing_changed(before, snapshot(tmp_path))


def test_compress_refuses_to_overwrite_an_existing_output(
    run_cli, tiny_flags, sample_file, snapshot
):
    sample_file.with_name("sample.txt.mz").write_bytes(b"precious")
    before = snapshot(sample_file.parent)
    line = run_cli("compress", *tiny_flags, sample_file).error_line(1)
    assert "exists" in line
    assert "-f" in line
    assert_nothing_changed(before, snapshot(sample_file.parent))


def test_decompress_refuses_to_overwrite_an_existing_output(mz_file, decompress_refused):
    mz_file.with_name("sample.txt").write_bytes(b"precious")
    line = decompress_refused(mz_file)
    assert "exists" in line
    assert "-f" in line


def test_compress_force_overwrites_an_existing_output(
    run_cli, tiny_flags, sample_file, sample, snapshot
):
    out = sample_file.with_name("sample.txt.mz")
    out.write_bytes(b"precious")
    result = run_cli("compress", *tiny_flags, "-f", sample_file)
    assert (result.exit_code, result.stderr) == (0, "")
    assert mambazip.decompress(out.read_bytes()) == sample
    assert set(snapshot(sample_file.parent)) == {"sample.txt", "sample.txt.mz"}


def test_decompress_force_overwrites_an_existing_output(run_cli, mz_file, sample, snapshot):
    out = mz_file.with_name("sample.txt")
    out.write_bytes(b"precious")
    result = run_cli("decompress", "-f", mz_file)
    assert (result.exit_code, result.stderr) == (0, "")
    assert out.read_bytes() == sample
    assert set(snapshot(mz_file.parent)) == {"sample.txt", "sample.txt.mz"}


def test_decompress_without_mz_suffix_and_without_output_name_is_refused(
    mz_file, decompress_refused
):
    renamed = mz_file.with_name("sample.bin")
    mz_file.rename(renamed)
    line = decompress_refused(renamed)
    assert ".mz" in line
    assert "-o" in line


# ------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    "flags",
    [
        ["--d-model", "0"],
        ["--scope", "bogus"],
        ["--optimizer", "bogus"],
        ["--n-layer", "-1"],
        ["--lr", "-0.1"],
        ["--lr", "fast"],
        ["--seed", "-1"],
        ["--preset", "bogus"],
    ],
    ids=" ".join,
)
def test_an_invalid_option_value_is_a_usage_error(
    run_cli, tiny_flags, sample_file, snapshot, flags
):
    before = snapshot(sample_file.parent)
    line = run_cli("compress", *tiny_flags, *flags, sample_file).error_line(2)
    assert flags[0].removeprefix("--").replace("-", "_") in line.replace("-", "_")
    assert_nothing_changed(before, snapshot(sample_file.parent))


# ------------------------------------------------------------------------- real process


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (["decompress", "TRUNCATED"], 1),
        (["compress", "--d-model", "0", "INPUT"], 2),
    ],
    ids=["truncated-file", "invalid-option"],
)
def test_a_real_process_prints_one_line_and_leaves_nothing(
    run_process, mz_file, sample_file, snapshot, args, exit_code
):
    blob = mz_file.read_bytes()
    mz_file.write_bytes(blob[: layout(blob)["payload_start"] + 10])
    paths = {"TRUNCATED": str(mz_file), "INPUT": str(sample_file)}
    before = snapshot(mz_file.parent)
    result = run_process(*(paths.get(a, a) for a in args))
    assert "Traceback" not in result.stderr
    assert result.returncode == exit_code, result.stderr
    line = result.stderr.removesuffix("\n")
    assert line.startswith("mambazip: ")
    assert "\n" not in line
    assert result.stdout == b""
    assert_nothing_changed(before, snapshot(mz_file.parent))
