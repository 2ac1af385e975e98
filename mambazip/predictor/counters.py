"""12-bit probabilities in the stretch domain, nonstationary bit counters, adaptive maps.

Probabilities are integers p in 0..4095 meaning p / 4096 (of bit = 1). stretch(p) = ln(p/(1-p))
and squash its inverse, both scaled by 256 and tabulated:
    SQUASH (4095,) int32: SQUASH[x + 2047] = round(4096 / (1 + e^(-x/256))) in 1..4095
    STRETCH (4096,) int32: STRETCH[p] = the smallest x in -2047..2047 with squash(x) >= p
The squash table is built once with detmath.exp32 (fixed float32 operations, no libm), so every
platform builds the same entries.

Counter (one node of a context slot), uint16: p12 << 4 | n, where n in 0..15 counts updates up
to a limit and n = 0 means "never seen" (p taken as 2048). It moves towards the bit at rate
COUNTER_RATES[schedule, n]: schedule 0, 1 / (n + 1.5) (down to 1/16.5); schedule 1 (mix
counter_rates) the same for the first 7 bits, then slower, down to 1/48 at n = 14 and 1/64 at
15: a young counter follows the first bits fast and an old one averages over more of them.

Adaptive map: a table of int32 entries p21 << 10 | n (p21 the probability in 21 bits, n a count
up to a limit), indexed by a quantised counter state (``map_index``: the top 8 bits of p12 and n,
4096 entries). It learns what a counter state actually predicts, e.g. that a counter which has
seen one 1 in an order-6 context means p(1) = 0.95, not 0.83.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from ..kernels.detmath import exp32

f32 = np.float32

MAP_SIZE = 4096  # entries of one adaptive map


@kernel
def _build_squash(out):
    for i in range(4095):
        x = f32(i - 2047) / f32(256.0)
        v = f32(4096.0) / (f32(1.0) + exp32(-x))
        q = np.int32(np.floor(v + f32(0.5)))
        out[i] = min(max(q, 1), 4095)


def _build_stretch(squash_table):
    out = np.empty(4096, np.int32)
    p = 0
    for i in range(4095):
        v = int(squash_table[i])
        while p <= v:
            out[p] = i - 2047
            p += 1
    out[p:] = 2047
    return out


SQUASH = np.empty(4095, np.int32)
_build_squash(SQUASH)
STRETCH = _build_stretch(SQUASH)

# Counter rates in 16-bit fixed point, for n in 0..15, one row per schedule: 65536 / (d / 2).
_SLOW = (3, 5, 7, 9, 11, 13, 15, 18, 22, 28, 36, 46, 58, 72, 96, 128)
COUNTER_RATES = np.array([[131072 // (2 * n + 3) for n in range(16)],
                          [131072 // d for d in _SLOW]], np.int64)  # fmt: skip
# Adaptive-map rate 1 / (n + 1.5), for n in 0..1023.
MAP_RATE = np.array([131072 // (2 * n + 3) for n in range(1024)], np.int64)


@kernel_inline
def squash(x):
    if x > 2047:
        x = 2047
    if x < -2047:
        x = -2047
    return SQUASH[x + 2047]


@kernel_inline
def stretch(p):
    return STRETCH[p]


@kernel_inline
def counter_p(s):
    """12-bit probability of a counter state s (uint16)."""
    s = np.int64(s)
    if s & 15 == 0:
        return np.int64(2048)
    return s >> 4


@kernel_inline
def counter_next(s, bit, limit, rates):
    """The counter state s (uint16) after seeing bit at rates (16,), a row of COUNTER_RATES;
    its count stops at limit."""
    s = np.int64(s)
    n = s & 15
    p = counter_p(s)
    target = 4095 if bit else 0
    p += ((target - p) * rates[n]) >> 16
    if n < limit:
        n += 1
    return np.uint16((p << 4) | n)


@kernel_inline
def map_index(s):
    """Adaptive-map entry of counter state s: top 8 bits of its probability, and its count."""
    s = np.int64(s)
    return ((s >> 8) << 4) | (s & 15)


@kernel
def map_p(table, i):
    """12-bit probability of entry i of an adaptive map (int32 p21 << 10 | n)."""
    return np.int64(table[i]) >> 19


@kernel
def map_update(table, i, bit, limit):
    e = np.int64(table[i])
    n = e & 1023
    p = e >> 10
    target = (1 << 21) - 1 if bit else 0
    p += ((target - p) * MAP_RATE[n]) >> 16
    if n < limit:
        n += 1
    table[i] = np.int32((p << 10) | n)


@kernel
def map_init(table):
    """Each map (rows of MAP_SIZE) starts at the probability its counter state says."""
    for i in range(table.size):
        j = i % MAP_SIZE
        n = j & 15
        p12 = 2048 if n == 0 else ((j >> 4) << 4) + 8
        table[i] = np.int32(p12 << 19)
