"""forward.ssm_forward forms the state, its saved copies and the output with the operations
and in the order its docstring states, bit for bit, whatever the state size is against the
16-lane vectors of its state update.

The oracle spells that order in NumPy float32, where each operation rounds once; e^x is the
project's own exp32 (tested against float64 in test_detmath)."""

import numpy as np
import pytest

from mambazip.kernels.detmath import apply_exp32
from mambazip.kernels.forward import ssm_forward

f32 = np.float32
# (E, N): N a multiple of the 16-lane vectors, below, above and between them; E below 16
# (channels one by one), a multiple of 16 (16 channels at a time) and both.
SHAPES = [(64, 16), (8, 4), (12, 5), (16, 32), (6, 20), (5, 1), (9, 17), (16, 5), (32, 20),
          (37, 17)]  # fmt: skip


def documented_order(ssm, u, dt, B, C, A, D_skip):
    """(y, new state, dA, ssm_prev) of one step from the state ``ssm``."""
    dA = np.empty_like(A)
    apply_exp32(dA, dt[:, None] * A)
    dtu = dt * u
    new = dA * ssm + dtu[:, None] * B
    y = np.empty_like(u)
    for e in range(u.shape[0]):
        acc = f32(0.0)
        for n in range(B.shape[0]):
            acc = f32(acc + new[e, n] * C[n])
        y[e] = acc + D_skip[e] * u[e]
    return y, new, dA, ssm.copy()


@pytest.mark.parametrize("shape", SHAPES, ids=[f"E{e}xN{n}" for e, n in SHAPES])
def test_ssm_forward_follows_its_documented_order(shape):
    E, N = shape
    rng = np.random.default_rng(E * 100 + N)

    def arr(*dims):
        return (rng.standard_normal(dims) * 2.0 ** rng.integers(-6, 6, size=dims)).astype(f32)

    ssm, u, dt, B, C = arr(E, N), arr(E), np.abs(arr(E)), arr(N), arr(N)
    A, D_skip = -np.abs(arr(E, N)), arr(E)
    want = documented_order(ssm, u, dt, B, C, A, D_skip)
    y, state, dA, prev = np.zeros(E, f32), ssm.copy(), arr(E, N), arr(E, N)
    ssm_forward(y, state, dA, prev, u, dt, B, C, A, D_skip)
    for name, got, expected in zip(("y", "ssm", "dA", "ssm_prev"), (y, state, dA, prev), want,
                                   strict=True):  # fmt: skip
        assert got.tobytes() == expected.tobytes(), name
