"""The record model: the record length found from the bytes, and the contexts it keys."""

import dataclasses

import numpy as np

from mambazip.predictor import ContextMixer
from mambazip.predictor.config import SMALL
from mambazip.predictor.history import KIND_CODES, history_push
from mambazip.predictor.loop import N_ROWS, V_SEL, layout, view
from mambazip.predictor.record import (
    CANDIDATE,
    LENGTH,
    REC_SIZE,
    RECORD_ON,
    VOTES,
    record_context,
    record_push,
)

HIST_LOG = 12
KINDS = ("record", "record2", "recpos")


class _Records:
    """The history and the record state after each byte, as loop.py's update moves them."""

    def __init__(self, hist_log=HIST_LOG):
        self.mask = (1 << hist_log) - 1
        self.hist = np.zeros(1 << hist_log, np.uint8)
        self.hstate = np.zeros(3, np.int64)
        self.words = np.zeros(4, np.uint64)
        self.rec = np.zeros(REC_SIZE, np.int64)

    def push(self, data):
        for byte in data:
            history_push(self.hist, self.hstate, self.words, self.mask, byte)
            record_push(self.rec, self.hist, self.hstate, self.mask)
        return self

    def hashes(self, kinds=KINDS):
        codes = np.array([KIND_CODES[k] for k in kinds], np.int64)
        ctxh = np.zeros(len(kinds), np.uint64)
        record_context(ctxh, codes, self.rec, self.hist, self.hstate, self.mask)
        return [int(h) for h in ctxh]


def test_a_period_of_distinct_bytes_becomes_the_record_length_at_its_sixteenth_vote():
    # Bytes 1..7 repeating: byte t's gap first repeats at t = 14 (its third occurrence),
    # so bytes 14, 15, ... each vote once for 7, and the 16th vote is byte 14 + 15 = 29.
    data = bytes(1 + t % 7 for t in range(40))
    assert RECORD_ON == 16
    assert _Records().push(data[:29]).rec[LENGTH] == 0
    records = _Records().push(data[:30])
    assert records.rec[LENGTH] == 7
    assert records.rec[CANDIDATE] == 7 and records.rec[VOTES] == 16


def test_a_run_of_one_byte_never_votes():
    records = _Records().push(b"\0" * 500)
    assert records.rec[VOTES] == 0 and records.rec[LENGTH] == 0


def test_a_found_length_stays_while_a_few_other_gaps_vote_against_it():
    records = _Records().push(bytes(1 + t % 7 for t in range(200)))
    votes = int(records.rec[VOTES])
    # Bytes 101..105 at gap 5, three times: the first round sets their positions, the
    # second their gaps, the third votes 5 times against 7.
    records.push(bytes(range(101, 106)) * 3)
    assert records.rec[LENGTH] == 7 and records.rec[CANDIDATE] == 7
    assert records.rec[VOTES] == votes - 5


def test_a_period_longer_than_half_the_history_ring_is_never_the_length():
    # A ring of 64 bytes: two records of 40 would not fit, one of 32 and the one before do.
    assert _Records(hist_log=6).push(bytes(1 + t % 40 for t in range(400))).rec[LENGTH] == 0
    assert _Records(hist_log=6).push(bytes(1 + t % 32 for t in range(400))).rec[LENGTH] == 32


def test_another_period_replaces_the_length_once_it_wins_the_vote():
    records = _Records().push(bytes(1 + t % 7 for t in range(60)))
    assert records.rec[LENGTH] == 7
    records.push(bytes(101 + t % 5 for t in range(400)))
    assert records.rec[LENGTH] == 5


def test_the_record_context_is_the_byte_above_and_the_bits_nearest_the_next_byte():
    rows = bytes(1 + t % 7 for t in range(70))  # length 7 from byte 29 on
    base = _Records().push(rows + b"abcdefg" + b"xyz").hashes()
    # The next byte is byte 80: above it byte 73 ('d'), after that 'e' (0b01100101), two
    # records back byte 66 (5), its position in the record 80 % 7 = 3, the last byte 'z'
    # (0b01111010).
    other = _Records().push(rows + b"qqqdefg" + b"xyz").hashes()  # other bytes before
    assert other == base
    below = _Records().push(rows[:66] + b"Q" + rows[67:] + b"abcdefg" + b"xyz").hashes()
    assert below[1] != base[1]  # two records back: record2 alone sees it
    assert below[0] == base[0] and below[2] == base[2]
    changed = _Records().push(rows + b"abcXefg" + b"xyz").hashes()  # another byte above
    assert all(changed[i] != base[i] for i in range(3))
    after = _Records().push(rows + b"abcd\xa5fg" + b"xyz").hashes()  # its top 2 bits 10
    assert after[0] != base[0] and after[1:] == base[1:]
    last = _Records().push(rows + b"abcdefg" + b"xyQ").hashes()  # low 2 bits 01
    assert last[0] != base[0] and last[1:] == base[1:]
    # The rest of those two bytes does not count: the after byte's low 6 bits and the last
    # byte's top 6 bits.
    far = _Records().push(rows + b"abcd\x7ffg" + b"xy\x02").hashes()
    assert far == base


def test_the_contexts_carry_the_record_length():
    seven = _Records().push(bytes(1 + t % 7 for t in range(70)))
    five = _Records().push(bytes(1 + t % 5 for t in range(70)))
    assert seven.rec[LENGTH] == 7 and five.rec[LENGTH] == 5
    # The next byte, 70, is at position 0 of a record in both, with byte 1 above it: only
    # the length tells recpos's contexts apart.
    assert seven.hashes(("recpos",)) != five.hashes(("recpos",))


def test_without_a_record_length_only_the_record_context_varies_by_the_last_byte():
    a = _Records().push(b"hello").hashes()
    b = _Records().push(b"jello").hashes()
    c = _Records().push(b"help").hashes()
    assert a == b
    assert a[0] != c[0] and a[1:] == c[1:]


def _mixer(cfg, data):
    mixer = ContextMixer(cfg)
    mixer.prime()
    _, p = mixer.advance(np.frombuffer(data, np.uint8))
    return mixer, -np.log2(p).sum() / len(data)


def test_the_record_pos_set_is_chosen_by_the_position_in_the_record():
    cfg = dataclasses.replace(SMALL, sets=("c3", "record_pos"))
    rows = bytes(1 + t % 7 for t in range(40))  # length 7 from byte 29: the next is at 40 % 7
    for data, pos in ((rows, 40 % 7), (rows[:20], 0)):  # no length yet: value 0
        mixer, _ = _mixer(cfg, data)
        sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
        for depth, node in ((0, 1), (5, 40)):
            assert sel[node, 4] == N_ROWS + 8 * 256 + 8 * pos + depth


def test_only_the_record_parts_keep_the_record_state():
    assert layout(SMALL)["rec"] == 0
    assert layout(dataclasses.replace(SMALL, contexts=("recpos",)))["rec"] == REC_SIZE
    assert layout(dataclasses.replace(SMALL, sets=("record_pos",)))["rec"] == REC_SIZE


def test_the_record_contexts_learn_a_table_whose_rows_follow_from_the_row_above():
    # Each byte is mostly the byte above it plus its column's own step (mod 16), else a
    # random one: random along a row and no row repeats, so the order-n contexts and the
    # match model see noise, but the byte above and the column nearly decide it. A
    # separator ends each row, the byte whose recurrence gives away the length.
    rng = np.random.default_rng(5)
    steps = rng.integers(0, 16, 36)
    rows = [rng.integers(0, 16, 36)]
    for _ in range(199):
        noise = rng.random(36) < 0.2
        rows.append(np.where(noise, rng.integers(0, 16, 36), (rows[-1] + steps) % 16))
    rows = [np.append(row, 255).astype(np.uint8) for row in rows]
    table = np.concatenate(rows).tobytes()
    _, without = _mixer(SMALL, table)
    _, with_records = _mixer(dataclasses.replace(SMALL, contexts=KINDS), table)
    # Without them, about the 4 bits of a value of 16 (36 bytes of 37): little is learnt.
    assert without > 3.5
    assert with_records < without - 0.5
