"""Truncated BPTT: the online loop with one update per segment of ``bptt`` bytes.

A segment is a run of forwards (input byte -> pdf of the target, the byte after it) from a
saved start state. When its last target is known, the gradient of the mean loss over the
segment flows back through time (the SSM state and the convolution's inputs), one optimizer
step is taken, and the segment is run again from its start state with the new weights, so
that the live state is the one the updated model would have reached. That rerun forms no
pdfs and goes layer by layer over all its inputs (``forward.model_rerun``).

``A`` (L, E, N) = -exp(A_log) goes with ``theta``: the optimizer step renews it.

Activations are kept for ``chunk`` forwards only; the state at the start of every chunk is
saved, and during the backward pass each chunk but the newest is replayed from its saved
state. A replay repeats the same forwards on the same state with the same weights, so the
gradient has the same bits for every chunk size; memory is O(chunk), not O(bptt).

``Segment`` buffers, with M = ceil(bptt / chunk) and S = forward.acts_size(dims), all carved
from one int64 and one float32 buffer (``segment_sizes``, ``segment_views``), so that the
per-byte call of the decoder hands Numba two arrays instead of twenty:
    inputs, targets  (bptt,) int64
    ck_conv          (M, L, K, E)  conv ring buffer at the start of each chunk
    ck_ssm           (M, L, E, N)  SSM state at the start of each chunk
    ck_pos           (M,) int64    ring-buffer slot of the newest input then
    work             (chunk, S)    saved activations, forward t in row t % chunk
    dssm, dpend      (L, E, N), (L, K, E): gradients carried back through the state
    dfr              backward.Deferred with ``chunk`` rows: the gradients of a chunk
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .backward import Deferred
from .forward import acts_size, acts_views, model_rerun
from .layout import DIM_D, DIM_E, DIM_K, DIM_L, DIM_N, DIM_R, DIM_V, weight_views
from .step import (
    C_BYTES,
    C_LAST_INPUT,
    C_POS,
    C_SEG,
    H_EPS,
    backward_tokens,
    emit_pdf,
    forward_byte,
    optimizer_step,
)
from .views import carve

f32 = np.float32

Segment = namedtuple(
    "Segment",
    ["inputs", "targets", "ck_conv", "ck_ssm", "ck_pos", "work", "dssm", "dpend", "dfr"],
)


@njit(cache=True, error_model="numpy")
def segment_sizes(dims, bptt, chunk):
    """(ints, floats): the lengths of the int64 and float32 buffers of a Segment."""
    D, E, N, R, V = dims[DIM_D], dims[DIM_E], dims[DIM_N], dims[DIM_R], dims[DIM_V]
    K, L = dims[DIM_K], dims[DIM_L]
    M = (bptt + chunk - 1) // chunk
    deferred = chunk * (3 * D + V + 3 * E + L * (5 * E + 2 * D + 2 * R + 2 * N))
    floats = M * L * E * (K + N) + chunk * acts_size(dims) + L * E * (N + K) + deferred
    return 2 * bptt + M, floats


@njit(cache=True, error_model="numpy")
def segment_views(ints, floats, dims, bptt, chunk):
    """The Segment of ``bptt`` forwards replayed in chunks of ``chunk``, as views of its
    buffers ints (int64) and floats (float32), sized by ``segment_sizes``."""
    D, E, N, R, V = dims[DIM_D], dims[DIM_E], dims[DIM_N], dims[DIM_R], dims[DIM_V]
    K, L = dims[DIM_K], dims[DIM_L]
    P = R + 2 * N
    M = (bptt + chunk - 1) // chunk
    S = acts_size(dims)
    o = 0
    ck_conv = carve(floats, o, (M, L, K, E))
    o += M * L * K * E
    ck_ssm = carve(floats, o, (M, L, E, N))
    o += M * L * E * N
    work = carve(floats, o, (chunk, S))
    o += chunk * S
    dssm = carve(floats, o, (L, E, N))
    o += L * E * N
    dpend = carve(floats, o, (L, K, E))
    o += L * K * E
    head_x = carve(floats, o, (chunk, D))
    o += chunk * D
    head_dy = carve(floats, o, (chunk, V))
    o += chunk * V
    out_x = carve(floats, o, (L, chunk, E))
    o += L * chunk * E
    out_dy = carve(floats, o, (L, chunk, D))
    o += L * chunk * D
    dt_x = carve(floats, o, (L, chunk, R))
    o += L * chunk * R
    dt_dy = carve(floats, o, (L, chunk, E))
    o += L * chunk * E
    xp_x = carve(floats, o, (L, chunk, E))
    o += L * chunk * E
    xp_dy = carve(floats, o, (L, chunk, P))
    o += L * chunk * P
    in_x = carve(floats, o, (L, chunk, D))
    o += L * chunk * D
    in_dy = carve(floats, o, (L, chunk, 2 * E))
    o += L * chunk * 2 * E
    emb_dx = carve(floats, o, (chunk, D))
    o += chunk * D
    dh = carve(floats, o, (chunk, D))
    o += chunk * D
    dyg = carve(floats, o, (chunk, E))
    o += chunk * E
    du = carve(floats, o, (chunk, E))
    o += chunk * E
    dy = carve(floats, o, (chunk, E))
    if o + chunk * E != floats.shape[0] or 2 * bptt + M != ints.shape[0]:
        raise ValueError("segment_views: buffers not sized by segment_sizes")
    dfr = Deferred(head_x, head_dy, out_x, out_dy, dt_x, dt_dy, xp_x, xp_dy, in_x, in_dy, emb_dx,
                   dh, dyg, du, dy)  # fmt: skip
    return Segment(
        carve(ints, 0, (bptt,)), carve(ints, bptt, (bptt,)), ck_conv, ck_ssm,
        carve(ints, 2 * bptt, (M,)), work, dssm, dpend, dfr,
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, byte):
    """Feed ``byte`` as the next forward of the segment, saving what its backward needs."""
    t = counters[C_SEG]
    chunk = seg.work.shape[0]
    if t % chunk == 0:
        c = t // chunk
        seg.ck_conv[c] = conv_state
        seg.ck_ssm[c] = ssm_state
        seg.ck_pos[c] = counters[C_POS]
    forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters,
                 seg.work[t % chunk], byte)  # fmt: skip
    seg.inputs[t] = byte
    counters[C_SEG] = t + 1


@njit(cache=True, error_model="numpy")
def _restore(conv_state, ssm_state, counters, seg, c):
    conv_state[...] = seg.ck_conv[c]
    ssm_state[...] = seg.ck_ssm[c]
    counters[C_POS] = seg.ck_pos[c]


@njit(cache=True, error_model="numpy")
def segment_backward(theta, A, grad, offs, need, dims, hyper, conv_state, ssm_state, counters,
                     seg, n_steps, live):  # fmt: skip
    """grad += the gradient of the mean of -log p(target) over the segment's first
    ``n_steps`` forwards. ``live``: the newest chunk's activations are still those of the
    forwards (so it needs no replay). Leaves the live state at the start of some chunk."""
    chunk = seg.work.shape[0]
    scale = f32(1.0 / n_steps)
    seg.dssm[...] = f32(0.0)
    seg.dpend[...] = f32(0.0)
    newest = (n_steps - 1) // chunk
    for c in range(newest, -1, -1):
        lo = c * chunk
        hi = min(lo + chunk, n_steps)
        if c != newest or not live:
            _restore(conv_state, ssm_state, counters, seg, c)
            for t in range(lo, hi):
                forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters,
                             seg.work[t - lo], seg.inputs[t])  # fmt: skip
        backward_tokens(theta, A, grad, offs, need, dims, seg.work[: hi - lo], seg.inputs[lo:hi],
                        seg.targets[lo:hi], scale, True, seg.dssm, seg.dpend, seg.dfr)  # fmt: skip


@njit(cache=True, error_model="numpy")
def segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, dims, hyper,
                   conv_state, ssm_state, counters, seg, n_steps, live):  # fmt: skip
    """Learn the segment's first ``n_steps`` targets with one optimizer step (the schedule's
    clock counts bytes), then rerun them from the segment's start state with the new weights
    and open a new, empty segment."""
    segment_backward(theta, A, grad, offs, need, dims, hyper, conv_state, ssm_state, counters,
                     seg, n_steps, live)  # fmt: skip
    counters[C_BYTES] += n_steps
    optimizer_step(theta, A, grad, adam_m, adam_v, offs, need, ranges, dims, hyper, counters,
                   counters[C_BYTES])  # fmt: skip
    _restore(conv_state, ssm_state, counters, seg, 0)
    # The saved activations are spent: their buffer is the rerun's scratch, a chunk at a time.
    W = weight_views(theta, offs, dims)
    scratch = seg.work.reshape(-1)
    chunk = seg.work.shape[0]
    for lo in range(0, n_steps, chunk):
        counters[C_POS] = model_rerun(
            W, A, conv_state, ssm_state, counters[C_POS], seg.inputs[lo : min(lo + chunk, n_steps)],
            scratch, dims[DIM_R], f32(hyper[H_EPS]),
        )  # fmt: skip
    counters[C_LAST_INPUT] = seg.inputs[n_steps - 1]
    counters[C_SEG] = 0


@njit(cache=True, error_model="numpy")
def run_segments(
    theta, A, grad, adam_m, adam_v, offs, need, ranges, dims, hyper,
    conv_state, ssm_state, counters, seg_ints, seg_floats, bptt, chunk, data, freqs, pdfs,
    p_coded,
):  # fmt: skip
    """The online loop over data (n,) uint8 with truncated BPTT, from a primed model; the
    segment is the one packed in seg_ints, seg_floats (see ``segment_views``).

    For each byte b: p_coded[i] = p(b) under the current float pdf; b becomes the target of
    the newest forward; if that completes the segment, update; feed b as the next forward;
    row i + 1 = the pdf of the byte after it, quantized into freqs (n + 1, V) or copied into
    pdfs (n + 1, V) when that has rows (``step.emit_pdf``); row 0 untouched.
    """
    seg = segment_views(seg_ints, seg_floats, dims, bptt, chunk)
    for i in range(data.shape[0]):
        b = data[i]
        t = counters[C_SEG] - 1
        p_coded[i] = acts_views(seg.work[t % chunk], dims).probs[b]
        seg.targets[t] = b
        if t + 1 == bptt:
            segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, dims, hyper,
                           conv_state, ssm_state, counters, seg, bptt, True)  # fmt: skip
        segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, b)
        t = counters[C_SEG] - 1
        emit_pdf(freqs, pdfs, i + 1, acts_views(seg.work[t % chunk], dims).probs)
