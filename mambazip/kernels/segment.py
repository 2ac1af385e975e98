"""Truncated BPTT: the online loop with one update per segment of ``bptt`` bytes.

A segment is a run of forwards (input byte -> pdf of the target, the byte after it) from a
saved start state. When its last target is known, the gradient of the mean loss over the
segment flows back through time (the SSM state and the convolution's inputs), one optimizer
step is taken, and the segment is run again from its start state with the new weights, so
that the live state is the one the updated model would have reached. That rerun forms no
pdfs and goes layer by layer over all its inputs (``forward.model_rerun``). Without it
(P_RERUN 0, config's ``rerun`` false) the live state stays the one the segment's forwards
reached with the old weights: the next byte is fed to the new weights from there.

``A`` (L, E, N) = -exp(A_log) goes with ``theta``: the optimizer step renews it.

Activations are kept for ``chunk`` forwards only; the state at the start of every chunk is
saved, and during the backward pass each chunk but the newest is replayed from its saved
state. A replay repeats the same forwards on the same state with the same weights, so the
gradient has the same bits for every chunk size; memory is O(chunk), not O(bptt).

A segment may hold more than one update's bytes: with a horizon H longer than the stride
``bptt``, each update learns the last H bytes (``plan``), so the segment holds up to
C = H forwards; after an update its oldest chunks are dropped (``_slide``) and the rest
stay, rerun with the new weights (``_rerun``), which saves each chunk's start state again:
every replay of a chunk then starts from a state its weights made, and the bits do not
depend on the chunk size. ``hist`` keeps the last W coded bytes for the replay passes.

``Segment`` buffers, with C the capacity, M = ceil(C / chunk) and S =
forward.acts_size(dims), all carved from one int64 and one float32 buffer
(``segment_sizes``, ``segment_views``), so that the per-byte call of the decoder hands
Numba two arrays instead of twenty:
    inputs, targets  (C,) int64
    ck_conv          (M, L, K, E)  conv ring buffer at the start of each chunk
    ck_ssm           (M, L, E, N)  SSM state at the start of each chunk
    ck_pos           (M,) int64    ring-buffer slot of the newest input then
    work             (chunk, S)    saved activations, forward t in row t % chunk
    dssm, dpend      (L, E, N), (L, K, E): gradients carried back through the state
    dfr              backward.Deferred with ``chunk`` rows: the gradients of a chunk
    hist, hist_n     (W,) int64 ring of the last W coded bytes, (1,) int64 bytes pushed

``plan`` (N_PLAN,) int64 says how the online loop learns (config.TrainConfig): P_BPTT the
stride, P_WINDOW the horizon H, P_CHUNK, P_HISTORY W, P_CURRICULUM, P_ITERS, P_REPLAY_EVERY,
P_REPLAY_PASSES, P_RERUN (1: rerun each segment after its update), P_OVERLAP.

Overlapped updates (P_OVERLAP 1, config's ``overlap``; no rerun, horizon or replay): the
update of segment k is computed while segment k + 1 is coded, so the weights land one
segment late. Two weight buffers take turns, T[k % 2] holding the weights segment k's
forwards read: ``overlap_update`` takes the gradient of segment k at T[k % 2], then steps
from the newest weights, in T[(k + 1) % 2], which segment k + 1's forwards read meanwhile,
into T[k % 2], which segment k + 2's forwards will read. Segment k + 1 is fed into a second
Segment while the update reads the first. Which thread computes the update changes the
timing only: the bits are those of running it at once (``OnlineLearner``).
"""

from collections import namedtuple

import numpy as np

from ..jit import jit, jit_inline, kernel
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
from .views import carve, copy_into

f32 = np.float32

Segment = namedtuple(
    "Segment",
    ["inputs", "targets", "ck_conv", "ck_ssm", "ck_pos", "work", "dssm", "dpend", "dfr", "hist",
     "hist_n"],
)  # fmt: skip

(P_BPTT, P_WINDOW, P_CHUNK, P_HISTORY, P_CURRICULUM, P_ITERS, P_REPLAY_EVERY,
 P_REPLAY_PASSES, P_RERUN, P_OVERLAP) = range(10)  # fmt: skip
N_PLAN = 10


@kernel
def segment_sizes(dims, bptt, chunk, history=0):
    """(ints, floats): the lengths of the int64 and float32 buffers of a Segment of
    capacity ``bptt`` forwards with a history of ``history`` bytes."""
    D, E, N, R, V = dims[DIM_D], dims[DIM_E], dims[DIM_N], dims[DIM_R], dims[DIM_V]
    K, L = dims[DIM_K], dims[DIM_L]
    M = (bptt + chunk - 1) // chunk
    deferred = chunk * (3 * D + V + 3 * E + L * (5 * E + 2 * D + 2 * R + 2 * N))
    floats = M * L * E * (K + N) + chunk * acts_size(dims) + L * E * (N + K) + deferred
    return 2 * bptt + M + history + 1, floats


@jit_inline
def _segment(ints, floats, dims, bptt, chunk, history=0):
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
    if o + chunk * E != floats.shape[0] or 2 * bptt + M + history + 1 != ints.shape[0]:
        raise ValueError("segment_views: buffers not sized by segment_sizes")
    dfr = Deferred(head_x, head_dy, out_x, out_dy, dt_x, dt_dy, xp_x, xp_dy, in_x, in_dy, emb_dx,
                   dh, dyg, du, dy)  # fmt: skip
    return Segment(
        carve(ints, 0, (bptt,)), carve(ints, bptt, (bptt,)), ck_conv, ck_ssm,
        carve(ints, 2 * bptt, (M,)), work, dssm, dpend, dfr,
        carve(ints, 2 * bptt + M, (history,)), carve(ints, 2 * bptt + M + history, (1,)),
    )  # fmt: skip


@kernel
def segment_views(ints, floats, dims, bptt, chunk, history=0):
    """``_segment`` for kernels: views without reference counts (jit.py)."""
    return _segment(ints, floats, dims, bptt, chunk, history)


@jit
def segment_views_py(ints, floats, dims, bptt, chunk, history=0):
    """``_segment`` for Python: counted views, which keep ints and floats alive."""
    return _segment(ints, floats, dims, bptt, chunk, history)


@kernel
def segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, byte):
    """Feed ``byte`` as the next forward of the segment, saving what its backward needs."""
    t = counters[C_SEG]
    chunk = seg.work.shape[0]
    if t % chunk == 0:
        c = t // chunk
        copy_into(seg.ck_conv[c], conv_state)
        copy_into(seg.ck_ssm[c], ssm_state)
        seg.ck_pos[c] = counters[C_POS]
    forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters,
                 seg.work[t % chunk], byte)  # fmt: skip
    seg.inputs[t] = byte
    counters[C_SEG] = t + 1


@kernel
def _restore(conv_state, ssm_state, counters, seg, c):
    copy_into(conv_state, seg.ck_conv[c])
    copy_into(ssm_state, seg.ck_ssm[c])
    counters[C_POS] = seg.ck_pos[c]


@kernel
def segment_backward(theta, A, grad, offs, need, dims, hyper, conv_state, ssm_state, counters,
                     seg, n_steps, n_loss, live):  # fmt: skip
    """grad += the gradient of the sum of -log p(target) over the segment's first
    ``n_steps`` forwards, divided by ``n_loss``, the targets that are not negative (a
    negative target marks a forward that is only a path back through the state).
    ``live``: the newest chunk's activations are still those of the forwards (so it needs
    no replay). Leaves the live state at the start of some chunk."""
    chunk = seg.work.shape[0]
    scale = f32(1.0 / n_loss)
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


@kernel
def _rerun(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, n_steps):
    """Run the segment's first ``n_steps`` inputs again from its start state with the
    current weights, saving the state at the start of each chunk: the live state becomes
    the one these weights reach, and every saved state one that they made."""
    _restore(conv_state, ssm_state, counters, seg, 0)
    # The saved activations are spent: their buffer is the rerun's scratch, a chunk at a time.
    W = weight_views(theta, offs, dims)
    scratch = seg.work.reshape(-1)
    chunk = seg.work.shape[0]
    for lo in range(0, n_steps, chunk):
        c = lo // chunk
        if c > 0:  # chunk 0 starts from the state just restored from its save
            copy_into(seg.ck_conv[c], conv_state)
            copy_into(seg.ck_ssm[c], ssm_state)
            seg.ck_pos[c] = counters[C_POS]
        counters[C_POS] = model_rerun(
            W, A, conv_state, ssm_state, counters[C_POS], seg.inputs[lo : min(lo + chunk, n_steps)],
            scratch, dims[DIM_R], f32(hyper[H_EPS]),
        )  # fmt: skip
    counters[C_LAST_INPUT] = seg.inputs[n_steps - 1]


@jit
def segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                   conv_state, ssm_state, counters, seg, n_steps, live, n_new, clock,
                   iters, rerun):  # fmt: skip
    """Learn the newest ``n_new`` targets of the segment's first ``n_steps`` forwards (the
    older ones are marked negative: the gradient only passes through them) with ``iters``
    optimizer steps, the forwards run again with the weights of each before the next; with
    ``clock`` the schedule's clock moves by the n_new bytes. Then, with ``rerun``, rerun them
    from the segment's start state with the new weights (else put back the live state the
    forwards left) and open a new, empty segment."""
    # The backward leaves the live state alone only when it replays nothing.
    keep = not rerun and (iters > 1 or not live or n_steps > seg.work.shape[0])
    live_conv = np.empty(conv_state.shape if keep else (0, 0, 0), dtype=f32)
    live_ssm = np.empty(ssm_state.shape if keep else (0, 0, 0), dtype=f32)
    live_pos = counters[C_POS]
    if keep:
        live_conv[...] = conv_state
        live_ssm[...] = ssm_state
    for it in range(iters):
        if it > 0:
            _rerun(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, n_steps)
        segment_backward(theta, A, grad, offs, need, dims, hyper, conv_state, ssm_state, counters,
                         seg, n_steps, n_new, live and it == 0)  # fmt: skip
        if it == 0 and clock:
            counters[C_BYTES] += n_new
        optimizer_step(theta, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                       counters, counters[C_BYTES])  # fmt: skip
    if rerun:
        _rerun(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, n_steps)
    else:
        if keep:
            conv_state[...] = live_conv
            ssm_state[...] = live_ssm
            counters[C_POS] = live_pos
        counters[C_LAST_INPUT] = seg.inputs[n_steps - 1]
    counters[C_SEG] = 0


@kernel
def window_at(plan, learned):
    """The bytes an update learns after ``learned`` bytes: the horizon, or with a
    curriculum bptt more every ``curriculum`` bytes, up to the horizon."""
    bptt, window, curriculum = plan[P_BPTT], plan[P_WINDOW], plan[P_CURRICULUM]
    if curriculum == 0:
        return window
    grown = learned // curriculum
    if grown >= window // bptt - 1:  # compared before multiplying: a late clock would wrap
        return window
    return bptt * (1 + grown)


@kernel
def _slide(seg, n_steps, keep):
    """Drop the segment's oldest n_steps - keep forwards (whole chunks), keeping the
    newest ``keep`` with their saved start states, their targets marked learned (-1): the
    next update's gradient flows back through them, its loss is the new targets'."""
    drop = n_steps - keep
    for t in range(keep):
        seg.inputs[t] = seg.inputs[t + drop]
        seg.targets[t] = -1
    chunk = seg.work.shape[0]
    for c in range(keep // chunk):
        copy_into(seg.ck_conv[c], seg.ck_conv[c + drop // chunk])
        copy_into(seg.ck_ssm[c], seg.ck_ssm[c + drop // chunk])
        seg.ck_pos[c] = seg.ck_pos[c + drop // chunk]


@jit
def replay(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper, conv_state,
           ssm_state, counters, seg, rep, passes, rerun):  # fmt: skip
    """``passes`` passes of the online loop's truncated BPTT over the bytes of ``seg.hist``,
    oldest first, in segments of ``rep``: each pass from the zero state and primed with a 0
    as a stream is, so that a pass is what learning those bytes as a new stream would do,
    without moving the schedule's clock; ``rerun`` as in ``segment_update``. The live state
    and counters are put back."""
    W = seg.hist.shape[0]
    pushed = seg.hist_n[0]
    n = min(pushed, W)
    bptt = rep.inputs.shape[0]
    live_conv = conv_state.copy()
    live_ssm = ssm_state.copy()
    live_pos, live_input, live_seg = counters[C_POS], counters[C_LAST_INPUT], counters[C_SEG]
    start = pushed - n
    for _ in range(passes):
        conv_state[...] = f32(0.0)
        ssm_state[...] = f32(0.0)
        counters[C_POS] = dims[DIM_K] - 1
        counters[C_SEG] = 0
        for j in range(n):
            x = 0 if j == 0 else seg.hist[(start + j - 1) % W]
            segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, rep, x)
            t = counters[C_SEG]
            rep.targets[t - 1] = seg.hist[(start + j) % W]
            if t == bptt:
                segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims,
                               hyper, conv_state, ssm_state, counters, rep, t, True, t,
                               False, 1, rerun)  # fmt: skip
        t = counters[C_SEG]
        if t > 0:
            segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                           conv_state, ssm_state, counters, rep, t, True, t, False,
                           1, rerun)  # fmt: skip
    conv_state[...] = live_conv
    ssm_state[...] = live_ssm
    counters[C_POS], counters[C_LAST_INPUT], counters[C_SEG] = live_pos, live_input, live_seg


@kernel
def run_segments(
    theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
    conv_state, ssm_state, counters, seg_ints, seg_floats, rep_ints, rep_floats, plan, data,
    freqs, pdfs, p_coded, start, resumed,
):  # fmt: skip
    """The online loop over data[start:] (data (n,) uint8) with truncated BPTT, from a
    primed model; the segment is the one packed in seg_ints, seg_floats (see
    ``segment_views``), the replay passes' in rep_ints, rep_floats, the recipe in ``plan``.

    For each byte b: p_coded[i] = p(b) under the current float pdf; b becomes the target of
    the newest forward; if that completes ``bptt`` new targets, update on the window, keep
    its newest forwards for the next (as many as the next window holds, less bptt) and, when
    the clock passes a multiple of replay_every, replay the history; feed b as the next
    forward; row i + 1 = the pdf of the byte after it, quantized into freqs (n + 1, V) or
    copied into pdfs (n + 1, V) when that has rows (``step.emit_pdf``); row 0 untouched.

    Returns n, or with P_OVERLAP the index i of the byte that completed a segment: its
    update is the caller's (``overlap_update``), who then calls again from ``start`` i with
    ``resumed`` (byte i was coded and is a target: feed it) and the next weights and
    segment.
    """
    bptt, chunk, history = plan[P_BPTT], plan[P_CHUNK], plan[P_HISTORY]
    seg = segment_views(seg_ints, seg_floats, dims, plan[P_WINDOW], chunk, history)
    every = plan[P_REPLAY_EVERY]
    rerun = plan[P_RERUN] != 0
    overlap = plan[P_OVERLAP] != 0
    for i in range(start, data.shape[0]):
        b = data[i]
        if not (resumed and i == start):
            if history > 0:
                seg.hist[seg.hist_n[0] % history] = b
                seg.hist_n[0] += 1
            t = counters[C_SEG] - 1
            p_coded[i] = acts_views(seg.work[t % chunk], dims).probs[b]
            seg.targets[t] = b
            if (t + 1) % bptt == 0:
                if overlap:
                    return i
                segment_update(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims,
                               hyper, conv_state, ssm_state, counters, seg, t + 1, True, bptt,
                               True, plan[P_ITERS], rerun)  # fmt: skip
                keep = min(t + 1, window_at(plan, counters[C_BYTES]) - bptt)
                _slide(seg, t + 1, keep)
                counters[C_SEG] = keep
                clock = counters[C_BYTES]
                if every > 0 and clock // every != (clock - bptt) // every:
                    rep = segment_views(rep_ints, rep_floats, dims, bptt, chunk, 0)
                    replay(theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                           conv_state, ssm_state, counters, seg, rep,
                           plan[P_REPLAY_PASSES], rerun)  # fmt: skip
                    if keep > 0:
                        _rerun(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg,
                               keep)  # fmt: skip
        segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, b)
        t = counters[C_SEG] - 1
        emit_pdf(freqs, pdfs, i + 1, acts_views(seg.work[t % chunk], dims).probs)
    return data.shape[0]


@kernel
def overlap_update(theta, A, newest, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                   conv_scratch, ssm_scratch, counters, scratch_counters, seg_ints, seg_floats,
                   plan, n_steps, live):  # fmt: skip
    """The overlapped update of the first ``n_steps`` forwards of a segment packed in
    seg_ints, seg_floats, which read the weights theta, A (``live``: the newest chunk's
    activations are still the forwards', see ``segment_backward``): its gradient there
    (replays run on the scratch state and counters, not the live ones), then one
    optimizer step from the weights
    ``newest`` into theta, A. Moves the optimizer's counters (C_STEP, C_BYTES), which the
    forwards do not read."""
    seg = segment_views(seg_ints, seg_floats, dims, plan[P_WINDOW], plan[P_CHUNK], 0)
    segment_backward(theta, A, grad, offs, need, dims, hyper, conv_scratch, ssm_scratch,
                     scratch_counters, seg, n_steps, n_steps, live)  # fmt: skip
    counters[C_BYTES] += n_steps
    optimizer_step(newest, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                   counters, counters[C_BYTES])  # fmt: skip
