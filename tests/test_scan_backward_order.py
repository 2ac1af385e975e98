"""backward.ssm_backward forms every value with the operations and every sum in the order
its docstring states, bit for bit, whatever the state size is against the vector width.

The oracle spells that order in NumPy float32, where each operation rounds once."""

import numpy as np
import pytest

from mambazip.kernels.backward import ssm_backward

f32 = np.float32
# (E, N): N a multiple of the 16-lane vectors, below, above and between them; E below 16
# (channels one by one), a multiple of 16 (16 channels at a time) and both.
SHAPES = [(64, 16), (8, 4), (12, 5), (16, 32), (6, 20), (5, 1), (9, 17), (16, 5), (32, 20),
          (37, 17)]  # fmt: skip


def documented_order(du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA, ssm_prev,
                     D_skip, need, carry):  # fmt: skip
    dB[:] = 0
    dC[:] = 0
    for e in range(dy.shape[0]):
        dtu = dt[e] * u[e]
        dC[:] = dC + dy[e] * (dA[e] * ssm_prev[e] + dtu * B)
        g = dy[e] * C
        if carry:
            g = g + dssm[e]
            dssm[e] = g * dA[e]
        dq = (g * ssm_prev[e]) * dA[e]
        t_ddt = dq * A[e] + g * (u[e] * B)
        if need:
            dA_log[e] = dA_log[e] + (dq * dt[e]) * A[e]
            dD[e] = dD[e] + dy[e] * u[e]
        dB[:] = dB + g * dtu
        t_du = g * (dt[e] * B)
        sum_ddt, sum_du = f32(0.0), dy[e] * D_skip[e]
        for n in range(B.shape[0]):
            sum_ddt = sum_ddt + t_ddt[n]
            sum_du = sum_du + t_du[n]
        ddt[e], du[e] = sum_ddt, sum_du


def make_case(E, N, seed):
    """Normals times 2^[-6, 6), so that any change of order changes bits; two channels
    without gradient (+0.0 and -0.0), for the signs of zero sums."""
    rng = np.random.default_rng(seed)

    def arr(*shape):
        return (rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 6, size=shape)).astype(f32)

    dy = arr(E)
    dy[0], dy[1] = 0.0, -0.0
    inputs = [dy, arr(E), np.abs(arr(E)), arr(N), arr(N), -np.abs(arr(E, N)),
              np.abs(arr(E, N)), arr(E, N), arr(E)]  # fmt: skip
    outputs = [np.zeros(E, f32), np.zeros(E, f32), arr(N), arr(N), arr(E, N), arr(E), arr(E, N)]
    return outputs, inputs


@pytest.mark.parametrize("need", [True, False])
@pytest.mark.parametrize("carry", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"E{e}xN{n}" for e, n in SHAPES])
def test_ssm_backward_follows_its_documented_order(shape, carry, need):
    outputs, inputs = make_case(*shape, seed=shape[0] * 100 + shape[1])
    got = [o.copy() for o in outputs]
    want = [o.copy() for o in outputs]
    ssm_backward(*got, *inputs, need, carry)
    documented_order(*want, *inputs, need, carry)
    names = ["du", "ddt", "dB", "dC", "dA_log", "dD", "dssm"]
    for name, a, b in zip(names, got, want, strict=True):
        assert a.tobytes() == b.tobytes(), name
