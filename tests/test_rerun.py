"""The recipe knob ``rerun`` (config.TrainConfig): true, the default, reruns each segment
with the new weights after its update, as every file before it; false feeds the next byte
from the state the segment's forwards reached under the old weights. Stated against a
trainer without the rerun written here from the model's forward and segment gradient,
recorded in the header only when false, and decoded to the same bytes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from click.testing import CliRunner

import mambazip
from mambazip import container
from mambazip.cli import cli
from mambazip.config import ConfigError, Settings, TrainConfig
from mambazip.kernels.step import quantize
from mambazip.model import Model, OnlineLearner
from mambazip.params import Params

try:  # tests/ as a package or as a plain directory on sys.path
    from .conftest import TINY_MODEL
    from .learners import first_bytes, moved_to, new_learner, perturbed_params, sgd_stepped
except ImportError:
    from conftest import TINY_MODEL
    from learners import first_bytes, moved_to, new_learner, perturbed_params, sgd_stepped

f32 = np.float32
LR = 0.05
TEXT = b"".join(b"%d: the state runs on, the weights move under it\n" % i for i in range(40))


def _without_rerun(data, bptt):
    """SGD truncated BPTT without the rerun: each segment's gradient from the state at its
    start, the weights stepped, and the state the forwards left fed the next byte under the
    new weights. Returns (p of each byte, final weights, pdf of the byte after data)."""
    cfg, params = perturbed_params()
    model = Model(cfg, params)
    start = moved_to(cfg, model.params.flat, model)
    pdf = model.forward(0)
    inputs, targets, coded = [0], [], []
    for b in data.tolist():
        coded.append(pdf[b])
        targets.append(b)
        if len(targets) == bptt:
            grads = start.segment_gradient(inputs, targets)
            model = moved_to(cfg, sgd_stepped(cfg, model.params.flat, grads, LR), model)
            start = moved_to(cfg, model.params.flat, model)
            inputs, targets = [], []
        pdf = model.forward(b)
        inputs.append(b)
    return np.array(coded, dtype=f32), model.params.flat, pdf


def test_without_rerun_the_next_byte_is_fed_from_the_state_the_old_weights_reached():
    data = first_bytes(11)
    learner = new_learner(optimizer="sgd", lr=LR, bptt=4, rerun=False)
    _, p = learner.advance(data)
    want_p, want_flat, want_pdf = _without_rerun(data, 4)
    assert learner.step == 2
    assert np.array_equal(p, want_p)
    assert np.array_equal(learner.model.params.flat, want_flat)
    want = np.zeros_like(learner.freq)
    quantize(want, want_pdf)
    assert np.array_equal(learner.freq, want)


def test_without_rerun_the_pdfs_differ_from_the_rerun_after_the_first_update():
    data = first_bytes(11)
    _, rerun = new_learner(optimizer="sgd", lr=LR, bptt=4).advance(data)
    _, skip = new_learner(optimizer="sgd", lr=LR, bptt=4, rerun=False).advance(data)
    assert np.array_equal(rerun[:4], skip[:4])
    assert not np.array_equal(rerun[4:], skip[4:])


@pytest.mark.parametrize("iters", [1, 2])
def test_without_rerun_the_bits_do_not_depend_on_the_activation_chunk(iters):
    """Chunks shorter than the segment make the backward replay them, moving the live
    state, which must then be put back; so do the steps after the first of ``iters``."""
    data = first_bytes(23)
    train = {"optimizer": "adam", "lr": 0.01, "bptt": 6, "iters": iters, "rerun": False}
    whole = new_learner(**train)
    freqs, p = whole.advance(data)
    for chunk in (1, 4):
        chunked = new_learner(replay_chunk=chunk, **train)
        got_freqs, got_p = chunked.advance(data)
        assert np.array_equal(got_freqs, freqs) and np.array_equal(got_p, p)
        assert np.array_equal(chunked.model.params.flat, whole.model.params.flat)
        assert np.array_equal(chunked.model.ssm_state, whole.model.ssm_state)


def test_finish_without_rerun_learns_the_last_bytes_and_keeps_the_live_state():
    data = first_bytes(10)
    learner = new_learner(optimizer="sgd", lr=LR, bptt=4, rerun=False)
    learner.advance(data)
    conv, ssm = learner.model.conv_state.copy(), learner.model.ssm_state.copy()
    before = learner.model.params.flat.copy()
    learner.finish()
    assert learner.step == 3
    assert not np.array_equal(learner.model.params.flat, before)
    assert np.array_equal(learner.model.conv_state, conv)
    assert np.array_equal(learner.model.ssm_state, ssm)


def test_rerun_true_is_left_out_of_the_header_and_false_is_recorded():
    assert "rerun" not in TrainConfig(bptt=16).to_dict()
    assert TrainConfig(bptt=16, rerun=False).to_dict()["rerun"] is False


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"bptt": 1, "rerun": False}, "rerun false needs bptt > 1"),
        ({"bptt": 16, "horizon": 32, "rerun": False}, "no horizon"),
        ({"bptt": 16, "rerun": 0}, "rerun must be true or false"),
    ],
)
def test_rerun_false_out_of_its_bounds_is_refused(train, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**train)


@pytest.mark.parametrize("mix", ["none", "full"])
def test_rerun_false_is_recorded_in_the_header_and_decodes_to_the_input(mix):
    settings = mambazip.resolve_settings(model=TINY_MODEL, train={"rerun": False}, mix=mix)
    blob = mambazip.compress(TEXT, settings)
    assert container.read_header(io.BytesIO(blob))["settings"] == settings
    assert mambazip.decompress(blob) == TEXT
    rerun = mambazip.resolve_settings(model=TINY_MODEL, train={"rerun": True}, mix=mix)
    plain = mambazip.compress(TEXT, rerun)
    assert plain != blob, "skipping the rerun changes the coded bits"


def test_the_cli_no_rerun_flag_sets_it(tmp_path, tiny_flags):
    src = tmp_path / "a.txt"
    src.write_bytes(TEXT)
    runner = CliRunner()
    made = runner.invoke(cli, ["compress", "-q", *tiny_flags, "--no-rerun", str(src)])
    assert made.exit_code == 0, made.output
    header = container.read_header(io.BytesIO((tmp_path / "a.txt.mz").read_bytes()))
    assert header["settings"].train.rerun is False
    back = runner.invoke(cli, ["decompress", "-q", "-c", str(tmp_path / "a.txt.mz")])
    assert back.exit_code == 0 and back.stdout_bytes == TEXT


def test_without_rerun_a_replay_pass_learns_the_window_as_a_new_stream_without_rerun_would():
    """As test_recipe's replay test, both learners without the rerun: the replay's own
    segments follow the setting too."""
    train = {"optimizer": "adam", "lr": 0.01, "bptt": 4, "decay": 0, "rerun": False}
    data = first_bytes(8)
    with_replay = new_learner(replay_every=8, replay_window=6, **train)
    with_replay.advance(data)
    without = new_learner(**train)
    without.advance(data)
    fresh = _continued(without, data[2:], train)
    assert np.array_equal(with_replay.model.params.flat, fresh.model.params.flat)
    fresh_rerun = _continued(without, data[2:], {**train, "rerun": True})
    assert not np.array_equal(with_replay.model.params.flat, fresh_rerun.model.params.flat)


def _continued(learner, data, train):
    """A fresh learner of ``train`` from ``learner``'s weights and moments, run over
    ``data`` and finished."""
    cfg, _ = perturbed_params()
    fresh = OnlineLearner(
        Settings(model=cfg, train=TrainConfig(**train)),
        params=Params(cfg, learner.model.params.flat.copy()),
        moments=(learner.adam_m, learner.adam_v), step=learner.step,
    )  # fmt: skip
    fresh.advance(data)
    fresh.finish()
    return fresh


@pytest.mark.parametrize("train", [{"bptt": 1}, {"horizon": 32}])
def test_a_recipe_that_needs_the_rerun_takes_it_back_from_a_preset_without_it(train):
    """The default preset skips the rerun; bptt 1 and a horizon cannot (TrainConfig refuses
    rerun false with them), so asking for either brings the rerun back, and asking for it
    to be skipped as well is still refused."""
    assert mambazip.resolve_settings("default").train.rerun is False
    assert mambazip.resolve_settings("default", train=train).train.rerun is True
    with pytest.raises(ConfigError, match="rerun false"):
        mambazip.resolve_settings("default", train={**train, "rerun": False})
