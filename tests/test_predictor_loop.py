"""The per-byte loop: the tree pdf's arithmetic, and encoder and decoder giving the same tables."""

import dataclasses
import math

import numpy as np

from mambazip.kernels.step import FREQ_TOTAL
from mambazip.predictor import SMALL, ContextMixer
from mambazip.predictor.loop import tree_to_freqs


def reference_freqs(p12):
    """The split rule of loop.py in plain Python: node masses top-down."""
    mass = [0] * 512
    mass[1] = FREQ_TOTAL
    for n in range(1, 256):
        leaves = 128 >> (n.bit_length() - 1)
        r = min(max((mass[n] * int(p12[n]) + 2048) >> 12, leaves), mass[n] - leaves)
        mass[2 * n + 1], mass[2 * n] = r, mass[n] - r
    return mass


def test_tree_pdf_sums_to_2_24_and_its_code_length_is_the_bitwise_one():
    rng = np.random.default_rng(11)
    for p12 in (rng.integers(1, 4096, 256), np.full(256, 4095), np.full(256, 1)):
        p12 = p12.astype(np.int32)
        freq, mass = np.zeros(256, np.int32), np.zeros(512, np.int64)
        tree_to_freqs(freq, mass, p12)
        ref = reference_freqs(p12)
        assert freq.tolist() == ref[256:]
        assert int(freq.astype(np.int64).sum()) == FREQ_TOTAL and freq.min() >= 1
        for b in range(256):
            node, bits = 1, 0.0
            for d in range(8):
                bit = (b >> (7 - d)) & 1
                child = 2 * node + bit
                ratio = ref[child] / ref[node]
                bits -= math.log2(ratio)
                # The split follows the node's probability to within rounding and the clamp.
                want = p12[node] / 4096 if bit else 1 - p12[node] / 4096
                leaves = 128 >> d
                assert abs(ratio - want) <= (0.5 + leaves) / ref[node]
                node = child
            assert math.isclose(-math.log2(freq[b] / FREQ_TOTAL), bits, rel_tol=1e-12)


def _data(n):
    with open("/work/shared/bench/corpus/calgary/book1", "rb") as f:
        text = np.frombuffer(f.read(n), np.uint8)
    return np.concatenate([text, text[: n // 2]])  # a repeat, so the match model takes part


def _pdfs(n):
    rng = np.random.default_rng(5)
    return (rng.random((n, 256)) ** 4).astype(np.float32)


def test_advance_over_a_chunk_equals_advance_byte_by_byte():
    for cfg in (SMALL, dataclasses.replace(SMALL, mamba=True)):
        data = _data(1500)
        pdfs = _pdfs(data.size + 1) if cfg.mamba else None
        enc = ContextMixer(cfg)
        enc.prime(pdfs[0] if cfg.mamba else None)
        freqs, p = enc.advance(data[:700], None if pdfs is None else pdfs[1:701])
        freqs2, p2 = enc.advance(data[700:], None if pdfs is None else pdfs[701:])
        freqs, p = np.concatenate([freqs, freqs2]), np.concatenate([p, p2])
        dec = ContextMixer(cfg)
        dec.prime(pdfs[0] if cfg.mamba else None)
        for i, byte in enumerate(data):
            assert np.array_equal(dec.freq, freqs[i]), (cfg.mamba, i)
            dec.advance_byte(byte, None if pdfs is None else pdfs[i + 1])
        assert np.array_equal(dec.freq, enc.freq)
        assert np.array_equal(p, freqs[np.arange(data.size), data] / FREQ_TOTAL)
        assert freqs.min() >= 1 and np.all(freqs.astype(np.int64).sum(1) == FREQ_TOTAL)
        # It learns: the repeated half costs far less than the first bytes.
        assert -np.log2(p[-500:]).mean() < 0.5 * -np.log2(p[:500]).mean()


def test_trust_gives_each_part_a_share_that_sums_to_one():
    mixer = ContextMixer(SMALL)
    mixer.prime()
    data = _data(400)
    trust = np.zeros((data.size, len(mixer.part_names)), np.float32)
    mixer.advance(data, trust=trust)
    assert mixer.part_names[-1] == "match" and trust.min() >= 0
    # Before the first byte every input is stretch(1/2) = 0: no part says anything.
    assert trust[0].sum() == 0
    assert np.allclose(trust[1:].sum(1), 1.0, atol=1e-5)
    # On the repeat, where the match model has a long match, it earns a share.
    assert trust[-100:, -1].mean() > 0.02
