"""forward.ssm_forward forms the state, its saved copies and the output with the operations
and in the order its docstring states, bit for bit, whatever the state size is against the
16-lane vectors of its state update.

The oracle spells that order in NumPy float32, where each operation rounds once; e^x is the
project's own exp32 (tested against float64 in test_detmath)."""

import numpy as np
import pytest

from mambazip.kernels.detmath import apply_exp32
from mambazip.kernels.forward import ssm_advance, ssm_forward

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


def make_case(E, N):
    """Normals times 2^[-6, 6), so that any change of order changes bits."""
    rng = np.random.default_rng(E * 100 + N)

    def arr(*dims):
        return (rng.standard_normal(dims) * 2.0 ** rng.integers(-6, 6, size=dims)).astype(f32)

    ssm, u, dt, B, C = arr(E, N), arr(E), np.abs(arr(E)), arr(N), arr(N)
    return ssm, u, dt, B, C, -np.abs(arr(E, N)), arr(E)


@pytest.mark.parametrize("shape", SHAPES, ids=[f"E{e}xN{n}" for e, n in SHAPES])
def test_ssm_forward_follows_its_documented_order(shape):
    E, N = shape
    ssm, u, dt, B, C, A, D_skip = make_case(E, N)
    want = documented_order(ssm, u, dt, B, C, A, D_skip)
    y, state = np.zeros(E, f32), ssm.copy()
    dA, prev = np.full((E, N), np.nan, f32), np.full((E, N), np.nan, f32)
    ssm_forward(y, state, dA, prev, u, dt, B, C, A, D_skip)
    for name, got, expected in zip(("y", "ssm", "dA", "ssm_prev"), (y, state, dA, prev), want,
                                   strict=True):  # fmt: skip
        assert got.tobytes() == expected.tobytes(), name


@pytest.mark.parametrize("shape", SHAPES, ids=[f"E{e}xN{n}" for e, n in SHAPES])
def test_ssm_advance_gives_the_output_and_state_of_ssm_forward(shape):
    """The rerun's step, which saves nothing for a backward pass."""
    E, N = shape
    ssm, u, dt, B, C, A, D_skip = make_case(E, N)
    want_y, want_state = documented_order(ssm, u, dt, B, C, A, D_skip)[:2]
    y, state = np.zeros(E, f32), ssm.copy()
    ssm_advance(y, state, u, dt, B, C, A, D_skip)
    assert y.tobytes() == want_y.tobytes()
    assert state.tobytes() == want_state.tobytes()


def test_ssm_forward_rejects_a_strided_decay_matrix():
    """The vector IR reads A's rows as contiguous vectors: a strided A must not be misread."""
    ssm, u, dt, B, C, A, D_skip = make_case(8, 4)
    wide = np.zeros((8, 8), f32)
    wide[:, ::2] = A
    y, dA, prev = np.zeros(8, f32), np.zeros_like(A), np.zeros_like(A)
    with pytest.raises(ValueError, match="not contiguous"):
        ssm_forward(y, ssm.copy(), dA, prev, u, dt, B, C, wide[:, ::2], D_skip)
