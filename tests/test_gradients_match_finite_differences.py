"""bptt=1 gradient: `Model.gradient` equals float64 finite differences of the reference.

For steps 5, 9 and 13 of a byte sequence (so the recurrent state is non-zero and the conv
ring buffer has wrapped), the analytic float32 gradient of -log p(target) of that step,
for every tensor of `to_hf()`, is compared with central differences of the same loss
computed by the float64 reference `step` from the model's own state before that step
(`state_hf()`), held constant: exactly the single-step gradient DESIGN.md asks for.

Finite differences. Central, step h = 1e-6 on float64 parameters: truncation error
h²/6·|f'''| ≈ 1e-12·|f'''| and rounding error ≈ 1e-16·|f|/h ≈ 1e-9 for f = O(5), so the
float64 FD is good to ~1e-8 absolute; FD_FLOOR = 5e-8 absorbs that.

Tolerance. The analytic gradient is float32 (unit roundoff 6e-8) from float32
activations; through two layers of dot products of length ≤ 64, RMSNorm backward (which
cancels terms of the size of the gradient) and the project's own transcendentals, its
error is expected near 1e-6 to 1e-5 of the scale S of the tensor's gradient (the largest
|FD| over its checked entries at that step). Each entry must satisfy
    |analytic - FD| ≤ 1e-4·(|FD| + S) + FD_FLOOR,
10 to 100 times the expected float32 error, while a wrong or missing term of the
backward pass errs by O(S). Do not loosen it: a failure is a finding.

Entries checked: all of a tensor with ≤ 128 entries; for larger ones a fixed random subset
of 64, plus the rows of the input and target bytes in the embedding and head matrices
(where the non-zero or special gradient entries are). Every entry of every tensor is
also covered by directional derivatives along fixed random directions v:
    |Σ analytic·v - FD along v| ≤ 2e-4·Σ|analytic·v| + FD_FLOOR.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

try:  # tests/ as a package or as a plain directory on sys.path
    from . import reference as ref
except ImportError:
    import reference as ref

BYTES = b"\x00mamba\xffzips bytes!!!"
SEED = 20240611
STEPS = (5, 9, 13)  # 0-based positions in BYTES; the target is the byte after
H = 1e-6
FD_FLOOR = 5e-8
ENTRY_RTOL = 1e-4
DIRECTION_RTOL = 2e-4
FULL_CHECK_MAX = 128  # tensors up to this many entries are checked entry by entry
SUBSET = 64
N_DIRECTIONS = 3
MIN_SCALE = 1e-5  # below this a tensor's gradient would be "trivially zero": test is vacuous

CASES = [
    pytest.param(name, tensor, id=f"{name}-{tensor}")
    for name, kw in ref.TEST_CONFIGS.items()
    for tensor in ref.param_shapes(SimpleNamespace(vocab=256, **kw))
]


@functools.cache
def _package_setup(name):
    """ModelConfig and perturbed float32 HF tensors for one test config."""
    from mambazip.config import ModelConfig
    from mambazip.params import init_params

    cfg = ModelConfig(**ref.TEST_CONFIGS[name])
    return cfg, ref.perturb(init_params(cfg, SEED).to_hf(), SEED)


@functools.cache
def _gradient_run(name):
    """Run the model over BYTES; at each of STEPS record the state before the step, the
    input byte, the target byte, and the analytic gradient after the step."""
    from mambazip.model import Model
    from mambazip.params import Params

    cfg, tensors = _package_setup(name)
    model = Model(cfg, Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}))
    records = {}
    for t, b in enumerate(BYTES[: max(STEPS) + 1]):
        conv, ssm = model.state_hf()
        model.forward(b)
        if t in STEPS:
            target = BYTES[t + 1]
            grads = model.gradient(target)
            records[t] = dict(
                state=(np.array(conv, dtype=np.float64), np.array(ssm, dtype=np.float64)),
                byte=b,
                target=target,
                grads=grads,
            )
    params64 = ref.to_float64(tensors, cfg)
    return cfg, params64, records


def _loss(cfg, params, rec):
    return ref.nll(ref.step(params, cfg, rec["state"], rec["byte"])[0], rec["target"])


def _fd_along(cfg, params, name, rec, direction):
    """Central difference of the loss along `direction` (shape of tensor `name`).

    Dividing by 2h rather than by the step actually stored (x ± h rounded in float64)
    errs by at most ulp(|x|)/h ≈ 1e-9 relative for |x| ≤ 8: negligible.
    """
    base = params[name]
    f_plus = _loss(cfg, {**params, name: base + H * direction}, rec)
    f_minus = _loss(cfg, {**params, name: base - H * direction}, rec)
    return (f_plus - f_minus) / (2 * H)


def _checked_entries(name, shape, rec, rng):
    """Flat indices to check entry by entry."""
    size = int(np.prod(shape))
    if size <= FULL_CHECK_MAX:
        return np.arange(size)
    idx = set(rng.choice(size, SUBSET, replace=False).tolist())
    if name in ("backbone.embeddings.weight", "lm_head.weight"):
        for row in (rec["byte"], rec["target"]):
            idx.update(range(row * shape[1], (row + 1) * shape[1]))
    return np.array(sorted(idx))


def _record(name, step):
    cfg, params, records = _gradient_run(name)
    return cfg, params, records[step]


@pytest.mark.parametrize("name", list(ref.TEST_CONFIGS))
def test_gradient_has_exactly_the_parameter_tensors(name):
    cfg, tensors = _package_setup(name)
    expected = ref.param_shapes(cfg)
    assert {k: v.shape for k, v in tensors.items()} == expected
    for step in STEPS:
        grads = _record(name, step)[2]["grads"]
        assert sorted(grads) == sorted(expected), f"step {step}: names differ"
        for k, g in grads.items():
            assert g.shape == expected[k], f"step {step}: {k} has shape {g.shape}"
            assert g.dtype == np.float32, f"step {step}: {k} is {g.dtype}"
            assert np.all(np.isfinite(g)), f"step {step}: {k} is not finite"


@pytest.mark.parametrize(("name", "tensor"), CASES)
def test_gradient_entries_match_finite_differences(name, tensor):
    for step in STEPS:
        cfg, params, rec = _record(name, step)
        shape = params[tensor].shape
        rng = np.random.default_rng([SEED, step])
        entries = _checked_entries(tensor, shape, rec, rng)
        analytic = np.asarray(rec["grads"][tensor], dtype=np.float64).reshape(-1)[entries]
        fd = np.empty(len(entries))
        for j, i in enumerate(entries):
            e = np.zeros(shape)
            e.flat[i] = 1.0
            fd[j] = _fd_along(cfg, params, tensor, rec, e)
        scale = float(np.max(np.abs(fd)))
        assert scale >= MIN_SCALE, f"step {step}: gradient scale {scale:.3e} too small to test"
        err = np.abs(analytic - fd)
        allowed = ENTRY_RTOL * (np.abs(fd) + scale) + FD_FLOOR
        worst = int(np.argmax(err - allowed))
        assert np.all(err <= allowed), (
            f"step {step}: {np.sum(err > allowed)}/{len(entries)} entries off; worst at "
            f"index {np.unravel_index(entries[worst], shape)}: analytic {analytic[worst]:.6e}, "
            f"FD {fd[worst]:.6e}, allowed {allowed[worst]:.2e}; max |FD| {scale:.3e}, "
            f"max error {np.max(err):.3e}"
        )


@pytest.mark.parametrize(("name", "tensor"), CASES)
def test_gradient_directional_derivatives_match_finite_differences(name, tensor):
    for step in STEPS:
        cfg, params, rec = _record(name, step)
        rng = np.random.default_rng([SEED, step, 1])
        analytic = np.asarray(rec["grads"][tensor], dtype=np.float64)
        for k in range(N_DIRECTIONS):
            v = rng.standard_normal(analytic.shape)
            fd = _fd_along(cfg, params, tensor, rec, v)
            predicted = float(np.sum(analytic * v))
            allowed = DIRECTION_RTOL * float(np.sum(np.abs(analytic * v))) + FD_FLOOR
            assert abs(predicted - fd) <= allowed, (
                f"step {step}, direction {k}: analytic·v {predicted:.6e}, FD {fd:.6e}, "
                f"difference {abs(predicted - fd):.3e}, allowed {allowed:.3e}"
            )
