"""Backward pass over a chunk of saved forwards, one function per layer type.

Loss: -scale * Σ_t log softmax(logits_t)[target_t] over the chunk's tokens. Without ``carry``
(bptt=1, one token) the recurrent state that the forward started from (the previous K-1
convolution inputs and ssm_prev) is a constant. With ``carry`` (truncated BPTT) the gradients
reaching the state are handed back from each token to the one before it, and from the oldest
token to the previous chunk: ``dssm`` (L, E, N), the gradient of the SSM state, and ``dpend``
(L, K, E), the gradients pending for the last K convolution inputs, [K-1] the newest.

``chunk_backward`` goes layer by layer, from the head down, over all the chunk's tokens: the
input gradients of the linear layers are batched (``linalg.matvec_t_rows``: each weight
matrix read once per chunk, not once per token), the scan and the convolution visit the
tokens newest first, as the state requires. Every value gets the operations it would get
token by token, in the same order: gradient sums over tokens run newest first, and a
token's values do not depend on the chunk's other tokens except through the state.
The weight gradients of the linear layers and the embedding are not formed token by token:
each token's layer inputs and output gradients are rows of ``Deferred`` buffers, and
``flush_weight_grads`` adds a chunk of tokens at once, newest first, so the bits do not
depend on how many tokens a chunk holds.
Argument order of the layer functions: input gradients, weight gradients, output gradient,
saved activations, weights. Weight gradients are accumulated (+=); ``optim`` consumes and
zeroes them. ``need`` (N_TENSORS,) says which weight gradients to form at all: untrained
tensors cost nothing.
Dimensions as in ``layout``.
"""

from collections import namedtuple

import numpy as np

from ..jit import kernel
from .detmath import sigmoid32
from .forward import acts_views
from .layout import (
    A_LOG,
    CONV_B,
    CONV_W,
    D_SKIP,
    DIM_E,
    DIM_L,
    DIM_N,
    DIM_R,
    DIM_TIED,
    DIM_V,
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
from .linalg import matvec_t_acc, matvec_t_rows, outer_acc_rows
from .scan import scan_backward_pass
from .views import copy_into

f32 = np.float32

# Per-token rows (C tokens) of a chunk's backward: each linear layer's input ("_x") and
# output gradient ("_dy"), the terms ``flush_weight_grads`` defers, and (the last four) the
# gradients that pass from one layer type to the next, kept per token so that a layer's
# linear products can take all the chunk's tokens at once.
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
        "emb_dx",  # (C, D)   the residual stream's gradient, ends as the embedding's
        "dh",  # (C, D)     a norm's output gradient
        "dyg",  # (C, E)    the gated SSM output's gradient
        "du",  # (C, E)     the SSM input's gradient
        "dy",  # (C, E)     the SSM output's gradient
    ],
)


@kernel
def linear_terms(db, x_row, dy, x, need_w, need_b):
    """One token's weight and bias terms of y = b + x @ Wt: with ``need_w`` x (n_in,) is
    saved to x_row for ``flush_weight_grads`` (dy (n_out,) already is a Deferred row); with
    ``need_b`` db += dy. Tokens come newest first, the order of the bias sums."""
    if need_w:
        copy_into(x_row, x)
    if need_b:
        for o in range(dy.shape[0]):
            db[o] += dy[o]


@kernel
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


@kernel
def gate_backward(dy, dz, dyg, y, z):
    """Forward was yg = y * z sig(z); SiLU'(z) = sig(z) (1 + z (1 - sig(z)))."""
    for e in range(y.shape[0]):
        s = sigmoid32(z[e])
        dy[e] = dyg[e] * (z[e] * s)
        dz[e] = dyg[e] * y[e] * (s * (f32(1.0) + z[e] * (f32(1.0) - s)))


@kernel
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
    from dy D). One pass in vector IR (``scan.scan_backward_pass``), which reads the N
    states of a channel as contiguous vectors.
    """
    for vectors in (dB, dC, B, C):
        if vectors.shape[0] > 1 and vectors.strides[0] != 4:
            raise ValueError("ssm_backward: the (N,) arrays must be contiguous")
    for rows in (dA_log, dssm, A, dA, ssm_prev):
        if rows.shape[1] > 1 and rows.strides[1] != 4:
            raise ValueError("ssm_backward: the (E, N) arrays must have contiguous rows")
    scan_backward_pass(du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA, ssm_prev,
                       D_skip, need, carry)  # fmt: skip


@kernel
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


@kernel
def head_backward(G, dfr, work, dims, W, targets, need, scale):
    """From the pdfs to the residual stream after the last layer, for the n tokens of
    ``targets`` (n,) (a negative target: no loss at that token): dfr.emb_dx[:n] (n, D) =
    the gradients of x_f. Overwrites the rows of head_dy (the logits' gradients), dh and,
    with need[LM_HEAD], head_x; adds to G.norm_f and G.lm_head_bias."""
    n = targets.shape[0]
    V = dims[DIM_V]
    dlogits = dfr.head_dy[:n]
    dh = dfr.dh[:n]
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        if targets[t] < 0:  # no loss here: the forward is only a path back through the state
            dlogits[t, :] = f32(0.0)
        else:
            for v in range(V):
                dlogits[t, v] = act.probs[v]
            dlogits[t, targets[t]] -= f32(1.0)
        if scale != f32(1.0):
            for v in range(V):
                dlogits[t, v] *= scale
        linear_terms(G.lm_head_bias, dfr.head_x[t], dlogits[t], act.h_f, need[LM_HEAD],
                     need[LM_HEAD_BIAS])  # fmt: skip
    dh[...] = f32(0.0)
    matvec_t_rows(dh, W.lm_head, dlogits)
    dx = dfr.emb_dx[:n]
    dx[...] = f32(0.0)
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        rmsnorm_backward(dx[t], G.norm_f, dh[t], act.x_f, W.norm_f, act.rstd_f[0], need[NORM_F])


@kernel
def mixer_backward(G, dfr, work, dims, n, l, W, A, need, carry, dssm, dpend):
    """Gradient through layer l's mixer and norm for the n tokens of a chunk, tokens newest
    first wherever they meet (the state carries, the gradient sums).
    On entry dfr.emb_dx[:n] (n, D) holds the gradients of the layer's output; on return, of
    its input (the residual passes them through, the norm adds its share)."""
    E, N, R = dims[DIM_E], dims[DIM_N], dims[DIM_R]
    dx = dfr.emb_dx
    dout = dfr.out_dy[l, :n]
    copy_into(dout, dx[:n])
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        linear_terms(G.out_proj_bias[l], dfr.out_x[l, t], dout[t], act.yg[l], need[OUT_PROJ],
                     need[OUT_PROJ_BIAS])  # fmt: skip
    dyg = dfr.dyg[:n]
    dyg[...] = f32(0.0)
    matvec_t_rows(dyg, W.out_proj[l], dout)
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        dxz = dfr.in_dy[l, t]
        ddbc = dfr.xp_dy[l, t]
        ddt = dfr.dt_dy[l, t]
        dy = dfr.dy[t]
        gate_backward(dy, dxz[E:], dyg[t], act.y[l], act.xz[l, E:])
        ssm_backward(
            dfr.du[t], ddt, ddbc[R : R + N], ddbc[R + N :], G.A_log[l], G.D[l], dssm[l],
            dy, act.u[l], act.dt[l], act.dbc[l, R : R + N], act.dbc[l, R + N :],
            A[l], act.dA[l], act.ssm_prev[l], W.D[l], need[A_LOG] or need[D_SKIP], carry,
        )  # fmt: skip
        for e in range(E):
            ddt[e] = ddt[e] * sigmoid32(act.dtp[l, e])
        for r in range(R):
            ddbc[r] = f32(0.0)
        linear_terms(G.dt_bias[l], dfr.dt_x[l, t], ddt, act.dbc[l, :R], need[DT_PROJ],
                     need[DT_BIAS])  # fmt: skip
        matvec_t_acc(ddbc[:R], W.dt_proj[l], ddt)
        linear_terms(G.x_proj_bias[l], dfr.xp_x[l, t], ddbc, act.u[l], need[X_PROJ],
                     need[X_PROJ_BIAS])  # fmt: skip
    du = dfr.du[:n]
    matvec_t_rows(du, W.x_proj[l], dfr.xp_dy[l, :n])
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        for e in range(E):
            s = sigmoid32(act.xc[l, e])
            du[t, e] = du[t, e] * (s * (f32(1.0) + act.xc[l, e] * (f32(1.0) - s)))
        dxz = dfr.in_dy[l, t]
        conv_backward(
            dxz[:E], G.conv_w[l], G.conv_b[l], dpend[l], du[t], act.conv_in[l], W.conv_w[l],
            need[CONV_W], need[CONV_B], carry,
        )  # fmt: skip
        linear_terms(G.in_proj_bias[l], dfr.in_x[l, t], dxz, act.h[l], need[IN_PROJ],
                     need[IN_PROJ_BIAS])  # fmt: skip
    dh = dfr.dh[:n]
    dh[...] = f32(0.0)
    matvec_t_rows(dh, W.in_proj[l], dfr.in_dy[l, :n])
    for t in range(n - 1, -1, -1):
        act = acts_views(work[t], dims)
        rmsnorm_backward(dx[t], G.norm[l], dh[t], act.x_in[l], W.norm[l], act.rstd[l], need[NORM])


@kernel
def chunk_backward(G, W, A, work, dims, inputs, targets, need, scale, carry, dssm, dpend, dfr):
    """Accumulate into G the gradient of -scale * Σ_t log probs_t[targets[t]] over the
    forwards of inputs (n,) saved in work[:n] (n, acts_size), oldest first: the head for all
    n tokens, then each layer from the last, then the weight terms (``flush_weight_grads``).
    ``carry``, ``dssm``, ``dpend``: see the module docstring; A (L, E, N) = -exp(W.A_log)."""
    n = inputs.shape[0]
    if targets.shape[0] != n or work.shape[0] < n or dfr.emb_dx.shape[0] < n:
        raise ValueError("chunk_backward: more tokens than saved forwards or buffer rows")
    head_backward(G, dfr, work, dims, W, targets, need, scale)
    for l in range(dims[DIM_L] - 1, -1, -1):
        mixer_backward(G, dfr, work, dims, n, l, W, A, need, carry, dssm, dpend)
    flush_weight_grads(G, dfr, n, inputs, need, dims[DIM_TIED] != 0)


@kernel
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
