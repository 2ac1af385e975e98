"""APM / SSE: refine a probability by what it has meant before in a small context.

Array (K contexts):
    t (K * 33,) uint16     per context, 33 buckets at stretch(p) = -2048, -1920, ..., 2048
                           holding 16-bit probabilities (p12 << 4 at the start)

With mix.apm_counts, a count per bucket (uint8, a parallel array) makes the rate adaptive
(apm_update_counted).

The output interpolates linearly between the two buckets around stretch(p); the update moves
the nearer bucket towards the bit by 1/2^rate of the distance (paq style). At a bucket edge
(stretch(p) = 128 k - 2048) the output is exactly bucket k's probability.
"""

import numpy as np

from ..jit import kernel
from .counters import squash


@kernel
def apm_init(t):
    for i in range(t.shape[0]):
        t[i] = np.uint16(squash((i % 33 - 16) * 128) * 16)


@kernel
def apm_predict(t, ctx, st):
    """(12-bit probability, bucket to update) for stretch value st in context ctx."""
    return apm_predict_bits(t, ctx, st, 12)


@kernel
def apm_predict_bits(t, ctx, st, bits):
    """apm_predict with a probability of bits bits (at most 16, the buckets' own)."""
    u = np.int64(st) + 2048  # 1..4095
    lo = u >> 7
    w = u & 127
    base = ctx * 33 + lo
    p = (np.int64(t[base]) * (128 - w) + np.int64(t[base + 1]) * w) >> (23 - bits)
    return min(max(p, 1), (1 << bits) - 1), base + (w >> 6)


@kernel
def apm_update(t, idx, bit, rate):
    v = np.int64(t[idx])
    target = 65535 if bit else 0
    t[idx] = np.uint16(v + ((target - v) >> rate))


@kernel
def apm_update_counted(t, n, idx, bit, rate):
    """apm_update at rate 1 / (count + 2), the bucket's count n[idx] going up to 2^rate - 2
    (at most 255):
    a bucket seen little learns fast (its start, the identity, is only a guess), then it
    averages over about 2^rate bits as apm_update does."""
    v = np.int64(t[idx])
    c = np.int64(n[idx])
    target = 65535 if bit else 0
    t[idx] = np.uint16(v + (target - v) // (c + 2))
    if c + 2 < (1 << rate) and c < 255:
        n[idx] = np.uint8(c + 1)
