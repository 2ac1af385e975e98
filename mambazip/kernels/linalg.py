"""Matrix-vector products with one fixed summation order.

Weights are stored input-major, ``Wt`` of shape (n_in, n_out), the transpose of PyTorch's
``Linear.weight``. The forward product is then written in axpy form: for each input ``c`` in
order, ``y[:] += Wt[c, :] * x[c]``. Every output is summed in input order regardless of SIMD
width, and the contiguous inner loop vectorises without reassociation.

The backward product ``dx = Wt @ dy`` is a reduction along contiguous rows. It uses eight
explicit lane accumulators combined in a fixed tree, so the order is written here, not chosen
by the compiler.
"""

import numpy as np
from numba import njit

f32 = np.float32


@njit(cache=True)
def matvec(y, Wt, x, bias):
    """y (n_out,) = bias (n_out,) + x (n_in,) @ Wt (n_in, n_out)."""
    n_in, n_out = Wt.shape
    for o in range(n_out):
        y[o] = bias[o]
    for c in range(n_in):
        xc = x[c]
        row = Wt[c]
        for o in range(n_out):
            y[o] += row[o] * xc


@njit(cache=True, inline="always")
def dot_lanes(a, b):
    """sum_i a[i] * b[i] over contiguous float32 vectors, in eight interleaved lanes."""
    n = a.shape[0]
    s0 = f32(0.0)
    s1 = f32(0.0)
    s2 = f32(0.0)
    s3 = f32(0.0)
    s4 = f32(0.0)
    s5 = f32(0.0)
    s6 = f32(0.0)
    s7 = f32(0.0)
    n8 = n - n % 8
    for i in range(0, n8, 8):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
        s4 += a[i + 4] * b[i + 4]
        s5 += a[i + 5] * b[i + 5]
        s6 += a[i + 6] * b[i + 6]
        s7 += a[i + 7] * b[i + 7]
    for i in range(n8, n):
        s0 += a[i] * b[i]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@njit(cache=True)
def matvec_t_acc(dx, Wt, dy):
    """dx (n_in,) += Wt (n_in, n_out) @ dy (n_out,): the input gradient of ``matvec``."""
    for c in range(Wt.shape[0]):
        dx[c] += dot_lanes(Wt[c], dy)


@njit(cache=True)
def outer_acc(dWt, x, dy):
    """dWt (n_in, n_out) += outer(x (n_in,), dy (n_out,)): the weight gradient of ``matvec``."""
    for c in range(dWt.shape[0]):
        xc = x[c]
        row = dWt[c]
        for o in range(dWt.shape[1]):
            row[o] += xc * dy[o]
