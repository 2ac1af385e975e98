"""Single-token forward pass of a Mamba-1 byte model, one function per layer type.

Dimensions as in ``layout``: D d_model, E d_inner, N d_state, R dt_rank, K d_conv, V vocab,
L n_layer, P = R + 2N (x_proj outputs). Argument order follows llm.c: outputs, inputs,
weights. Each forward saves in ``Acts`` exactly what ``backward`` needs.

Recurrent state: ``conv_state`` (L, K, E) is a ring buffer of the last K mixer inputs;
``pos`` is the slot of the newest one. ``ssm_state`` (L, E, N) is the selective-scan state.

``A`` (L, E, N) = -exp(A_log) is formed by ``a_from_log`` when the weights change, not at
every token: with truncated BPTT it changes once per segment, and its exponentials were a
third of the scan's forward.
"""

from collections import namedtuple

import numpy as np

from ..jit import jit, jit_inline, kernel, kernel_inline
from .detmath import exp32, silu32, softmax32, softplus32
from .layout import DIM_D, DIM_E, DIM_K, DIM_L, DIM_N, DIM_R, DIM_V
from .linalg import matvec, matvec_rows
from .scan import scan_forward_pass
from .views import carve

f32 = np.float32

Acts = namedtuple(
    "Acts",
    [
        "x_in",  # (L, D)    residual stream entering each layer
        "rstd",  # (L,)      1/rms of x_in, for the norm's backward
        "h",  # (L, D)    normed x_in
        "xz",  # (L, 2E)   in_proj output: mixer input | gate
        "conv_in",  # (L, K, E) the convolution's inputs at this step, oldest first
        "xc",  # (L, E)    convolution output, before SiLU
        "u",  # (L, E)    SiLU(xc), the SSM input
        "dbc",  # (L, P)    x_proj output: dt_raw | B | C
        "dtp",  # (L, E)    dt before softplus
        "dt",  # (L, E)
        "dA",  # (L, E, N) exp(dt A)
        "ssm_prev",  # (L, E, N) SSM state before this token
        "y",  # (L, E)    SSM output before the gate
        "yg",  # (L, E)    gated output, out_proj input
        "x_f",  # (D,)      residual stream after the last layer
        "rstd_f",  # (1,)
        "h_f",  # (D,)      normed x_f, lm_head input
        "logits",  # (V,)
        "probs",  # (V,)      softmax(logits): the pdf of the next byte
        "mix_out",  # (D,)      scratch: out_proj output
    ],
)


@kernel
def acts_size(dims):
    D, E, N, R, V = dims[DIM_D], dims[DIM_E], dims[DIM_N], dims[DIM_R], dims[DIM_V]
    K, L = dims[DIM_K], dims[DIM_L]
    P = R + 2 * N
    per_layer = 2 * D + 1 + 2 * E + K * E + 6 * E + P + 2 * E * N
    return L * per_layer + 3 * D + 1 + 2 * V


@jit_inline
def _acts(work, dims):
    """Views of the float32 workspace ``work`` (size ``acts_size(dims)``) as ``Acts``."""
    D, E, N, R, V = dims[DIM_D], dims[DIM_E], dims[DIM_N], dims[DIM_R], dims[DIM_V]
    K, L = dims[DIM_K], dims[DIM_L]
    P = R + 2 * N
    o = 0
    x_in = carve(work, o, (L, D))
    o += L * D
    rstd = carve(work, o, (L,))
    o += L
    h = carve(work, o, (L, D))
    o += L * D
    xz = carve(work, o, (L, 2 * E))
    o += L * 2 * E
    conv_in = carve(work, o, (L, K, E))
    o += L * K * E
    xc = carve(work, o, (L, E))
    o += L * E
    u = carve(work, o, (L, E))
    o += L * E
    dbc = carve(work, o, (L, P))
    o += L * P
    dtp = carve(work, o, (L, E))
    o += L * E
    dt = carve(work, o, (L, E))
    o += L * E
    dA = carve(work, o, (L, E, N))
    o += L * E * N
    ssm_prev = carve(work, o, (L, E, N))
    o += L * E * N
    y = carve(work, o, (L, E))
    o += L * E
    yg = carve(work, o, (L, E))
    o += L * E
    x_f = carve(work, o, (D,))
    o += D
    rstd_f = carve(work, o, (1,))
    o += 1
    h_f = carve(work, o, (D,))
    o += D
    logits = carve(work, o, (V,))
    o += V
    probs = carve(work, o, (V,))
    o += V
    mix_out = carve(work, o, (D,))
    return Acts(
        x_in, rstd, h, xz, conv_in, xc, u, dbc, dtp, dt, dA, ssm_prev, y, yg,
        x_f, rstd_f, h_f, logits, probs, mix_out,
    )  # fmt: skip


@kernel
def acts_views(work, dims):
    """``_acts`` for kernels: views without reference counts (jit.py)."""
    return _acts(work, dims)


@jit
def acts_views_py(work, dims):
    """``_acts`` for Python: counted views, which keep work alive."""
    return _acts(work, dims)


@kernel
def rmsnorm_forward(out, x, weight, eps):
    """out (D,) = x (D,) / sqrt(mean(x^2) + eps) * weight (D,); returns that 1/rms."""
    D = x.shape[0]
    sum_sq = f32(0.0)
    for d in range(D):
        sum_sq += x[d] * x[d]
    rstd = f32(1.0) / np.sqrt(sum_sq / f32(D) + eps)
    for d in range(D):
        out[d] = (x[d] * rstd) * weight[d]
    return rstd


@kernel
def conv_forward(xc, conv_in, conv_state, pos, xin, conv_w, conv_b):
    """Causal depthwise convolution of one new input.

    xc (E,) out; conv_in (K, E) out: the K inputs convolved, oldest first (for backward);
    conv_state (K, E) ring buffer, slot ``pos`` receives xin (E,);
    conv_w (K, E) with k = K-1 applied to the newest input; conv_b (E,).
    """
    K, E = conv_state.shape
    for e in range(E):
        conv_state[pos, e] = xin[e]
        xc[e] = conv_b[e]
    for k in range(K):
        slot = (pos + 1 + k) % K
        for e in range(E):
            conv_in[k, e] = conv_state[slot, e]
            xc[e] += conv_w[k, e] * conv_in[k, e]


@kernel
def silu_forward(out, x):
    for i in range(x.shape[0]):
        out[i] = silu32(x[i])


@kernel
def softplus_forward(out, x):
    for i in range(x.shape[0]):
        out[i] = softplus32(x[i])


@kernel
def a_from_log(A, A_log):
    """A (L, E, N) = -exp(A_log (L, E, N)): the SSM's decay rates, trained in log space."""
    L, E, N = A.shape
    for l in range(L):
        for e in range(E):
            for n in range(N):
                A[l, e, n] = -exp32(A_log[l, e, n])


@kernel
def ssm_forward(y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip):
    """One step of the selective scan, discretised as in Mamba-1.

    ssm (E, N) updated in place: ssm = exp(dt A) * ssm + (dt u) B, A (E, N) = -exp(A_log);
    y (E,) = ssm @ C + D_skip * u, each y[e] summed over n in order from +0.0. Saves
    dA = exp(dt A) and ssm_prev, both (E, N). u, dt (E,); B, C (N,); D_skip (E,).
    One pass over the channels in vector IR (``scan.scan_forward_pass``).
    """
    _check_scan_arrays(y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip)
    scan_forward_pass(y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip, True)


@kernel
def ssm_advance(y, ssm, u, dt, B, C, A, D_skip):
    """``ssm_forward`` without saving dA and ssm_prev (the rerun's)."""
    _check_scan_arrays(y, ssm, ssm, ssm, u, dt, B, C, A, D_skip)
    scan_forward_pass(y, ssm, ssm, ssm, u, dt, B, C, A, D_skip, False)


@kernel
def _check_scan_arrays(y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip):
    """The vector IR of the scan reads the N states of a channel as contiguous vectors and
    trusts the shapes: a wrong call must raise, not read past an array or misread it."""
    E, N = ssm.shape
    ok = _rows_ok(ssm, E, N) and _rows_ok(dA, E, N) and _rows_ok(ssm_prev, E, N)
    ok = ok and _rows_ok(A, E, N) and _states_ok(B, N) and _states_ok(C, N)
    ok = ok and y.shape[0] == E and u.shape[0] == E and dt.shape[0] == E
    if not (ok and D_skip.shape[0] == E):
        raise ValueError("ssm scan: shapes that do not match, or N axes that are not contiguous")


@kernel_inline
def _rows_ok(rows, E, N):
    return rows.shape[0] == E and rows.shape[1] == N and (N < 2 or rows.strides[1] == 4)


@kernel_inline
def _states_ok(vector, N):
    return vector.shape[0] == N and (N < 2 or vector.strides[0] == 4)


@kernel
def gate_forward(yg, y, z):
    """yg (E,) = y (E,) * SiLU(z (E,))."""
    for e in range(y.shape[0]):
        yg[e] = y[e] * silu32(z[e])


@kernel
def mixer_forward(out, act, layer, W, A, conv_state, ssm_state, pos, R):
    """The Mamba mixer of one layer on act.h[layer] (D,); out (D,) = its output.
    A (L, E, N) = -exp(W.A_log)."""
    l = layer
    E = conv_state.shape[2]
    N = ssm_state.shape[2]
    matvec(act.xz[l], W.in_proj[l], act.h[l], W.in_proj_bias[l])
    conv_forward(
        act.xc[l], act.conv_in[l], conv_state[l], pos, act.xz[l, :E], W.conv_w[l], W.conv_b[l]
    )
    silu_forward(act.u[l], act.xc[l])
    matvec(act.dbc[l], W.x_proj[l], act.u[l], W.x_proj_bias[l])
    matvec(act.dtp[l], W.dt_proj[l], act.dbc[l, :R], W.dt_bias[l])
    softplus_forward(act.dt[l], act.dtp[l])
    ssm_forward(
        act.y[l], ssm_state[l], act.dA[l], act.ssm_prev[l], act.u[l], act.dt[l],
        act.dbc[l, R : R + N], act.dbc[l, R + N :], A[l], W.D[l],
    )  # fmt: skip
    gate_forward(act.yg[l], act.y[l], act.xz[l, E:])
    matvec(out, W.out_proj[l], act.yg[l], W.out_proj_bias[l])


@kernel
def model_forward(act, W, A, conv_state, ssm_state, pos, byte, R, eps):
    """Advance the model by one input byte; act.probs (V,) becomes the next byte's pdf.
    A (L, E, N) = -exp(W.A_log), formed by ``a_from_log``; ``pos`` is the ring-buffer slot
    for this input (the caller advances it). ``model_rerun`` advances the state only."""
    L, D = act.x_in.shape
    x = act.x_in[0]
    for d in range(D):
        x[d] = W.embedding[d, byte]
    for l in range(L):
        act.rstd[l] = rmsnorm_forward(act.h[l], act.x_in[l], W.norm[l], eps)
        mixer_forward(act.mix_out, act, l, W, A, conv_state, ssm_state, pos, R)
        nxt = act.x_in[l + 1] if l + 1 < L else act.x_f
        for d in range(D):
            nxt[d] = act.x_in[l, d] + act.mix_out[d]
    act.rstd_f[0] = rmsnorm_forward(act.h_f, act.x_f, W.norm_f, eps)
    matvec(act.logits, W.lm_head, act.h_f, W.lm_head_bias)
    softmax32(act.probs, act.logits)


@kernel
def model_rerun(W, A, conv_state, ssm_state, pos, inputs, scratch, R, eps):
    """Advance the recurrent state by inputs (T,) without forming any pdf; returns the
    ring-buffer slot of the newest input (``pos`` is the slot before the first).

    The forward run layer by layer, all T inputs at a time, so that each weight matrix is
    read once per layer rather than once per input. Every value gets the operations of
    ``model_forward`` in the same order, so the state has the same bits as T calls of it.
    scratch: float32, at least T (3D + 8E + P) + K E long, overwritten.
    """
    T = inputs.shape[0]
    L, K, E = conv_state.shape
    N = ssm_state.shape[2]
    D = W.norm.shape[1]
    P = R + 2 * N
    o = 0
    x = carve(scratch, o, (T, D))
    o += T * D
    h = carve(scratch, o, (T, D))
    o += T * D
    mix = carve(scratch, o, (T, D))
    o += T * D
    xz = carve(scratch, o, (T, 2 * E))
    o += T * 2 * E
    xc = carve(scratch, o, (T, E))
    o += T * E
    u = carve(scratch, o, (T, E))
    o += T * E
    dtp = carve(scratch, o, (T, E))
    o += T * E
    dt = carve(scratch, o, (T, E))
    o += T * E
    y = carve(scratch, o, (T, E))
    o += T * E
    yg = carve(scratch, o, (T, E))
    o += T * E
    dbc = carve(scratch, o, (T, P))
    o += T * P
    # Saved per token by the forward for the backward; here it is only passed through.
    conv_in = carve(scratch, o, (K, E))
    for t in range(T):
        for d in range(D):
            x[t, d] = W.embedding[d, inputs[t]]
    for l in range(L):
        for t in range(T):
            rmsnorm_forward(h[t], x[t], W.norm[l], eps)
        matvec_rows(xz, W.in_proj[l], h, W.in_proj_bias[l])
        for t in range(T):
            slot = (pos + 1 + t) % K
            conv_forward(xc[t], conv_in, conv_state[l], slot, xz[t, :E], W.conv_w[l], W.conv_b[l])
            silu_forward(u[t], xc[t])
        matvec_rows(dbc, W.x_proj[l], u, W.x_proj_bias[l])
        matvec_rows(dtp, W.dt_proj[l], dbc[:, :R], W.dt_bias[l])
        for t in range(T):
            softplus_forward(dt[t], dtp[t])
            ssm_advance(
                y[t], ssm_state[l], u[t], dt[t], dbc[t, R : R + N], dbc[t, R + N :], A[l], W.D[l]
            )
        if l == L - 1:
            break  # the last mixer's output feeds only the head
        for t in range(T):
            gate_forward(yg[t], y[t], xz[t, E:])
        matvec_rows(mix, W.out_proj[l], yg, W.out_proj_bias[l])
        for t in range(T):
            for d in range(D):
                x[t, d] = x[t, d] + mix[t, d]
    return (pos + T) % K
