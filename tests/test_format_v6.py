"""Format version 6: the compact container (a binary header naming a base of settings and
its prior, the short form of an input that is one block) and blocks of noise that the
predictor skips on both sides."""

import contextlib
import dataclasses
import io
import zlib

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip import blocks, codec, container, predict, priors
from mambazip.errors import ChecksumError, FormatError, MambazipError, VersionError
from mambazip.predictor import SMALL

TEXT = (b"The compact container costs bytes, not hundreds; noise is stored untouched.\n" * 60)[
    :4096
]


def noise(n, seed=5):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def tiny(mix="full"):
    settings = mambazip.resolve_settings("default", model=TINY_MODEL, mix=mix)
    return dataclasses.replace(settings, mix=dataclasses.replace(SMALL, mamba=mix == "full"))


def pack(data, settings, **options):
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(data), out, settings, **options)
    return out.getvalue()


def unpack(blob):
    out = io.BytesIO()
    codec.decompress_stream(io.BytesIO(blob), out)
    return out.getvalue()


def header_of(blob):
    return container.read_header(io.BytesIO(blob))


@pytest.mark.parametrize("preset", ["default", "fast", "max"])
def test_every_shipped_preset_is_named_by_its_base_alone(preset):
    """No settings diff: a preset that changes needs a new entry in V6_BASES."""
    header = container.compact_header(mambazip.resolve_settings(preset))
    flags = header[3]
    assert not flags & container.F_DIFF
    assert container.read_header(io.BytesIO(header + container.varint(0) + b"\0" + bytes(4)))[
        "settings"
    ] == mambazip.resolve_settings(preset)


def test_an_empty_input_of_the_default_preset_costs_at_most_12_bytes():
    blob = pack(b"", mambazip.resolve_settings("default"))
    assert len(blob) <= 12
    assert unpack(blob) == b""


@pytest.mark.parametrize("mix", ["full", "cm"])
@pytest.mark.parametrize("size", [1, 600, 4095])
def test_an_input_of_one_block_is_written_in_the_short_form_and_decodes(mix, size):
    data = (TEXT * 2)[:size]
    blob = pack(data, tiny(mix), block_size=4096)
    header = header_of(blob)
    assert (header["version"], header["short"], header["size"]) == (6, True, size)
    assert unpack(blob) == data


def test_the_short_form_holds_nothing_but_its_header_payload_and_check():
    """The header, the payload's length, the payload, CRC32: no block header, end or index."""
    data = noise(5000)
    settings = mambazip.resolve_settings("default")
    blob = pack(data, settings)
    header = container.compact_header(settings) + container.varint(len(data))
    assert blob == header + container.varint(len(data)) + data + (
        zlib.crc32(data) ^ zlib.crc32(header)
    ).to_bytes(4, "little")


def test_the_short_form_names_and_dates_its_input():
    blob = pack(TEXT[:300], tiny(), name="notes.txt", mtime=1_800_000_000)
    header = header_of(blob)
    assert (header["name"], header["mtime"]) == ("notes.txt", 1_800_000_000)
    assert codec.decompress_stream(io.BytesIO(blob), io.BytesIO()).name == "notes.txt"


def test_a_larger_input_is_written_in_the_long_form_and_decodes():
    data = TEXT * 3
    blob = pack(data, tiny(), block_size=4096, size=len(data))
    header = header_of(blob)
    assert (header["short"], header["block_size"], header["size"]) == (False, 4096, len(data))
    assert unpack(blob) == data


def test_a_user_model_is_named_by_its_digest_and_resume_is_kept():
    sha = "ab" * 32
    raw = container.compact_header(tiny(), sha, True) + container.varint(0) + b"\0" + bytes(4)
    header = header_of(raw)
    assert (header["model_sha256"], header["model_resume"]) == (sha, True)


@pytest.mark.parametrize("base", [0, 4, 5, 7])  # the default presets so far
def test_the_base_prior_is_named_without_its_digest(base):
    settings = mambazip.Settings.from_dict(container.V6_BASES[base][0])
    prior = container.V6_BASES[base][1]
    header = container.compact_header(settings, prior)
    # Magic, version, flags, the base's index: no diff, no digest.
    flags = container.F_PRIOR | (container.F_BASE if base else 0)
    index = container.varint(base) if base else b""
    assert header == container.SHORT_MAGIC + bytes([container.COMPACT, flags]) + index
    parsed = header_of(header + container.varint(0) + b"\0" + bytes(4))
    assert parsed["model_sha256"] == prior


# Today's default preset (level 7, promote, final_lr 1, no rerun, overlap, mix.bits, the five
# contexts, three weight sets, deterministic inputs, the found set by node, dead zone 8, the
# states, the match recovery, counter_limit 15 and the order-4 APM of 2026-12-07) naming its
# prior 31e2540a.
DEFAULT_BASE = 28
PRIOR_BASE = 29  # the same from its prior 31e2540a (preset "prior_train")
SMALL_PRIOR_BASE = 16  # its small-input counterpart's settings with that prior
BINARY_BASE = 30  # the default preset's settings for binary input (its "binary_mix")
FAST_BINARY_BASE = 31  # the fast preset's


def test_the_default_preset_is_its_base_and_names_it_and_its_prior_in_one_byte():
    settings = mambazip.resolve_settings("default")
    header = container.compact_header(settings, priors.preset_prior("default"))
    assert header[3] == container.F_BASE | container.F_PRIOR
    assert header[4:] == container.varint(DEFAULT_BASE)


def test_the_default_preset_without_a_prior_names_its_base_all_the_same():
    header = container.compact_header(mambazip.resolve_settings("default"))
    assert header[3] == container.F_BASE
    assert header[4:] == container.varint(DEFAULT_BASE)


@pytest.mark.parametrize(("preset", "base"), [("default", BINARY_BASE), ("fast", FAST_BINARY_BASE)])
def test_a_preset_on_binary_input_names_its_own_base_in_one_byte(preset, base):
    settings = mambazip.resolve_settings(preset, binary=True)
    assert settings != mambazip.resolve_settings(preset)
    header = container.compact_header(settings)
    assert header[3] == container.F_BASE
    assert header[4:] == container.varint(base)


def test_a_short_binary_input_of_the_default_preset_takes_its_small_counterpart():
    settings = mambazip.resolve_settings("default", binary=True)
    small = container.V6_BASES[container.SMALL_BASES[BINARY_BASE]][0]
    assert container.small_input_settings(settings, 100) == mambazip.Settings.from_dict(small)


def test_settings_of_two_entries_without_a_prior_name_the_lower_one():
    """Entries 12 and 14 differ only in the prior they name (the default preset's before
    mix.bits): without a prior, the header names 12."""
    assert container.V6_BASES[12][0] == container.V6_BASES[14][0]
    header = container.compact_header(mambazip.Settings.from_dict(container.V6_BASES[14][0]))
    assert header[3:] == bytes([container.F_BASE]) + container.varint(12)


def test_the_default_from_its_prior_is_its_own_base_in_one_byte():
    settings = mambazip.resolve_settings("default", from_prior=True)
    assert settings != mambazip.resolve_settings("default")
    header = container.compact_header(settings, priors.preset_prior("default"))
    assert header[3] == container.F_BASE | container.F_PRIOR
    assert header[4:] == container.varint(PRIOR_BASE)
    small = container.V6_BASES[container.SMALL_BASES[DEFAULT_BASE]][0]
    assert container.small_input_settings(settings, 100) == mambazip.Settings.from_dict(small)


def test_a_noise_block_is_stored_and_skipped_by_the_predictor_on_both_sides():
    """Text, noise, text in blocks of 4096 costs what text, text does, plus the noise and
    one block header (a run of skipped blocks is one): the predictor neither codes nor
    learns the noise."""
    settings = tiny()
    plain = pack(TEXT + TEXT, settings, block_size=4096)
    mixed = pack(TEXT + noise(8192) + TEXT, settings, block_size=4096)
    assert len(mixed) == len(plain) + 8192 + 8
    assert unpack(mixed) == TEXT + noise(8192) + TEXT


def test_skipped_blocks_are_marked_in_the_stream():
    blob = pack(TEXT + noise(4096), tiny(), block_size=4096)
    f = io.BytesIO(blob)
    header = container.read_header(f)
    kinds = [type(p) for n, p in container.frame_blocks(f, header) if n != "end"]
    assert kinds == [np.ndarray, container.Skipped]


def test_random_bytes_are_found_incompressible():
    assert blocks.Noise().incompressible(np.frombuffer(noise(65536), np.uint8))


@pytest.mark.parametrize(
    "data",
    [
        TEXT * 16,
        bytes(range(256)) * 256,  # every byte equally often, and every difference 1
        noise(1024) * 64,  # random, but repeating
        noise(4095),  # too short to tell
    ],
    ids=["text", "counter", "repeated-noise", "short"],
)
def test_what_a_model_can_gain_on_is_not_found_incompressible(data):
    assert not blocks.Noise().incompressible(np.frombuffer(data, np.uint8))


def test_noise_seen_in_an_earlier_block_is_not_found_incompressible():
    estimate, block = blocks.Noise(), np.frombuffer(noise(65536), np.uint8)
    assert estimate.incompressible(block)
    assert not estimate.incompressible(block)


def test_version_5_is_still_written_on_request_and_decodes():
    blob = pack(TEXT, tiny(), version=5)
    assert header_of(blob)["version"] == 5
    assert unpack(blob) == TEXT


def test_the_short_form_refuses_a_payload_longer_than_its_input():
    header = container.compact_header(tiny()) + container.varint(4)
    blob = header + container.varint(5) + bytes(5) + bytes(4)
    with pytest.raises(MambazipError, match="payload length"):
        unpack(blob)


def test_a_changed_mtime_is_caught_by_the_check():
    """The short form has no header CRC of its own: its check covers the header too."""
    settings = tiny()
    blob = bytearray(pack(TEXT[:300], settings, mtime=1_800_000_000))
    mtime_end = len(container.compact_header(settings, mtime=1_800_000_000))
    blob[mtime_end - 1] ^= 1  # the varint's last byte: still a valid, other date
    with pytest.raises(ChecksumError):
        unpack(bytes(blob))


@pytest.mark.parametrize("seed", range(4))
def test_mutated_headers_fail_cleanly_or_decode_to_the_original(seed):
    """1,000 mutations per run of the header bytes of short and long files (flips, extreme
    values, truncations, inserted endless varints): each is one of mambazip's errors, or
    decodes to the original."""
    rng = np.random.default_rng(seed)
    data_short, data_long = TEXT[:700], TEXT * 2
    originals = {
        pack(data_short, tiny("cm"), name="a.txt", mtime=5): data_short,
        pack(data_long, tiny("cm"), block_size=4096, size=len(data_long)): data_long,
    }
    for blob, data in originals.items():
        head = len(blob) - 4 if len(blob) < 400 else 48
        for _ in range(250):
            mutated = bytearray(blob)
            kind = rng.integers(4)
            at = int(rng.integers(head))
            if kind == 0:
                mutated[at] ^= 1 << int(rng.integers(8))
            elif kind == 1:
                mutated[at] = int(rng.choice([0, 0x7F, 0x80, 0xFF]))
            elif kind == 2:
                mutated = mutated[:at]
            else:
                mutated[at:at] = b"\xff" * int(rng.integers(1, 12))
            with contextlib.suppress(MambazipError):
                assert unpack(bytes(mutated)) == data


def test_the_long_form_codes_every_block_as_version_5_does():
    """Only the header changes: the frames (blocks and end) and the index are version 5's
    bytes, so no file that skips nothing codes worse than before."""
    data = TEXT * 3
    v5, v6 = pack(data, tiny(), block_size=4096, version=5), pack(data, tiny(), block_size=4096)
    start5, start6 = (len(blob) - len(_after_header(blob)) for blob in (v5, v6))
    assert v6[start6:] == v5[start5:]
    assert start6 < start5


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f.read()


def test_a_frame_of_noise_alone_is_coded_here_and_the_same_as_by_workers():
    data = TEXT + noise(16384) + TEXT
    here = pack(data, tiny(), block_size=4096, frame_size=8192, jobs=1)
    pooled = pack(data, tiny(), block_size=4096, frame_size=8192, jobs=2)
    assert here == pooled
    assert unpack(pooled) == data


def test_a_compact_file_of_a_future_version_names_both_versions():
    blob = bytearray(pack(TEXT[:100], tiny()))
    blob[2] = container.VERSION + 1
    with pytest.raises(VersionError, match=f"{container.VERSION + 1}.*{container.VERSION}"):
        unpack(bytes(blob))


def test_a_flipped_bit_in_any_payload_byte_of_the_short_form_raises_a_mambazip_error():
    """Every byte of a 1000-byte input's coded payload in turn, its top bit flipped: the
    decoder raises one of mambazip's errors (which the CLI reports in one line), or, where
    the flip changes nothing the check sees, gives the original."""
    data = (TEXT * 2)[:1000]
    settings = tiny()
    blob = pack(data, settings)
    f = io.BytesIO(blob)
    container.read_header(f)
    m = container.read_varint(f, "payload length", len(data))
    start = f.tell()
    for at in range(start, start + m):
        damaged = bytearray(blob)
        damaged[at] ^= 0x80
        with contextlib.suppress(MambazipError):
            assert unpack(bytes(damaged)) == data


def test_a_short_input_is_coded_with_tables_sized_to_it():
    settings = mambazip.resolve_settings("default")
    small = container.short_settings(settings, 1000)
    assert predict.memory_bytes(small) < predict.memory_bytes(settings) / 4
    assert small.model == settings.model and small.train == settings.train


def test_tables_are_never_grown_past_the_settings_for_a_long_input():
    settings = tiny()
    assert container.short_settings(settings, container.MAX_BLOCK - 1) == settings


def test_a_preset_short_input_codes_with_its_small_input_counterpart():
    settings = mambazip.resolve_settings("default")
    small = mambazip.Settings.from_dict(container.V6_BASES[container.SMALL_BASES[DEFAULT_BASE]][0])
    # The counterpart is the default preset with fewer, faster-learning context models (none
    # of its extra contexts, weight sets and deterministic inputs), its Mamba outside the
    # final combiner, and the rerun after each update kept (the settings measured on short
    # inputs before level 4: bench-2026-12-03-small-inputs.md), coding nibbles (it predates
    # mix.bits; a short input's time is mostly start-up).
    assert small.model == settings.model
    assert small.train == dataclasses.replace(settings.train, rerun=True, overlap=False)
    assert small.mix == dataclasses.replace(settings.mix, max_order=4, sparse=False,
                                            combiner_lr=16, final_lr=8, level=0,
                                            promote=False, bits=False, contexts=(),
                                            sets=(), det_inputs=0,
                                            found_node=False, dead_zone=0, states=0,
                                            match_recover=0, counter_limit=14,
                                            sse_order4=False)  # fmt: skip
    for n in (1, container.SMALL_INPUT):
        assert container.small_input_settings(settings, n) == small
    for n in (0, container.SMALL_INPUT + 1):
        assert container.small_input_settings(settings, n) is settings
    for other in (dataclasses.replace(settings, seed=1), mambazip.resolve_settings("fast"),
                  mambazip.resolve_settings("default", mix="cm"), small):  # fmt: skip
        assert container.small_input_settings(other, 100) is other


def test_the_small_input_counterpart_is_chosen_only_where_a_preset_chose_the_settings():
    data = TEXT[:300]
    settings = mambazip.resolve_settings("default")
    counterpart = container.SMALL_BASES[DEFAULT_BASE]
    small = mambazip.Settings.from_dict(container.V6_BASES[counterpart][0])
    chosen = mambazip.compress(data)  # the preset by name, from its prior (text)
    assert header_of(chosen)["settings"] == small
    # Named by the entry that holds those settings with the preset's prior, digest-free.
    assert container.V6_BASES[SMALL_PRIOR_BASE] == (
        container.V6_BASES[counterpart][0],
        priors.preset_prior("default"),
    )
    assert chosen[3] == container.F_BASE | container.F_PRIOR
    assert chosen[4] == SMALL_PRIOR_BASE
    assert mambazip.decompress(chosen) == data
    given = pack(data, settings)  # settings given: kept, as every earlier file was written
    assert header_of(given)["settings"] == settings and unpack(given) == data
    assert len(chosen) < len(given)
    longer = (TEXT * 3)[: container.SMALL_INPUT + 1]
    assert header_of(pack(longer, settings, small_input=True))["settings"] == settings


def test_a_stored_name_with_a_directory_part_is_refused():
    raw = container.compact_header(tiny(), name="../../etc/evil") + container.varint(0)
    with pytest.raises(FormatError, match="stored file name"):
        header_of(raw + b"\0" + bytes(4))
