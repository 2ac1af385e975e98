"""The recipe knob ``overlap`` (config.TrainConfig, kernels/segment.py): each segment's update
is taken while the next segment is coded, so it lands one segment late. Stated against a
delayed trainer written here from the model's forward and segment gradient; the thread that
computes the update, the chunks the bytes arrive in and the activations kept change no bit;
recorded in the header only when true, and decoded to the same bytes."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from click.testing import CliRunner

import mambazip
from mambazip import container, trainer
from mambazip.cli import cli
from mambazip.config import ConfigError, TrainConfig
from mambazip.kernels.optim import adam_update, sgd_update
from mambazip.kernels.step import quantize
from mambazip.model import Model

try:  # tests/ as a package or as a plain directory on sys.path
    from .conftest import TINY_MODEL
    from .learners import first_bytes, moved_to, new_learner, perturbed_params, sgd_stepped
except ImportError:
    from conftest import TINY_MODEL
    from learners import first_bytes, moved_to, new_learner, perturbed_params, sgd_stepped

f32 = np.float32
LR = 0.05
TEXT = b"".join(b"%d: the update lands a segment late, the bytes do not\n" % i for i in range(40))
OVERLAP = {"rerun": False, "overlap": True}


def _overlapped(data, bptt):
    """SGD truncated BPTT with each update one segment late: U_0 the initial weights and
    U_j = U_{j-1} - lr g_{j-1}; segment k's forwards read U_{k-1} (segment 0 reads U_0),
    its gradient g_k is taken at those weights from the state at its start, and the state
    runs on across segments. At the end the unfinished segment is learned at once.
    Returns (p of each byte, pdf of the byte after data, final weights)."""
    cfg, params = perturbed_params()
    model = Model(cfg, params)
    newest = model.params.flat.copy()
    start = moved_to(cfg, model.params.flat, model)
    pdf = model.forward(0)
    inputs, targets, coded = [0], [], []
    for b in data.tolist():
        coded.append(pdf[b])
        targets.append(b)
        if len(targets) == bptt:
            grads = start.segment_gradient(inputs, targets)
            read_next, newest = newest, sgd_stepped(cfg, newest, grads, LR)
            model = moved_to(cfg, read_next, model)
            start = moved_to(cfg, read_next, model)
            inputs, targets = [], []
        pdf = model.forward(b)
        inputs.append(b)
    if targets:
        grads = start.segment_gradient(inputs[: len(targets)], targets)
        newest = sgd_stepped(cfg, newest, grads, LR)
    return np.array(coded, dtype=f32), pdf, newest


@pytest.mark.parametrize("n", [11, 21])
def test_overlapped_updates_land_one_segment_late(n):
    data = first_bytes(n)
    learner = new_learner(optimizer="sgd", lr=LR, bptt=4, **OVERLAP)
    _, p = learner.advance(data)
    want_p, want_pdf, want_flat = _overlapped(data, 4)
    assert np.array_equal(p, want_p)
    want = np.zeros_like(learner.freq)
    quantize(want, want_pdf)
    assert np.array_equal(learner.freq, want)
    learner.finish()
    assert learner.step == -(-n // 4)
    assert np.array_equal(learner.model.params.flat, want_flat)


def test_overlap_changes_the_bits_from_the_second_segment_on():
    """Without overlap the forward of byte 3, which completes the first segment, reads the
    weights updated on it; with overlap it and the rest of the second segment read the
    first weights."""
    data = first_bytes(21)
    train = {"optimizer": "sgd", "lr": LR, "bptt": 4, "rerun": False}
    _, now = new_learner(**train).advance(data)
    _, late = new_learner(overlap=True, **train).advance(data)
    assert np.array_equal(now[:4], late[:4])
    assert not np.array_equal(now[4:], late[4:])


def _run(learner, data, pieces):
    """Advance ``learner`` over data cut at ``pieces`` and finish it."""
    freqs, ps, at = [], [], 0
    for cut in [*pieces, data.size]:
        f, p = learner.advance(data[at:cut])
        freqs.append(f)
        ps.append(p)
        at = cut
    learner.finish()
    return np.concatenate(freqs), np.concatenate(ps), learner.model.params.flat


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


ADAM = {"optimizer": "adam", "lr": 0.01, "bptt": 6, **OVERLAP}


def test_a_thread_computing_the_update_changes_no_bit():
    data = first_bytes(40)
    inline = _run(new_learner(thread=False, **ADAM), data, [])
    threaded = _run(new_learner(thread=True, **ADAM), data, [])
    assert _same(inline, threaded)


def test_the_bits_do_not_depend_on_how_the_bytes_are_cut():
    data = first_bytes(40)
    whole = _run(new_learner(thread=True, **ADAM), data, [])
    bytewise = _run(new_learner(thread=True, **ADAM), data, list(range(1, data.size)))
    uneven = _run(new_learner(thread=True, **ADAM), data, [5, 6, 12, 30])
    assert _same(whole, bytewise) and _same(whole, uneven)


@pytest.mark.parametrize("chunk", [1, 4])
def test_the_bits_do_not_depend_on_the_activation_chunk(chunk):
    """Chunks shorter than the segment make the backward replay its forwards: on scratch
    state, not the live one the coding side runs on."""
    data = first_bytes(40)
    whole = _run(new_learner(**ADAM), data, [])
    chunked = new_learner(replay_chunk=chunk, **ADAM)
    assert _same(whole, _run(chunked, data, []))


def test_finish_learns_the_last_bytes_and_keeps_the_live_state():
    learner = new_learner(optimizer="sgd", lr=LR, bptt=4, **OVERLAP)
    learner.advance(first_bytes(10))
    conv, ssm = learner.model.conv_state.copy(), learner.model.ssm_state.copy()
    before = learner.model.params.flat.copy()
    learner.finish()
    assert learner.step == 3
    assert not np.array_equal(learner.model.params.flat, before)
    assert np.array_equal(learner.model.conv_state, conv)
    assert np.array_equal(learner.model.ssm_state, ssm)


def _new_threads(before):
    return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]


def test_settle_ends_the_update_thread_and_finish_then_learns_as_it_would_alone():
    """A stream's end settles its learner, so that a frame's update does not run on beside
    the next frame's learner, holding the buffers it reads."""
    before = set(threading.enumerate())
    settled = new_learner(thread=True, **ADAM)
    settled.advance(first_bytes(40))
    assert _new_threads(before), "the learner updates on a thread of its own"
    settled.settle()
    assert not _new_threads(before)
    settled.finish()
    alone = new_learner(thread=True, **ADAM)
    alone.advance(first_bytes(40))
    alone.finish()
    assert settled.step == alone.step
    assert np.array_equal(settled.model.params.flat, alone.model.params.flat)


@pytest.mark.parametrize("direction", ["compress", "decompress"])
def test_no_update_thread_runs_on_after_a_stream(direction):
    settings = mambazip.resolve_settings(model=TINY_MODEL, train=OVERLAP, mix="none")
    blob = mambazip.compress(TEXT, settings)
    before = set(threading.enumerate())
    if direction == "compress":
        mambazip.compress(TEXT, settings)
    else:
        mambazip.decompress(blob)
    assert not _new_threads(before)


def test_overlap_false_is_left_out_of_the_header_and_true_is_recorded():
    assert "overlap" not in TrainConfig(bptt=16).to_dict()
    assert TrainConfig(bptt=16, **OVERLAP).to_dict()["overlap"] is True


@pytest.mark.parametrize("mix", ["none", "full"])
def test_overlap_is_recorded_in_the_header_and_decodes_to_the_input(mix):
    settings = mambazip.resolve_settings(model=TINY_MODEL, train=OVERLAP, mix=mix)
    blob = mambazip.compress(TEXT, settings)
    assert container.read_header(io.BytesIO(blob))["settings"] == settings
    assert mambazip.decompress(blob) == TEXT
    train = {"rerun": False, "overlap": False}
    now = mambazip.resolve_settings(model=TINY_MODEL, train=train, mix=mix)
    assert mambazip.compress(TEXT, now) != blob, "late updates change the coded bits"


def test_the_cli_overlap_flag_sets_it(tmp_path, tiny_flags):
    src = tmp_path / "a.txt"
    src.write_bytes(TEXT)
    runner = CliRunner()
    made = runner.invoke(cli, ["compress", "-q", *tiny_flags, "--no-rerun", "--overlap", str(src)])
    assert made.exit_code == 0, made.output
    header = container.read_header(io.BytesIO((tmp_path / "a.txt.mz").read_bytes()))
    assert header["settings"].train.overlap is True
    back = runner.invoke(cli, ["decompress", "-q", "-c", str(tmp_path / "a.txt.mz")])
    assert back.exit_code == 0 and back.stdout_bytes == TEXT


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"bptt": 16, "overlap": True}, "overlap needs rerun false"),
        ({"bptt": 16, "iters": 2, **OVERLAP}, "overlap needs"),
        ({"bptt": 16, "replay_every": 64, "replay_window": 32, **OVERLAP}, "overlap needs"),
        ({"bptt": 16, "overlap": 1}, "overlap must be true or false"),
    ],
)
def test_overlap_out_of_its_bounds_is_refused(train, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**train)


@pytest.mark.parametrize("train", [{"rerun": True}, {"iters": 2}, {"horizon": 32}])
def test_a_recipe_that_learns_a_segment_more_than_once_drops_the_presets_overlap(train):
    assert mambazip.resolve_settings("default").train.overlap is True
    assert mambazip.resolve_settings("default", train=train).train.overlap is False
    with pytest.raises(ConfigError, match="overlap needs"):
        mambazip.resolve_settings("default", train={**train, "overlap": True})


def test_the_trainer_refuses_overlap():
    settings = mambazip.resolve_settings(model=TINY_MODEL, train=OVERLAP, mix="none")
    with pytest.raises(trainer.TrainError, match="--no-overlap"):
        trainer.Training([], settings)


@pytest.mark.parametrize("update", ["sgd", "adam"])
def test_an_update_out_of_place_equals_one_in_place_and_copies_what_it_does_not_train(update):
    rng = np.random.default_rng(3)
    src = rng.standard_normal(300).astype(f32)
    src_before = src.copy()
    theta = rng.standard_normal(300).astype(f32)
    grad = rng.standard_normal(300).astype(f32)
    m, v = rng.standard_normal(300).astype(f32), rng.random(300).astype(f32)
    ranges = np.array([[10, 50], [120, 200]], dtype=np.int64)
    lrs = np.array([1.0, 0.5], dtype=f32)
    in_place = src.copy()
    mv = (m.copy(), v.copy())
    if update == "sgd":
        sgd_update(in_place, in_place, grad.copy(), ranges, lrs, f32(0.01), f32(0.0))
        sgd_update(src, theta, grad, ranges, lrs, f32(0.01), f32(0.0))
    else:
        hyper = (f32(1e-3), f32(0.9), f32(0.999), f32(1e-8), f32(0.1), f32(0.01), f32(0.0))
        adam_update(in_place, in_place, grad.copy(), *mv, ranges, lrs, *hyper)
        adam_update(src, theta, grad, m, v, ranges, lrs, *hyper)
    assert np.array_equal(theta, in_place)
    assert np.array_equal(src, src_before), "the weights stepped from are only read"
