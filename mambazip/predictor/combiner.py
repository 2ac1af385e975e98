"""The combiner: logistic mixing of stretched probabilities with fixed-point weights.

Arrays (NIN inputs, R weight sets of one selector):
    w (R, NIN) int32       weights, 16-bit fixed point (65536 = 1.0)
    x (256, NIN) int32     inputs per byte-tree node (row), stretch domain (-2047..2047,
                           256 = 1 nat)

Forward: s = clamp((sum_k w[k] x[k]) >> 16, -2047, 2047), p = squash(s), summed in int64 in
index order (integer sums do not depend on their order anyway).
Training on coding cost: for bit y, d(-ln p(y)) / d w[k] = -(y - p) x[k], so gradient descent is
w[k] += lr (y - p) x[k]; here err = ((y << 12) - p12) * lr and w[k] += (x[k] err) >> 14 rounded
to nearest, clamped to +-2^22 so that a product never overflows and a weight can always recover.
With a row's own rate (mix.row_rates), err is first scaled by row_scale (in 1/65536, floored).
An error of at most ``dead`` (in 1/4096) leaves the weights as they are: the step it would
take is mostly noise, and skipping it is also faster.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .counters import squash

W_ONE = 1 << 16
W_MAX = 1 << 22
LR_SHIFT = 14
ROW_COUNT_MAX = 1 << 30


@kernel
def combine(w, r, x, node, n):
    """Stretch-domain output of weight set r over the first n inputs of x[node]."""
    acc = np.int64(0)
    for k in range(n):
        acc += np.int64(w[r, k]) * np.int64(x[node, k])
    s = acc >> 16
    return min(max(s, -2047), 2047)


@kernel
def train(w, r, x, node, n, s, bit, lr, lo, hi, lr2, dead, scale=W_ONE):
    """One gradient step of weight set r, whose output on x[node] was stretch value s,
    towards bit; inputs lo..hi - 1 step with lr2 instead of lr; none if |error| <= dead.
    scale (in 1/W_ONE) multiplies the step (row_scale)."""
    e = (np.int64(bit) << 12) - squash(s)
    if -dead <= e <= dead:
        return
    err = (e * lr * scale) >> 16
    a = min(lo, n)
    b = min(max(hi, lo), n)  # [a, b): the inputs at lr2 (none where hi <= lo)
    _step(w, r, x, node, 0, a, err)
    _step(w, r, x, node, a, b, (e * lr2 * scale) >> 16)
    _step(w, r, x, node, b, n, err)


@kernel_inline
def _step(w, r, x, node, k0, k1, err):
    """Inputs k0..k1 - 1 of weight set r step by err: a loop without a branch, which the
    compiler vectorises."""
    for k in range(k0, k1):
        v = np.int64(w[r, k]) + ((np.int64(x[node, k]) * err + (1 << (LR_SHIFT - 1))) >> LR_SHIFT)
        w[r, k] = np.int32(min(max(v, -W_MAX), W_MAX))


@kernel
def row_scale(counts, r, half):
    """The step multiplier (in 1/W_ONE) of weight row r, picked for counts[r] bits before
    (dead-zone skips included): 5 at first, 3 after half, down towards 1 (a row its selector
    rarely picks still learns fast while a busy one settles); counts this bit. half = 0: 1
    throughout, nothing counted."""
    if half == 0:
        return W_ONE
    c = np.int64(counts[r])
    if c < ROW_COUNT_MAX:
        counts[r] = c + 1
    return W_ONE + (4 * W_ONE * half) // (half + c)


@kernel
def combiner_init(w, value):
    for i in range(w.size):
        w.flat[i] = value
