"""Range coding of bytes under quantized pdfs, with constriction's queue (range) coder.

constriction quantizes float probabilities itself; to keep the format independent of its
rounding we hand it a form it reproduces exactly. Its fast quantizer gives symbol i the
cumulative frequency floor(c_i * s) + i, where c_i is the running sum of the weights and
s = (2^24 - V) / sum(weights). With weights f - 1 for our integer frequencies f (each >= 1,
summing to 2^24), s is exactly 1 and every c_i is an integer below 2^24, exact in float64:
constriction then codes with precisely our frequencies. The same holds for the 16-symbol
nibble tables of format 5 (V = 16, frequencies summing to 2^24: s = (2^24 - 16) / (2^24 - 16))
and the 2-symbol tables of mix.bits. tests/test_coder.py checks all three.

constriction encodes. The decoder is compiled here (``range_decode``): constriction's
decoding step for its default range coder (32-bit words, a 64-bit state, 24 bits of
precision), taking our integer tables as they are. Called from compiled code, it lets the
predictor's kernels decode a byte's two nibbles or 8 bits in one call (loop.decode_byte); through
constriction's Python API each nibble cost a model object and two crossings, 1.7 µs, about
a seventh of what the fast preset spends on a byte. tests/test_coder.py checks it symbol for
symbol against constriction's own decoder, on valid and on corrupt words.

Decoder state (uint64 (4,)): the interval's lower end and width (lower, range: range starts
at 2^64 - 1), point, the 64 bits of the words read so far that locate the code within the
interval, and pos, the next word to read (words past the end read as 0).
"""

import math

import constriction
import numpy as np

from .errors import FormatError
from .jit import kernel, kernel_inline

_FAMILY = constriction.stream.model.Categorical(perfect=False)
PRECISION = 24  # bits of the tables' total, 2^24 (kernels/step.py's FREQ_TOTAL)
R_LOWER, R_RANGE, R_POINT, R_POS = range(4)
u64 = np.uint64
_WORD = u64(32)
_ONE_WORD = u64(1 << 32)


def constriction_weights(freqs, out=None):
    """float64 weights that constriction's fast quantizer maps back to ``freqs`` exactly
    (written into ``out`` when given)."""
    return np.subtract(freqs, 1, out=out, dtype=np.float64)


@kernel
def decoder_start(words, state):
    """state for decoding ``words`` (uint32) from their start: point holds the first two."""
    point = u64(0)
    n = min(2, words.shape[0])
    for k in range(n):
        point = (point << _WORD) | u64(words[k])
    if n == 1:
        point = point << _WORD
    state[R_LOWER] = u64(0)
    state[R_RANGE] = u64(0xFFFFFFFFFFFFFFFF)
    state[R_POINT] = point
    state[R_POS] = u64(n)


@kernel_inline
def range_decode(words, state, freq, at, n):
    """The next symbol under the table freq[at : at + n] (int32, each >= 1, summing to
    2^PRECISION), or -1 where the point lies outside the table's total: words no encoder
    wrote under these tables (constriction's InvalidData)."""
    lower, width, point = state[R_LOWER], state[R_RANGE], state[R_POINT]
    scale = width >> u64(PRECISION)
    quantile = (point - lower) // scale
    if quantile >= u64(1 << PRECISION):
        return -1
    q = np.int64(quantile)
    symbol = 0
    cum = np.int64(0)
    while symbol < n - 1 and cum + freq[at + symbol] <= q:
        cum += freq[at + symbol]
        symbol += 1
    lower = lower + scale * u64(cum)
    width = scale * u64(freq[at + symbol])
    if width < _ONE_WORD:
        lower = lower << _WORD
        width = width << _WORD
        point = point << _WORD
        pos = np.int64(state[R_POS])
        if pos < words.shape[0]:
            point = point | u64(words[pos])
            state[R_POS] = u64(pos + 1)
    state[R_LOWER] = lower
    state[R_RANGE] = width
    state[R_POINT] = point
    return symbol


@kernel
def decode_one(words, state, freq):
    """range_decode under the whole table freq (V,)."""
    return range_decode(words, state, freq, 0, freq.shape[0])


@kernel
def decode_all(words, state, freqs, out):
    """out[i] = the i-th symbol of ``words`` under freqs[i] (n, V), decoding from their
    start (state: work array). Returns False where the words do not decode."""
    decoder_start(words, state)
    for i in range(freqs.shape[0]):
        symbol = range_decode(words, state, freqs[i], 0, freqs.shape[1])
        if symbol < 0:
            return False
        out[i] = symbol
    return True


class Encoder:
    def __init__(self):
        self._coder = constriction.stream.queue.RangeEncoder()

    def encode(self, symbols, freqs):
        """symbols (n,) uint8, each coded with its row of freqs (n, V) int32 (V = 256, 16 for
        nibbles, 2 for mix.bits)."""
        if symbols.shape[0]:
            self._coder.encode(symbols.astype(np.int32), _FAMILY, constriction_weights(freqs))

    def finish(self):
        """The compressed words (uint32) of everything encoded so far."""
        return self._coder.get_compressed()


class Decoder:
    """A block's words (uint32) and the compiled decoder's state. ``cost`` (float64 (2,)):
    the code length of the symbols decoded so far and the most their words can hold (bits),
    kept by ``decode`` and by the predictor's decoding kernels (loop.decode_byte)."""

    def __init__(self, words, budget=np.inf):
        self.words = np.ascontiguousarray(words, dtype=np.uint32)
        self.state = np.empty(4, np.uint64)
        decoder_start(self.words, self.state)
        self.cost = np.array([0.0, budget])

    def decode(self, freq):
        """One symbol under freq (V,) int32 (summing to 2^PRECISION), its cost counted."""
        symbol = decode_one(self.words, self.state, freq)
        if symbol >= 0:
            self.cost[0] += PRECISION - math.log2(freq[symbol])
        self.check(symbol if symbol < 0 or self.cost[0] <= self.cost[1] else -2)
        return symbol

    @staticmethod
    def check(code):
        """Raise FormatError for a decoding kernel's error code: -1, words that do not
        decode; -2, symbols that cost more bits than the words hold."""
        if code == -1:
            raise FormatError("corrupt file: the compressed data does not decode")
        if code == -2:
            raise FormatError("corrupt file: a block decodes to more than its data can hold")


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
    freqs = np.ascontiguousarray(freqs, dtype=np.int32)
    decoded, state = np.empty_like(symbols), np.empty(4, np.uint64)
    for cut in (3, 2, 1):
        low = (1 << (8 * cut)) - 1
        for value in (last & ~low, (last | low) + 1):
            if value >> 32:
                continue
            trial = words.copy()
            trial[-1] = value
            if decode_all(trial, state, freqs, decoded) and np.array_equal(decoded, symbols):
                return trial.astype(">u4").tobytes()[:-cut]
    return raw
