"""scripts/train_prior.py's selective scan (Numba, no torch needed): its forward against a
float64 NumPy recurrence, its backward against float64 central differences of that
recurrence, and a state carried across two calls against one call. And each prior it
trained: mambazip's forward gives the logits that the script's torch model gave
(tests/fixtures/train_prior-SHA.npy, written by ``train_prior.py fixture SHA``)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "train_prior.py"
NB, T, E, N = 2, 7, 5, 4


@pytest.fixture(scope="module")
def tp():
    spec = importlib.util.spec_from_file_location("train_prior", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def inputs():
    """u, dt, B, C, A_log (E, N), D_skip in float64, with dt > 0 as softplus gives it."""
    rng = np.random.default_rng(7)
    return (
        rng.normal(size=(NB, T, E)),
        rng.uniform(0.01, 0.8, size=(NB, T, E)),
        rng.normal(size=(NB, T, N)),
        rng.normal(size=(NB, T, N)),
        rng.normal(scale=0.7, size=(E, N)),
        rng.normal(size=E),
    )


def reference(u, dt, Bm, Cm, A_log, D_skip, h0=None):
    """Mamba-1's scan written as the paper's recurrence, float64: (y, final state (b, E, N))."""
    A = -np.exp(A_log)
    h = np.zeros((u.shape[0], E, N)) if h0 is None else h0.copy()
    y = np.empty(u.shape)
    for t in range(u.shape[1]):
        a = np.exp(dt[:, t, :, None] * A)
        h = a * h + (dt[:, t] * u[:, t])[:, :, None] * Bm[:, t, None, :]
        y[:, t] = (h * Cm[:, t, None, :]).sum(-1) + D_skip * u[:, t]
    return y, h


def run_forward(tp, u, dt, Bm, Cm, A_log, D_skip, h0=None, save=True):
    f32 = np.float32
    nb, t = u.shape[:2]
    A = np.ascontiguousarray((-np.exp(A_log)).T, dtype=f32)  # (N, E)
    y = np.empty((nb, t, E), dtype=f32)
    hs = np.empty((nb, t, N, E) if save else (1, 0, 1, 1), dtype=f32)
    h_last = np.empty((nb, N, E), dtype=f32)
    h0 = np.zeros((nb, N, E), dtype=f32) if h0 is None else h0
    args = [np.ascontiguousarray(x, dtype=f32) for x in (u, dt, Bm, Cm)]
    tp.scan_forward(y, hs, h_last, *args, A, D_skip.astype(f32), h0)
    return y, hs, h_last, args, A


def test_skip_takes_a_count_of_batches_and_refuses_a_negative_one(tp):
    assert tp.steps("0") == 0 and tp.steps("1200") == 1200
    with pytest.raises(argparse.ArgumentTypeError, match="must be 0 or more, got -3"):
        tp.steps("-3")


def test_forward_matches_the_recurrence(tp, inputs):
    want, h_want = reference(*inputs)
    y, _, h_last, _, _ = run_forward(tp, *inputs)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h_last.transpose(0, 2, 1), h_want, rtol=1e-5, atol=1e-5)


def test_state_carried_across_calls_equals_one_call(tp, inputs):
    u, dt, Bm, Cm, A_log, D_skip = inputs
    whole, _, h_whole, _, _ = run_forward(tp, *inputs, save=False)
    first, _, h_mid, _, _ = run_forward(tp, u[:, :3], dt[:, :3], Bm[:, :3], Cm[:, :3], A_log,
                                        D_skip, save=False)  # fmt: skip
    second, _, h_end, _, _ = run_forward(tp, u[:, 3:], dt[:, 3:], Bm[:, 3:], Cm[:, 3:], A_log,
                                         D_skip, h0=h_mid, save=False)  # fmt: skip
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), whole, rtol=1e-6,
                               atol=1e-6)  # fmt: skip
    np.testing.assert_allclose(h_end, h_whole, rtol=1e-6, atol=1e-6)


def test_backward_matches_central_differences(tp, inputs):
    """d(sum gy * y)/d(each input) from the kernel against float64 central differences."""
    gy = np.random.default_rng(8).normal(size=(NB, T, E))
    _, hs, _, args, A = run_forward(tp, *inputs)
    D_skip = inputs[5]
    outs = [np.empty_like(x) for x in (*args, A)] + [np.empty(E, dtype=np.float32)]
    tp.scan_backward(*outs, gy.astype(np.float32), hs, *args, A, D_skip.astype(np.float32))
    gu, gdt, gB, gC, gA, gD = outs
    # The kernel's gA is by A (N, E); A = -exp(A_log), so d/dA_log = gA * A.
    got = [gu, gdt, gB, gC, (gA * A).T, gD]
    eps = 1e-6
    for which, analytic in enumerate(got):
        base = list(inputs)
        numeric = np.empty(base[which].shape)
        for index in np.ndindex(numeric.shape):
            plus, minus = [x.copy() for x in base], [x.copy() for x in base]
            plus[which][index] += eps
            minus[which][index] -= eps
            numeric[index] = ((reference(*plus)[0] - reference(*minus)[0]) * gy).sum() / (2 * eps)
        scale = np.abs(numeric).max()
        assert scale > 0.1  # a gradient that is there to be checked
        np.testing.assert_allclose(analytic, numeric, rtol=0, atol=2e-5 * scale)


FIXTURES = sorted((SCRIPT.parent.parent / "tests" / "fixtures").glob("train_prior-*.npy"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem[12:20] for f in FIXTURES])
def test_mambazip_runs_the_prior_as_its_trainer_did(tp, fixture):
    from mambazip import priors
    from mambazip.model import Model

    want = np.load(fixture)
    prior = priors.load(fixture.stem.removeprefix("train_prior-"))
    model = Model(prior.config, prior.params)
    got = []
    for byte in b"\0" + tp.FIXTURE_TEXT:
        model.forward(byte)
        got.append(model.logits.copy())
    assert want.shape == (len(tp.FIXTURE_TEXT) + 1, 256)
    np.testing.assert_allclose(np.array(got), want, rtol=0, atol=1e-4 * np.abs(want).max())
