"""SGD and Adam steps equal a NumPy reference step: bit for bit against float32 NumPy doing the
same operations in the same order, and closely against float64."""

import numpy as np
import pytest

import mambazip
from mambazip.kernels.optim import adam_update, power, scheduled_lr, sgd_update
from mambazip.model import OnlineLearner

f32 = np.float32
ONE = np.ones(1, dtype=f32)  # the learning-rate multiplier of one range


def numpy_adam(theta, grad, m, v, lr, b1, b2, eps, bc1, bc2, clip):
    g = np.clip(grad, -clip, clip) if clip > 0 else grad
    m = b1 * m + (f32(1) - b1) * g
    v = b2 * v + (f32(1) - b2) * (g * g)
    return theta - lr * (m / bc1) / (np.sqrt(v / bc2) + eps), m, v


def tensors(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n).astype(f32)
    grad = (rng.standard_normal(n) * 0.1).astype(f32)
    m = (rng.standard_normal(n) * 0.01).astype(f32)
    v = (rng.random(n) * 1e-3).astype(f32)
    return theta, grad, m, v


@pytest.mark.parametrize("clip", [0.0, 0.05])
def test_adam_step_equals_numpy_float32_bit_for_bit(clip):
    theta, grad, m, v = tensors()
    lr, b1, b2, eps = f32(1e-3), f32(0.9), f32(0.999), f32(1e-8)
    step = 7
    bc1, bc2 = f32(1 - power(0.9, step)), f32(1 - power(0.999, step))
    want = numpy_adam(theta, grad, m, v, lr, b1, b2, eps, bc1, bc2, f32(clip))
    ranges = np.array([[0, theta.size]], dtype=np.int64)
    adam_update(theta, theta, grad, m, v, ranges, ONE, lr, b1, b2, eps, bc1, bc2, f32(clip))
    for ours, ref in zip((theta, m, v), want, strict=True):
        assert np.array_equal(ours, ref)
    assert not grad.any(), "the update consumes the gradient"


def test_adam_step_is_close_to_float64_adam():
    theta, grad, m, v = tensors(seed=1)
    t = 3
    m64 = 0.9 * m.astype(np.float64) + 0.1 * grad
    v64 = 0.999 * v.astype(np.float64) + 0.001 * grad.astype(np.float64) ** 2
    want = theta - 1e-3 * (m64 / (1 - 0.9**t)) / (np.sqrt(v64 / (1 - 0.999**t)) + 1e-8)
    bc1, bc2 = f32(1 - power(0.9, t)), f32(1 - power(0.999, t))
    ranges = np.array([[0, theta.size]], dtype=np.int64)
    adam_update(theta, theta, grad, m, v, ranges, ONE, f32(1e-3), f32(0.9), f32(0.999), f32(1e-8),
                bc1, bc2, f32(0))  # fmt: skip
    # A step is ~1e-3; float32 roundings in it are ~1e-7 of that, theta's own ulp ~1e-7.
    assert np.abs(theta - want).max() < 1e-6


def test_sgd_step_equals_numpy_and_honours_segments():
    theta, grad, _, _ = tensors()
    before = theta.copy()
    g = grad.copy()
    ranges = np.array([[10, 20], [500, 600]], dtype=np.int64)
    sgd_update(theta, theta, grad, ranges, np.ones(2, dtype=f32), f32(0.01), f32(0.0))
    want = before.copy()
    for lo, hi in ranges:
        want[lo:hi] = before[lo:hi] - f32(0.01) * g[lo:hi]
    assert np.array_equal(theta, want)
    assert not grad[10:20].any() and np.array_equal(grad[:10], g[:10])


def test_power_by_squaring_matches_float64_pow():
    for t in (0, 1, 2, 10, 1000, 123457):
        assert power(0.999, t) == pytest.approx(0.999**t, rel=1e-12)


def test_schedule_warms_up_linearly_then_decays_as_inverse_sqrt():
    assert scheduled_lr(1e-3, 50, 100, 0) == f32(5e-4)
    assert scheduled_lr(1e-3, 100, 100, 0) == f32(1e-3)
    assert scheduled_lr(1e-3, 400, 0, 100) == f32(5e-4)
    assert scheduled_lr(1e-3, 50, 0, 100) == f32(1e-3)


@pytest.mark.parametrize("bptt", [1, 16])
def test_schedule_clock_is_bytes_learned_for_every_bptt(bptt):
    """One clock for both loops: the learning rate of an update follows the bytes learned,
    not the optimizer steps, so a bptt-16 checkpoint (16 bytes per step) resumed with bptt 1
    keeps its schedule. With SGD the steps count nowhere else, so learners that differ only
    in their step counter must take the same update; one that learned fewer bytes must not."""
    settings = mambazip.resolve_settings(
        model={"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3},
        train={"optimizer": "sgd", "lr": 0.05, "decay": 10, "bptt": bptt},
        mix="none",
    )
    data = np.frombuffer(b"a schedule keeps its clock " * 3, dtype=np.uint8)

    def weights_after(step, learned):
        learner = OnlineLearner(settings, step=step, learned=learned)
        learner.advance(data)
        learner.finish()
        return learner.model.params.flat.copy()

    resumed = weights_after(step=64, learned=1024)
    assert np.array_equal(resumed, weights_after(step=1024, learned=1024))
    assert not np.array_equal(resumed, weights_after(step=64, learned=0))
