"""Independent float64 NumPy reference of the Mamba-1 byte model, for tests only.

Written from the math (Gu & Dao 2023, "Mamba", Algorithm 2) and the Hugging Face
`MambaForCausalLM` parameter layout, in the sequence form of mamba-minimal: the
convolution is a causal convolution over the whole sequence and the selective scan a
plain loop over time. A second, recurrent form (`step`) advances one byte from an
explicit state; the tests check that both forms agree, and then use them to check the
project's float32 Numba model (forward values and finite-difference gradients).

Nothing here imports `mambazip`: `cfg` is read only through the attributes d_model,
n_layer, d_inner, d_state, d_conv, dt_rank, vocab, norm_eps, proj_bias, conv_bias,
x_proj_bias, head_bias and tie_embeddings.

Dimension glossary (symbols of the paper where it has them):
    T  sequence length (bytes)
    V  vocabulary, 256 bytes
    D  d_model      width of the residual stream
    E  d_inner      width of the mixer (paper: E*D, expansion factor times D)
    N  d_state      SSM state size per channel
    R  dt_rank      rank of the Delta projection
    K  d_conv       kernel width of the causal depthwise convolution
    L  n_layer      number of residual blocks

Per token, per layer (x is the residual stream, (D,)):
    h    = x / sqrt(mean(x^2) + eps) * norm.weight                     (D,)
    xin, z = split(in_proj(h))                                         (E,), (E,)
    c    = sum_k conv1d.weight[:, 0, k] * xin[t - (K-1) + k] + bias    (E,)  k = K-1 is newest
    u    = silu(c)                                                     (E,)
    dt_raw, B, C = split(x_proj(u))                                    (R,), (N,), (N,)
    dt   = softplus(dt_proj(dt_raw) + dt_proj.bias)                    (E,)
    A    = -exp(A_log)                                                 (E, N)
    ssm  = exp(dt[:, None] * A) * ssm + dt[:, None] * B[None, :] * u[:, None]   (E, N)
    y    = (ssm @ C + D * u) * silu(z)                                 (E,)
    x    = x + out_proj(y)                                             (D,)
Then logits = lm_head(rmsnorm(x) * norm_f.weight), lm_head tied to the embeddings when
`tie_embeddings`.

State layout (same as the model's `state_hf()`):
    conv (L, E, K)  the last K values of xin per layer, [..., K-1] the newest
    ssm  (L, E, N)
"""

from __future__ import annotations

import numpy as np

PREFIX = "backbone.layers"


# --------------------------------------------------------------------------- names


def param_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """The Hugging Face names and shapes that a model of `cfg` has, in a fixed order."""
    D, E, N = cfg.d_model, cfg.d_inner, cfg.d_state
    R, K, V = cfg.dt_rank, cfg.d_conv, cfg.vocab
    shapes: dict[str, tuple[int, ...]] = {"backbone.embeddings.weight": (V, D)}
    for i in range(cfg.n_layer):
        p = f"{PREFIX}.{i}"
        shapes[f"{p}.norm.weight"] = (D,)
        shapes[f"{p}.mixer.in_proj.weight"] = (2 * E, D)
        if cfg.proj_bias:
            shapes[f"{p}.mixer.in_proj.bias"] = (2 * E,)
        shapes[f"{p}.mixer.conv1d.weight"] = (E, 1, K)
        if cfg.conv_bias:
            shapes[f"{p}.mixer.conv1d.bias"] = (E,)
        shapes[f"{p}.mixer.x_proj.weight"] = (R + 2 * N, E)
        if cfg.x_proj_bias:
            shapes[f"{p}.mixer.x_proj.bias"] = (R + 2 * N,)
        shapes[f"{p}.mixer.dt_proj.weight"] = (E, R)
        shapes[f"{p}.mixer.dt_proj.bias"] = (E,)
        shapes[f"{p}.mixer.A_log"] = (E, N)
        shapes[f"{p}.mixer.D"] = (E,)
        shapes[f"{p}.mixer.out_proj.weight"] = (D, E)
        if cfg.proj_bias:
            shapes[f"{p}.mixer.out_proj.bias"] = (D,)
    shapes["backbone.norm_f.weight"] = (D,)
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (V, D)
    if cfg.head_bias:
        shapes["lm_head.bias"] = (V,)
    return shapes


def to_float64(params, cfg) -> dict[str, np.ndarray]:
    """Check names and shapes against `cfg` exactly, and convert every tensor to float64."""
    expected = param_shapes(cfg)
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise ValueError(f"parameter names differ from cfg: missing {missing}, extra {extra}")
    out = {}
    for name, shape in expected.items():
        a = np.asarray(params[name], dtype=np.float64)
        if a.shape != shape:
            raise ValueError(f"{name}: shape {a.shape}, expected {shape}")
        out[name] = a
    return out


def zero_state(cfg) -> tuple[np.ndarray, np.ndarray]:
    """conv (L, E, K), ssm (L, E, N), all zero."""
    L, E = cfg.n_layer, cfg.d_inner
    conv = np.zeros((L, E, cfg.d_conv))  # (L, E, K)
    ssm = np.zeros((L, E, cfg.d_state))  # (L, E, N)
    return conv, ssm


# --------------------------------------------------------------------------- pieces


def rms_norm(x, weight, eps):
    """x (..., D), weight (D,) -> (..., D)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def sigmoid(x):
    # 0.5 * (1 + tanh(x/2)) is sigmoid without overflow for either sign.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def silu(x):
    return x * sigmoid(x)


def softplus(x):
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(0.0, x)


def linear(x, weight, bias):
    """x (..., in), weight (out, in), bias (out,) or None -> (..., out)."""
    y = x @ weight.T
    return y if bias is None else y + bias


def log_softmax(logits):
    """logits (..., V) -> (..., V)."""
    m = np.max(logits, axis=-1, keepdims=True)
    s = logits - m
    return s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True))


def nll(logits, target: int) -> float:
    """-log softmax(logits)[target] for logits (V,)."""
    return float(-log_softmax(logits)[target])


def _head(p, cfg, x):
    """Final norm and lm_head: x (..., D) -> logits (..., V)."""
    h = rms_norm(x, p["backbone.norm_f.weight"], cfg.norm_eps)  # (..., D)
    head = p["backbone.embeddings.weight"] if cfg.tie_embeddings else p["lm_head.weight"]
    return linear(h, head, p.get("lm_head.bias"))  # (..., V)


class _Layer:
    """The float64 tensors of layer i, optional biases None when absent."""

    def __init__(self, p, i):
        m = f"{PREFIX}.{i}.mixer"
        self.norm = p[f"{PREFIX}.{i}.norm.weight"]  # (D,)
        self.in_w = p[f"{m}.in_proj.weight"]  # (2E, D)
        self.in_b = p.get(f"{m}.in_proj.bias")  # (2E,) or None
        self.conv_w = p[f"{m}.conv1d.weight"][:, 0, :]  # (E, K)
        self.conv_b = p.get(f"{m}.conv1d.bias")  # (E,) or None
        self.x_w = p[f"{m}.x_proj.weight"]  # (R+2N, E)
        self.x_b = p.get(f"{m}.x_proj.bias")  # (R+2N,) or None
        self.dt_w = p[f"{m}.dt_proj.weight"]  # (E, R)
        self.dt_b = p[f"{m}.dt_proj.bias"]  # (E,)
        self.A = -np.exp(p[f"{m}.A_log"])  # (E, N)
        self.D = p[f"{m}.D"]  # (E,)
        self.out_w = p[f"{m}.out_proj.weight"]  # (D, E)
        self.out_b = p.get(f"{m}.out_proj.bias")  # (D,) or None


# --------------------------------------------------------------------------- sequence form


def _mixer_sequence(lay: _Layer, cfg, h):
    """One mixer over a whole sequence from zero state.

    h (T, D) -> out (T, D), final conv state (E, K), final ssm state (E, N).
    """
    T = h.shape[0]
    E, N, R, K = cfg.d_inner, cfg.d_state, cfg.dt_rank, cfg.d_conv
    xz = linear(h, lay.in_w, lay.in_b)  # (T, 2E)
    xin, z = xz[:, :E], xz[:, E:]  # (T, E), (T, E)

    # Causal depthwise convolution: K-1 zeros of history in front, so that
    # c[t] = sum_k w[:, k] * xin[t - (K-1) + k] and w[:, K-1] meets xin[t].
    padded = np.concatenate([np.zeros((K - 1, E)), xin], axis=0)  # (T+K-1, E)
    c = np.zeros((T, E))  # (T, E)
    for k in range(K):
        c += padded[k : k + T] * lay.conv_w[:, k]
    if lay.conv_b is not None:
        c += lay.conv_b
    u = silu(c)  # (T, E)

    dbc = linear(u, lay.x_w, lay.x_b)  # (T, R+2N)
    dt_raw, B, C = dbc[:, :R], dbc[:, R : R + N], dbc[:, R + N :]  # (T, R), (T, N), (T, N)
    dt = softplus(linear(dt_raw, lay.dt_w, lay.dt_b))  # (T, E)

    # Selective scan, one time step at a time (zero-order hold for A, Euler for B).
    dA = np.exp(dt[:, :, None] * lay.A)  # (T, E, N)
    dBu = dt[:, :, None] * B[:, None, :] * u[:, :, None]  # (T, E, N)
    ssm = np.zeros((E, N))  # (E, N)
    y = np.zeros((T, E))  # (T, E)
    for t in range(T):
        ssm = dA[t] * ssm + dBu[t]
        y[t] = ssm @ C[t] + lay.D * u[t]
    y = y * silu(z)  # (T, E)
    out = linear(y, lay.out_w, lay.out_b)  # (T, D)

    conv_state = padded[-K:].T.copy()  # (E, K): the last K inputs, newest at K-1
    return out, conv_state, ssm


def run_sequence(params, cfg, byte_seq):
    """Forward over `byte_seq` from zero state: logits (T, V) and final state (conv, ssm)."""
    p = to_float64(params, cfg)
    ids = np.array(list(byte_seq), dtype=np.int64)  # (T,) from bytes or a sequence of ints
    x = p["backbone.embeddings.weight"][ids]  # (T, D)
    conv, ssm = zero_state(cfg)  # (L, E, K), (L, E, N)
    for i in range(cfg.n_layer):
        lay = _Layer(p, i)
        h = rms_norm(x, lay.norm, cfg.norm_eps)  # (T, D)
        out, conv[i], ssm[i] = _mixer_sequence(lay, cfg, h)
        x = x + out  # (T, D)
    return _head(p, cfg, x), (conv, ssm)


def forward_sequence(params, cfg, byte_seq):
    """Logits (T, V) after each byte of `byte_seq`, starting from zero state."""
    return run_sequence(params, cfg, byte_seq)[0]


# --------------------------------------------------------------------------- recurrent form


def step(params, cfg, state, byte):
    """Advance one byte from `state` = (conv (L, E, K), ssm (L, E, N)).

    Returns (logits (V,), new_state); `state` is not modified.
    """
    p = to_float64(params, cfg)
    E, N, R = cfg.d_inner, cfg.d_state, cfg.dt_rank
    conv = np.array(state[0], dtype=np.float64)  # (L, E, K) copy
    ssm = np.array(state[1], dtype=np.float64)  # (L, E, N) copy
    x = p["backbone.embeddings.weight"][int(byte)]  # (D,)
    for i in range(cfg.n_layer):
        lay = _Layer(p, i)
        h = rms_norm(x, lay.norm, cfg.norm_eps)  # (D,)
        xz = linear(h, lay.in_w, lay.in_b)  # (2E,)
        xin, z = xz[:E], xz[E:]  # (E,), (E,)
        conv[i, :, :-1] = conv[i, :, 1:]  # shift out the oldest input
        conv[i, :, -1] = xin  # newest at K-1
        c = np.sum(conv[i] * lay.conv_w, axis=1)  # (E,)
        if lay.conv_b is not None:
            c = c + lay.conv_b
        u = silu(c)  # (E,)
        dbc = linear(u, lay.x_w, lay.x_b)  # (R+2N,)
        dt_raw, B, C = dbc[:R], dbc[R : R + N], dbc[R + N :]  # (R,), (N,), (N,)
        dt = softplus(linear(dt_raw, lay.dt_w, lay.dt_b))  # (E,)
        ssm[i] = np.exp(dt[:, None] * lay.A) * ssm[i] + dt[:, None] * B[None, :] * u[:, None]
        y = (ssm[i] @ C + lay.D * u) * silu(z)  # (E,)
        x = x + linear(y, lay.out_w, lay.out_b)  # (D,)
    return _head(p, cfg, x), (conv, ssm)


# --------------------------------------------------------------------------- test fixtures
# Shared by the test files: small configurations covering every optional tensor, and a
# perturbation that moves every tensor away from its initial value so that no activation
# or gradient is trivially zero (norm weights away from 1, D away from 1, biases away
# from 0, dt large enough that A_log matters). The noise comes from NumPy's generator: a
# change of its stream between NumPy versions changes the test values, not the verdicts.

# name: (D, E, K, proj_bias, conv_bias, x_proj_bias, head_bias, tie_embeddings, norm_eps)
_CONFIG_TABLE = {
    # d_conv 4, every optional bias, untied head.
    "k4-allbias-untied": (16, 32, 4, True, True, True, True, False, 1e-5),
    # d_conv 3, no optional bias at all, tied head.
    "k3-nobias-tied": (8, 16, 3, False, False, False, False, True, 1e-5),
    # d_conv 4, conv bias only (the bias layout of the published Mamba checkpoints), untied
    # head; a large norm eps, so that an implementation ignoring cfg.norm_eps is caught.
    "k4-convbias-untied-eps": (12, 24, 4, False, True, False, False, False, 5e-2),
    # d_conv 3, projection, x_proj and head biases without conv bias, tied head with a bias.
    "k3-mixedbias-tied": (8, 16, 3, True, False, True, True, True, 1e-5),
}
_FLAGS = ("proj_bias", "conv_bias", "x_proj_bias", "head_bias", "tie_embeddings")

# ModelConfig keyword arguments (vocab left at its default of 256), L=2, N=4, R=2.
TEST_CONFIGS = {
    name: dict(
        d_model=D,
        n_layer=2,
        d_inner=E,
        d_state=4,
        d_conv=K,
        dt_rank=2,
        norm_eps=eps,
        **dict(zip(_FLAGS, flags, strict=True)),
    )
    for name, (D, E, K, *flags, eps) in _CONFIG_TABLE.items()
}


def _noise(name, shape, rng):
    """Additive noise for one tensor, its scale chosen by the tensor's role."""
    if name.endswith("dt_proj.bias"):
        # Shifted up by 3 as well: from the usual init (dt in [1e-3, 1e-1]) to dt of about
        # 0.02 to 1, so that exp(dt·A), and with it A_log, weighs in the result.
        return 3.0 + 0.5 * rng.standard_normal(shape)
    if name.endswith(("norm.weight", "norm_f.weight", "mixer.D", "A_log")):
        std = 0.3
    elif name.endswith("embeddings.weight"):
        std = 0.5
    elif name.endswith(".bias"):
        std = 0.2
    elif name.endswith("conv1d.weight"):
        std = 0.7 / np.sqrt(shape[-1])
    elif name.endswith(("dt_proj.weight", "out_proj.weight")):
        std = 0.5 / np.sqrt(shape[1])
    else:  # in_proj, x_proj, lm_head weights (out, in)
        std = 1.0 / np.sqrt(shape[1])
    return std * rng.standard_normal(shape)


def perturb(tensors, seed):
    """Return float32 copies of `tensors` (HF names) with seeded noise added to each."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype=np.float64)
        out[name] = (a + _noise(name, a.shape, rng)).astype(np.float32)
    return out


def random_params(cfg, seed):
    """Mamba-like initial values plus `perturb`, float32, for reference-only tests."""
    base = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith(("norm.weight", "norm_f.weight", "mixer.D")):
            base[name] = np.ones(shape)
        elif name.endswith("A_log"):
            base[name] = np.log(np.broadcast_to(np.arange(1.0, shape[1] + 1.0), shape))
        elif name.endswith("dt_proj.bias"):
            base[name] = np.log(np.expm1(np.geomspace(1e-3, 1e-1, shape[0])))
        else:
            base[name] = np.zeros(shape)
    return perturb(base, seed)
