"""The quantizer and the range coder: integer pdfs reach constriction exactly, round trips hold,
the compiled decoder reads words as constriction's own decoder does, and the compressed words
of a fixed input never change silently, for the 256-symbol tables and for the 16-symbol
nibble tables of format 5; the 2-symbol tables of mix.bits are coded exactly and decoded as
constriction decodes them."""

import hashlib

import constriction
import numpy as np
import pytest

from mambazip.coder import Decoder, Encoder, constriction_weights
from mambazip.errors import FormatError
from mambazip.kernels.step import FREQ_TOTAL, quantize

f32 = np.float32


def fast_quantized_cdf(weights, precision=24):
    """constriction's documented fast quantization (left cumulatives), re-derived: symbol i
    starts at floor(c_i * (2^P - n) / sum) + i, c_i the running sum of the weights."""
    n = weights.shape[0]
    scale = float(2**precision - n) / float(weights.sum())
    cumulative = np.concatenate(([0.0], np.cumsum(weights)[:-1]))
    return np.floor(cumulative * scale).astype(np.int64) + np.arange(n)


def quantized(probs):
    freq = np.zeros(probs.shape[0], dtype=np.int32)
    quantize(freq, probs.astype(f32))
    return freq


def test_quantizer_gives_every_symbol_at_least_one_and_sums_to_total():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.dirichlet(np.full(256, 0.05)).astype(f32)
        freq = quantized(p)
        assert freq.min() >= 1
        assert int(freq.sum()) == FREQ_TOTAL


def test_quantizer_tracks_probabilities():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(256)).astype(f32)
    freq = quantized(p)
    assert np.abs(freq / FREQ_TOTAL - p).max() < 1e-5


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_quantizer_turns_a_diverged_pdf_into_a_valid_table(bad):
    freq = quantized(np.full(256, bad, dtype=f32))
    assert freq.min() >= 1 and int(freq.sum()) == FREQ_TOTAL


def test_constriction_weights_reproduce_our_frequencies_under_its_quantization():
    rng = np.random.default_rng(2)
    freq = quantized(rng.dirichlet(np.full(256, 0.1)).astype(f32))
    cdf = fast_quantized_cdf(constriction_weights(freq))
    assert np.array_equal(np.diff(np.append(cdf, FREQ_TOTAL)), freq)


def test_constriction_codes_with_exactly_our_frequencies():
    # A symbol of frequency 1 costs 24 bits, of frequency 2 costs 23: any rounding of ours by
    # constriction would show up in the length of 1000 such symbols.
    for f, bits in ((1, 24), (2, 23)):
        freq = np.ones(256, dtype=np.int32)
        freq[5] = f
        freq[0] = FREQ_TOTAL - int(freq[1:].sum())
        enc = Encoder()
        enc.encode(np.full(1000, 5, dtype=np.uint8), np.tile(freq, (1000, 1)))
        assert abs(enc.finish().shape[0] * 32 / 1000 - bits) < 0.1


def test_encoder_and_decoder_round_trip_under_changing_pdfs():
    rng = np.random.default_rng(3)
    n = 2000
    freqs = np.stack([quantized(rng.dirichlet(np.full(256, 0.3)).astype(f32)) for _ in range(n)])
    symbols = np.array([rng.choice(256, p=f / FREQ_TOTAL) for f in freqs], dtype=np.uint8)
    enc = Encoder()
    enc.encode(symbols, freqs)
    dec = Decoder(enc.finish())
    assert [dec.decode(f) for f in freqs] == symbols.tolist()


def test_compressed_words_of_a_fixed_input_are_pinned():
    # Golden value: recorded once from this code; a change means the format changed.
    weights = [np.linspace(1, 2 + k, 256) for k in range(64)]
    freqs = np.stack([quantized((w / w.sum()).astype(f32)) for w in weights])
    symbols = (np.arange(64) * 37 % 256).astype(np.uint8)
    enc = Encoder()
    enc.encode(symbols, freqs)
    digest = hashlib.sha256(enc.finish().astype("<u4").tobytes()).hexdigest()
    assert digest == GOLDEN_WORDS_SHA256


GOLDEN_WORDS_SHA256 = "65b7c04819c201e73a8eb5f99699c3b417615b241304e385bd99dd7b88bdbfac"


def nibble_table(weights):
    """A 16-symbol table of the nibble coding (format 5): each >= 1, summing to 2^24."""
    freq = np.maximum(np.floor(weights / weights.sum() * FREQ_TOTAL), 1).astype(np.int64)
    freq[np.argmax(freq)] += FREQ_TOTAL - freq.sum()
    return freq.astype(np.int32)


def test_constriction_weights_reproduce_16_symbol_tables_under_its_quantization():
    rng = np.random.default_rng(4)
    for _ in range(20):
        freq = nibble_table(rng.dirichlet(np.full(16, 0.1)))
        freq[rng.integers(16)] = 1
        freq[np.argmax(freq)] += FREQ_TOTAL - int(freq.astype(np.int64).sum())
        cdf = fast_quantized_cdf(constriction_weights(freq))
        assert np.array_equal(np.diff(np.append(cdf, FREQ_TOTAL)), freq)


@pytest.mark.parametrize("symbols", [2, 16])  # mix.bits' tables and the nibbles'
def test_constriction_codes_small_tables_with_exactly_our_frequencies(symbols):
    for f, bits in ((1, 24), (2, 23)):
        freq = np.ones(symbols, dtype=np.int32)
        freq[symbols - 1] = f
        freq[0] = FREQ_TOTAL - int(freq[1:].sum())
        enc = Encoder()
        enc.encode(np.full(1000, symbols - 1, dtype=np.uint8), np.tile(freq, (1000, 1)))
        assert abs(enc.finish().shape[0] * 32 / 1000 - bits) < 0.1


def test_compressed_words_of_a_fixed_nibble_input_are_pinned():
    # Golden value: recorded once from this code (format 5); a change means the format changed.
    freqs = np.stack([nibble_table(np.linspace(1, 2 + k, 16) ** 3) for k in range(128)])
    symbols = (np.arange(128) * 7 % 16).astype(np.uint8)
    enc = Encoder()
    enc.encode(symbols, freqs)
    words = enc.finish()
    dec = Decoder(words)
    assert [dec.decode(f) for f in freqs] == symbols.tolist()
    digest = hashlib.sha256(words.astype("<u4").tobytes()).hexdigest()
    assert digest == GOLDEN_NIBBLE_WORDS_SHA256


GOLDEN_NIBBLE_WORDS_SHA256 = "ff9331fbc8956069bd82de9c941588085cae5f542fe795921911e3955400d125"


def constriction_decoded(words, freqs):
    """constriction's own decoder over freqs (n, V): the symbols it gives, then "invalid" if
    it refuses the words (its InvalidData, raised to Python as AssertionError)."""
    decoder = constriction.stream.queue.RangeDecoder(words)
    out = []
    for freq in freqs:
        model = constriction.stream.model.Categorical(constriction_weights(freq), perfect=False)
        try:
            out.append(int(decoder.decode(model)))
        except AssertionError:
            return [*out, "invalid"]
    return out


def our_decoded(words, freqs):
    decoder = Decoder(words)
    out = []
    for freq in freqs:
        try:
            out.append(decoder.decode(freq))
        except FormatError:
            return [*out, "invalid"]
    return out


def random_tables(rng, n, symbols):
    """n tables (each >= 1, summing to 2^24) with about half the symbols near frequency 1."""
    w = rng.integers(1, 1 << 18, size=(n, symbols)) * (rng.random((n, symbols)) < 0.5) + 1
    freqs = (w * ((FREQ_TOTAL - symbols) / w.sum(1, keepdims=True))).astype(np.int64) + 1
    freqs[np.arange(n), freqs.argmax(1)] += FREQ_TOTAL - freqs.sum(1)
    return freqs.astype(np.int32)


@pytest.mark.parametrize("symbols", [2, 16, 256])
def test_the_compiled_decoder_decodes_as_constriction_does(symbols):
    rng = np.random.default_rng(8)
    for n in (0, 1, 2, 3, 50, 700):
        freqs = random_tables(rng, n, symbols)
        coded = np.array([rng.choice(symbols, p=f / FREQ_TOTAL) for f in freqs], np.uint8)
        enc = Encoder()
        enc.encode(coded, freqs)
        words = enc.finish()
        assert our_decoded(words, freqs) == constriction_decoded(words, freqs) == coded.tolist()


@pytest.mark.parametrize("symbols", [2, 16, 256])
def test_the_compiled_decoder_reads_corrupt_words_as_constriction_does(symbols):
    """Flipped bits, words cut short, words of all ones: the same symbols, and a refusal at
    the same symbol where constriction refuses."""
    rng = np.random.default_rng(9)
    refused = 0
    for trial in range(60):
        freqs = random_tables(rng, 300, symbols)
        coded = np.array([rng.choice(symbols, p=f / FREQ_TOTAL) for f in freqs], np.uint8)
        enc = Encoder()
        enc.encode(coded, freqs)
        words = enc.finish().copy()
        if trial % 3 == 0:
            words[rng.integers(words.shape[0])] ^= np.uint32(1 << int(rng.integers(32)))
        elif trial % 3 == 1:
            words = words[: rng.integers(words.shape[0])]
        else:
            words[rng.integers(words.shape[0]) :] = 0xFFFFFFFF
        theirs = constriction_decoded(words, freqs)
        assert our_decoded(words, freqs) == theirs
        refused += theirs[-1] == "invalid"
    assert refused > 0  # the refusal path was taken
