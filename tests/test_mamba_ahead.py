"""The Mamba running ahead (predict.Predictor.advance with ``then``): the encoder's Mamba
computes the next chunk's pdfs on a thread of its own while the mixer takes this chunk."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

import mambazip
from mambazip import predict
from mambazip.predictor import SMALL

try:
    from .conftest import TINY_MODEL
except ImportError:
    from conftest import TINY_MODEL

TEXT = np.frombuffer(
    b"".join(b"%d: the Mamba codes ahead, the mixer behind it\n" % i for i in range(300)),
    np.uint8,
)
CHUNK = 1000


def mixing():
    """The tiny Mamba (the default preset's recipe: truncated BPTT, overlapped updates)
    mixed with the small tables."""
    settings = mambazip.resolve_settings(model=TINY_MODEL)
    return dataclasses.replace(settings, mix=dataclasses.replace(SMALL, mamba=True))


@pytest.fixture
def ahead_on_any_machine(monkeypatch):
    """The Mamba runs ahead only with more than one core: here it does on any machine."""
    monkeypatch.setattr(predict, "update_thread_default", lambda: True)


def _coded(predictor, announce):
    tables, probabilities = [], []
    for i in range(0, TEXT.shape[0], CHUNK):
        then = TEXT[i + CHUNK : i + 2 * CHUNK] if announce else None
        freqs, p = predictor.advance(TEXT[i : i + CHUNK], then=then)
        tables.append(freqs.copy())
        probabilities.append(p.copy())
    predictor.settle()
    return np.concatenate(tables), np.concatenate(probabilities)


def _mamba_threads():
    return [t for t in threading.enumerate() if t.name.startswith("mambazip-mamba")]


def test_running_the_mamba_ahead_changes_no_bit(ahead_on_any_machine):
    ahead = predict.Predictor(mixing(), nibbles=True)
    freqs, p = _coded(ahead, announce=True)
    in_step = predict.Predictor(mixing(), nibbles=True)
    expected_freqs, expected_p = _coded(in_step, announce=False)
    assert np.array_equal(freqs, expected_freqs)
    assert np.array_equal(p, expected_p)


def test_the_mamba_runs_ahead_on_its_own_thread_until_the_stream_settles(ahead_on_any_machine):
    predictor = predict.Predictor(mixing(), nibbles=True)
    predictor.advance(TEXT[:CHUNK], then=TEXT[CHUNK : 2 * CHUNK])
    assert _mamba_threads()
    predictor.advance(TEXT[CHUNK : 2 * CHUNK])
    predictor.settle()
    assert not _mamba_threads()


def test_advance_refuses_bytes_other_than_the_announced_ones(ahead_on_any_machine):
    predictor = predict.Predictor(mixing(), nibbles=True)
    predictor.advance(TEXT[:CHUNK], then=TEXT[CHUNK : 2 * CHUNK])
    with pytest.raises(ValueError, match="announced"):
        predictor.advance(TEXT[CHUNK + 1 : 2 * CHUNK + 1])
    predictor.settle()


def test_no_mamba_thread_runs_on_after_a_compressed_stream(ahead_on_any_machine):
    data = TEXT.tobytes() * 4  # several of the codec's chunks
    blob = mambazip.compress(data, mixing())
    assert not _mamba_threads()
    assert mambazip.decompress(blob) == data
