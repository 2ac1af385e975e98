"""Forward pass: the float32 Numba model equals the independent float64 reference.

Also checks the reference against itself: its sequence form (causal convolution over the
whole sequence, scan as a loop) equals iterating its recurrent `step` from zero state.

Tolerance for model vs reference. The model is float32 (unit roundoff u = 2^-24 ≈ 6e-8),
the reference float64 on the same float32 parameter values, so the difference is the
float32 rounding of the model alone. Each logit ends a chain of about a dozen operations
per layer (dot products of length ≤ 2E = 64, RMSNorm, the project's own exp/log/sigmoid,
accurate to a few ulp) over a 20-step recurrence that contracts (exp(dt·A) < 1), on values
of magnitude O(1) (logits up to ~5 here). Expected error: a few hundred u, ~1e-5 at most.
We allow max |model - reference| ≤ 1e-4 · max(1, max |reference|), i.e. 1e-4 relative to
the scale of the values; a real defect (wrong conv tap, missing 0.2-sized bias, ignored
norm eps, wrong ring-buffer order) moves them by 1e-2 or more. Do not loosen it: a
failure is a finding.
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

# 20 bytes: longer than every d_conv, so the conv ring buffer wraps several times; the
# extreme bytes 0 and 255 are included.
BYTES = b"\x00mamba\xffzips bytes!!!"
SEED = 20240611
CONFIGS = list(ref.TEST_CONFIGS)

MODEL_RTOL = 1e-4  # model (float32) vs reference (float64), relative to max(1, scale)
SELF_RTOL = 1e-12  # reference vs reference, both float64, only summation order differs


def _scaled_error(actual, expected):
    """(max |actual - expected|, max(1, max |expected|))."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    return float(np.max(np.abs(actual - expected))), max(1.0, float(np.max(np.abs(expected))))


@functools.cache
def _package_setup(name):
    """ModelConfig and perturbed float32 HF tensors for one test config."""
    from mambazip.config import ModelConfig
    from mambazip.params import init_params

    cfg = ModelConfig(**ref.TEST_CONFIGS[name])
    return cfg, ref.perturb(init_params(cfg, SEED).to_hf(), SEED)


@functools.cache
def _model_run(name):
    """Run the Numba model over BYTES: logits (T, V), probabilities (T, V), final state."""
    from mambazip.model import Model
    from mambazip.params import Params

    cfg, tensors = _package_setup(name)
    model = Model(cfg, Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}))
    logits, probs = [], []
    for b in BYTES:
        probs.append(np.array(model.forward(b), dtype=np.float64))
        logits.append(np.array(model.logits, dtype=np.float64))
    return np.stack(logits), np.stack(probs), model.state_hf()


@functools.cache
def _reference_run(name):
    cfg, tensors = _package_setup(name)
    return ref.run_sequence(tensors, cfg, BYTES)


# ----------------------------------------------------------------- reference self-check


@pytest.mark.parametrize("name", CONFIGS)
def test_reference_sequence_form_equals_iterated_steps(name):
    cfg = SimpleNamespace(vocab=256, **ref.TEST_CONFIGS[name])
    params = ref.random_params(cfg, SEED)
    seq_logits, (seq_conv, seq_ssm) = ref.run_sequence(params, cfg, BYTES)

    state = ref.zero_state(cfg)
    step_logits = []
    for b in BYTES:
        logits, state = ref.step(params, cfg, state, b)
        step_logits.append(logits)

    for what, a, b in [
        ("logits", np.stack(step_logits), seq_logits),
        ("conv state", state[0], seq_conv),
        ("ssm state", state[1], seq_ssm),
    ]:
        err, scale = _scaled_error(a, b)
        assert err <= SELF_RTOL * scale, f"{what}: max error {err:.3e}, scale {scale:.3e}"
    # Not vacuous: the state is non-zero and the logits change from byte to byte.
    assert np.min(np.abs(seq_ssm)) > 0 and np.min(np.abs(seq_conv)) > 0
    assert np.min(np.ptp(seq_logits, axis=0)) > 1e-3


# ----------------------------------------------------------------- model vs reference


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_match_reference_at_every_step(name):
    model_logits = _model_run(name)[0]
    ref_logits = _reference_run(name)[0]
    err, scale = _scaled_error(model_logits, ref_logits)
    worst_step = int(np.argmax(np.max(np.abs(model_logits - ref_logits), axis=1)))
    assert err <= MODEL_RTOL * scale, (
        f"logits: max |model - reference| = {err:.3e} (worst at step {worst_step}), "
        f"scale {scale:.3e}, allowed {MODEL_RTOL * scale:.3e}"
    )


@pytest.mark.parametrize("name", CONFIGS)
def test_probabilities_match_softmax_of_reference(name):
    model_probs = _model_run(name)[1]
    ref_probs = np.exp(ref.log_softmax(_reference_run(name)[0]))
    # A logit error δ changes p by about p·δ, so relative to p the same 1e-4 · scale bound
    # holds (doubled: the normaliser moves too); the absolute term covers float32 rounding
    # of the probabilities themselves (values ≤ 1, a few ulp ≈ 1e-7).
    scale = max(1.0, float(np.max(np.abs(_reference_run(name)[0]))))
    allowed = 2 * MODEL_RTOL * scale * ref_probs + 1e-6
    excess = np.abs(model_probs - ref_probs) - allowed
    t, v = np.unravel_index(np.argmax(excess), excess.shape)
    assert np.all(excess <= 0), (
        f"probabilities: at step {t}, byte {v}: model {model_probs[t, v]:.9e}, "
        f"reference {ref_probs[t, v]:.9e}, allowed difference {allowed[t, v]:.3e}"
    )


@pytest.mark.parametrize("name", CONFIGS)
def test_state_after_sequence_matches_reference(name):
    model_conv, model_ssm = _model_run(name)[2]
    ref_conv, ref_ssm = _reference_run(name)[1]
    for what, a, b in [("conv", model_conv, ref_conv), ("ssm", model_ssm, ref_ssm)]:
        err, scale = _scaled_error(a, b)
        assert err <= MODEL_RTOL * scale, (
            f"{what} state: max |model - reference| = {err:.3e}, scale {scale:.3e}"
        )
