"""The per-byte loop body, compiled as one call over a run of bytes, and the pdf quantizer.

Encoder and decoder both call ``run_bytes``: the encoder on a whole chunk, the decoder on one
byte at a time as it decodes them. Same code, same order of operations, same bits.
"""

import math

import numpy as np

from ..jit import kernel
from .backward import chunk_backward
from .forward import a_from_log, acts_views, model_forward
from .layout import A_LOG, DIM_K, DIM_R, weight_views
from .optim import adam_beta2, adam_update, power, scheduled_lr, sgd_update
from .views import carve, copy_into

f32 = np.float32

FREQ_BITS = 24
FREQ_TOTAL = 1 << FREQ_BITS

# Positions in the float64 ``hyper`` array.
(H_EPS, H_LR, H_BETA1, H_BETA2, H_ADAM_EPS, H_CLIP, H_WARMUP, H_DECAY, H_OPTIMIZER,
 H_BETA2_WARMUP) = range(10)  # fmt: skip
N_HYPER = 10
OPT_NONE, OPT_SGD, OPT_ADAM = 0, 1, 2

# Positions in the int64 ``counters`` array: the ring-buffer slot of the newest conv input,
# the number of optimizer steps taken, the byte fed to the last forward, the bytes learned
# so far (the schedule's one clock, whatever bptt is) and the forwards in the current segment.
C_POS, C_STEP, C_LAST_INPUT, C_BYTES, C_SEG = range(5)
N_COUNTERS = 5


@kernel
def quantize(freq, probs):
    """Integer frequencies (V,) summing to FREQ_TOTAL, each >= 1, from probs (V,).

    freq = 1 + floor(p * (FREQ_TOTAL - V)), exact in float64 for float32 p; the remainder
    (of either sign, a few units) goes to the first most frequent symbol. Negative or NaN p
    count as 0 and a table that cannot be balanced becomes uniform, so even a diverged model
    yields a valid, reproducible table.
    """
    V = probs.shape[0]
    free = float(FREQ_TOTAL - V)
    total = 0
    best = 0
    for v in range(V):
        scaled = float(probs[v]) * free
        if not scaled >= 0.0:
            scaled = 0.0
        elif scaled > free:
            scaled = free
        f = 1 + math.floor(scaled)
        freq[v] = f
        total += f
        if f > freq[best]:
            best = v
    if freq[best] + (FREQ_TOTAL - total) >= 1:
        freq[best] += FREQ_TOTAL - total
    else:
        for v in range(V):
            freq[v] = FREQ_TOTAL // V
        freq[0] += FREQ_TOTAL - (FREQ_TOTAL // V) * V


@kernel
def emit_pdf(freqs, pdfs, row, probs):
    """Hand out the pdf probs (V,) of the next byte as row ``row``: quantized into freqs
    (rows, V) int32 for coding, or, when pdfs (rows, V) float32 has rows, copied there for a
    predictor that mixes it with other parts (freqs is then not touched)."""
    if pdfs.shape[0] > 0:
        copy_into(pdfs[row], probs)
    else:
        quantize(freqs[row], probs)


@kernel
def optimizer_step(src, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                   counters, clock):  # fmt: skip
    """One update from the accumulated ``grad`` of the weights in ``src`` into ``theta``
    (the same array but for an overlapped update); ``clock`` is the schedule's position, lrs
    (S,) the multipliers of the ``ranges``.
    A = -exp(A_log) follows the new A_log: ``need`` and ``ranges`` come from the same scope
    (``Params.need_mask``, ``Params.trainable_ranges``), so need[A_LOG] says A_log moved."""
    kind = int(hyper[H_OPTIMIZER])
    step = counters[C_STEP] + 1
    counters[C_STEP] = step
    lr = scheduled_lr(hyper[H_LR], clock, hyper[H_WARMUP], hyper[H_DECAY])
    clip = f32(hyper[H_CLIP])
    if kind == OPT_SGD:
        sgd_update(src, theta, grad, ranges, lrs, lr, clip)
    else:
        beta1 = hyper[H_BETA1]
        beta2, bc2 = adam_beta2(hyper[H_BETA2], step, hyper[H_BETA2_WARMUP] != 0.0)
        bc1 = f32(1.0 - power(beta1, step))
        adam_update(
            src, theta, grad, adam_m, adam_v, ranges, lrs, lr, f32(beta1), f32(beta2),
            f32(hyper[H_ADAM_EPS]), bc1, f32(bc2), clip,
        )  # fmt: skip
    if need[A_LOG]:
        a_from_log(A, weight_views(theta, offs, dims).A_log)


@kernel
def forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, work, byte):
    """Advance the state by ``byte``; the next byte's pdf is left in the workspace.
    A (L, E, N) = -exp(A_log) of ``theta``."""
    W = weight_views(theta, offs, dims)
    act = acts_views(work, dims)
    pos = (counters[C_POS] + 1) % dims[DIM_K]
    counters[C_POS] = pos
    counters[C_LAST_INPUT] = byte
    model_forward(act, W, A, conv_state, ssm_state, pos, byte, dims[DIM_R], f32(hyper[H_EPS]))


@kernel
def backward_tokens(theta, A, grad, offs, need, dims, work, inputs, targets, scale, carry, dssm,
                    dpend, dfr):  # fmt: skip
    """Accumulate into ``grad`` the gradient of -scale Σ_t log p_t(targets[t]) of the forwards
    of inputs (n,) saved in work (n, acts_size), oldest first (see
    backward.chunk_backward for the other arguments)."""
    chunk_backward(weight_views(grad, offs, dims), weight_views(theta, offs, dims), A, work, dims,
                   inputs, targets, need, scale, carry, dssm, dpend, dfr)  # fmt: skip


@kernel
def run_bytes(
    theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
    conv_state, ssm_state, counters, work, dssm, dpend, dfr, token, data, freqs, pdfs, p_coded,
):  # fmt: skip
    """The online loop over data (n,) uint8, from a primed model.

    For each byte b: p_coded[i] = p(b) under the current float pdf; learn b (one exact bptt=1
    optimizer step, unless the optimizer is none); feed b; row i + 1 = the pdf of the byte
    after it, quantized into freqs (n + 1, V) int32 or, when pdfs (n + 1, V) float32 is given
    (has rows), copied there (``emit_pdf``); row 0 untouched (the caller's current pdf).
    token (2,) int64 is scratch: the input and the target of the saved forward.
    """
    act = acts_views(work, dims)
    learn = int(hyper[H_OPTIMIZER]) != OPT_NONE and ranges.shape[0] > 0
    saved = carve(work, 0, (1, work.shape[0]))
    for i in range(data.shape[0]):
        b = data[i]
        p_coded[i] = act.probs[b]
        if learn:
            token[0] = counters[C_LAST_INPUT]
            token[1] = b
            backward_tokens(theta, A, grad, offs, need, dims, saved, token[:1], token[1:],
                            f32(1.0), False, dssm, dpend, dfr)  # fmt: skip
            counters[C_BYTES] += 1
            optimizer_step(
                theta, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                counters, counters[C_BYTES],
            )  # fmt: skip
        forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, work, b)
        emit_pdf(freqs, pdfs, i + 1, act.probs)
