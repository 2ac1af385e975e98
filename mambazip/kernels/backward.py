"""Backward pass of one token, one function per layer type.

Loss: -scale * log softmax(logits)[target] of a saved forward. Without ``carry`` (bptt=1)
the recurrent state that the forward started from (the previous K-1 convolution inputs and
ssm_prev) is a constant. With ``carry`` (truncated BPTT, tokens visited newest first) the
gradients reaching that state are handed back to the previous token: ``dssm`` (L, E, N), the
gradient of the SSM state, and ``dpend`` (L, K, E), the gradients pending for the last K
convolution inputs, [K-1] the newest.
With ``defer`` (truncated BPTT) the weight gradients of the five linear layers and the
embedding are not formed token by token: each token's layer inputs and output gradients go
to token row ``j`` of ``Deferred`` buffers, and ``flush_weight_grads`` adds a chunk of tokens at
once, reading and writing each weight gradient once per chunk instead of once per token.
It adds the terms newest token first, the order the token-by-token visit would use, so the
bits do not depend on how many tokens a chunk holds.
Argument order: input gradients, weight gradients, output gradient, saved activations, weights.
Weight gradients are accumulated (+=); ``optim`` consumes and zeroes them. ``need`` (N_TENSORS,)
says which weight gradients to form at all: untrained tensors cost nothing.
Dimensions as in ``layout``.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .detmath import sigmoid32
from .layout import (
    A_LOG,
    CONV_B,
    CONV_W,
    D_SKIP,
    DT_BIAS,
    DT_PROJ,
    EMBEDDING,
    IN_PROJ,
    IN_PROJ_BIAS,
    LM_HEAD,
    LM_HEAD_BIAS,
    NORM,
    NORM_F,
    OUT_PROJ,
    OUT_PROJ_BIAS,
    X_PROJ,
    X_PROJ_BIAS,
)
from .linalg import matvec_t_acc, outer_acc, outer_acc_rows
from .scan import scan_backward_pass

f32 = np.float32

# Per-token rows (C tokens) of the deferred weight-gradient terms: each linear layer's input
# ("_x") and output gradient ("_dy"), and the embedding column's gradient.
Deferred = namedtuple(
    "Deferred",
    [
        "head_x",  # (C, D)
        "head_dy",  # (C, V)
        "out_x",  # (L, C, E)
        "out_dy",  # (L, C, D)
        "dt_x",  # (L, C, R)
        "dt_dy",  # (L, C, E)
        "xp_x",  # (L, C, E)
        "xp_dy",  # (L, C, P)
        "in_x",  # (L, C, D)
        "in_dy",  # (L, C, 2E)
        "emb_dx",  # (C, D)
    ],
)


@njit(cache=True, error_model="numpy")
def linear_backward(dx, dWt, db, dy, x, Wt, need_w, need_b, defer, x_row, dy_row):
    """For y = b + x @ Wt: dx (n_in,) += Wt @ dy; dWt (n_in, n_out) += x ⊗ dy, or with
    ``defer`` x and dy saved to x_row, dy_row; db += dy."""
    if need_w:
        if defer:
            x_row[:] = x
            dy_row[:] = dy
        else:
            outer_acc(dWt, x, dy)
    if need_b:
        for o in range(dy.shape[0]):
            db[o] += dy[o]
    matvec_t_acc(dx, Wt, dy)


@njit(cache=True, error_model="numpy")
def rmsnorm_backward(dx, dweight, dout, x, weight, rstd, need_w):
    """Forward was out = (x * rstd) * w with rstd = (mean(x^2) + eps)^-1/2, so
    d rstd / dx_j = -rstd^3 x_j / D and, with xh = x rstd and g = dout * w,
    dx = rstd * (g - xh * mean(g * xh)). dx (D,) +=, dweight (D,) +=."""
    D = x.shape[0]
    dot = f32(0.0)
    for d in range(D):
        dot += (dout[d] * weight[d]) * (x[d] * rstd)
    mean_dot = dot / f32(D)
    for d in range(D):
        xh = x[d] * rstd
        if need_w:
            dweight[d] += dout[d] * xh
        dx[d] += rstd * (dout[d] * weight[d] - xh * mean_dot)


@njit(cache=True, error_model="numpy")
def gate_backward(dy, dz, dyg, y, z):
    """Forward was yg = y * z sig(z); SiLU'(z) = sig(z) (1 + z (1 - sig(z)))."""
    for e in range(y.shape[0]):
        s = sigmoid32(z[e])
        dy[e] = dyg[e] * (z[e] * s)
        dz[e] = dyg[e] * y[e] * (s * (f32(1.0) + z[e] * (f32(1.0) - s)))


@njit(cache=True, error_model="numpy")
def ssm_backward(du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA, ssm_prev, D_skip,
                 need, carry):  # fmt: skip
    """Gradient of one selective-scan step (see forward.ssm_forward).

    Forward: s = dA * ssm_prev + (dt u) B with dA = exp(dt A), A = -exp(A_log);
    y = s @ C + D u. With g = dy ⊗ C (+ dssm with ``carry``) the gradient reaching s (E, N):
      dC += s^T dy;  dD += dy u;  du = dy D + Σ_n g dt B;
      ddt = Σ_n g dA ssm_prev A + Σ_n g u B;  dB += Σ_e g dt u;
      dA_log += g dA ssm_prev dt A   (dA/dA_log = A, A is trained in log space);
      with ``carry``, dssm = g dA, the gradient of ssm_prev.
    s is recomputed with the forward's own operations, so it has the forward's bits.
    du, ddt (E,), dB, dC (N,) are overwritten; dA_log (E, N), dD (E,) accumulate (only with
    ``need``).

    Per element, with dq = (g ssm_prev) dA: the ddt term is dq A + g (u B), the du term
    g (dt B), the dA_log term (dq dt) A, the dB term g (dt u), the dC term dy (dA ssm_prev +
    (dt u) B). Sums over e run in increasing e, sums over n in increasing n from +0.0 (du
    from dy D). One pass over the channels in vector IR (``scan.scan_backward_pass``), which
    reads the N states of a channel as contiguous vectors.
    """
    for vectors in (dB, dC, B, C):
        if vectors.shape[0] > 1 and vectors.strides[0] != 4:
            raise ValueError("ssm_backward: the (N,) arrays must be contiguous")
    for rows in (dA_log, dssm, A, dA, ssm_prev):
        if rows.shape[1] > 1 and rows.strides[1] != 4:
            raise ValueError("ssm_backward: the (E, N) arrays must have contiguous rows")
    scan_backward_pass(du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA, ssm_prev,
                       D_skip, need, carry)  # fmt: skip


@njit(cache=True, error_model="numpy")
def conv_backward(dxin, dconv_w, dconv_b, dpend, dxc, conv_in, conv_w, need_w, need_b, carry):
    """Forward was xc = b + Σ_k w[k] * conv_in[k], conv_in (K, E) oldest first; this token's
    input is conv_in[K-1], so dxin (E,) = dxc * w[K-1] (overwritten). With ``carry`` the
    older inputs' shares go to ``dpend`` (K, E): dpend[k] += dxc * w[k], the newest input
    collects what later tokens left in dpend[K-1], and dpend shifts one input back."""
    K, E = conv_in.shape
    if need_w:
        for k in range(K):
            for e in range(E):
                dconv_w[k, e] += dxc[e] * conv_in[k, e]
    if need_b:
        for e in range(E):
            dconv_b[e] += dxc[e]
    if not carry:
        for e in range(E):
            dxin[e] = dxc[e] * conv_w[K - 1, e]
        return
    for e in range(E):
        dxin[e] = dpend[K - 1, e] + dxc[e] * conv_w[K - 1, e]
    for k in range(K - 1, 0, -1):
        for e in range(E):
            dpend[k, e] = dpend[k - 1, e] + dxc[e] * conv_w[k - 1, e]
    for e in range(E):
        dpend[0, e] = f32(0.0)


@njit(cache=True, error_model="numpy")
def mixer_backward(dh, G, dout, act, layer, W, A, R, need, scratch, carry, dssm, dpend, defer,
                   dfr, j):  # fmt: skip
    """Gradient through one mixer: dh (D,) = its input gradient (overwritten), weight gradients
    into ``G``; dout (D,) is the gradient of the mixer output; A (L, E, N) = -exp(W.A_log)."""
    l = layer
    E = A.shape[1]
    N = A.shape[2]
    dyg, dy, du, ddt, dxz, ddbc = scratch
    for e in range(E):
        dyg[e] = f32(0.0)
    linear_backward(
        dyg, G.out_proj[l], G.out_proj_bias[l], dout, act.yg[l], W.out_proj[l],
        need[OUT_PROJ], need[OUT_PROJ_BIAS], defer, dfr.out_x[l, j], dfr.out_dy[l, j],
    )  # fmt: skip
    gate_backward(dy, dxz[E:], dyg, act.y[l], act.xz[l, E:])
    ssm_backward(
        du, ddt, ddbc[R : R + N], ddbc[R + N :], G.A_log[l], G.D[l], dssm[l],
        dy, act.u[l], act.dt[l], act.dbc[l, R : R + N], act.dbc[l, R + N :],
        A[l], act.dA[l], act.ssm_prev[l], W.D[l], need[A_LOG] or need[D_SKIP], carry,
    )  # fmt: skip
    for e in range(E):
        ddt[e] = ddt[e] * sigmoid32(act.dtp[l, e])
    for r in range(R):
        ddbc[r] = f32(0.0)
    linear_backward(
        ddbc[:R], G.dt_proj[l], G.dt_bias[l], ddt, act.dbc[l, :R], W.dt_proj[l],
        need[DT_PROJ], need[DT_BIAS], defer, dfr.dt_x[l, j], dfr.dt_dy[l, j],
    )  # fmt: skip
    linear_backward(
        du, G.x_proj[l], G.x_proj_bias[l], ddbc, act.u[l], W.x_proj[l],
        need[X_PROJ], need[X_PROJ_BIAS], defer, dfr.xp_x[l, j], dfr.xp_dy[l, j],
    )  # fmt: skip
    for e in range(E):
        s = sigmoid32(act.xc[l, e])
        du[e] = du[e] * (s * (f32(1.0) + act.xc[l, e] * (f32(1.0) - s)))
    conv_backward(
        dxz[:E], G.conv_w[l], G.conv_b[l], dpend[l], du, act.conv_in[l], W.conv_w[l],
        need[CONV_W], need[CONV_B], carry,
    )  # fmt: skip
    for d in range(dh.shape[0]):
        dh[d] = f32(0.0)
    linear_backward(
        dh, G.in_proj[l], G.in_proj_bias[l], dxz, act.h[l], W.in_proj[l],
        need[IN_PROJ], need[IN_PROJ_BIAS], defer, dfr.in_x[l, j], dfr.in_dy[l, j],
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def model_backward(G, act, W, A, byte_in, target, R, need, scale, carry, dssm, dpend, defer,
                   dfr, j):  # fmt: skip
    """Accumulate into G the gradient of -scale * log probs[target] for the forward of
    ``byte_in`` (``carry``, ``dssm``, ``dpend``, ``defer``, ``dfr``, ``j``: see the module
    docstring); A (L, E, N) = -exp(W.A_log), as in the forward."""
    L, D = act.x_in.shape
    E = A.shape[1]
    N = A.shape[2]
    V = act.probs.shape[0]
    dlogits = np.empty(V, dtype=f32)
    for v in range(V):
        dlogits[v] = act.probs[v]
    dlogits[target] -= f32(1.0)
    if scale != f32(1.0):
        for v in range(V):
            dlogits[v] *= scale
    dh = np.zeros(D, dtype=f32)
    linear_backward(
        dh, G.lm_head, G.lm_head_bias, dlogits, act.h_f, W.lm_head,
        need[LM_HEAD], need[LM_HEAD_BIAS], defer, dfr.head_x[j], dfr.head_dy[j],
    )  # fmt: skip
    dx = np.zeros(D, dtype=f32)
    rmsnorm_backward(dx, G.norm_f, dh, act.x_f, W.norm_f, act.rstd_f[0], need[NORM_F])
    scratch = (
        np.empty(E, dtype=f32),
        np.empty(E, dtype=f32),
        np.empty(E, dtype=f32),
        np.empty(E, dtype=f32),
        np.empty(2 * E, dtype=f32),
        np.zeros(R + 2 * N, dtype=f32),
    )
    for l in range(L - 1, -1, -1):
        mixer_backward(dh, G, dx, act, l, W, A, R, need, scratch, carry, dssm, dpend, defer, dfr, j)
        # The residual passes dx through unchanged; the norm adds its own share.
        rmsnorm_backward(dx, G.norm[l], dh, act.x_in[l], W.norm[l], act.rstd[l], need[NORM])
    if need[EMBEDDING]:
        if defer:
            dfr.emb_dx[j] = dx
        else:
            for d in range(D):
                G.embedding[d, byte_in] += dx[d]


@njit(cache=True, error_model="numpy")
def flush_weight_grads(G, dfr, n, inputs, need, tied):
    """Add the deferred terms of tokens 0..n-1 (rows of ``dfr``; ``inputs`` (n,) their input
    bytes) to the weight gradients, newest first. With tied embeddings the head and the
    embedding are one matrix: each token's column term follows its head term, as it does
    token by token."""
    if need[LM_HEAD]:
        outer_acc_rows(G.lm_head, dfr.head_x[:n], dfr.head_dy[:n], tied, dfr.emb_dx[:n], inputs)
    if need[EMBEDDING] and not tied:
        for t in range(n - 1, -1, -1):
            for d in range(dfr.emb_dx.shape[1]):
                G.embedding[d, inputs[t]] += dfr.emb_dx[t, d]
    # (trained, gradient (L, n_in, n_out), inputs (L, C, n_in), output gradients (L, C, n_out))
    layers = (
        (need[OUT_PROJ], G.out_proj, dfr.out_x, dfr.out_dy),
        (need[DT_PROJ], G.dt_proj, dfr.dt_x, dfr.dt_dy),
        (need[X_PROJ], G.x_proj, dfr.xp_x, dfr.xp_dy),
        (need[IN_PROJ], G.in_proj, dfr.in_x, dfr.in_dy),
    )
    for l in range(dfr.out_x.shape[0] - 1, -1, -1):
        for trained, dW, X, dY in layers:
            if trained:
                outer_acc_rows(dW[l], X[l, :n], dY[l, :n], False, dfr.emb_dx, inputs)
