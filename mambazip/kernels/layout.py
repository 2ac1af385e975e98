"""Named views into the flat parameter buffer, for use inside compiled kernels.

Dimensions (the paper's letters in brackets):
    d_model  [D]  residual stream width
    d_inner  [E]  mixer width
    d_state  [N]  SSM state size per channel
    dt_rank  [R]  rank of the time-step projection
    d_conv   [K]  causal convolution kernel width
    vocab    [V]  256 byte values
    n_layer  [L]

Every weight matrix is stored input-major (the transpose of PyTorch's ``Linear.weight``) so
that forward products are contiguous axpy loops; see ``linalg``. Per-layer tensors are
stacked with a leading ``L`` axis. The same layout and views serve parameters, gradients and
both Adam moments, so one offsets table describes all four buffers.
"""

from collections import namedtuple

from ..jit import jit, jit_inline, kernel
from .views import carve

# Position of each stacked tensor in the offsets table (and in the flat buffer).
EMBEDDING = 0  # (D, V)
NORM = 1  # (L, D)
IN_PROJ = 2  # (L, D, 2E)
IN_PROJ_BIAS = 3  # (L, 2E)
CONV_W = 4  # (L, K, E)     [k = K-1 multiplies the newest input]
CONV_B = 5  # (L, E)
X_PROJ = 6  # (L, E, R+2N)  [outputs: dt_raw | B | C]
X_PROJ_BIAS = 7  # (L, R+2N)
DT_PROJ = 8  # (L, R, E)
DT_BIAS = 9  # (L, E)
A_LOG = 10  # (L, E, N)
D_SKIP = 11  # (L, E)
OUT_PROJ = 12  # (L, E, D)
OUT_PROJ_BIAS = 13  # (L, D)
NORM_F = 14  # (D,)
LM_HEAD = 15  # (D, V)       [absent when tied: the embedding serves as head]
LM_HEAD_BIAS = 16  # (V,)
N_TENSORS = 17

# Positions in the int64 ``dims`` array handed to kernels.
DIM_D, DIM_E, DIM_N, DIM_R, DIM_K, DIM_V, DIM_L, DIM_TIED = range(8)
N_DIMS = 8

Weights = namedtuple(
    "Weights",
    [
        "embedding",
        "norm",
        "in_proj",
        "in_proj_bias",
        "conv_w",
        "conv_b",
        "x_proj",
        "x_proj_bias",
        "dt_proj",
        "dt_bias",
        "A_log",
        "D",
        "out_proj",
        "out_proj_bias",
        "norm_f",
        "lm_head",
        "lm_head_bias",
    ],
)


@jit_inline
def _weights(flat, offs, dims):
    """Views of ``flat`` (float32, 1-D) as a ``Weights`` tuple, shapes as listed above."""
    D = dims[DIM_D]
    E = dims[DIM_E]
    N = dims[DIM_N]
    R = dims[DIM_R]
    K = dims[DIM_K]
    V = dims[DIM_V]
    L = dims[DIM_L]
    P = R + 2 * N
    embedding = carve(flat, offs[EMBEDDING], (D, V))
    lm_head = embedding if dims[DIM_TIED] else carve(flat, offs[LM_HEAD], (D, V))
    return Weights(
        embedding,
        carve(flat, offs[NORM], (L, D)),
        carve(flat, offs[IN_PROJ], (L, D, 2 * E)),
        carve(flat, offs[IN_PROJ_BIAS], (L, 2 * E)),
        carve(flat, offs[CONV_W], (L, K, E)),
        carve(flat, offs[CONV_B], (L, E)),
        carve(flat, offs[X_PROJ], (L, E, P)),
        carve(flat, offs[X_PROJ_BIAS], (L, P)),
        carve(flat, offs[DT_PROJ], (L, R, E)),
        carve(flat, offs[DT_BIAS], (L, E)),
        carve(flat, offs[A_LOG], (L, E, N)),
        carve(flat, offs[D_SKIP], (L, E)),
        carve(flat, offs[OUT_PROJ], (L, E, D)),
        carve(flat, offs[OUT_PROJ_BIAS], (L, D)),
        carve(flat, offs[NORM_F], (D,)),
        lm_head,
        carve(flat, offs[LM_HEAD_BIAS], (V,)),
    )


@kernel
def weight_views(flat, offs, dims):
    """``_weights`` for kernels: views without reference counts (jit.py)."""
    return _weights(flat, offs, dims)


@jit
def weight_views_py(flat, offs, dims):
    """``_weights`` for Python: counted views, which keep flat alive."""
    return _weights(flat, offs, dims)
