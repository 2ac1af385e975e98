"""The trainer (``mambazip train``): deterministic, exactly resumable, and it learns."""

import os
import random

import numpy as np
import pytest
from click.testing import CliRunner

from mambazip import checkpoint, trainer
from mambazip.cli.train import train as train_command
from mambazip.config import resolve_settings

TINY = {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}
WORDS = b"the quick brown fox jumps over a lazy dog while cats sleep".split()


def settings(bptt=4):
    # Without the preset's overlapped updates, which the trainer refuses (test_overlap).
    train = {"bptt": bptt, "lr": 1e-2, "overlap": False}
    return resolve_settings("default", model=TINY, train=train, mix="none")


def write_corpus(root, n=6, words=120, seed=1):
    """``n`` repetitive documents in a folder and a subfolder."""
    rng = random.Random(seed)
    for i in range(n):
        path = root / ("sub" if i % 2 else "") / f"d{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b" ".join(rng.choice(WORDS) for _ in range(words)) + b"\n")
    return root


@pytest.fixture
def corpus(tmp_path):
    return trainer.find_documents([write_corpus(tmp_path / "corpus")], holdout=0.3)


def run_epochs(corpus, s, epochs, between, checkpoint=None):
    run = trainer.Training(corpus, s, between)
    while run.position.epoch < epochs:
        run.epoch(checkpoint=checkpoint)
    return run


class StopError(Exception):
    pass


@pytest.mark.parametrize("between", trainer.BETWEEN)
@pytest.mark.parametrize("bptt", [1, 4])
def test_resume_equals_uninterrupted_run(corpus, tmp_path, monkeypatch, between, bptt):
    # Chunks of 37 bytes put checkpoints inside documents and partial segments.
    monkeypatch.setattr(trainer, "CHUNK", 37)
    s = settings(bptt)
    full = run_epochs(corpus, s, 2, between)
    expected = full.model().to_bytes()
    path = str(tmp_path / "run.resume")
    for stop_after in (3, 11, 30):
        calls = []
        write = trainer.Checkpointer(path, every_bytes=50)

        def interrupt(run, final=False, write=write, calls=calls, stop_after=stop_after):
            write(run, final)
            calls.append(1)
            if len(calls) == stop_after:
                raise StopError

        with pytest.raises(StopError):
            run_epochs(corpus, s, 2, between, interrupt)
        resumed = trainer.Training.resume(path, corpus, s)
        assert (resumed.position.epoch, resumed.position.document) < (2, 0)
        while resumed.position.epoch < 2:
            resumed.epoch()
        assert resumed.model().to_bytes() == expected
        assert resumed.position.heldout == full.position.heldout


def test_some_checkpoint_falls_inside_a_document(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(trainer, "CHUNK", 37)
    offsets = []

    def record(run, final=False):
        offsets.append(run.position.offset)

    run_epochs(corpus, settings(), 1, "separator", record)
    assert any(o % 37 == 0 and o > 0 for o in offsets)  # the resume test covers these


def test_training_twice_gives_identical_checkpoints(corpus, tmp_path):
    a = run_epochs(corpus, settings(), 2, "separator")
    b = run_epochs(corpus, settings(), 2, "separator")
    assert a.model().to_bytes() == b.model().to_bytes()
    assert a.to_bytes() == b.to_bytes()
    assert a.model().to_bytes() != trainer.Training(corpus, settings()).model().to_bytes()


def test_heldout_evaluation_does_not_change_the_weights(corpus):
    run = run_epochs(corpus, settings(), 1, "separator")
    flat = run.learner.model.params.flat
    before = flat.copy()
    first = trainer.heldout_bits(settings(), flat, corpus.heldout)
    assert np.array_equal(flat, before)
    assert trainer.heldout_bits(settings(), flat, corpus.heldout) == first
    assert first[1] == sum(doc.size for doc in corpus.heldout)
    # The epoch's own evaluation gave the same number, and training continues from it.
    assert run.position.heldout == [first[0] / first[1]]


def test_heldout_bits_fall_after_training_on_repetitive_text(corpus):
    s = settings()
    untrained = trainer.Training(corpus, s).learner.model.params.flat
    bits, n = trainer.heldout_bits(s, untrained, corpus.heldout)
    run = run_epochs(corpus, s, 2, "separator")
    # A random init spends about 8 bits a byte; words drawn from 12 cost log2(12) = 3.6
    # bits per word of about 5 bytes with its space: 0.7 bits/byte at best.
    assert bits / n > 7.0
    assert all(0.7 < result < 1.5 for result in run.position.heldout)


def test_document_order_is_sorted_and_split_by_a_fixed_hash(tmp_path):
    root = tmp_path / "c"
    for name in ("b/z.txt", "a.txt", "B.txt", "b/a/y.txt", "c.txt", "empty.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"" if name == "empty.txt" else name.encode())
    os.symlink(root / "a.txt", root / "link.txt")  # skipped: it would read a.txt twice
    (root / "heldout.txt").write_text("c.txt\n")
    corpus = trainer.find_documents([root, root / "a.txt"])
    assert [d.name for d in corpus.train] == ["B.txt", "a.txt", "b/a/y.txt", "b/z.txt", "a.txt"]
    assert [d.name for d in corpus.heldout] == ["c.txt"]
    assert trainer.fnv1a64(b"") == 0xCBF29CE484222325
    assert trainer.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    names = [f"doc{i}" for i in range(2000)]
    out = [n for n in names if trainer.held_out_by_hash(n, 0.1)]
    assert 150 < len(out) < 250
    assert out == [n for n in names if trainer.held_out_by_hash(n, 0.1)]
    (root / "heldout.txt").write_text("missing.txt\n")
    with pytest.raises(trainer.TrainError, match=r"missing\.txt"):
        trainer.find_documents([root])


def test_resume_refuses_other_documents(corpus, tmp_path):
    path = str(tmp_path / "run.resume")
    run_epochs(corpus, settings(), 1, "separator", trainer.Checkpointer(path))
    other = trainer.Corpus(corpus.train[1:], corpus.heldout)
    with pytest.raises(trainer.TrainError, match="other documents"):
        trainer.Training.resume(path, other, settings())
    with pytest.raises(trainer.TrainError, match="other settings"):
        trainer.Training.resume(path, corpus, settings(bptt=2))


def test_cli_refuses_an_existing_output_without_force(tmp_path):
    root = write_corpus(tmp_path / "c", n=2)
    out = tmp_path / "model.safetensors"
    out.write_bytes(b"keep")
    result = CliRunner().invoke(train_command, [str(root), "--save-model", str(out), "-q"])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "already exists" in lines[0] and "-f" in lines[0]
    assert out.read_bytes() == b"keep"
    assert not os.path.exists(str(out) + ".resume")


def test_cli_saves_a_model_of_the_preset(tmp_path):
    root = write_corpus(tmp_path / "c", n=3, words=60)
    out = tmp_path / "model.safetensors"
    args = [str(root), "--save-model", str(out), "--preset", "fast", "--holdout", "0.3", "-q"]
    result = CliRunner().invoke(train_command, args)
    assert result.exit_code == 0, result.output
    saved = checkpoint.load(str(out))
    assert saved.settings == resolve_settings("fast")
    resumed = checkpoint.load(str(out) + ".resume")
    assert np.array_equal(resumed.params.flat, saved.params.flat)
    again = CliRunner().invoke(train_command, [*args, "-f"])
    assert again.exit_code == 0, again.output
    assert checkpoint.load(str(out)).params.flat.tobytes() == saved.params.flat.tobytes()


def test_cli_trains_with_the_recipe_options_and_saves_them(tmp_path):
    root = write_corpus(tmp_path / "c", n=2, words=60)
    out = tmp_path / "model.safetensors"
    args = [str(root), "--save-model", str(out), "--preset", "fast", "--beta1", "0",
            "--horizon", "32", "--replay-every", "256", "--replay-window", "128", "-q"]  # fmt: skip
    result = CliRunner().invoke(train_command, args)
    assert result.exit_code == 0, result.output
    train = checkpoint.load(str(out)).settings.train
    assert (train.beta1, train.horizon, train.replay_every, train.replay_window) == (
        0.0, 32, 256, 128,
    )  # fmt: skip
