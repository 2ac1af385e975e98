"""Format version 7: segments coded transformed (deflate streams inflated, x86 code filtered)
with their transform record, in the short and the long form; the decoder inverts them and
checks the original's CRC32s."""

import dataclasses
import gzip
import io
import struct
import zipfile
import zlib

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip import blocks, codec, container, predict, priors, transforms
from mambazip.errors import ChecksumError, FormatError, MambazipError, MemoryLimitError
from mambazip.predictor import SMALL

TEXT = b"".join(b"Line %d of a text that deflates well and codes better inflated.\n" % i
                for i in range(400))  # fmt: skip


def tiny():
    settings = mambazip.resolve_settings("default", model=TINY_MODEL, mix="cm")
    return dataclasses.replace(settings, mix=dataclasses.replace(SMALL, mamba=False))


def pack(data, **options):
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(data), out, tiny(), **options)
    return out.getvalue()


def unpack(blob):
    return codec.decompress(blob)


def header_of(blob):
    return container.read_header(io.BytesIO(blob))


def heads(blob):
    """(offset of its n_bytes, ``container.Transformed``) of each transformed segment of the
    long-form stream ``blob``, every frame read."""
    f = io.BytesIO(blob)
    header = container.read_header(f)
    if header.get("short"):
        return [(None, header["transformed"])] if header["transformed"] else []
    out = []
    while f.getvalue()[f.tell() : f.tell() + 4] != bytes(4):
        at = f.tell()
        for _, payload in container.frame_blocks(f, header):
            if isinstance(payload, container.Transformed):
                out.append((at, payload))
            at = f.tell()
    return out


def x86_program(calls=600):
    header = bytearray(0x200)
    header[:2] = b"MZ"
    header[60:64] = struct.pack("<I", 0x80)
    header[0x80:0x86] = b"PE\0\0" + struct.pack("<H", 0x8664)
    code = bytearray()
    for k in range(calls):  # push rbp; call f_k; ret
        code += b"\x55\xe8" + struct.pack("<i", -len(code) - 6 + 16 * (k % 7)) + b"\xc3"
    return bytes(header + code)


def png(rows, chunk):
    def framed(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    idat = zlib.compress(rows, 9)
    ihdr = struct.pack(">IIBBBBB", 64, len(rows) // 193, 8, 2, 0, 0, 0)
    parts = [framed(b"IHDR", ihdr)]
    parts += [framed(b"IDAT", idat[i : i + chunk]) for i in range(0, len(idat), chunk)]
    return b"\x89PNG\r\n\x1a\n" + b"".join(parts) + framed(b"IEND", b"")


def zipped(members):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, (2000, 1, 1, 0, 0, 0)), data,
                       zipfile.ZIP_DEFLATED, 9)  # fmt: skip
    return out.getvalue()


ROWS = b"".join(b"\x00" + bytes((3 * x + y) % 256 for x in range(192)) for y in range(40))
INPUTS = {
    "gzip": gzip.compress(TEXT, 9, mtime=0),
    "zlib in text": TEXT[:3000] + zlib.compress(TEXT, 6) + TEXT[3000:6000],
    "zip of a gzip": zipped({"a.txt": TEXT, "b.gz": gzip.compress(TEXT[::-1], 6, mtime=0)}),
    "png": png(ROWS, 64),
    "x86": x86_program(),
}
KINDS = {"gzip": {"deflate"}, "zlib in text": {"deflate"}, "zip of a gzip": {"deflate"},
         "png": {"png", "deflate"}, "x86": {"x86"}}  # fmt: skip


@pytest.mark.parametrize("name", INPUTS)
@pytest.mark.parametrize("form", ["short", "long"])
def test_each_transform_round_trips_through_the_container(name, form):
    data = INPUTS[name]
    options = {"block_size": 1 << 16} if form == "short" else {"block_size": 256}
    blob = pack(data, **options)
    header = header_of(blob)
    assert header["version"] == container.TRANSFORMS
    assert header["short"] == (form == "short")
    found = heads(blob)
    assert found
    assert {kind for _, head in found for kind in transforms.summary(head.regions)} == KINDS[name]
    assert unpack(blob) == data


@pytest.mark.parametrize("form", ["short", "long"])
def test_progress_counts_the_original_bytes_of_a_transformed_input(form):
    """The predictor codes the inflated stream, ten times the gzip member's size; progress
    is reported against the user's input, so it counts that input's bytes, never more."""
    data = INPUTS["gzip"]
    options = {"block_size": 1 << 16} if form == "short" else {"block_size": 256}
    for_compress, for_decompress = [], []
    blob = pack(data, progress=lambda n, bits: for_compress.append(n), **options)
    assert heads(blob)
    codec.decompress_stream(io.BytesIO(blob), io.BytesIO(),
                            progress=lambda n, bits: for_decompress.append(n))  # fmt: skip
    for reported in (for_compress, for_decompress):
        assert min(reported) >= 0
        assert sum(reported) == len(data)


def test_transforms_none_writes_version_6_without_records():
    for data in INPUTS.values():
        for block_size in (1 << 16, 1024):
            blob = pack(data, block_size=block_size, transforms=False)
            assert header_of(blob)["version"] == container.COMPACT
            assert heads(blob) == []
            assert unpack(blob) == data


def test_an_input_no_transform_changes_is_coded_as_version_6_codes_it():
    """The short form stays version 6's bytes; the long form differs only in its version
    byte (and so in its header's CRC32)."""
    short = pack(TEXT[:5000])
    assert short == pack(TEXT[:5000], transforms=False)
    long_auto, long_none = (
        pack(TEXT, block_size=4096),
        pack(TEXT, block_size=4096, transforms=False),
    )
    assert (header_of(long_auto)["version"], header_of(long_none)["version"]) == (7, 6)
    assert len(long_auto) == len(long_none)
    start = len(long_auto) - len(_after_header(long_auto))
    assert long_auto[start:] == long_none[start:]


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f.read()


def test_a_short_input_is_never_larger_with_transforms():
    """The short form codes both and keeps the shorter: here a gzip of random bytes, whose
    inflated data codes no better than its deflate bytes."""
    rng = np.random.default_rng(3)
    for data in (gzip.compress(rng.integers(0, 256, 3000, np.uint8).tobytes(), 9, mtime=0),
                 INPUTS["gzip"], INPUTS["x86"][:1500]):  # fmt: skip
        auto, none = pack(data), pack(data, transforms=False)
        assert len(auto) <= len(none)
        assert unpack(auto) == data


def test_frames_with_transforms_code_the_same_here_and_in_workers_and_slice():
    data = TEXT[:2000] + INPUTS["gzip"] + x86_program(2000) + TEXT[:3000]
    here = pack(data, block_size=1024, frame_size=8192, jobs=1)
    pooled = pack(data, block_size=1024, frame_size=8192, jobs=2)
    assert here == pooled
    assert len(heads(here)) >= 2
    out = io.BytesIO()
    codec.decompress_stream(io.BytesIO(pooled), out, jobs=2)
    assert out.getvalue() == data
    for start, end in ((0, len(data)), (2500, 9000), (8000, 8300), (len(data) - 5, len(data))):
        out = io.BytesIO()
        codec.decompress_range(io.BytesIO(here), out, start, end)
        assert out.getvalue() == data[start:end]


def test_mambazip_open_reads_version_7(tmp_path):
    data = TEXT[:1000] + INPUTS["zip of a gzip"] + TEXT[:1000]
    path = tmp_path / "a.mz"
    path.write_bytes(pack(data, block_size=1024, frame_size=4096))
    with mambazip.open(path) as f:
        assert f.read() == data
        f.seek(5000)
        assert f.read(100) == data[5000:5100]


def test_a_segment_spans_up_to_segment_bytes_and_the_rest_is_another(monkeypatch):
    monkeypatch.setattr(blocks, "SEGMENT", 4096)
    monkeypatch.setattr(codec, "SEGMENT", 4096)
    member = gzip.compress(TEXT[:6000], 9, mtime=0)
    assert len(member) < 4096
    data = member.ljust(4096, b" ") + member
    blob = pack(data, block_size=1024)
    # The raw deflate data is replaced; gzip's 10-byte header and 8-byte trailer stay.
    deflated = len(member) - 18
    streams = [head.stream_length for _, head in heads(blob)]
    assert streams == [4096 - deflated + 6000, len(member) - deflated + 6000]
    assert unpack(blob) == data


def test_a_deflate_bomb_stays_bytes():
    bomb = gzip.compress(bytes(80 << 20), 9, mtime=0)  # over deflate.Budget.max_inflated
    blob = pack(bomb, block_size=1 << 16)
    assert heads(blob) == [] and unpack(blob) == bomb


@pytest.mark.parametrize("form", ["short", "long"])
def test_a_damaged_transform_record_raises_a_mambazip_error(form):
    data = INPUTS["zlib in text"]
    blob = pack(data, block_size=1 << 16 if form == "short" else 1024)
    _, head = heads(blob)[0]
    raw = transforms.record.encode(head.regions)
    start = blob.index(raw)
    refused = 0
    for i in range(len(raw)):
        for bit in (0, 7):
            damaged = bytearray(blob)
            damaged[start + i] ^= 1 << bit
            try:
                # A flip may name other zlib parameters that remake the same bytes: the
                # region's CRC32 then holds, and the original comes back.
                assert unpack(bytes(damaged)) == data
            except MambazipError:
                refused += 1
    assert refused >= 2 * len(raw) - 4


def test_a_damaged_crc_in_the_record_is_a_checksum_error():
    data = INPUTS["zlib in text"]
    blob = pack(data, block_size=1024)
    _, head = heads(blob)[0]
    raw = transforms.record.encode(head.regions)
    region = head.regions[0]
    bad = dataclasses.replace(region, crc=region.crc ^ 1)
    damaged = blob.replace(raw, transforms.record.encode((bad, *head.regions[1:])))
    with pytest.raises(ChecksumError, match="restore"):
        unpack(damaged)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (0, 1, "outside its block"),
        (0, container.MAX_SEGMENT + 1, "bytes declared"),
        (8, 0, "stream of 0 bytes"),
        (8, container.MAX_STREAM + 1, "stream of"),
        (8, 1, "longer than the stream"),
        (12, 0, "record of 0 bytes"),
        (12, container.MAX_RECORD + 1, "record of"),
    ],
)
def test_a_segment_head_declaring_what_cannot_be_is_refused(field, value, message):
    blob = pack(INPUTS["zlib in text"], block_size=1024)
    at, _ = heads(blob)[0]
    damaged = blob[: at + field] + struct.pack("<I", value) + blob[at + field + 4 :]
    with pytest.raises((FormatError, ChecksumError), match=message):
        unpack(damaged)


def test_a_segment_stream_past_the_memory_limit_is_refused_before_it_is_decoded():
    """A head may declare a stream of up to container.MAX_STREAM bytes; the decoder holds
    it and the original beside the model, so the memory limit bounds them together."""
    blob = pack(INPUTS["zlib in text"], block_size=1024)
    _, head = heads(blob)[0]
    model = predict.memory_bytes(tiny(), None, blocks.CHUNK)
    needed = model + head.stream_length + len(INPUTS["zlib in text"])
    out = io.BytesIO()
    codec.decompress_stream(io.BytesIO(blob), out, memlimit=needed)
    assert out.getvalue() == INPUTS["zlib in text"]
    with pytest.raises(MemoryLimitError, match="transformed segment"):
        codec.decompress_stream(io.BytesIO(blob), io.BytesIO(), memlimit=needed - 1)


def test_the_cli_lists_the_transforms_and_a_damaged_record_is_one_line(run_cli, tmp_path,
                                                                        tiny_flags):  # fmt: skip
    path = tmp_path / "in.gz"
    path.write_bytes(INPUTS["gzip"])
    packed = run_cli("compress", *tiny_flags, "--mix", "cm", str(path))
    assert packed.exit_code == 0, packed.stderr
    mz = tmp_path / "in.gz.mz"
    listed = run_cli("info", str(mz))
    assert listed.exit_code == 0, listed.stderr
    line = next(x for x in listed.stdout.decode().splitlines() if "transform " in x)
    deflated = len(INPUTS["gzip"]) - 18  # gzip's 10-byte header and 8-byte trailer
    assert line.split() == ["transform", "deflate:", "1", "region,", str(deflated), "bytes",
                            "->", str(len(TEXT))]  # fmt: skip
    blob = bytearray(mz.read_bytes())
    _, head = heads(bytes(blob))[0]
    at = bytes(blob).index(transforms.record.encode(head.regions))
    blob[at + 3] ^= 0x10
    bad = tmp_path / "bad.gz.mz"
    bad.write_bytes(bytes(blob))
    failed = run_cli("decompress", str(bad))
    failed.error_line(1)
    assert not (tmp_path / "bad.gz").exists()
    none = run_cli("compress", *tiny_flags, "--mix", "cm", "--transforms", "none", "-c", str(path))
    assert none.exit_code == 0, none.stderr
    assert header_of(none.stdout)["version"] == container.COMPACT
    assert "transform" not in run_cli("info", "-", input=none.stdout).stdout.decode()


def test_the_prior_is_chosen_by_the_transformed_data():
    """A gzip of text after 2,000 zero bytes starts from the default preset's prior with
    transforms (the predictor codes mostly text), from the seeded init without them (a third
    of the bytes are control bytes)."""
    data = bytes(2000) + gzip.compress(TEXT, 9, mtime=0)
    assert not priors.looks_like_text(data)
    auto = mambazip.compress(data)
    none = mambazip.compress(data, transforms="none")
    assert header_of(auto)["model_sha256"] is not None
    assert header_of(none)["model_sha256"] is None
    assert mambazip.decompress(auto) == data
