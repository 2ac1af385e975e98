"""mix.bits: from format 5, the mixing predictor may code a byte as 8 binary decisions, each
node of the byte's path predicted as its bit is due (8 nodes a byte, where the nibbles
evaluate 30), each through constriction's range coder with a two-symbol table."""

import dataclasses
import io
import json
import math
import struct
import zlib

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip import codec, container
from mambazip.coder import Decoder, Encoder
from mambazip.errors import ConfigError, FormatError
from mambazip.kernels.step import FREQ_BITS, FREQ_TOTAL
from mambazip.predictor import SMALL, ContextMixer
from mambazip.predictor.loop import (
    ROW_FOUND,
    V_BMAPS,
    V_HMAPS,
    V_MAPS,
    V_MMAP,
    V_P12,
    V_RMAPS,
    V_SEL,
    V_W,
    V_WF,
    view,
)

TEXT = (b"The bit coder predicts only the nodes on the byte's path, one bit at a time.\n" * 30)[
    :1500
]
BITS = dataclasses.replace(SMALL, bits=True)
FOUND_NODE = dataclasses.replace(BITS, found_sel=True, found_node=True)
# The nibble coding with every node predicted in full and every second slot looked up: what
# the bit coding computes at the nodes of the byte's path; at level 0 and at the presets'
# level 7 (bit histories, the last bytes per slot and their runs, 16-bit probabilities).
ALL_FULL = dataclasses.replace(SMALL, full_log=24, slot_log=24)
LEVEL7 = dataclasses.replace(ALL_FULL, level=7)
# The learned state the two codings must share: slots and APMs (all of u16), the adaptive
# maps, the combiners' weights and the match model's map.
LEARNED = (V_MAPS, V_HMAPS, V_RMAPS, V_BMAPS, V_W, V_WF, V_MMAP)


def pdfs_for(data, mamba, seed):
    if not mamba:
        return None
    rng = np.random.default_rng(seed)
    return (rng.random((data.size + 1, 256)) ** 4).astype(np.float32)


def path(byte):
    """The byte tree's nodes on byte's path, the root first."""
    return [(int(byte) | 256) >> (8 - d) for d in range(8)]


def bits_of(data):
    return np.unpackbits(data)


def coded(cfg, data, pdfs):
    """The range coder's words of data (one chunk) coded bit by bit, and the encoder's tables
    and probabilities (decode_run's tests, for nibbles and bits alike, are in
    tests/test_format_v5.py)."""
    enc = ContextMixer(cfg, nibbles=True)
    enc.prime(pdfs[0] if cfg.mamba else None)
    freqs, p = enc.advance(data, None if pdfs is None else pdfs[1:])
    coder = Encoder()
    coder.encode(bits_of(data), freqs.reshape(-1, 2))
    return coder.finish(), freqs, p


@pytest.mark.parametrize("cfg", [ALL_FULL, LEVEL7], ids=["level0", "level7"])
@pytest.mark.parametrize("mamba", [False, True])
def test_each_path_node_gets_the_probability_of_the_nibble_coding_with_every_node_full(mamba, cfg):
    """The bit coding is the nibble coding's mixing state and learning, with every node in
    full and every second slot looked up: byte by byte, the 8 path nodes' probabilities are
    equal, and so are the tables both learn."""
    data = np.frombuffer(TEXT, np.uint8)
    pdfs = pdfs_for(data, mamba, 5)
    nib = ContextMixer(dataclasses.replace(cfg, mamba=mamba), nibbles=True)
    bit = ContextMixer(dataclasses.replace(cfg, mamba=mamba, bits=True), nibbles=True)
    assert bit.bits and not nib.bits
    for m in (nib, bit):
        m.prime(pdfs[0] if mamba else None)
    nib_p12 = view(nib.buffers, nib.offs, V_P12)
    bit_p12 = view(bit.buffers, bit.offs, V_P12)
    for i, byte in enumerate(data):
        nodes = path(byte)
        want = nib_p12[nodes[:4]].tolist()
        nib.advance_nibble(int(byte) >> 4)
        want += nib_p12[nodes[4:]].tolist()
        pdf = None if pdfs is None else pdfs[i + 1 : i + 2]
        bit.advance(data[i : i + 1], pdf)
        assert bit_p12[nodes].tolist() == want, i
        nib.advance_byte(byte, None if pdfs is None else pdfs[i + 1])
    for kind in ("u8", "u16"):  # histories, runs, slots, APMs
        assert np.array_equal(bit.buffers[kind], nib.buffers[kind]), kind
    for v in LEARNED:
        assert np.array_equal(view(bit.buffers, bit.offs, v), view(nib.buffers, nib.offs, v)), v


def test_a_bytes_code_length_is_exactly_the_product_of_its_8_node_probabilities():
    """Float64 reference: bit d's table is {2^24 - r, r} with r the node's 16-bit probability
    scaled to 24 bits, with no rounding, and the encoder's p is the product over the path."""
    data = np.frombuffer(TEXT, np.uint8)
    enc = ContextMixer(BITS, nibbles=True)
    enc.prime()
    p12 = view(enc.buffers, enc.offs, V_P12)
    pbits = 16 if BITS.wide else 12
    for i, byte in enumerate(data[:300]):
        freqs, p = enc.advance(data[i : i + 1])
        exact = 0.0
        for d, node in enumerate(path(byte)):
            q = int(p12[node]) / 2.0**pbits
            one = (int(byte) >> (7 - d)) & 1
            assert freqs[0, 2 * d + 1] == int(p12[node]) << (FREQ_BITS - pbits)
            assert freqs[0, 2 * d] + freqs[0, 2 * d + 1] == FREQ_TOTAL
            assert 1 <= freqs[0, 2 * d + 1] < FREQ_TOTAL
            exact -= math.log2(q if one else 1.0 - q)
        assert math.isclose(-math.log2(p[0]), exact, rel_tol=1e-12, abs_tol=1e-12), i


@pytest.mark.parametrize("base", [BITS, FOUND_NODE], ids=["bits", "found_node"])
@pytest.mark.parametrize("mamba", [False, True])
def test_decode_byte_decodes_each_bit_under_the_tables_the_encoder_coded_with(mamba, base):
    cfg = dataclasses.replace(base, mamba=mamba)
    data = np.frombuffer(TEXT, np.uint8)
    pdfs = pdfs_for(data, mamba, 7)
    words, freqs, p = coded(cfg, data, pdfs)
    dec = ContextMixer(cfg, nibbles=True)
    dec.prime(pdfs[0] if mamba else None)
    decoder = Decoder(words)
    for i, byte in enumerate(data):
        assert dec.decode_byte(decoder) == byte, i
        assert np.array_equal(dec.freq, freqs[i]), i
        dec.advance_byte(byte, None if pdfs is None else pdfs[i + 1])
    assert math.isclose(decoder.cost[0], -np.log2(p).sum(), rel_tol=1e-12)


@pytest.mark.parametrize("found_node", [False, True])
def test_found_set_rows_along_a_path(found_node):
    """After "abcabcabc", orders 0-6 and the two sparse contexts have seen their context,
    always followed by "a"; the two word contexts have not ("abcabcabc" is a new word). "b"
    (0x62) leaves "a"'s path at depth 7, a node that order 0 alone has seen (after "a" came
    "b" and "c"). found_node: the row is by half the models that have seen the node: 9 // 2
    = 4 above it, 1 // 2 = 0 there; without it, by the 9 models that found the slot."""
    cfg = dataclasses.replace(FOUND_NODE, found_node=found_node)
    mixer = ContextMixer(cfg, nibbles=True)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abcabcabcb", np.uint8))
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    rows = [int(sel[node, 3]) - ROW_FOUND for node in path(0x62)]
    seen = [4] * 7 + [0] if found_node else [9] * 8
    assert rows == [8 * n + d for d, n in enumerate(seen)]


def test_found_node_leaves_the_nibble_coding_as_it_was():
    """Versions 3 and 4 hold a preset's settings without mix.bits: found_node stays in them
    and the nibbles keep counting the models that know their slot."""
    data = np.frombuffer(TEXT[:600], np.uint8)
    freqs = []
    for found_node in (False, True):
        cfg = dataclasses.replace(SMALL, found_sel=True, found_node=found_node)
        mixer = ContextMixer(cfg, nibbles=True)
        mixer.prime()
        freqs.append(mixer.advance(data)[0])
    assert np.array_equal(freqs[0], freqs[1])


def test_found_node_without_the_found_set_codes_as_without_it():
    """Level 0 has no found set: found_node has nothing to select and changes no bit."""
    data = np.frombuffer(TEXT[:600], np.uint8)
    freqs = []
    for found_node in (False, True):
        mixer = ContextMixer(dataclasses.replace(BITS, found_node=found_node), nibbles=True)
        mixer.prime()
        freqs.append(mixer.advance(data)[0])
    assert np.array_equal(freqs[0], freqs[1])


def test_the_nibble_calls_are_refused_under_bits():
    m = ContextMixer(BITS, nibbles=True)
    m.prime()
    with pytest.raises(ValueError, match="bits"):
        m.advance_nibble(3)


def tiny_bits(mamba):
    settings = mambazip.resolve_settings("default", model=TINY_MODEL, mix="full")
    mix = dataclasses.replace(SMALL, mamba=mamba, bits=True)
    return dataclasses.replace(settings, mix=mix)


@pytest.mark.parametrize("version", [5, 6])
@pytest.mark.parametrize("mamba", [False, True])
def test_bits_round_trip_in_every_version_that_codes_mixing_by_paths(mamba, version):
    settings = tiny_bits(mamba)
    data = TEXT + bytes(range(256)) + TEXT[:200]
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(data), out, settings, version=version)
    blob = out.getvalue()
    nib = io.BytesIO()
    codec.compress_stream(io.BytesIO(data), nib, dataclasses.replace(
        settings, mix=dataclasses.replace(settings.mix, bits=False)), version=version)  # fmt: skip
    assert blob != nib.getvalue()
    back = io.BytesIO()
    codec.decompress_stream(io.BytesIO(blob), back)
    assert back.getvalue() == data


def test_versions_3_and_4_cannot_hold_bits():
    """Not written (an empty input, which codes no byte, keeps the mix without bits: tests/
    test_format_v5.py) and refused when read."""
    settings = tiny_bits(False)
    for version in (3, 4):
        with pytest.raises(ConfigError, match="version 5"):
            codec.compress_stream(io.BytesIO(TEXT), io.BytesIO(), settings, version=version)
    # A version-3 header that claims bits (its checksum right) is refused before any block.
    nibbles = dataclasses.replace(settings, mix=dataclasses.replace(settings.mix, bits=False))
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(TEXT), out, nibbles, version=3)
    blob = out.getvalue()
    _, version, n = struct.unpack("<8sHI", blob[:14])
    assert version == 3
    header = json.loads(blob[14 : 14 + n])
    header["settings"]["mix"]["bits"] = True
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    claimed = struct.pack("<8sHI", container.MAGIC, 3, len(raw)) + raw
    claimed += struct.pack("<I", zlib.crc32(raw)) + blob[14 + n + 4 :]
    with pytest.raises(FormatError, match="bits in a version 3 file"):
        container.read_header(io.BytesIO(claimed))
    with pytest.raises(FormatError, match="bits in a version 3 file"):
        codec.decompress_stream(io.BytesIO(claimed), io.BytesIO())
