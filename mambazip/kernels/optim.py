"""Optimizer steps over the flat parameter buffer, and the learning-rate schedule.

``ranges`` (S, 2) holds [start, stop) ranges of the trainable tensors in the flat buffers,
``lrs`` (S,) float32 their learning-rate multipliers (lr * lrs[s], rounded once).
Each update reads the accumulated gradient, applies the optional element-wise clip, writes
the parameter updated from its value in ``src`` into ``theta`` (the same array but for an
overlapped update, which writes the weights of the forwards after next while the next ones
read ``src``; see kernels/segment.py) and zeroes the gradient for the next accumulation.
All arithmetic is float32, element by element, so vectorisation cannot change a bit.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .views import copy_into

f32 = np.float32


@kernel_inline
def _clipped(g, clip):
    if clip > f32(0.0):
        if g > clip:
            return clip
        if g < -clip:
            return -clip
    return g


@kernel
def _copy_outside(src, theta, ranges):
    """theta = src outside the trainable ranges (sorted, disjoint), which no update writes."""
    if src.ctypes.data == theta.ctypes.data:
        return
    lo = 0
    for s in range(ranges.shape[0]):
        copy_into(theta[lo : ranges[s, 0]], src[lo : ranges[s, 0]])
        lo = ranges[s, 1]
    copy_into(theta[lo:], src[lo:])


@kernel
def sgd_update(src, theta, grad, ranges, lrs, lr, clip):
    """theta = src - lr * clip(grad); grad = 0. lr, clip float32 (clip 0: none)."""
    _copy_outside(src, theta, ranges)
    in_place = src.ctypes.data == theta.ctypes.data
    for s in range(ranges.shape[0]):
        rate = lr * lrs[s]
        # Slices indexed from 0: with a loop starting at ranges[s, 0] Numba cannot prove the
        # index non-negative, and its wraparound check keeps the loop scalar.
        lo, hi = ranges[s, 0], ranges[s, 1]
        p, g = theta[lo:hi], grad[lo:hi]
        if in_place:  # p alone, read and written: see _adam_step
            for i in range(p.shape[0]):
                p[i] = p[i] - rate * _clipped(g[i], clip)
                g[i] = f32(0.0)
        else:
            q = src[lo:hi]
            for i in range(p.shape[0]):
                p[i] = q[i] - rate * _clipped(g[i], clip)
                g[i] = f32(0.0)


@kernel
def adam_update(src, theta, grad, m, v, ranges, lrs, lr, beta1, beta2, eps, bc1, bc2, clip):
    """Adam with bias correction: bc1 = 1 - beta1^t, bc2 = 1 - beta2^t for step t >= 1
    (bc2 = 1 under the beta2 warm-up of ``adam_beta2``).

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    theta = src - lr * (m / bc1) / (sqrt(v / bc2) + eps);  grad = 0.
    """
    _copy_outside(src, theta, ranges)
    one_minus_b1 = f32(1.0) - beta1
    one_minus_b2 = f32(1.0) - beta2
    # x / 1 is x, bit for bit: a correction of 1 (beta1 0; bc2 under the warm-up, or once
    # beta2^t is below float32's resolution) is skipped, and with it a division per
    # element, the update's slowest operation.
    div1 = bc1 != f32(1.0)
    div2 = bc2 != f32(1.0)
    in_place = src.ctypes.data == theta.ctypes.data
    for s in range(ranges.shape[0]):
        lo, hi = ranges[s, 0], ranges[s, 1]
        p, gs, ms, vs = theta[lo:hi], grad[lo:hi], m[lo:hi], v[lo:hi]
        rate = lr * lrs[s]
        args = (rate, beta1, beta2, one_minus_b1, one_minus_b2, eps, bc1, bc2, div1, div2, clip)
        if in_place:
            for i in range(p.shape[0]):
                ms[i], vs[i], step = _adam_step(gs[i], ms[i], vs[i], args)
                p[i] = p[i] - step
                gs[i] = f32(0.0)
        else:
            q = src[lo:hi]
            for i in range(p.shape[0]):
                ms[i], vs[i], step = _adam_step(gs[i], ms[i], vs[i], args)
                p[i] = q[i] - step
                gs[i] = f32(0.0)


@kernel_inline
def _adam_step(g, m, v, args):
    """(new m, new v, the step to subtract) of one element. In place, the caller's loop reads
    and writes p alone: given a source and a destination that are two views of one buffer,
    the compiler cannot rule out a partial overlap and ran the loop one element at a time
    (10x slower, measured 2026-12-07)."""
    rate, beta1, beta2, one_minus_b1, one_minus_b2, eps, bc1, bc2, div1, div2, clip = args
    g = _clipped(g, clip)
    mi = beta1 * m + one_minus_b1 * g
    vi = beta2 * v + one_minus_b2 * (g * g)
    m_hat = mi / bc1 if div1 else mi
    v_hat = vi / bc2 if div2 else vi
    return mi, vi, rate * m_hat / (np.sqrt(v_hat) + eps)


@kernel
def power(base, exponent):
    """base ** exponent for an integer exponent >= 0, by squaring in float64: the same bits
    everywhere, unlike libm's pow."""
    result = 1.0
    b = base
    e = exponent
    while e > 0:
        if e & 1:
            result *= b
        b *= b
        e >>= 1
    return result


@kernel
def scheduled_lr(lr, step, warmup, decay):
    """Learning rate at ``step`` on the schedule's clock (bytes learned, this update's
    included: the same clock for every bptt): linear warm-up over ``warmup`` bytes, then
    lr * min(1, sqrt(decay / step)) when ``decay`` > 0. Float64, rounded once to float32."""
    rate = lr
    if warmup > 0 and step < warmup:
        rate *= step / warmup
    if decay > 0 and step > decay:
        rate *= np.sqrt(decay / step)
    return f32(rate)


@kernel
def adam_beta2(beta2, step, warmup):
    """(beta2_t, bc2) of Adam step ``step`` >= 1, float64. Without ``warmup``: beta2 and
    1 - beta2^t. With it, v is the running mean of g^2 over the steps so far until that mean
    is as long as beta2's memory, 1 / (1 - beta2) steps: beta2_t = min(beta2, 1 - 1/t), and
    no bias to correct (bc2 = 1)."""
    if not warmup:
        return beta2, 1.0 - power(beta2, step)
    return min(beta2, 1.0 - 1.0 / step), 1.0
