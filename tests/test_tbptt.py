"""Truncated BPTT: `Model.segment_gradient` equals float64 finite differences of the mean
segment loss computed by the reference, replay in chunks changes no bit, and the online
learner applies exactly that gradient once per segment.

The segment is SEGMENT forwards long and starts after PREFIX bytes, so its start state is
non-zero and the conv ring buffer has wrapped. The loss is the mean over the segment of
-log p(target) with the state carried from forward to forward, differentiated through it
(the start state is a constant): the reference chains its recurrent `step` from the
model's own start state (`state_hf()`).

Finite differences and tolerance as in test_gradients_match_finite_differences (central,
h = 1e-6 in float64; entries within 1e-4·(|FD| + S) + 5e-8, directions within
2e-4·Σ|analytic·v| + 5e-8), for the same reasons: the analytic gradient is float32, the
FD good to ~1e-8, and a missing term errs by O(S). The gradient through the state is
checked not to be negligible, so that these comparisons could fail without it.
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
SEED = 20241129
PREFIX = 5
SEGMENT = 6
SUBSET = 32

INPUTS = BYTES[PREFIX : PREFIX + SEGMENT]
TARGETS = BYTES[PREFIX + 1 : PREFIX + SEGMENT + 1]


@functools.cache
def _setup(name):
    return fdm.perturbed_setup(name, SEED)


def _model(name):
    from mambazip.model import Model
    from mambazip.params import Params

    cfg, tensors = _setup(name)
    model = Model(cfg, Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}))
    for b in BYTES[:PREFIX]:
        model.forward(b)
    return model


@functools.cache
def _run(name):
    """(cfg, float64 params, start state, analytic segment gradient)."""
    cfg, tensors = _setup(name)
    model = _model(name)
    conv, ssm = model.state_hf()
    grads = model.segment_gradient(list(INPUTS), list(TARGETS))
    start = (np.array(conv, dtype=np.float64), np.array(ssm, dtype=np.float64))
    return cfg, ref.to_float64(tensors, cfg), start, grads


def _segment_loss(cfg, params, state):
    total = 0.0
    for b, target in zip(INPUTS, TARGETS, strict=True):
        logits, state = ref.step(params, cfg, state, b)
        total += ref.nll(logits, target)
    return total / SEGMENT


def _fd(name, tensor):
    cfg, params, state, _ = _run(name)
    return lambda direction: fdm.central_difference(
        lambda p: _segment_loss(cfg, p, state), params, tensor, direction
    )


@pytest.mark.parametrize(("name", "tensor"), fdm.CASES)
def test_segment_gradient_entries_match_finite_differences(name, tensor):
    grad = _run(name)[3][tensor]
    rng = np.random.default_rng(SEED)
    entries = fdm.checked_entries(tensor, grad.shape, rng, set(INPUTS) | set(TARGETS), SUBSET)
    fdm.assert_entries_match(grad, entries, _fd(name, tensor))


@pytest.mark.parametrize(("name", "tensor"), fdm.CASES)
def test_segment_gradient_directional_derivatives_match_finite_differences(name, tensor):
    grad = _run(name)[3][tensor]
    fdm.assert_directions_match(grad, np.random.default_rng([SEED, 1]), _fd(name, tensor))


@pytest.mark.parametrize("name", list(ref.TEST_CONFIGS))
def test_gradient_through_the_state_is_far_from_negligible(name):
    """The mean of per-step gradients with the state held constant (bptt=1 style) must
    differ from the segment gradient by far more than the tolerance above, in the SSM and
    convolution parameters at least; else the finite-difference tests could not tell."""
    model = _model(name)
    truncated = None
    for b, target in zip(INPUTS, TARGETS, strict=True):
        model.forward(b)
        g = model.gradient(target)
        truncated = g if truncated is None else {k: truncated[k] + g[k] for k in g}
    grads = _run(name)[3]
    for tensor in ("backbone.layers.0.mixer.A_log", "backbone.layers.0.mixer.conv1d.weight"):
        full = np.asarray(grads[tensor], dtype=np.float64)
        held = np.asarray(truncated[tensor], dtype=np.float64) / SEGMENT
        scale = np.max(np.abs(full))
        assert np.max(np.abs(full - held)) > 100 * fdm.ENTRY_RTOL * scale, tensor


@pytest.mark.parametrize("name", list(ref.TEST_CONFIGS))
@pytest.mark.parametrize("chunk", [1, 2, 4, SEGMENT])
def test_replay_in_chunks_gives_bit_identical_gradients(name, chunk):
    whole = _run(name)[3]
    chunked = _model(name).segment_gradient(list(INPUTS), list(TARGETS), chunk=chunk)
    for tensor, g in whole.items():
        assert np.array_equal(chunked[tensor], g), tensor


def _settings(cfg, **train):
    from mambazip.config import Settings, TrainConfig

    return Settings(model=cfg, train=TrainConfig(**train))


def test_online_learner_applies_one_sgd_step_of_the_segment_gradient():
    """bptt=6: after the 6th byte the learner has taken exactly one SGD step with the
    gradient of the mean loss of forwards 0, b0..b4 (targets b0..b5) from the zero state;
    that step lowers the segment loss."""
    from mambazip.model import Model, OnlineLearner
    from mambazip.params import Params

    name = "k4-allbias-untied"
    cfg, tensors = _setup(name)
    data = np.frombuffer(BYTES[: SEGMENT + 1], dtype=np.uint8)
    lr = 0.05
    before = Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()})
    learner = OnlineLearner(
        _settings(cfg, optimizer="sgd", lr=lr, bptt=SEGMENT),
        params=Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}),
    )
    learner.advance(data[: SEGMENT - 1])
    assert learner.step == 0
    learner.advance(data[SEGMENT - 1 : SEGMENT])
    assert learner.step == 1 and learner.learned == SEGMENT

    inputs = [0, *data[: SEGMENT - 1].tolist()]
    targets = data[:SEGMENT].tolist()
    grads = Model(cfg, before).segment_gradient(inputs, targets)
    after = learner.model.params.to_hf()
    for tensor, g in grads.items():
        expected = tensors[tensor] - np.float32(lr) * g
        assert np.array_equal(after[tensor], expected), tensor

    def loss(params):
        state = ref.zero_state(cfg)
        total = 0.0
        for b, target in zip(inputs, targets, strict=True):
            logits, state = ref.step(params, cfg, state, b)
            total += ref.nll(logits, target)
        return total / SEGMENT

    assert loss(ref.to_float64(after, cfg)) < loss(ref.to_float64(tensors, cfg))


def test_live_state_after_an_update_is_the_segment_rerun_with_the_new_weights():
    """After the update the learner's pdf for the next byte equals that of a fresh model
    with the updated weights fed the same bytes from the zero state."""
    from mambazip.kernels.step import quantize
    from mambazip.model import Model, OnlineLearner
    from mambazip.params import Params

    cfg, tensors = _setup("k3-nobias-tied")
    data = np.frombuffer(BYTES[: SEGMENT + 1], dtype=np.uint8)
    learner = OnlineLearner(
        _settings(cfg, optimizer="adam", lr=0.01, bptt=SEGMENT),
        params=Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}),
    )
    learner.advance(data)
    assert learner.step == 1
    fresh = Model(cfg, Params(cfg, learner.model.params.flat.copy()))
    for b in [0, *data.tolist()]:
        probs = fresh.forward(b)
    expected = np.zeros_like(learner.freq)
    quantize(expected, probs)
    assert np.array_equal(learner.freq, expected)


def test_decay_rates_follow_a_log_after_every_update():
    """Model.A, the cached -exp(A_log) of the forward, is renewed by each optimizer step."""
    from mambazip.kernels.detmath import apply_exp32
    from mambazip.model import OnlineLearner
    from mambazip.params import Params

    cfg, tensors = _setup("k3-nobias-tied")
    learner = OnlineLearner(
        _settings(cfg, optimizer="adam", lr=0.01, bptt=SEGMENT),
        params=Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()}),
    )
    before = learner.model.A.copy()
    learner.advance(np.frombuffer(BYTES * 2, dtype=np.uint8))
    assert learner.step > 1
    a_log = learner.model.params["A_log"]
    expected = np.empty_like(a_log)
    apply_exp32(expected, a_log)
    assert not np.array_equal(learner.model.A, before)
    assert np.array_equal(learner.model.A, -expected)


def test_rerun_layer_by_layer_leaves_the_state_of_one_forward_per_byte():
    """model_rerun (the state-only rerun after an update) gives the conv and SSM states, bit
    for bit, that feeding the same bytes one at a time gives, with two layers and a ring
    buffer that wraps."""
    from mambazip.kernels.forward import model_rerun
    from mambazip.kernels.layout import weight_views_py
    from mambazip.kernels.step import C_POS

    one_by_one = _model("k3-nobias-tied")
    rerun = _model("k3-nobias-tied")
    inputs = np.frombuffer(BYTES[PREFIX:], dtype=np.uint8).astype(np.int64)
    for b in inputs:
        one_by_one.forward(int(b))
    W = weight_views_py(rerun.params.flat, rerun.params.offsets, rerun.dims)
    scratch = np.zeros(4096, dtype=np.float32)
    pos = model_rerun(
        W, rerun.A, rerun.conv_state, rerun.ssm_state, rerun.counters[C_POS], inputs, scratch,
        rerun.cfg.dt_rank, np.float32(rerun.cfg.norm_eps),
    )  # fmt: skip
    assert rerun.cfg.n_layer == 2 and len(inputs) > rerun.cfg.d_conv
    assert pos == one_by_one.counters[C_POS]
    assert rerun.conv_state.tobytes() == one_by_one.conv_state.tobytes()
    assert rerun.ssm_state.tobytes() == one_by_one.ssm_state.tobytes()
