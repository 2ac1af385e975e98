"""Format version 5: the mixing predictor codes a byte as two 16-symbol nibbles, evaluating
only the byte's path (15 nodes for the high nibble, then the 15 under it), with the code
length of bitwise coding; older versions keep coding all 255 nodes."""

import dataclasses
import io
import math

import numpy as np
import pytest
from conftest import TINY_FLAGS, TINY_MODEL

import mambazip
from mambazip import checkpoint, codec, container
from mambazip.coder import Decoder, Encoder
from mambazip.kernels.step import FREQ_TOTAL
from mambazip.predictor import SMALL, ContextMixer
from mambazip.predictor.context import NODE2
from mambazip.predictor.loop import V_P12, nibble_table, view

TEXT = (b"The nibble coder codes the high nibble, then the low nibble under it.\n" * 30)[:1500]


def noise(n, seed=3):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def tiny(mix="full", preset="default"):
    return mambazip.resolve_settings(preset, model=TINY_MODEL, mix=mix)


def small(mix):
    """The tiny model with the small tables of predictor.SMALL."""
    settings = tiny(mix)
    return dataclasses.replace(settings, mix=dataclasses.replace(SMALL, mamba=mix == "full"))


def pack(data, settings, **options):
    """Written as version 5 (version 6 codes the same nibbles in its compact container)."""
    out = io.BytesIO()
    options.setdefault("version", 5)
    codec.compress_stream(io.BytesIO(data), out, settings, **options)
    return out.getvalue()


def unpack(blob, **options):
    out = io.BytesIO()
    codec.decompress_stream(io.BytesIO(blob), out, **options)
    return out.getvalue()


def version_of(blob):
    return container.read_header(io.BytesIO(blob))["version"]


def path_nodes(nib):
    return [j if nib < 0 else int(NODE2[nib, j]) for j in range(1, 16)]


def reference_nibble_masses(p12, nib):
    """nibble_table's split rule in plain Python: the masses of the nibble's own tree."""
    mass = [0] * 32
    mass[1] = FREQ_TOTAL
    for j, node in enumerate(path_nodes(nib), start=1):
        leaves = 8 >> (j.bit_length() - 1)
        r = min(max((mass[j] * int(p12[node]) + 2048) >> 12, leaves), mass[j] - leaves)
        mass[2 * j + 1], mass[2 * j] = r, mass[j] - r
    return mass


def nibble_bits_float64(p12, nib, symbol):
    """-log2 of the product of the quantized split ratios along symbol's 4 nodes (float64),
    and -log2 of the product of the node probabilities themselves."""
    mass = reference_nibble_masses(p12, nib)
    nodes = path_nodes(nib)
    j, quantized, exact = 1, 0.0, 0.0
    for d in range(4):
        bit = (symbol >> (3 - d)) & 1
        child = 2 * j + bit
        quantized -= math.log2(mass[child] / mass[j])
        q = p12[nodes[j - 1]] / 4096.0
        exact -= math.log2(q if bit else 1.0 - q)
        j = child
    return quantized, exact


def test_nibble_table_is_the_split_rule_on_the_nibbles_tree_with_every_symbol_at_least_1():
    rng = np.random.default_rng(4)
    for p12 in (rng.integers(1, 4096, 256), np.full(256, 4095), np.full(256, 1)):
        p12 = p12.astype(np.int32)
        for nib in (-1, 0, 9, 15):
            nfreq, nmass = np.zeros(32, np.int32), np.zeros(32, np.int64)
            nibble_table(nfreq, 16, nmass, p12, nib)
            assert nfreq[16:].tolist() == reference_nibble_masses(p12, nib)[16:]
            assert int(nfreq[16:].astype(np.int64).sum()) == FREQ_TOTAL
            assert nfreq[16:].min() >= 1 and not nfreq[:16].any()


def test_a_bytes_code_length_is_the_product_of_its_8_node_probabilities_bitwise():
    """Float64 reference: the two nibble tables give byte b exactly the product of the split
    ratios along its 8 nodes, which is the product of the nodes' 12-bit probabilities up to
    the quantizer's rounding; and the encoder's p is that product."""
    data = np.frombuffer(TEXT, np.uint8)
    enc = ContextMixer(SMALL, nibbles=True)
    enc.prime()
    _, p = enc.advance(data)
    dec = ContextMixer(SMALL, nibbles=True)
    dec.prime()
    p12 = view(dec.buffers, dec.offs, V_P12)
    for i, byte in enumerate(data):
        high, low = int(byte) >> 4, int(byte) & 15
        q_high, e_high = nibble_bits_float64(p12.copy(), -1, high)
        dec.advance_nibble(high)
        q_low, e_low = nibble_bits_float64(p12.copy(), high, low)
        coded = -math.log2(dec.freq[high] / FREQ_TOTAL) - math.log2(dec.freq_low[low] / FREQ_TOTAL)
        assert math.isclose(coded, q_high + q_low, rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(-math.log2(p[i]), coded, rel_tol=1e-12, abs_tol=1e-12)
        # The rounding of a split of mass m costs at most about 0.5 / r of the ratio.
        assert abs(coded - (e_high + e_low)) < 1e-3
        dec.advance_byte(byte)


def test_the_nodes_on_a_bytes_path_get_the_probabilities_of_the_all_node_loop():
    """The mixing state and its learning are those of versions 3 and 4: byte by byte, the
    path's 15 + 15 node probabilities equal those the all-node loop computes."""
    data = np.frombuffer(TEXT, np.uint8)
    for cfg in (SMALL, dataclasses.replace(SMALL, mamba=True)):
        rng = np.random.default_rng(5)
        pdfs = (rng.random((data.size + 1, 256)) ** 4).astype(np.float32) if cfg.mamba else None
        old, new = ContextMixer(cfg), ContextMixer(cfg, nibbles=True)
        for m in (old, new):
            m.prime(pdfs[0] if cfg.mamba else None)
        old_p12 = view(old.buffers, old.offs, V_P12)
        new_p12 = view(new.buffers, new.offs, V_P12)
        for i, byte in enumerate(data):
            high = int(byte) >> 4
            hi_nodes, lo_nodes = path_nodes(-1), path_nodes(high)
            assert np.array_equal(new_p12[hi_nodes], old_p12[hi_nodes]), (cfg.mamba, i)
            new.advance_nibble(high)
            assert np.array_equal(new_p12[lo_nodes], old_p12[lo_nodes]), (cfg.mamba, i)
            pdf = None if pdfs is None else pdfs[i + 1]
            old.advance_byte(byte, pdf)
            new.advance_byte(byte, pdf)


def test_advance_over_chunks_gives_the_tables_the_decoder_computes_nibble_by_nibble():
    data = np.frombuffer(TEXT, np.uint8)
    for cfg in (SMALL, dataclasses.replace(SMALL, mamba=True)):
        rng = np.random.default_rng(6)
        pdfs = (rng.random((data.size + 1, 256)) ** 4).astype(np.float32) if cfg.mamba else None
        enc = ContextMixer(cfg, nibbles=True)
        enc.prime(pdfs[0] if cfg.mamba else None)
        parts = [
            enc.advance(data[a:b], None if pdfs is None else pdfs[a + 1 : b + 1])
            for a, b in ((0, 700), (700, data.size))
        ]
        freqs = np.concatenate([f for f, _ in parts])
        assert freqs.shape == (data.size, 32)
        dec = ContextMixer(cfg, nibbles=True)
        dec.prime(pdfs[0] if cfg.mamba else None)
        for i, byte in enumerate(data):
            assert np.array_equal(dec.freq, freqs[i, :16]), (cfg.mamba, i)
            dec.advance_nibble(int(byte) >> 4)
            assert np.array_equal(dec.freq_low, freqs[i, 16:]), (cfg.mamba, i)
            dec.advance_byte(byte, None if pdfs is None else pdfs[i + 1])
        assert np.all(freqs.reshape(-1, 16).astype(np.int64).sum(1) == FREQ_TOTAL)
        assert freqs.min() >= 1


def coded_chunk(cfg, data, pdfs):
    """The range coder's words of data (one chunk) coded as format 5 codes it (nibbles, or
    with cfg.bits 8 bits a byte), and the encoder's tables and probabilities."""
    enc = ContextMixer(cfg, nibbles=True)
    enc.prime(pdfs[0] if cfg.mamba else None)
    freqs, p = enc.advance(data, None if pdfs is None else pdfs[1:])
    coder = Encoder()
    if cfg.bits:
        coder.encode(np.unpackbits(data), freqs.reshape(-1, 2))
    else:
        coder.encode(np.stack([data >> 4, data & 15], 1).reshape(-1), freqs.reshape(-1, 16))
    return coder.finish(), freqs, p


# The two codings of format 5 that decode_run decodes: nibbles, and bits (mix.bits).
CODINGS = [SMALL, dataclasses.replace(SMALL, bits=True)]


@pytest.mark.parametrize("mamba", [False, True])
def test_decode_byte_decodes_each_byte_with_the_tables_advance_nibble_gives(mamba):
    """The fused call (both nibbles decoded inside the compiled loop) returns the bytes coded,
    leaves the tables the separate calls leave, and counts each byte's code length."""
    cfg = dataclasses.replace(SMALL, mamba=mamba)
    data = np.frombuffer(TEXT, np.uint8)
    rng = np.random.default_rng(7)
    pdfs = (rng.random((data.size + 1, 256)) ** 4).astype(np.float32) if mamba else None
    words, freqs, p = coded_chunk(cfg, data, pdfs)
    dec = ContextMixer(cfg, nibbles=True)
    dec.prime(pdfs[0] if mamba else None)
    decoder = Decoder(words)
    for i, byte in enumerate(data):
        assert dec.decode_byte(decoder) == byte, i
        assert np.array_equal(np.concatenate([dec.freq, dec.freq_low]), freqs[i]), i
        dec.advance_byte(byte, None if pdfs is None else pdfs[i + 1])
    assert math.isclose(decoder.cost[0], -np.log2(p).sum(), rel_tol=1e-12)


@pytest.mark.parametrize("cfg", CODINGS, ids=["nibbles", "bits"])
def test_decode_run_decodes_and_learns_a_chunk_as_decode_byte_then_advance_byte_do(cfg):
    data = np.frombuffer(TEXT, np.uint8)
    words, _, _ = coded_chunk(cfg, data, None)
    one, run = ContextMixer(cfg, nibbles=True), ContextMixer(cfg, nibbles=True)
    one.prime()
    run.prime()
    d_one, d_run = Decoder(words), Decoder(words)
    out = np.zeros(data.size, np.uint8)
    assert run.decode_run(d_run, out, 0, 700) == 0
    assert run.decode_run(d_run, out, 700, data.size) == 0
    for byte in data:
        assert one.decode_byte(d_one) == byte
        one.advance_byte(byte)
    assert np.array_equal(out, data)
    assert np.array_equal(run.freq, one.freq)
    for name in ("u8", "u16", "i32", "i64"):
        assert np.array_equal(run.buffers[name], one.buffers[name]), name
    assert np.array_equal(d_run.state, d_one.state) and np.array_equal(d_run.cost, d_one.cost)


@pytest.mark.parametrize("cfg", CODINGS, ids=["nibbles", "bits"])
def test_decode_run_stops_at_words_that_do_not_decode_or_past_the_budget(cfg):
    data = np.frombuffer(TEXT, np.uint8)
    words, _, p = coded_chunk(cfg, data, None)
    # Every word all ones: the point lies past the tables' total (constriction's invalid data).
    dec = ContextMixer(cfg, nibbles=True)
    dec.prime()
    out = np.zeros(data.size, np.uint8)
    assert dec.decode_run(Decoder(np.full(8, 0xFFFFFFFF, np.uint32)), out, 0, data.size) == -1
    # A budget the first 100 bytes already exceed: decoding stops there.
    budget = float(-np.log2(p[:100]).sum())
    dec = ContextMixer(cfg, nibbles=True)
    dec.prime()
    decoder = Decoder(words, budget)
    assert dec.decode_run(decoder, out, 0, data.size) == -2
    assert np.array_equal(out[:99], data[:99])
    assert decoder.cost[0] > budget


@pytest.mark.parametrize("preset", mambazip.config.preset_names())
def test_every_presets_mixing_round_trips_as_version_5(preset):
    settings = mambazip.resolve_settings(preset, model=TINY_MODEL)
    if settings.mix is None:
        settings = mambazip.resolve_settings(preset, model=TINY_MODEL, mix="cm")
    blob = pack(TEXT, settings, block_size=512)
    assert version_of(blob) == 5
    assert unpack(blob) == TEXT


@pytest.mark.parametrize("mix", ["cm", "full"])
def test_mixing_round_trips_as_version_5_and_as_version_4(mix):
    settings = small(mix)
    new = pack(TEXT, settings, frame_size=700, block_size=256)
    old = pack(TEXT, settings, frame_size=700, block_size=256, version=4)
    assert (version_of(new), version_of(old)) == (5, 4)
    assert unpack(new) == TEXT and unpack(old) == TEXT
    assert new != old


def test_the_mamba_alone_still_writes_the_versions_before_mixing():
    settings = tiny("none")
    assert version_of(pack(TEXT, settings)) == 2  # the preset's truncated BPTT
    assert version_of(pack(TEXT, settings, frame_size=1000)) == 4


def test_an_unframed_mixing_stream_is_one_frame_of_any_length():
    blob = pack(TEXT, small("cm"))
    header, index = container.index_from_end(io.BytesIO(blob))
    assert header["version"] == 5 and header["frame_size"] == 0
    assert [fr.size for fr in index.frames] == [len(TEXT)]


def test_a_noise_block_is_stored_raw_inside_a_version_5_frame():
    data = TEXT[:1024] + noise(1024) + TEXT[:1024]
    blob = pack(data, small("full"), block_size=512, frame_size=0, stored_blocks=True)
    f = io.BytesIO(blob)
    header, index = container.index_from_end(f)
    f.seek(index.frames[0].packed_offset)
    kinds = [type(payload) for n, payload in container.frame_blocks(f, header) if n != "end"]
    assert bytes in kinds and np.ndarray in kinds
    assert unpack(blob) == data


def test_an_empty_input_with_mixing_is_the_short_empty_stream_of_version_3():
    blob = pack(b"", small("cm"), name="empty.txt")
    assert version_of(blob) == 3
    assert unpack(blob) == b""


@pytest.mark.parametrize("bits", [False, True])
def test_an_empty_input_started_from_a_model_is_a_version_3_stream_of_no_blocks(bits):
    """Also under mix.bits, which version 3 cannot hold: its header keeps the mix without
    it (no byte is coded)."""
    settings = small("full")
    settings = dataclasses.replace(settings, mix=dataclasses.replace(settings.mix, bits=bits))
    learned = codec.compress_stream(io.BytesIO(TEXT[:300]), io.BytesIO(), settings).learner
    start = checkpoint.Checkpoint.from_learner(learned)
    blob = pack(b"", settings, model=start, frame_size=1000)
    header = container.read_header(io.BytesIO(blob))
    assert header["version"] == 3 and header["model_sha256"] == start.digest()
    assert header["settings"].mix == dataclasses.replace(settings.mix, bits=False)
    assert unpack(blob, model=start) == b""


def test_frames_with_two_workers_round_trip_as_version_5(run_cli):
    data = TEXT * 2
    packed = run_cli("compress", *TINY_FLAGS, "--mix", "full", "--frame-size", "1KiB", "-T", "2",
                     input=data)  # fmt: skip
    assert packed.exit_code == 0, packed.stderr
    header, index = container.index_from_end(io.BytesIO(packed.stdout))
    # The command line writes the newest version, which codes nibbles as version 5 does.
    assert header["version"] == container.VERSION and len(index.frames) == 3
    back = run_cli("decompress", "-T", "2", input=packed.stdout)
    assert back.exit_code == 0, back.stderr
    assert back.stdout == data
    assert unpack(packed.stdout) == data  # one process decodes the same


def test_a_range_of_a_version_5_file_decodes_alone(tmp_path):
    data = TEXT * 2
    path = tmp_path / "f.mz"
    path.write_bytes(pack(data, small("cm"), frame_size=1000, block_size=256))
    out = io.BytesIO()
    with open(path, "rb") as f:
        codec.decompress_range(f, out, 1500, 2100)
    assert out.getvalue() == data[1500:2100]


def test_per_byte_and_trust_score_the_nibble_coding():
    """score's hooks on version 5: each byte's bits are its two nibbles' code length, the
    trust rows sum to one, and they add up to the coded size."""
    settings = small("full")
    bits, trust = [], []
    stats = codec.compress_stream(io.BytesIO(TEXT), io.BytesIO(), settings, per_byte=bits,
                                  trust=trust, stored_blocks=True)  # fmt: skip
    bits, trust = np.concatenate(bits), np.concatenate(trust)
    assert bits.shape == (len(TEXT),) and trust.shape == (len(TEXT), len(stats.part_names))
    assert np.allclose(trust.sum(1), 1.0, atol=1e-5)
    assert math.isclose(bits.sum(), stats.ideal_bits, rel_tol=1e-12)
    blob = pack(TEXT, settings, stored_blocks=True)
    payload = len(blob) - len(pack(b"x", settings, stored_blocks=True))  # framing, header
    assert abs(8 * payload - bits.sum()) < 64 + 0.05 * bits.sum()


def test_score_reports_the_coded_size_of_the_newest_version(run_cli, sample_file, sample):
    import json

    result = run_cli("score", sample_file, *TINY_FLAGS, "--mix", "cm", "--json", "-q")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="cm")
    newest = pack(sample, settings, version=None)
    assert report["coded_bytes"] == len(newest)
    # No transform changes the sample: the newest writer gives version 6's bytes.
    assert version_of(newest) == container.COMPACT
