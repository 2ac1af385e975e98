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

import numpy as np
import pytest

try:  # tests/ as a package or as a plain directory on sys.path
    from . import finite_differences as fdm
    from . import reference as ref
except ImportError:
    import finite_differences as fdm
    import reference as ref

BYTES = b"\x00mamba\xffzips bytes!!!"
SEED = 20240611
STEPS = (5, 9, 13)  # 0-based positions in BYTES; the target is the byte after
SUBSET = 64


@functools.cache
def _gradient_run(name):
    """Run the model over BYTES; at each of STEPS record the state before the step, the
    input byte, the target byte, and the analytic gradient after the step."""
    from mambazip.model import Model
    from mambazip.params import Params

    cfg, tensors = fdm.perturbed_setup(name, SEED)
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
    return cfg, tensors, params64, records


def _fd(name, step, tensor):
    """fd_along(direction) for the loss of ``step``."""
    cfg, _, params, records = _gradient_run(name)
    rec = records[step]

    def loss(p):
        return ref.nll(ref.step(p, cfg, rec["state"], rec["byte"])[0], rec["target"])

    return lambda direction: fdm.central_difference(loss, params, tensor, direction)


@pytest.mark.parametrize("name", list(ref.TEST_CONFIGS))
def test_gradient_has_exactly_the_parameter_tensors(name):
    cfg, tensors, _, records = _gradient_run(name)
    expected = ref.param_shapes(cfg)
    assert {k: v.shape for k, v in tensors.items()} == expected
    for step in STEPS:
        grads = records[step]["grads"]
        assert sorted(grads) == sorted(expected), f"step {step}: names differ"
        for k, g in grads.items():
            assert g.shape == expected[k], f"step {step}: {k} has shape {g.shape}"
            assert g.dtype == np.float32, f"step {step}: {k} is {g.dtype}"
            assert np.all(np.isfinite(g)), f"step {step}: {k} is not finite"


@pytest.mark.parametrize(("name", "tensor"), fdm.CASES)
def test_gradient_entries_match_finite_differences(name, tensor):
    for step in STEPS:
        rec = _gradient_run(name)[3][step]
        grad = rec["grads"][tensor]
        rng = np.random.default_rng([SEED, step])
        rows = (rec["byte"], rec["target"])
        entries = fdm.checked_entries(tensor, grad.shape, rng, rows, SUBSET)
        fdm.assert_entries_match(grad, entries, _fd(name, step, tensor), f"step {step}: ")


@pytest.mark.parametrize(("name", "tensor"), fdm.CASES)
def test_gradient_directional_derivatives_match_finite_differences(name, tensor):
    for step in STEPS:
        grad = _gradient_run(name)[3][step]["grads"][tensor]
        rng = np.random.default_rng([SEED, step, 1])
        fdm.assert_directions_match(grad, rng, _fd(name, step, tensor), f"step {step}: ")
