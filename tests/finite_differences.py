"""Shared machinery of the finite-difference gradient tests (see the docstring of
test_gradients_match_finite_differences for the choice of step and tolerances): central
differences of a float64 reference loss, the entries checked, and the two comparisons."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

try:  # tests/ as a package or as a plain directory on sys.path
    from . import reference as ref
except ImportError:
    import reference as ref

H = 1e-6
FD_FLOOR = 5e-8
ENTRY_RTOL = 1e-4
DIRECTION_RTOL = 2e-4
FULL_CHECK_MAX = 128  # tensors up to this many entries are checked entry by entry
N_DIRECTIONS = 3
MIN_SCALE = 1e-5  # below this a tensor's gradient would be "trivially zero": test is vacuous

# (test config, tensor) for every tensor of every test config.
CASES = [
    pytest.param(name, tensor, id=f"{name}-{tensor}")
    for name, kw in ref.TEST_CONFIGS.items()
    for tensor in ref.param_shapes(SimpleNamespace(vocab=256, **kw))
]


def perturbed_setup(name, seed):
    """ModelConfig and perturbed float32 HF tensors for one test config."""
    from mambazip.config import ModelConfig
    from mambazip.params import init_params

    cfg = ModelConfig(**ref.TEST_CONFIGS[name])
    return cfg, ref.perturb(init_params(cfg, seed).to_hf(), seed)


def central_difference(loss, params, name, direction):
    """Central difference of ``loss(params)`` along ``direction`` (shape of tensor ``name``).

    Dividing by 2h rather than by the step actually stored (x ± h rounded in float64)
    errs by at most ulp(|x|)/h ≈ 1e-9 relative for |x| ≤ 8: negligible.
    """
    base = params[name]
    f_plus = loss({**params, name: base + H * direction})
    f_minus = loss({**params, name: base - H * direction})
    return (f_plus - f_minus) / (2 * H)


def checked_entries(name, shape, rng, rows, subset):
    """Flat indices to check entry by entry: all of a small tensor; else ``subset`` random
    ones plus, in the embedding and head matrices, the ``rows`` (bytes) that matter."""
    size = int(np.prod(shape))
    if size <= FULL_CHECK_MAX:
        return np.arange(size)
    idx = set(rng.choice(size, subset, replace=False).tolist())
    if name in ("backbone.embeddings.weight", "lm_head.weight"):
        for row in sorted(rows):
            idx.update(range(row * shape[1], (row + 1) * shape[1]))
    return np.array(sorted(idx))


def assert_entries_match(grad, entries, fd_along, where=""):
    """Each checked entry of ``grad`` within ENTRY_RTOL·(|FD| + S) + FD_FLOOR of its
    finite difference, S the largest |FD| checked; ``fd_along(direction)``."""
    shape = grad.shape
    analytic = np.asarray(grad, dtype=np.float64).reshape(-1)[entries]
    fd = np.empty(len(entries))
    for j, i in enumerate(entries):
        e = np.zeros(shape)
        e.flat[i] = 1.0
        fd[j] = fd_along(e)
    scale = float(np.max(np.abs(fd)))
    assert scale >= MIN_SCALE, f"{where}gradient scale {scale:.3e} too small to test"
    err = np.abs(analytic - fd)
    allowed = ENTRY_RTOL * (np.abs(fd) + scale) + FD_FLOOR
    worst = int(np.argmax(err - allowed))
    assert np.all(err <= allowed), (
        f"{where}{np.sum(err > allowed)}/{len(entries)} entries off; worst at index "
        f"{np.unravel_index(entries[worst], shape)}: analytic {analytic[worst]:.6e}, "
        f"FD {fd[worst]:.6e}, allowed {allowed[worst]:.2e}; max |FD| {scale:.3e}, "
        f"max error {np.max(err):.3e}"
    )


def assert_directions_match(grad, rng, fd_along, where=""):
    """Along N_DIRECTIONS random directions v covering every entry:
    |Σ grad·v - FD along v| ≤ DIRECTION_RTOL·Σ|grad·v| + FD_FLOOR."""
    analytic = np.asarray(grad, dtype=np.float64)
    for k in range(N_DIRECTIONS):
        v = rng.standard_normal(analytic.shape)
        fd = fd_along(v)
        predicted = float(np.sum(analytic * v))
        allowed = DIRECTION_RTOL * float(np.sum(np.abs(analytic * v))) + FD_FLOOR
        assert abs(predicted - fd) <= allowed, (
            f"{where}direction {k}: analytic·v {predicted:.6e}, FD {fd:.6e}, "
            f"difference {abs(predicted - fd):.3e}, allowed {allowed:.3e}"
        )
