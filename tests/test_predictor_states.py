"""The bit-history states (issue 21 item 3, mix.states): states.py's table of
counts that forget, worked by hand on short bit sequences; its closure and bounds; the state
maps' start; the kind of history a state holds; their map layout and round trip; and the
default leaving every older header and its bits alone."""

import dataclasses
import hashlib

import numpy as np
import pytest
from conftest import TINY_MODEL
from test_predictor_text import decoder_follows

import mambazip
from mambazip.errors import ConfigError
from mambazip.predictor import DEFAULT, SMALL, ContextMixer, MixConfig
from mambazip.predictor.context import (
    DEPTH_BUCKETS,
    HISTORY_STATES,
    RUNS,
    STATE_SLOTS,
    _deterministic,
    _history_kind,
    state_map_init,
)
from mambazip.predictor.loop import V_HIDX, layout, view
from mambazip.predictor.states import (
    BOUNDS,
    LAST,
    N0,
    N1,
    N_STATES,
    NEXT,
    discount,
    next_counts,
    state_of,
)


def _after(bits, state=0):
    for bit in bits:
        state = int(NEXT[state, bit])
    return state, (int(N0[state]), int(N1[state]), int(LAST[state]))


def test_three_1s_from_nothing_count_three_1s():
    assert _after([1, 1, 1])[1] == (0, 3, 1)
    assert _after([0, 0])[1] == (2, 0, 0)


def test_the_count_of_the_bit_not_seen_is_kept_up_to_2_then_halved_plus_one():
    assert [discount(n) for n in (0, 1, 2, 3, 4, 5, 6, 10, 50)] == [0, 1, 2, 2, 3, 3, 4, 6, 26]
    assert _after([1, 0, 1])[1] == (1, 2, 1)  # two 1s, one 0: nothing discounted
    assert _after([0, 0, 0, 1])[1] == (2, 1, 1)  # three 0s: 3 -> 2


def test_a_0_after_thirty_1s_halves_the_1s_plus_one():
    assert _after([1] * 30)[1] == (0, 30, 1)
    assert _after([1] * 30 + [0])[1] == (1, 16, 0)  # 30 // 2 + 1
    assert _after([1] * 30 + [0, 0])[1] == (2, 9, 0)  # 16 // 2 + 1


def test_a_pure_run_stops_at_its_bound():
    assert BOUNDS[0] == 50
    assert _after([1] * 60)[1] == (0, 50, 1)
    assert _after([0] * 51)[1] == (50, 0, 0)


def test_a_long_run_after_one_opposite_bit_ends_as_a_pure_run():
    # One 0, then 1s: (1, 1) .. (1, 22) = (1, BOUNDS[1]); the 23rd 1 would make (1, 23),
    # outside the bounds, so the 0 is forgotten: (0, 23).
    assert _after([0] + [1] * 22)[1] == (1, 22, 1)
    assert _after([0] + [1] * 23)[1] == (0, 23, 1)


def test_next_counts_follows_the_table():
    for s in range(1, N_STATES):
        for bit in (0, 1):
            t = NEXT[s, bit]
            assert (N0[t], N1[t]) == next_counts(int(N0[s]), int(N1[s]), bit)
            assert LAST[t] == bit


def test_every_state_is_reachable_from_nothing_and_the_table_is_closed():
    assert N_STATES == 239 and NEXT.shape == (256, 2) and NEXT.dtype == np.uint8
    assert NEXT[:N_STATES].max() < N_STATES
    assert not NEXT[N_STATES:].any()
    seen, todo = {0}, [0]
    while todo:
        s = todo.pop()
        for t in NEXT[s]:
            if int(t) not in seen:
                seen.add(int(t))
                todo.append(int(t))
    assert seen == set(range(N_STATES))


def test_counts_are_bounded_and_each_state_is_one_of_its_own():
    keys = set()
    for s in range(N_STATES):
        n0, n1 = int(N0[s]), int(N1[s])
        low, high = min(n0, n1), max(n0, n1)
        assert low < len(BOUNDS) and high <= BOUNDS[low]
        assert (n0 + n1 == 0) == (s == 0)
        keys.add((n0, n1, int(LAST[s])))
    assert len(keys) == N_STATES
    assert state_of(0, 3, 1) == _after([1, 1, 1])[0]
    with pytest.raises(ValueError):
        state_of(0, 51, 1)


def test_the_table_is_pinned():
    """A change to the table changes the bits of every file with mix.states."""
    digest = hashlib.sha256(NEXT.tobytes() + N0.tobytes() + N1.tobytes()).hexdigest()
    assert digest[:16] == PINNED_TABLE


PINNED_TABLE = "67fbc55521c380e6"


def test_state_maps_start_at_the_share_of_1s_their_counts_say():
    hmaps = np.zeros(2 * STATE_SLOTS, np.int32)
    state_map_init(hmaps)
    p12 = hmaps >> 19
    assert p12[0] == 2048  # nothing seen: (0 + 1/2) / 1
    assert p12[state_of(0, 1, 1)] == 3072  # (1 + 1/2) / 2
    assert p12[state_of(1, 0, 0)] == 1024  # (0 + 1/2) / 2
    assert p12[state_of(0, 3, 1)] == 4096 * 7 // 8  # 3584
    assert p12[state_of(1, 16, 0)] == 4096 * 33 // 36  # 3754
    assert p12[state_of(0, 50, 1)] == 4096 * 101 // 102  # 4055
    assert p12[255] == 2048  # unused entries past N_STATES
    assert np.array_equal(p12[STATE_SLOTS:], p12[:STATE_SLOTS])  # every map alike


@pytest.mark.parametrize(
    "bits, kind",
    [((), 0), ((1, 1, 1), 1), ((0,), 1), ((1,) * 30 + (0,), 2), ((0,) + (1,) * 23, 1)],
)
def test_a_state_holds_no_bit_one_value_or_both(bits, kind):
    state = _after(bits)[0]
    assert _history_kind(state, 1) == kind
    signed = {0: 0, 1: 1000 >> 1 if N1[state] else -((4096 - 1000) >> 1), 2: 0}[kind]
    assert _deterministic(state, 1000, -300, 2, 1) == signed
    assert _deterministic(state, 1000, -300, 1, 1) == (-300 if kind == 1 else 0)


def test_the_states_take_maps_of_a_state_s_entries():
    states = dataclasses.replace(SMALL, level=5, states=1)
    assert states.history_states == 1
    assert dataclasses.replace(SMALL, level=5).history_states == 0
    assert dataclasses.replace(states, histories=False, level=0).history_states == 0
    n_models = len(states.context_kinds)
    assert layout(states)["hmaps"] == 3 * RUNS * n_models * STATE_SLOTS
    deep = dataclasses.replace(states, history_depth=True)
    assert layout(deep)["hmaps"] == DEPTH_BUCKETS * layout(states)["hmaps"]
    data = np.frombuffer(b"the cat sat on the mat; the cat sat on a hat. " * 30, np.uint8)
    tables = []
    for cfg in (states, dataclasses.replace(SMALL, level=5)):
        mixer = ContextMixer(cfg, nibbles=True)
        mixer.prime()
        tables.append(mixer.advance(data)[0])
    assert not np.array_equal(tables[0], tables[1])


def test_each_context_keys_its_state_map_by_its_last_byte_and_run():
    mixer = ContextMixer(dataclasses.replace(SMALL, level=5, states=1))
    mixer.prime()
    mixer.advance(np.frombuffer(b"aba", np.uint8))  # o1's context "a" was followed by "b"
    hidx = view(mixer.buffers, mixer.offs, V_HIDX).reshape(256, -1)
    o1 = 1  # b = 0110 0010, seen once after "a": run 0
    # Map index ((3 model + way) * RUNS + run) * 256 + state: o1's node 1 saw one 0, node 2
    # one 1, node 3 nothing (off b's path, way 0).
    assert hidx[1, o1] == ((3 * o1 + 1) * RUNS + 0) * STATE_SLOTS + state_of(1, 0, 0)
    assert hidx[2, o1] == ((3 * o1 + 2) * RUNS + 0) * STATE_SLOTS + state_of(0, 1, 1)
    assert hidx[3, o1] == ((3 * o1 + 0) * RUNS + 0) * STATE_SLOTS + 0


@pytest.mark.parametrize("states, entries", [(1, STATE_SLOTS), (0, HISTORY_STATES)])
def test_history_depth_keys_the_history_maps_by_depth_too(states, entries):
    mixer = ContextMixer(dataclasses.replace(SMALL, level=5, states=states, history_depth=True))
    mixer.prime()
    mixer.advance(np.frombuffer(b"aba", np.uint8))
    hidx = view(mixer.buffers, mixer.offs, V_HIDX).reshape(256, -1)
    one = state_of(0, 1, 1) if states else 0b11  # a single 1 seen
    o1 = 1  # node 2 is at depth 1 (bucket 0), nodes 4 and 5 at depth 2 (bucket 1)
    assert hidx[2, o1] == (((3 * o1 + 2) * RUNS + 0) * 4 + 0) * entries + one
    # b = 0110 0010 goes 1, 2 (0), 5 (1) and on (1): node 5 saw its third bit, 1; node 4,
    # off its path, nothing.
    assert hidx[5, o1] == (((3 * o1 + 2) * RUNS + 0) * 4 + 1) * entries + one
    assert hidx[4, o1] == (((3 * o1 + 0) * RUNS + 0) * 4 + 1) * entries + 0


def test_the_new_fields_at_their_defaults_leave_older_headers_alone():
    for level in range(6):  # states at its default, 0 (the default preset takes 1)
        cfg = dataclasses.replace(DEFAULT, level=level, states=0)
        assert {"states", "history_depth"}.isdisjoint(cfg.to_dict())
        assert MixConfig.from_dict(cfg.to_dict()) == cfg
    on = dataclasses.replace(DEFAULT, states=1, history_depth=True)
    assert (on.to_dict()["states"], on.to_dict()["history_depth"]) == (1, True)
    assert MixConfig.from_dict(on.to_dict()) == on
    six = dataclasses.replace(DEFAULT, level=6)
    assert six.to_dict()["level"] == 6 and "history_depth" not in six.to_dict()
    with pytest.raises(ConfigError, match="states"):
        MixConfig.from_dict({**SMALL.to_dict(), "states": 2})
    with pytest.raises(ConfigError, match="history_depth"):
        MixConfig.from_dict({**SMALL.to_dict(), "history_depth": 1})


@pytest.mark.parametrize("nibbles", [False, True])
@pytest.mark.parametrize("depth", [False, True])
def test_decoder_steps_equal_advance_with_the_states(nibbles, depth):
    decoder_follows(
        dataclasses.replace(
            SMALL, level=5, states=1, history_depth=depth, det_inputs=2, conf_inputs=1
        ),
        nibbles,
    )


def test_round_trip_with_the_states(sample):
    settings = mambazip.resolve_settings("default", model=TINY_MODEL)
    mix = dataclasses.replace(SMALL, mamba=True, level=5, states=1)
    blob = mambazip.compress(sample * 2, dataclasses.replace(settings, mix=mix))
    assert mambazip.decompress(blob) == sample * 2
