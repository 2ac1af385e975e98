"""Format version 3 (mambazip/container.py): stored blocks, the stored name, mtime and size,
the short header of an empty stream, concatenated streams, and the decoder's refusal to run
on for a block's declared length when its words cannot hold that many bytes."""

import dataclasses
import io
import json
import struct
import zlib

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip import codec, container
from mambazip.errors import FormatError, MemoryLimitError
from mambazip.kernels.segment import segment_sizes
from mambazip.predict import Predictor, memory_bytes

EXTRAS = {"name": "notes.txt", "mtime": 1_700_000_000, "size": None}


def tiny(**train):
    return mambazip.resolve_settings(model=TINY_MODEL, train=train or None)


def tiny_mamba(**train):
    """The Mamba alone: the settings versions 1 and 2 can describe."""
    return mambazip.resolve_settings(model=TINY_MODEL, train=train or None, mix="none")


def compress(data, settings, block_size=container.DEFAULT_BLOCK, **extras):
    """The JSON header's layouts (versions 3 to 5); version 6 has tests/test_format_v6.py."""
    out = io.BytesIO()
    extras.setdefault("version", 5)
    codec.compress_stream(io.BytesIO(data), out, settings, block_size, **extras)
    return out.getvalue()


def decompress(blob, **options):
    out = io.BytesIO()
    stats = codec.decompress_stream(io.BytesIO(blob), out, **options)
    return out.getvalue(), stats


def blocks(blob):
    """(n_bytes, payload) of every block of a one-stream file."""
    f = io.BytesIO(blob)
    header = container.read_header(f)
    return [b for b in container.read_blocks(f, header["block_size"], header["version"])][:-1]


def random_bytes(n, seed=7):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_incompressible_block_is_stored_raw_and_grows_the_file_by_its_framing_only():
    data = random_bytes(20_000)
    blob = compress(data, tiny(), **EXTRAS)
    kinds = [type(payload) for _, payload in blocks(blob)]
    assert kinds == [bytes]
    one_byte = compress(b"y", tiny(), **EXTRAS)  # one byte costs more coded than raw
    assert len(blob) - len(data) == len(one_byte) - 1
    assert decompress(blob)[0] == data


def test_stored_and_coded_blocks_mix_in_one_file_and_the_model_learns_both():
    text = b"the decoder learns a stored block as the encoder did. " * 120
    data = text + random_bytes(len(text)) + text
    blob = compress(data, tiny(), block_size=len(text), **EXTRAS)
    kinds = {type(payload) for _, payload in blocks(blob)}
    assert kinds == {bytes, np.ndarray}
    assert decompress(blob)[0] == data


def test_files_without_version_3_fields_keep_their_older_version_and_store_nothing():
    data = random_bytes(5000)
    settings = tiny_mamba()
    blob = compress(data, settings)
    assert struct.unpack_from("<H", blob, 8)[0] == container.format_version(settings) < 3
    assert all(isinstance(payload, np.ndarray) for _, payload in blocks(blob))


def test_name_mtime_and_size_come_back_from_the_header():
    data = b"a file with a name\n" * 10
    blob = compress(data, tiny(), name="notes.txt", mtime=1_700_000_000, size=len(data))
    seen = []
    out, stats = decompress(blob, on_header=seen.append)
    assert out == data
    assert (stats.name, stats.mtime) == ("notes.txt", 1_700_000_000)
    assert (seen[0]["name"], seen[0]["mtime"], seen[0]["size"]) == (
        "notes.txt",
        1_700_000_000,
        len(data),
    )


def test_empty_input_gets_a_short_header_and_decodes_to_nothing():
    blob = compress(b"", tiny(), **EXTRAS)
    assert len(blob) < 100
    out, stats = decompress(blob)
    assert out == b"" and stats.original_bytes == 0 and stats.name == "notes.txt"


def test_concatenated_streams_decode_as_one_output():
    first, second = b"first stream\n" * 9, b"second, other settings\n" * 7
    blob = (
        compress(first, tiny(), **EXTRAS)
        + compress(second, tiny(lr=0.002))
        + compress(b"", tiny(), **EXTRAS)
    )
    out, stats = decompress(blob)
    assert out == first + second
    assert stats.original_bytes == len(first) + len(second)
    assert stats.compressed_bytes == len(blob)


def test_data_after_the_last_stream_is_a_corrupt_file():
    blob = compress(b"some data" * 5, tiny(), **EXTRAS) + b"junk"
    with pytest.raises(FormatError, match="unexpected data after the end"):
        decompress(blob)


def bytewise(settings):
    """settings as versions 3 and 4 can hold them: their mixing codes whole bytes, not the
    bits (mix.bits) of today's presets."""
    if settings.mix is None:
        return settings
    return dataclasses.replace(settings, mix=dataclasses.replace(settings.mix, bits=False))


def hostile_block_file(n_blocks, n_bytes, words=b"", settings=None, framed=False):
    """A version-3 file whose blocks each declare n_bytes but carry only ``words``
    (``framed``: the one frame of a version-5 file, mixing coded by nibbles)."""
    settings = settings if framed else bytewise(settings or tiny())
    head = io.BytesIO()
    container.write_header(head, settings or tiny(), container.MAX_BLOCK, extras=EXTRAS,
                           frame_size=0 if framed else None, nibbles=framed)  # fmt: skip
    block = struct.pack("<II", n_bytes, len(words) // 4) + words
    return head.getvalue() + block * n_blocks + struct.pack("<IQI", 0, n_blocks * n_bytes, 0)


# (words, bytes declared): mixed, a block is refused before decoding once its bytes at the
# floor (0.00015 bits each with level 4's 16-bit probabilities) cost more than its words hold.
@pytest.mark.parametrize(("mix", "words", "n_bytes"), [("none", 200, 65536), ("full", 2, 1 << 20)])
def test_blocks_that_declare_more_bytes_than_their_words_hold_stop_at_once(mix, words, n_bytes):
    """The Mamba alone: decoding stops once the bytes cost more than the words hold; mixed:
    the block is refused before decoding (every byte costs at least min_byte_bits)."""
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix=mix)
    decoded = []
    with pytest.raises(FormatError, match="than its data can hold"):
        decompress(hostile_block_file(words, n_bytes, settings=settings),
                   progress=lambda n, bits: decoded.append(n))  # fmt: skip
    assert decoded == [], "the decoder ran on for the declared length"
    with pytest.raises(FormatError, match="than its data can hold"):
        decompress(hostile_block_file(1, 1 << 24, words=b"\x5a" * 64, settings=settings))


def test_a_nibble_coded_block_that_declares_more_bytes_than_its_words_hold_is_refused():
    """Version 5: the mixer's floor per byte holds for two nibble tables too, so the block
    is refused before decoding."""
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="full")
    decoded = []
    with pytest.raises(FormatError, match="than its data can hold"):
        decompress(hostile_block_file(2, 1 << 20, settings=settings, framed=True),
                   progress=lambda n, bits: decoded.append(n))  # fmt: skip
    assert decoded == []


def _cm_at_level(level):
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="cm")
    return dataclasses.replace(settings, mix=dataclasses.replace(settings.mix, level=level))


@pytest.mark.parametrize("level", [3, 4])  # 12-bit node probabilities, then 16-bit ones
def test_the_nibble_coded_floor_on_a_bytes_code_length_holds_for_a_long_run(level):
    data = np.zeros(20_000, dtype=np.uint8)
    predictor = Predictor(_cm_at_level(level), nibbles=True)
    _, p = predictor.advance(data)
    assert (-np.log2(p)).min() > predictor.min_byte_bits


@pytest.mark.parametrize(("level", "floor"), [(3, 0.0025), (4, 0.00015)])
def test_the_mixers_floor_on_a_bytes_code_length_holds_for_a_long_run(level, floor):
    """The floor the refusal rests on: a run of one byte, the cheapest thing there is to
    code, costs more than 0.0025 bits per byte in the mixer's frequencies, and more than
    0.00015 with level 4's 16-bit node probabilities."""
    data = np.zeros(20_000, dtype=np.uint8)
    predictor = Predictor(_cm_at_level(level))
    assert predictor.min_byte_bits == floor
    _, p = predictor.advance(data)
    assert (-np.log2(p)).min() > predictor.min_byte_bits


def test_a_long_run_of_one_byte_decodes_under_16_bit_probabilities():
    """Level 4 codes a long run below the 12-bit floor (about 0.0002 bits a byte): a block
    of 64 KiB then holds fewer words than 0.0025 bits a byte would need, and the decoder
    must not refuse it (it did while the floor ignored the probability width)."""
    data = bytes(4 << 16)  # four blocks: from the second on, each codes in a word or two
    blob = compress(data, _cm_at_level(4), version=6)
    assert decompress(blob)[0] == data


def test_the_code_length_bound_holds_for_real_blocks_at_both_extremes():
    """The bound the decoder enforces (32 bits of code length per word, plus the coder's
    state) is never reached by what the encoder writes: random bytes (the most bits per
    byte) and one repeated byte (the fewest) both decode."""
    for data in (random_bytes(30_000), b"\x00" * 30_000):
        blob = compress(data, tiny())
        assert decompress(blob)[0] == data


def with_header(blob, header):
    (length,) = struct.unpack_from("<I", blob, 10)
    raw = json.dumps(header).encode()
    rest = blob[14 + length + 4 :]
    return blob[:10] + struct.pack("<I", len(raw)) + raw + struct.pack("<I", zlib.crc32(raw)) + rest


def header_of(blob):
    (length,) = struct.unpack_from("<I", blob, 10)
    return json.loads(blob[14 : 14 + length])


def test_deeply_nested_header_json_is_refused_without_recursing():
    blob = compress(b"nested", tiny(), **EXTRAS)
    raw = b"[" * 100_000 + b"]" * 100_000
    bad = blob[:10] + struct.pack("<I", len(raw)) + raw + struct.pack("<I", zlib.crc32(raw))
    with pytest.raises(FormatError, match="nested deeper"):
        decompress(bad)


@pytest.mark.parametrize("value", [True, 1.5, "65536", [1]])
def test_mistyped_block_size_is_refused(value):
    blob = compress(b"typed", tiny(), **EXTRAS)
    with pytest.raises(FormatError, match="block size"):
        decompress(with_header(blob, {**header_of(blob), "block_size": value}))


@pytest.mark.parametrize(
    "field,value",
    [("name", "../etc/passwd"), ("name", ""), ("name", 7), ("mtime", -1), ("mtime", True),
     ("mtime", 2**63 - 1), ("size", "big"), ("size", 2**63)],
)  # fmt: skip
def test_bad_stored_name_mtime_or_size_is_refused(field, value):
    blob = compress(b"fields", tiny(), **EXTRAS)
    with pytest.raises(FormatError, match="corrupt header"):
        decompress(with_header(blob, {**header_of(blob), field: value}))


def test_version_1_or_2_file_with_version_3_fields_is_corrupt():
    blob = compress(b"old", tiny_mamba())
    with pytest.raises(FormatError, match=r"in a version [12] file"):
        decompress(with_header(blob, {**header_of(blob), "name": "x"}))


def hostile_model_header(blob, n_layer):
    """blob's header asking for d_model 2 x n_layer, d_inner 16384, d_conv 16, bptt 1024."""
    header = header_of(blob)
    # Version 3 stores what differs from container.V3_BASE: these fields override it.
    header["settings"].setdefault("model", {}).update(
        d_model=2, n_layer=n_layer, d_inner=16384, d_conv=16, d_state=1, dt_rank=1
    )
    header["settings"].setdefault("train", {})["bptt"] = 1024
    return with_header(blob, header)


def test_the_fuzzers_15m_parameter_header_is_refused_by_the_parameter_bound():
    """The fuzzer's 4,100-byte file: d_model 2 x 32 layers (15 M parameters), which made the
    decoder allocate gigabytes or work for minutes."""
    blob = compress(b"x" * 100, tiny(), **EXTRAS)
    with pytest.raises(FormatError, match="parameters"):
        decompress(hostile_model_header(blob, 32))


def test_a_header_that_needs_more_memory_than_the_limit_is_refused_before_allocating():
    """8 layers: 3.8 M parameters, within the bound, but its TBPTT buffers of 1024 bytes and
    the mixing tables need about 1 GiB."""
    blob = compress(b"x" * 100, tiny(), **EXTRAS)
    with pytest.raises(MemoryLimitError, match="--memlimit"):
        decompress(hostile_model_header(blob, 8), memlimit=512 << 20)


def test_memlimit_below_what_the_settings_need_is_refused_on_both_sides():
    settings = tiny()
    need = memory_bytes(settings)
    with pytest.raises(MemoryLimitError):
        compress(b"data", settings, memlimit=need - 1)
    blob = compress(b"data", settings, memlimit=need)
    with pytest.raises(MemoryLimitError):
        decompress(blob, memlimit=need - 1)
    assert decompress(blob, memlimit=need)[0] == b"data"


@pytest.mark.parametrize(
    "train",
    [{"bptt": 1}, {"bptt": 16},
     {"bptt": 4, "horizon": 32, "replay_every": 64, "replay_window": 1000}],
    ids=["bptt1", "bptt16", "horizon-replay"],
)  # fmt: skip
def test_memory_estimate_covers_every_array_the_mamba_allocates(train):
    settings = mambazip.resolve_settings(model=TINY_MODEL, train=train, mix="none")
    learner = Predictor(settings).learner
    m = learner.model
    arrays = [m.params.flat, learner.grad, learner.adam_m, learner.adam_v, m.conv_state,
              m.ssm_state, m.A, m.work, learner.lrs]  # fmt: skip
    if learner.seg is not None:
        arrays += [learner._seg_ints, learner._seg_floats, learner._rep_ints,
                   learner._rep_floats, learner.plan]  # fmt: skip
    overlap = learner._overlap
    if overlap is not None:  # the preset's overlapped updates: the second buffers
        _, ints, floats = overlap.segs[1]
        arrays += [overlap.theta[1], overlap.A[1], ints, floats, overlap.conv_scratch,
                   overlap.ssm_scratch, overlap.scratch_counters]  # fmt: skip
    # The bptt=1 scratch is a one-token segment (Model.__init__), held through its views.
    n_ints, n_floats = segment_sizes(m.dims, 1, 1)
    allocated = sum(a.nbytes for a in arrays) + 8 * n_ints + 4 * n_floats
    estimate = memory_bytes(settings)
    chunk_tables = 4096 * 256 * 8 + 4096 * 16
    assert allocated <= estimate - chunk_tables <= allocated + 4096


def test_version_3_header_stores_only_what_differs_from_the_baseline():
    default = bytewise(mambazip.resolve_settings("default"))
    other = mambazip.resolve_settings("fast", mix="none")
    assert container.settings_from_diff(container.settings_diff(default)) == default
    assert container.settings_from_diff(container.settings_diff(other)) == other
    assert container.settings_diff(other)["mix"] is None
    blob = compress(b"x", default, name="a", mtime=1, version=3)
    stored = header_of(blob)["settings"]
    assert stored == container.settings_diff(default)
    # Every stored field differs from the baseline; none of the baseline's others is there.
    for section in ("model", "train", "mix"):
        for key, value in stored.get(section, {}).items():
            assert container.V3_BASE[section].get(key, object()) != value, (section, key)
    # A preset far from the baseline still stores a small part of its settings: the default
    # of V6_BASES entry 18 (before the default took more contexts and sets) in under a quarter.
    preset = bytewise(mambazip.Settings.from_dict(container.V6_BASES[18][0]))
    full = json.dumps(preset.to_dict(), separators=(",", ":"))
    diff = container.settings_diff(preset)
    assert len(json.dumps(diff, separators=(",", ":"))) < len(full) // 4


@pytest.mark.parametrize("stored", [[], {"model": []}, {"mix": 3}, {"extra": {}}])
def test_malformed_version_3_settings_are_refused(stored):
    blob = compress(b"diff", tiny(), **EXTRAS)
    with pytest.raises(FormatError, match="corrupt header"):
        decompress(with_header(blob, {**header_of(blob), "settings": stored}))
