"""The training recipe's knobs (config.TrainConfig, RECIPE_DEFAULTS): Adam without momentum
and with a beta2 warm-up against hand-computed steps, per-group learning-rate multipliers,
a BPTT horizon longer than the update stride (against the segment gradient bit for bit, and
that gradient against float64 finite differences of the reference), a horizon curriculum,
several optimizer steps per update, and replay passes over the history; each recorded in
the header and decoded to the same bytes.

The tiny configurations and the finite-difference tolerances are those of test_tbptt.
"""

from __future__ import annotations

import functools
import io

import numpy as np
import pytest
from click.testing import CliRunner

import mambazip
from mambazip import container
from mambazip.cli import cli
from mambazip.config import ConfigError, Settings, TrainConfig
from mambazip.kernels.optim import adam_beta2, adam_update
from mambazip.kernels.segment import N_PLAN, P_BPTT, P_CURRICULUM, P_WINDOW, window_at
from mambazip.model import Model, OnlineLearner
from mambazip.params import Params

try:  # tests/ as a package or as a plain directory on sys.path
    from . import finite_differences as fdm
    from . import reference as ref
    from .conftest import TINY_MODEL
except ImportError:
    import finite_differences as fdm
    import reference as ref
    from conftest import TINY_MODEL

f32 = np.float32
BYTES = b"\x00mamba\xffzips bytes!!! and more of them"
SEED = 20241129
TEXT = b"".join(b"%d: recipes are learned by heart, then replayed\n" % i for i in range(40))


def _params(name):
    cfg, tensors = fdm.perturbed_setup(name, SEED)
    return cfg, Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()})


def _learner(name, replay_chunk=None, **train):
    cfg, params = _params(name)
    return OnlineLearner(Settings(model=cfg, train=TrainConfig(**train)), params=params,
                         replay_chunk=replay_chunk)  # fmt: skip


def _data(n):
    return np.frombuffer(BYTES[:n], dtype=np.uint8)


def _sgd_step(params, grads, lr):
    return {k: params[k] - f32(lr) * g for k, g in grads.items()}


def _model_with(cfg, hf):
    return Model(cfg, Params.from_hf(cfg, {k: np.array(v) for k, v in hf.items()}))


# ------------------------------------------------------------------------------ Adam


def test_adam_without_momentum_takes_the_hand_computed_steps():
    """beta1 = 0 and the beta2 warm-up, eps 0, lr 2^-10. Step 1, g = 1/4: m = g, v = g^2,
    the step is lr * g / |g| = lr exactly. Step 2, g = 3/4: beta2_2 = 1/2, v = (1/16 + 9/16)/2
    = 5/16, the step is lr * (3/4) / sqrt(5/16) = lr * 3 / sqrt(5)."""
    theta, m, v = (np.array([x], dtype=f32) for x in (1.0, 0.0, 0.0))
    ranges = np.array([[0, 1]], dtype=np.int64)
    lr = f32(2.0**-10)
    for step, g in ((1, 0.25), (2, 0.75)):
        beta2, bc2 = adam_beta2(0.999, step, True)
        grad = np.array([g], dtype=f32)
        adam_update(theta, theta, grad, m, v, ranges, np.ones(1, dtype=f32), lr, f32(0.0),
                    f32(beta2), f32(0.0), f32(1.0), f32(bc2), f32(0.0))  # fmt: skip
        assert m[0] == f32(g), "without momentum m is the last gradient"
        if step == 1:
            assert theta[0] == f32(1.0 - 2.0**-10) and v[0] == f32(0.0625)
    assert v[0] == f32(5 / 16)
    assert theta[0] == pytest.approx(1.0 - 2.0**-10 * (1 + 3 / 5**0.5), rel=1e-7)


@pytest.mark.parametrize(
    ("step", "beta2", "bc2"),
    [(1, 0.0, 1.0), (2, 0.5, 1.0), (4, 0.75, 1.0), (500, 0.998, 1.0), (1000, 0.999, 1.0),
     (10**6, 0.999, 1.0)],
)  # fmt: skip
def test_beta2_warmup_is_one_minus_one_over_t_up_to_beta2(step, beta2, bc2):
    got = adam_beta2(0.999, step, True)
    assert got[0] == pytest.approx(beta2, abs=1e-15) and got[1] == bc2


def test_without_warmup_beta2_is_constant_with_bias_correction():
    assert adam_beta2(0.999, 3, False) == (0.999, pytest.approx(1 - 0.999**3, rel=1e-14))


def test_beta2_warmup_makes_v_the_mean_of_the_squared_gradients():
    rng = np.random.default_rng(1)
    gs = rng.standard_normal((12, 5)).astype(f32)
    theta, m, v = (np.zeros(5, dtype=f32) for _ in range(3))
    ranges = np.array([[0, 5]], dtype=np.int64)
    for step, g in enumerate(gs, 1):
        beta2, bc2 = adam_beta2(0.999, step, True)
        adam_update(theta, theta, g.copy(), m, v, ranges, np.ones(1, dtype=f32), f32(1e-3),
                    f32(0.9), f32(beta2), f32(1e-8), f32(1 - 0.9**step), f32(bc2),
                    f32(0.0))  # fmt: skip
    want = (gs.astype(np.float64) ** 2).mean(axis=0)
    assert np.allclose(v, want, rtol=1e-5)


# ------------------------------------------------------------------- lr multipliers


def _after_one_byte(**train):
    train = {"optimizer": "sgd", "bptt": 1, "lr_scale": {}, **train}
    settings = mambazip.resolve_settings(model=TINY_MODEL, mix="none", train=train)
    learner = OnlineLearner(settings)
    learner.advance(np.frombuffer(b"m", dtype=np.uint8))
    return learner.model.params


def test_a_zero_multiplier_freezes_only_its_group():
    plain = _after_one_byte(lr=0.05)
    frozen = _after_one_byte(lr=0.05, lr_scale={"head": 0.0})
    start = _after_one_byte(lr=0.0)
    assert np.array_equal(frozen["lm_head"], start["lm_head"])
    assert not np.array_equal(plain["lm_head"], start["lm_head"])
    for name in ("embedding", "in_proj", "x_proj", "out_proj", "norm_f"):
        assert np.array_equal(frozen[name], plain[name]), name


def test_a_multiplier_scales_the_step_of_its_group_only():
    """One SGD step from the same weights: the head of lr 0.05 x 2 is that of lr 0.1 (x 2 is
    exact in float32), every other tensor that of lr 0.05 (and, where the step moved it at
    all, not that of lr 0.1)."""
    scaled = _after_one_byte(lr=0.05, lr_scale={"head": 2.0})
    doubled = _after_one_byte(lr=0.1)
    plain = _after_one_byte(lr=0.05)
    start = _after_one_byte(lr=0.0)
    assert np.array_equal(scaled["lm_head"], doubled["lm_head"])
    moved = 0
    for name in ("embedding", "norm", "conv_w", "A_log", "dt_proj", "out_proj", "norm_f"):
        assert np.array_equal(scaled[name], plain[name]), name
        if not np.array_equal(plain[name], start[name]):
            moved += 1
            assert not np.array_equal(scaled[name], doubled[name]), name
    assert moved >= 3


def test_a_tensor_in_two_groups_takes_the_product_of_their_multipliers():
    train = TrainConfig(lr_scale={"mixer_conv": 2.0, "bias": 0.25})
    assert train.tensor_lr_scale(("mixer_conv", "bias")) == 0.5
    assert train.tensor_lr_scale(("mixer_conv",)) == 2.0
    assert train.tensor_lr_scale(("head",)) == 1.0


# ------------------------------------------------------------------------- horizon

NAME = "k4-allbias-untied"
LR = 0.05


@functools.cache
def _horizon_run():
    """bptt 3, horizon 6, SGD, over b0..b8 (after the priming 0): weights after each of the
    three updates (at b2, b5, b8), as HF dicts."""
    learner = _learner(NAME, optimizer="sgd", lr=LR, bptt=3, horizon=6)
    data = _data(9)
    weights = []
    for end in (3, 6, 9):
        learner.advance(data[end - 3 : end])
        weights.append(learner.model.params.to_hf())
    return learner, weights


def _window_gradient(cfg, weights, prefix, inputs, targets):
    """The segment gradient under ``weights`` over ``inputs`` from the state that feeding
    ``prefix`` from the zero state reaches under the same weights."""
    model = _model_with(cfg, weights)
    for b in prefix:
        model.forward(b)
    return model, model.segment_gradient(inputs, targets)


def test_horizon_updates_learn_the_new_bytes_through_the_whole_window():
    """Update 2 learns targets b3..b5 of forwards 0, b0..b4 from the zero state under the
    weights of update 1, the gradient flowing back through all six; update 3 learns
    b6..b8 of forwards b2..b7, from the state the rerun after update 2 left at b2: that of
    0, b0, b1 under its weights. The forwards already learned carry no loss (target -1)."""
    cfg, start = _params(NAME)
    learner, (w1, w2, w3) = _horizon_run()
    b = _data(9).tolist()
    assert learner.step == 3 and learner.learned == 9
    _, g1 = _window_gradient(cfg, start.to_hf(), [], [0, b[0], b[1]], b[0:3])
    assert all(np.array_equal(w1[k], v) for k, v in _sgd_step(start.to_hf(), g1, LR).items())
    _, g2 = _window_gradient(cfg, w1, [], [0, *b[0:5]], [-1, -1, -1, *b[3:6]])
    assert all(np.array_equal(w2[k], v) for k, v in _sgd_step(w1, g2, LR).items())
    _, g3 = _window_gradient(cfg, w2, [0, b[0], b[1]], b[2:8], [-1, -1, -1, *b[6:9]])
    assert all(np.array_equal(w3[k], v) for k, v in _sgd_step(w2, g3, LR).items())


@functools.cache
def _fd_setup():
    cfg, _ = _params(NAME)
    _, (_, w2, _) = _horizon_run()
    b = _data(9).tolist()
    model, grads = _window_gradient(cfg, w2, [0, b[0], b[1]], b[2:8], [-1, -1, -1, *b[6:9]])
    conv, ssm = model.state_hf()
    state = (np.array(conv, dtype=np.float64), np.array(ssm, dtype=np.float64))
    return cfg, ref.to_float64(w2, cfg), state, grads, b[2:8], b[6:9]


@pytest.mark.parametrize(("name", "tensor"), [c for c in fdm.CASES if c.values[0] == NAME])
def test_horizon_gradient_matches_float64_finite_differences(name, tensor):
    """The gradient of update 3 (a window of 6 that starts mid-stream, the loss of its
    newest 3 targets) against central differences of the reference's loss, the start state
    held constant: a gradient that stopped at the stride would miss the older forwards'
    share."""
    cfg, params, state, grads, inputs, targets = _fd_setup()

    def loss(p):
        s, total = state, 0.0
        for t, x in enumerate(inputs):
            logits, s = ref.step(p, cfg, s, x)
            if t >= len(inputs) - len(targets):
                total += ref.nll(logits, targets[t - len(inputs) + len(targets)])
        return total / len(targets)

    fdm.assert_directions_match(
        grads[tensor], np.random.default_rng([SEED, 3]),
        lambda direction: fdm.central_difference(loss, params, tensor, direction),
    )  # fmt: skip


def test_the_horizon_carries_gradient_the_stride_alone_would_not():
    """Update 3's gradient through the six forwards differs from that of its three new
    forwards alone, from the state at b5, in the SSM and convolution weights."""
    cfg, _ = _params(NAME)
    _, (_, w2, _) = _horizon_run()
    b = _data(9).tolist()
    _, through = _window_gradient(cfg, w2, [0, b[0], b[1]], b[2:8], [-1, -1, -1, *b[6:9]])
    model = _model_with(cfg, w2)
    for x in (0, b[0], b[1], b[2], b[3], b[4]):
        model.forward(x)
    stride = model.segment_gradient(b[5:8], b[6:9])
    for tensor in ("backbone.layers.0.mixer.A_log", "backbone.layers.0.mixer.conv1d.weight"):
        full, short = (np.asarray(g[tensor], dtype=np.float64) for g in (through, stride))
        assert np.max(np.abs(full - short)) > 100 * fdm.ENTRY_RTOL * np.max(np.abs(full)), tensor


def test_live_state_after_a_horizon_update_is_the_window_rerun_with_the_new_weights():
    from mambazip.kernels.step import quantize

    cfg, _ = _params(NAME)
    learner, (_, w2, w3) = _horizon_run()
    b = _data(9).tolist()
    before = _model_with(cfg, w2)
    for x in (0, b[0], b[1]):
        before.forward(x)
    after = _model_with(cfg, w3)
    after.conv_state[...], after.ssm_state[...] = before.conv_state, before.ssm_state
    after.counters[...] = before.counters
    for x in b[2:9]:
        probs = after.forward(x)
    want = np.zeros_like(learner.freq)
    quantize(want, probs)
    assert np.array_equal(learner.freq, want)


@pytest.mark.parametrize("replay_chunk", [1, 2])
def test_recipe_bits_do_not_depend_on_how_activations_are_replayed(replay_chunk):
    train = {"optimizer": "adam", "lr": 0.01, "bptt": 4, "horizon": 12, "iters": 2,
             "curriculum": 9, "replay_every": 12, "replay_window": 10}  # fmt: skip
    data = np.frombuffer(BYTES, dtype=np.uint8)
    whole = _learner(NAME, **train)
    chunked = _learner(NAME, replay_chunk=replay_chunk, **train)
    assert chunked.seg.work.shape[0] == replay_chunk
    assert np.array_equal(whole.advance(data)[1], chunked.advance(data)[1])
    assert np.array_equal(whole.model.params.flat, chunked.model.params.flat)


def test_finish_twice_learns_nothing_more():
    learner = _learner(NAME, optimizer="adam", lr=0.01, bptt=4, horizon=8)
    learner.advance(_data(11))
    learner.finish()
    weights, step, learned = learner.model.params.flat.copy(), learner.step, learner.learned
    learner.finish()
    assert np.array_equal(learner.model.params.flat, weights)
    # Updates at bytes 4 and 8, then finish learns bytes 9-11 in one step.
    assert (learner.step, learner.learned) == (step, learned) == (3, 11)


# ---------------------------------------------------------------------- curriculum


@pytest.mark.parametrize(
    ("learned", "window"), [(0, 4), (9, 4), (10, 8), (25, 12), (30, 16), (10**6, 16)]
)
def test_curriculum_grows_the_window_by_bptt_every_curriculum_bytes(learned, window):
    plan = np.zeros(N_PLAN, dtype=np.int64)
    plan[P_BPTT], plan[P_WINDOW], plan[P_CURRICULUM] = 4, 16, 10
    assert window_at(plan, learned) == window


def test_the_curriculum_window_stops_at_the_horizon_on_any_clock():
    plan = np.zeros(N_PLAN, dtype=np.int64)
    plan[P_BPTT], plan[P_WINDOW], plan[P_CURRICULUM] = 2, 4, 1
    for learned in (2**62 - 1, 2**63 - 1):
        assert window_at(plan, learned) == 4


def test_a_curriculum_that_has_not_grown_learns_as_bptt_alone():
    data = np.frombuffer(BYTES, dtype=np.uint8)
    plain = _learner(NAME, optimizer="adam", lr=0.01, bptt=4)
    early = _learner(NAME, optimizer="adam", lr=0.01, bptt=4, horizon=16, curriculum=10**6)
    grown = _learner(NAME, optimizer="adam", lr=0.01, bptt=4, horizon=16, curriculum=8)
    assert np.array_equal(plain.advance(data)[1], early.advance(data)[1])
    assert np.array_equal(plain.model.params.flat, early.model.params.flat)
    grown.advance(data)
    assert not np.array_equal(early.model.params.flat, grown.model.params.flat)


# --------------------------------------------------------------------------- iters


def test_iters_takes_its_steps_on_the_same_window_each_from_the_last():
    cfg, start = _params(NAME)
    learner = _learner(NAME, optimizer="sgd", lr=LR, bptt=6, iters=2)
    learner.advance(_data(6))
    assert learner.step == 2 and learner.learned == 6
    b = _data(6).tolist()
    inputs, targets = [0, *b[:5]], b[:6]
    w = start.to_hf()
    for _ in range(2):
        _, g = _window_gradient(cfg, w, [], inputs, targets)
        w = _sgd_step(w, g, LR)
    got = learner.model.params.to_hf()
    assert all(np.array_equal(got[k], v) for k, v in w.items())


# -------------------------------------------------------------------------- replay


@pytest.mark.parametrize("window", [10, 6])
def test_a_replay_pass_learns_the_window_as_a_new_stream_would(window):
    """bptt 4, a replay of the last ``window`` bytes every 8 learned: at the 8th byte the
    weights are those of the learner without replay, after which a fresh learner of those
    weights, moments and step, fed the window's bytes (all 8 when it holds more; the last 6
    of a ring that wrapped), then ``finish``, gives the weights of the learner with replay
    (a constant lr, so the clock the replay does not move makes no difference)."""
    train = {"optimizer": "adam", "lr": 0.01, "bptt": 4, "decay": 0}
    data = _data(8)
    with_replay = _learner(NAME, replay_every=8, replay_window=window, **train)
    with_replay.advance(data)
    without = _learner(NAME, **train)
    without.advance(data)
    n = min(window, 8)
    assert with_replay.step == without.step + -(-n // 4) and with_replay.learned == 8
    cfg, _ = _params(NAME)
    fresh = OnlineLearner(
        Settings(model=cfg, train=TrainConfig(**train)),
        params=Params(cfg, without.model.params.flat.copy()),
        moments=(without.adam_m, without.adam_v), step=without.step,
    )  # fmt: skip
    fresh.advance(data[8 - n :])
    fresh.finish()
    assert np.array_equal(with_replay.model.params.flat, fresh.model.params.flat)
    assert not np.array_equal(with_replay.model.params.flat, without.model.params.flat)


def _moved_to(cfg, flat, model):
    """A Model of weights ``flat`` in the state of ``model``."""
    out = Model(cfg, Params(cfg, flat.copy()))
    out.conv_state[...], out.ssm_state[...] = model.conv_state, model.ssm_state
    out.counters[...] = model.counters
    return out


def test_replay_puts_the_live_state_back():
    """bptt 4, replay at the 8th byte: the state that byte 7 is fed to is the one the update
    at it left (the segment b3..b6 rerun under its weights, from the state of the update
    before), only the weights are the replayed ones."""
    from mambazip.kernels.step import quantize

    cfg, _ = _params(NAME)
    train = {"optimizer": "adam", "lr": 0.01, "bptt": 4}
    b = _data(8).tolist()
    first = _learner(NAME, **train)
    first.advance(_data(4))
    without = _learner(NAME, **train)
    without.advance(_data(8))
    with_replay = _learner(NAME, replay_every=8, replay_window=6, **train)
    with_replay.advance(_data(8))
    model = Model(cfg, Params(cfg, first.model.params.flat.copy()))
    for x in (0, *b[0:3]):
        model.forward(x)
    model = _moved_to(cfg, without.model.params.flat, model)
    for x in b[3:7]:
        model.forward(x)
    model = _moved_to(cfg, with_replay.model.params.flat, model)
    want = np.zeros_like(with_replay.freq)
    quantize(want, model.forward(b[7]))
    assert np.array_equal(with_replay.freq, want)
    assert not np.array_equal(with_replay.freq, without.freq)


# ---------------------------------------------------------------- header and codec

RECIPES = {
    "beta1-beta2-warmup": {"beta1": 0.5, "beta2_warmup": True, "beta2": 0.9999},
    "lr-scale": {"lr_scale": {"head": 3.0, "embed": 0.5}},
    "horizon": {"horizon": 32},
    "curriculum": {"horizon": 48, "curriculum": 300},
    "iters": {"iters": 3},
    "replay": {"replay_every": 512, "replay_window": 256, "replay_passes": 2},
}


@pytest.mark.parametrize("mix", ["none", "full"])
@pytest.mark.parametrize("recipe", list(RECIPES))
def test_each_recipe_is_recorded_in_the_header_and_decodes_to_the_input(recipe, mix):
    settings = mambazip.resolve_settings(model=TINY_MODEL, train=RECIPES[recipe], mix=mix)
    blob = mambazip.compress(TEXT, settings)
    header = container.read_header(io.BytesIO(blob))
    assert header["settings"] == settings
    assert mambazip.decompress(blob) == TEXT
    plain = mambazip.compress(TEXT, mambazip.resolve_settings(model=TINY_MODEL, mix=mix))
    assert plain != blob, "the recipe changes the coded bits"


def test_the_default_recipe_adds_nothing_to_the_header():
    train = TrainConfig(bptt=16).to_dict()
    assert not set(train) & {"beta2_warmup", "lr_scale", "horizon", "curriculum", "iters",
                             "replay_every", "replay_window", "replay_passes"}  # fmt: skip


def test_a_horizon_of_bptt_is_no_horizon():
    assert TrainConfig(bptt=16, horizon=16) == TrainConfig(bptt=16)


def test_a_float_too_large_for_a_float_is_a_config_error():
    with pytest.raises(ConfigError, match="lr must be"):
        Settings.from_dict({"model": TINY_MODEL | {"d_inner": 16, "dt_rank": 1},
                            "train": {"lr": 10**400}})  # fmt: skip


def test_multipliers_of_one_are_left_out_of_the_header():
    assert TrainConfig(lr_scale={"head": 1.0}) == TrainConfig()
    assert TrainConfig(lr_scale={"head": 2}).to_dict()["lr_scale"] == {"head": 2.0}


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"bptt": 16, "horizon": 24}, "multiple of bptt"),
        ({"bptt": 16, "curriculum": 100}, "curriculum needs a horizon"),
        ({"bptt": 16, "replay_every": 100}, "go together"),
        ({"bptt": 1, "iters": 2}, "need bptt > 1"),
        ({"bptt": 16, "iters": 17}, "iters must be"),
        ({"bptt": 2, "horizon": 1024}, "training bytes per byte"),
        ({"bptt": 16, "replay_every": 16, "replay_window": 1 << 20}, "training bytes per byte"),
        ({"lr_scale": {"gates": 2.0}}, "not one of"),
        ({"lr_scale": {"head": -1.0}}, "lr_scale[head]"),
        ({"beta2_warmup": 1}, "true or false"),
        ({"lr_scale": {"head": 10**400}}, "lr_scale[head]"),
        ({"bptt": 16, "replay_passes": 2}, "replay_passes needs"),
        ({"bptt": 16, "replay_every": 8, "replay_window": 100}, "at least bptt"),
    ],
)
def test_a_recipe_out_of_bounds_is_refused(train, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        TrainConfig(**train)


def test_the_cli_sets_every_knob_and_info_shows_them(tmp_path, tiny_flags):
    src = tmp_path / "a.txt"
    src.write_bytes(TEXT)
    runner = CliRunner()
    knobs = ("--beta1", "0", "--beta2", "0.9999", "--beta2-warmup", "--lr-scale",
             "head=2,embed=0.5", "--horizon", "32", "--curriculum", "500", "--iters", "2",
             "--replay-every", "1024", "--replay-window", "300",
             "--replay-passes", "2")  # fmt: skip
    made = runner.invoke(cli, ["compress", "-q", *tiny_flags, "--mix", "none", *knobs, str(src)])
    assert made.exit_code == 0, made.output
    train = container.read_header(io.BytesIO((tmp_path / "a.txt.mz").read_bytes()))
    train = train["settings"].train
    assert (train.beta1, train.beta2, train.beta2_warmup) == (0.0, 0.9999, True)
    assert dict(train.lr_scale) == {"head": 2.0, "embed": 0.5}
    assert (train.horizon, train.curriculum, train.iters) == (32, 500, 2)
    assert (train.replay_every, train.replay_window, train.replay_passes) == (1024, 300, 2)
    shown = runner.invoke(cli, ["info", str(tmp_path / "a.txt.mz")])
    assert shown.exit_code == 0, shown.output
    assert "replay_window=300" in shown.output or "replay_window 300" in shown.output
    back = runner.invoke(cli, ["decompress", "-q", "-c", str(tmp_path / "a.txt.mz")])
    assert back.exit_code == 0 and back.stdout_bytes == TEXT


def test_a_bad_lr_scale_flag_is_one_line(tmp_path, tiny_flags):
    src = tmp_path / "a.txt"
    src.write_bytes(TEXT)
    result = CliRunner().invoke(cli, ["compress", *tiny_flags, "--lr-scale", "gates=2", str(src)])
    assert result.exit_code == 2 and "gates" in result.output
    assert "Traceback" not in result.output and result.exception.__class__ is SystemExit
    assert not (tmp_path / "a.txt.mz").exists()
