"""MixConfig: strict parsing of header values, and memory known before allocating."""

import dataclasses

import pytest

import mambazip
from mambazip.errors import ConfigError
from mambazip.predictor import DEFAULT, SMALL, ContextMixer, MixConfig


def test_round_trip_through_dict():
    cfg = dataclasses.replace(SMALL, mamba=True, max_order=3)
    assert MixConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "change",
    [
        {"colour": 1},  # unknown
        {"max_order": True},  # bool is not an int
        {"mamba": 1},  # int is not a bool
        {"ctx_log": 22.0},  # float is not an int
        {"ctx_log": 40},  # out of bounds: 32 GB
        {"counter_limit": 0},
        {"max_order": 7},
    ],
)
def test_from_dict_refuses_bad_fields(change):
    with pytest.raises(ConfigError):
        MixConfig.from_dict({**SMALL.to_dict(), **change})


def test_from_dict_refuses_a_non_mapping():
    with pytest.raises(ConfigError):
        MixConfig.from_dict([("mamba", True)])


@pytest.mark.parametrize("cfg", [SMALL, dataclasses.replace(SMALL, mamba=True, apm=False)])
def test_memory_bytes_is_what_the_mixer_allocates(cfg):
    mixer = ContextMixer(cfg)
    assert cfg.memory_bytes() == sum(b.nbytes for b in mixer.buffers.values())


def test_default_fits_in_512_mb():
    assert DEFAULT.memory_bytes() <= 512 << 20
    assert dataclasses.replace(DEFAULT, mamba=True).memory_bytes() <= 512 << 20


def test_presets_fit_their_memory_budgets():
    from mambazip.predictor import FAST, MAX

    assert FAST.memory_bytes() < DEFAULT.memory_bytes() <= 512 << 20
    assert MAX.memory_bytes() <= 1 << 30
    assert DEFAULT.mamba and MAX.mamba and not FAST.mamba


def test_the_fast_preset_mixes_with_predictor_fast():
    """predictor.FAST (what bench_predictor.py and profile_predictor.py take for --preset
    fast) is the shipped fast preset's mix."""
    from mambazip.predictor import FAST

    assert mambazip.resolve_settings("fast").mix == FAST


def test_the_default_preset_mixes_with_predictor_default():
    """predictor.DEFAULT (what ContextMixer() and bench_predictor.py use) is the shipped
    default preset's mix, not an older one."""
    assert mambazip.resolve_settings("default").mix == DEFAULT
