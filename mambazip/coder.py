"""Range coding of bytes under quantized pdfs, with constriction's queue (range) coder.

constriction quantizes float probabilities itself; to keep the format independent of its
rounding we hand it a form it reproduces exactly. Its fast quantizer gives symbol i the
cumulative frequency floor(c_i * s) + i, where c_i is the running sum of the weights and
s = (2^24 - V) / sum(weights). With weights f - 1 for our integer frequencies f (each >= 1,
summing to 2^24), s is exactly 1 and every c_i is an integer below 2^24, exact in float64:
constriction then codes with precisely our frequencies. The same holds for the 16-symbol
nibble tables of format 5 (V = 16, frequencies summing to 2^24: s = (2^24 - 16) / (2^24 - 16)).
tests/test_coder.py pins both.
"""

import constriction
import numpy as np

from .errors import FormatError

_FAMILY = constriction.stream.model.Categorical(perfect=False)


def constriction_weights(freqs, out=None):
    """float64 weights that constriction's fast quantizer maps back to ``freqs`` exactly
    (written into ``out`` when given)."""
    return np.subtract(freqs, 1, out=out, dtype=np.float64)


class Encoder:
    def __init__(self):
        self._coder = constriction.stream.queue.RangeEncoder()

    def encode(self, symbols, freqs):
        """symbols (n,) uint8, each coded with its row of freqs (n, V) int32 (V = 256, or 16
        for nibbles)."""
        if symbols.shape[0]:
            self._coder.encode(symbols.astype(np.int32), _FAMILY, constriction_weights(freqs))

    def finish(self):
        """The compressed words (uint32) of everything encoded so far."""
        return self._coder.get_compressed()


class Decoder:
    def __init__(self, words):
        self._coder = constriction.stream.queue.RangeDecoder(words)
        self._weights = {}  # V -> work array

    def decode(self, freq):
        """One symbol under freq (V,) int32."""
        weights = self._weights.get(freq.shape[0])
        if weights is None:
            weights = self._weights[freq.shape[0]] = np.empty(freq.shape, dtype=np.float64)
        constriction_weights(freq, weights)
        return self.decode_weights(weights)

    def decode_weights(self, weights):
        """One symbol under ``constriction_weights`` of its table, made by the caller."""
        model = constriction.stream.model.Categorical(weights, perfect=False)
        try:
            return self._coder.decode(model)
        except AssertionError:  # constriction's signal that the words cannot come from this model
            raise FormatError("corrupt file: the compressed data does not decode") from None


def shortest_payload(words, symbols, freqs):
    """The fewest big-endian bytes of ``words`` (which code ``symbols`` under ``freqs``, all
    of a block) from which the words, padded with zero bytes, decode the same symbols: the
    last word's lowest bytes are cut where, rounded down or up to zero there, it still lies
    in the coder's final interval. Checked by decoding, so it does not depend on how the
    coder seals its words."""
    raw = words.astype(">u4").tobytes()
    if not words.shape[0]:
        return raw
    last = int(words[-1])
    weights = constriction_weights(freqs)
    wanted = symbols.astype(np.int32)
    for cut in (3, 2, 1):
        low = (1 << (8 * cut)) - 1
        for value in (last & ~low, (last | low) + 1):
            if value >> 32:
                continue
            trial = words.copy()
            trial[-1] = value
            try:
                decoded = constriction.stream.queue.RangeDecoder(trial).decode(_FAMILY, weights)
            except AssertionError:  # constriction's signal that the words do not decode
                continue
            if np.array_equal(decoded, wanted):
                return trial.astype(">u4").tobytes()[:-cut]
    return raw
