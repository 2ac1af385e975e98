"""MixConfig: every setting of the context-mixing predictor that changes the coded bits.

A compressed file records one in its header, so ``from_dict`` is strict (unknown fields, wrong
types and out-of-range values raise ConfigError) and ``memory_bytes`` says what the tables will
take before anything is allocated, so a hostile header can be refused first.

Table sizes are log2 entry counts. The default config allocates 176.7 MB (168.5 MiB; 181.0 MB with
mamba=True: ``memory_bytes()``, printed by scripts/bench_predictor.py).
"""

import dataclasses
from dataclasses import dataclass

from ..errors import ConfigError

# Context kinds, in the order their inputs enter the combiner. Orders 0..max_order come first.
ORDER_KINDS = ("o0", "o1", "o2", "o3", "o4", "o5", "o6")
WORD_KINDS = ("word", "word2")  # current word; current and previous word
SPARSE_KINDS = ("skip1", "skip3")  # bytes 2-3 back (skipping 1); byte 4 back alone
# Chosen one by one in ``contexts``, after the others (history.py says what each hashes).
EXTRA_KINDS = ("o7", "o8", "word3", "wordgap", "column", "above", "classes", "wordclass",
               "matched", "indirect1", "indirect2", "nest", "mamba", "word1b", "record", "record2",
               "recpos")  # fmt: skip
# More weight sets, chosen one by one in ``sets`` (loop.py's _set_rows says what selects each,
# by depth): the classes of the last two bytes, the length of the word so far, the column, the
# last byte, the byte three back, the top bits of the last three bytes, the word so far, the
# position mod 4 with the last byte's top bits, the position in the record (record.py finds
# the record's length).
EXTRA_SETS = ("classes", "wordlen", "column", "c1depth", "c3", "hibits", "word", "pos4",
              "record_pos")  # fmt: skip
# What level 1 adds, in one field a header spells in a few bytes: these contexts (before
# ``contexts``), the found set, the SSE pair, the bit histories, the c2 set, the final
# combiner by node, and the combiner rate's decay (lr_decay).
LEVEL1_CONTEXTS = ("classes", "column", "word3", "matched")
# What level 2 adds to level 1: these weight sets (before ``sets``), the slow counter rates,
# the APMs' mean alone, the last byte per slot.
LEVEL2_SETS = ("classes", "wordlen", "c1depth")
LEVEL2_DEAD_ZONE = 32  # and the combiners' dead zone, where dead_zone is 0
# What level 3 adds to level 2: these contexts (after level 1's), the run counts per slot.
LEVEL3_CONTEXTS = ("nest",)
# What level 4 adds to level 3: the run input of each context model (run_inputs 1), the
# 16-bit final probabilities (wide_final).
LEVEL4_RUN_INPUTS = 1
# What level 5 adds to level 4: the match model's recovery (match_recover 3) and its second
# candidate by a hash of 20 bytes, where those fields are 0.
LEVEL5_RECOVER = 3
LEVEL5_MIN2 = 20
# What level 6 adds to level 5: each weight row's own rate (row_rates 8) where row_rates is 0,
# and the history maps by depth too (history_depth).
LEVEL6_ROW_RATES = 8
# Level 7 adds to level 6 the byte histories (byte_history) and the history and run inputs
# at half (half_inputs).

# (low, high) inclusive bounds of the integer fields.
_INT_BOUNDS = {
    "max_order": (1, 6),
    "ctx_log": (10, 25),  # slots of 32 bytes in the shared context table
    "hist_log": (12, 26),  # history ring buffer bytes
    "match_log": (10, 24),  # match table entries (int32 positions)
    "match_min": (4, 12),  # bytes hashed to find a match
    "apm_log": (8, 20),  # order-2 APM contexts (each 33 uint16)
    "counter_limit": (1, 15),  # slowest counter rate 1 / (limit + 1.5)
    "map_limit": (1, 1023),  # slowest adaptive-map rate
    "combiner_lr": (1, 1024),  # in 1/2^14 (combiner.LR_SHIFT)
    "final_lr": (1, 1024),
    "apm_rate": (1, 12),  # APM update shift
    # Nodes reached with probability < 2^-full_log get the c0 weight set alone, and second
    # nibbles reached with probability < 2^-slot_log no context lookups (24: never).
    "full_log": (1, 24),
    "slot_log": (1, 24),
    # The Mamba's weight set: by its expected byte's agreement with the node x depth (0), also by
    # its confidence at the node (1), or by whether the match model expects the same byte (2).
    "mamba_sel": (0, 2),
    "mamba_lr": (0, 1024),  # combiner step of the Mamba's two inputs (0: combiner_lr)
    "mamba_w0": (0, 64),  # their initial weight in 1/64 (the others start at 16/64)
    # An APM after the combiner keyed by the node and (1) the Mamba's expected byte or (2) its
    # node probability quantised to 32 stretch buckets; 0: none.
    "mamba_eapm": (0, 2),
    "level": (0, 7),
    "counter_rates": (0, 1),  # counters.COUNTER_RATES's row
    # With the SSE pair, the probability coded is the mean of the APMs and the combiner's (0)
    # or of the APMs alone (1).
    "apm_mean": (0, 1),
    "dead_zone": (0, 255),  # combiner errors up to this (in 1/4096) train nothing
    "final_sel": (0, 1),
    # More inputs per context model, from its node's bit history (context.py's _read says
    # what each is): 0 none.
    "conf_inputs": (0, 1),
    "det_inputs": (0, 3),
    "run_inputs": (0, 2),
    # The APMs of the context side (order 1, order 2 and the SSE pair) at a rate by a count per
    # bucket, from 1/2 down to 2^-(apm_rate + apm_counts - 1); 0: at 2^-apm_rate throughout.
    "apm_counts": (0, 2),
    # The match model's recovery: a candidate that misses is kept until this many of its last
    # 16 bytes missed (0: dropped at its first miss).
    "match_recover": (0, 16),
    # A second match candidate found by a hash of this many bytes (0: none; else more than
    # match_min).
    "match_min2": (0, 32),
    # Each weight row's step by its own count of steps (combiner.row_scale: 5 times the rate at
    # first, 3 times after 2^row_rates steps, towards 1), in place of the rate's decay by bytes
    # (lr_decay, level 1; 0: off).
    "row_rates": (0, 20),
    # With the bit histories, each node's history as a state of states.py's table (counts
    # that forget) instead of its last 6 bits (1).
    "states": (0, 1),
}
_BOOL_FIELDS = (
    "mamba",
    "word",
    "sparse",
    "match",
    "final",
    "apm",
    "found_sel",
    "sse",
    "histories",
    "c2_sel",
    "lr_decay",
    "promote",
    "last_byte",
    "runs",
    "sse_order4",
    "wide_final",
    "match_ctx2",
    "history_depth",
    "byte_history",
    "half_inputs",
    "bits",
    "found_node",
)


@dataclass(frozen=True)
class MixConfig:
    """Settings of the context-mixing predictor (see module docstring)."""

    mamba: bool = False  # the Mamba's pdf enters the combiner
    max_order: int = 6  # context models of orders 0..max_order
    word: bool = True  # the two word contexts
    sparse: bool = True  # the two sparse contexts
    match: bool = True  # the match model
    final: bool = True  # a final combiner over the weight sets (else their stretch mean)
    apm: bool = True  # APM stages after the combiner
    ctx_log: int = 22
    hist_log: int = 24
    match_log: int = 22
    match_min: int = 6
    apm_log: int = 16
    counter_limit: int = 14
    map_limit: int = 1023
    combiner_lr: int = 8
    final_lr: int = 2
    apm_rate: int = 6
    full_log: int = 8
    slot_log: int = 10
    mamba_sel: int = 0
    mamba_lr: int = 0
    mamba_w0: int = 16
    mamba_eapm: int = 0
    contexts: tuple = ()  # more context models, from EXTRA_KINDS
    found_sel: bool = False  # a weight set by how many context models know their context
    sse: bool = False  # with apm: two more APMs, order-3 hashed and by the match state
    histories: bool = False  # each context node's last bits, a second input per model
    c2_sel: bool = False  # a weight set by the byte two back
    lr_decay: bool = False  # the combiner's rate from 3 combiner_lr down to it (decayed_lr)
    sets: tuple = ()  # more weight sets, from EXTRA_SETS
    counter_rates: int = 0  # the counters' rate schedule: 0 down to 1/16.5, 1 to 1/64
    apm_mean: int = 0
    dead_zone: int = 0
    promote: bool = False  # with the Mamba, its two inputs also enter the final combiner
    last_byte: bool = False  # with the bit histories, each context's last byte keys its map
    final_sel: int = 0  # the final combiner's weights by depth (0) or by node (1)
    runs: bool = False  # with the last byte, how often in a row it came keys its map too
    # With the bit histories, more combiner inputs per context model: the history's
    # probability as a confidence (1); where the history holds one bit value only, its stretch
    # (1) or its signed probability (2; 3: an eighth as loud); with the last byte, the bit it
    # expects by its run (1), also by whether the node's history holds one bit value, both or
    # none (2).
    conf_inputs: int = 0
    det_inputs: int = 0
    run_inputs: int = 0
    sse_order4: bool = False  # with the SSE pair, a third APM: order-4 hashed
    apm_counts: int = 0
    # The node probabilities in 16 bits from the APMs to the coder's tables (else 12): a
    # bit all but certain costs down to 2^-16 / ln 2 bits, not 2^-12 / ln 2.
    wide_final: bool = False
    # The match model (match.py): recovery after a miss (match_recover), a second candidate
    # by a longer hash (match_min2) with its own two inputs and map, and its expected byte in
    # the "matched" context's hash (match_ctx2, with match_min2).
    match_recover: int = 0
    match_min2: int = 0
    match_ctx2: bool = False
    row_rates: int = 0
    # The bit histories as states of a nonstationary table, counts that forget (states 1,
    # states.py), and their maps also keyed by the node's depth // 2 (history_depth).
    states: int = 0
    history_depth: bool = False
    # With the last byte per slot, the two distinct bytes seen there before it, and an input
    # per context model by which way each of the three goes at the node.
    byte_history: bool = False
    # With the bit histories, their inputs and the run inputs at half their stretch: beside
    # the counters at full they were too loud for the combiner (0.0079 and 0.0003 bits/byte
    # over four 256 KB prefixes; a lower combiner_lr for all inputs lost instead).
    half_inputs: bool = False
    # From format 5, each byte coded as 8 binary decisions, each node of the byte's path
    # predicted in full once its bit is due: 8 nodes evaluated a byte where the nibbles
    # evaluate 30 (full_log and slot_log are then unused: every node on the path is full
    # and every second slot is looked up).
    bits: bool = False
    # With mix.bits, the found set's selector is half the number of context models that
    # have seen the node itself (its counter has a count), as paq8px's order counts at each
    # bit, in place of those that know the nibble's slot. The nibble coding, which a version
    # 3 or 4 header gives the same settings without mix.bits, keeps the nibble's count;
    # without the found set (level 0) there is nothing to select.
    found_node: bool = False
    level: int = 0  # 1: LEVEL1_CONTEXTS and the parts above; 2: also what LEVEL2_SETS says; 3:
    # also LEVEL3_CONTEXTS and the runs; 4: also the run inputs (LEVEL4_RUN_INPUTS) and the
    # wide final probabilities; 5: also the match model's recovery and second candidate
    # (LEVEL5_RECOVER, LEVEL5_MIN2); 6: also each weight row's own rate (LEVEL6_ROW_RATES)
    # and the history maps by depth; 7: also the byte histories and the halved inputs

    def __post_init__(self):
        for field, names in (("contexts", EXTRA_KINDS), ("sets", EXTRA_SETS)):
            value = getattr(self, field)
            if isinstance(value, list):  # as JSON gives it back
                value = tuple(value)
                object.__setattr__(self, field, value)
            if (
                not isinstance(value, tuple)
                or not all(isinstance(k, str) and k in names for k in value)
                or len(set(value)) != len(value)
            ):
                allowed = ", ".join(names)
                raise ConfigError(
                    f"mix.{field} must be distinct names from {allowed}, got {value!r}"[:300]
                )
        if isinstance(self.level, int) and self.level >= 1:
            again = sorted(set(self.contexts) & set(self._level_contexts()))
            if again:
                raise ConfigError(f"mix.contexts repeats {', '.join(again)}, which the level has")
        if isinstance(self.level, int) and self.level >= 2:
            again = sorted(set(self.sets) & set(LEVEL2_SETS))
            if again:
                raise ConfigError(f"mix.sets repeats {', '.join(again)}, which level 2 has")
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"mix.{name} must be true or false, got {getattr(self, name)!r}")
        for name, (lo, hi) in _INT_BOUNDS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ConfigError(f"mix.{name} must be an integer in {lo}..{hi}, got {value!r}")
        if self.match_min2 and self.match_min2 <= self.match_min:
            raise ConfigError(
                f"mix.match_min2 must be 0 or more than match_min ({self.match_min}), "
                f"got {self.match_min2}"
            )
        if self.match_ctx2 and not self.match_two:
            raise ConfigError(
                "mix.match_ctx2 needs the second match candidate (match_min2 or level 5)"
            )

    @property
    def context_kinds(self):
        """Names of the context models, in input order."""
        kinds = ORDER_KINDS[: self.max_order + 1]
        if self.word:
            kinds += WORD_KINDS
        if self.sparse:
            kinds += SPARSE_KINDS
        return kinds + self._level_contexts() + self.contexts

    def _level_contexts(self):
        return (LEVEL1_CONTEXTS if self.level >= 1 else ()) + (
            LEVEL3_CONTEXTS if self.level >= 3 else ()
        )

    @property
    def found_set(self):
        """Whether the weight set by the found count is on (found_sel or level 1)."""
        return self.found_sel or self.level >= 1

    @property
    def sse_pair(self):
        return self.sse or self.level >= 1

    @property
    def bit_histories(self):
        return self.histories or self.level >= 1

    @property
    def c2_set(self):
        return self.c2_sel or self.level >= 1

    @property
    def counter_schedule(self):
        return 1 if self.level >= 2 else self.counter_rates

    @property
    def slot_last_byte(self):
        return (self.last_byte or self.level >= 2) and self.bit_histories

    @property
    def slot_runs(self):
        return (self.runs or self.level >= 3) and self.slot_last_byte

    @property
    def input_groups(self):
        """The context models' groups of combiner columns, in column order: each group has a
        column per model."""
        groups = ("counter",)
        if self.bit_histories:
            groups += ("history",)
            groups += ("conf",) if self.conf_inputs else ()
            groups += ("det",) if self.det_inputs else ()
            groups += ("run",) if self.run_mode and self.slot_last_byte else ()
            groups += ("bytes",) if self.slot_bytes else ()
        return groups

    @property
    def slot_bytes(self):
        """Whether the slots keep their last three distinct bytes (byte_history or level 7)."""
        return (self.byte_history or self.level >= 7) and self.slot_last_byte

    @property
    def halved(self):
        """half_inputs, or level 7."""
        return (self.half_inputs or self.level >= 7) and self.bit_histories

    @property
    def run_mode(self):
        """run_inputs, or level 4's where it is 0."""
        if self.run_inputs == 0 and self.level >= 4:
            return LEVEL4_RUN_INPUTS
        return self.run_inputs

    @property
    def wide(self):
        return self.wide_final or self.level >= 4

    @property
    def apm_order4(self):
        return self.sse_order4 and self.apm and self.sse_pair

    @property
    def promoted(self):
        return self.promote and self.mamba and self.final

    @property
    def dead_error(self):
        return LEVEL2_DEAD_ZONE if self.level >= 2 and self.dead_zone == 0 else self.dead_zone

    @property
    def apms_alone(self):
        return 1 if self.level >= 2 else self.apm_mean

    @property
    def weight_sets(self):
        """Names of the weight sets of EXTRA_SETS, in row order."""
        return (LEVEL2_SETS if self.level >= 2 else ()) + self.sets

    @property
    def rate_decays(self):
        return self.lr_decay or self.level >= 1

    @property
    def final_by_node(self):
        return self.final_sel == 1 or self.level >= 1

    @property
    def match_hash2(self):
        """Bytes hashed to find the second match candidate: match_min2, or level 5's where it
        is 0 (0: no second candidate)."""
        if not self.match:
            return 0
        if self.match_min2 == 0 and self.level >= 5:
            return LEVEL5_MIN2
        return self.match_min2

    @property
    def match_two(self):
        """Whether the match model has a second candidate."""
        return self.match_hash2 > 0

    @property
    def match_recovery(self):
        """The match model's miss limit (0: no recovery): match_recover, or level 5's where it
        is 0."""
        if not self.match:
            return 0
        if self.match_recover == 0 and self.level >= 5:
            return LEVEL5_RECOVER
        return self.match_recover

    @property
    def history_states(self):
        """With the bit histories: states (0: the raw last bits)."""
        return self.states if self.bit_histories else 0

    @property
    def history_by_depth(self):
        return (self.history_depth or self.level >= 6) and self.bit_histories

    @property
    def row_rate_log(self):
        """row_rates, or level 6's where it is 0 (0: the rate decays by bytes, if at all)."""
        if self.row_rates == 0 and self.level >= 6:
            return LEVEL6_ROW_RATES
        return self.row_rates

    @property
    def match_columns(self):
        """Combiner inputs of the match model: two per candidate."""
        return 2 * self.match + 2 * self.match_two

    @property
    def part_names(self):
        """The parts whose combiner contributions ``trust`` reports, in its column order."""
        names = self.context_kinds
        if self.match:
            names += ("match",)
        if self.mamba:
            names += ("mamba",)
        return names

    def memory_bytes(self):
        """Bytes the predictor's tables allocate (the sum of ``loop.layout``)."""
        from .loop import layout_bytes

        return layout_bytes(self)

    def to_dict(self):
        """Every field, but those of _LATER only where they differ from their defaults: the
        settings of files written before they existed stay as they were."""
        out = dataclasses.asdict(self)
        out["contexts"] = list(self.contexts)
        out["sets"] = list(self.sets)
        for name, default in _LATER.items():
            if getattr(self, name) == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data):
        """Build from ``to_dict`` output; unknown, mistyped or out-of-range fields raise
        ConfigError. Missing fields take their defaults."""
        if not isinstance(data, dict):
            raise ConfigError(f"mix settings must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown mix field(s): {', '.join(sorted(map(str, unknown)))}")
        return cls(**data)


# Fields added after format version 5's presets, with the values that keep older bits.
_LATER = {
    "contexts": (),
    "found_sel": False,
    "sse": False,
    "histories": False,
    "level": 0,
    "final_sel": 0,
    "c2_sel": False,
    "lr_decay": False,
    "sets": (),
    "counter_rates": 0,
    "apm_mean": 0,
    "dead_zone": 0,
    "promote": False,
    "last_byte": False,
    "runs": False,
    "conf_inputs": 0,
    "det_inputs": 0,
    "run_inputs": 0,
    "sse_order4": False,
    "apm_counts": 0,
    "wide_final": False,
    "match_recover": 0,
    "match_min2": 0,
    "match_ctx2": False,
    "row_rates": 0,
    "states": 0,
    "history_depth": False,
    "byte_history": False,
    "half_inputs": False,
    "bits": False,
    "found_node": False,
}


# Presets (bits/byte measured by /tmp-side runs of advance over 4 KB chunks with the default
# preset's Mamba D128x3 pdfs cached, 2026-12-01, 2-core AMD EPYC shared with other sessions, so
# µs/byte are +-10 %). Fields absent from a header take the dataclass defaults above, which keep
# the bits of files written before the Mamba fields existed.
#
# FAST, the context models alone: orders 0-5 and the words, no sparse contexts, 2^20 slots, the
# c0 set alone below 2^-6: enwik6[:200K] 1.8954 bits/byte at 18.0 (advance) / 19.5
# (advance_byte) µs/byte, vs 1.8867 at 25.8 / 26.0 for MixConfig(); 76.0 MB. Whole files
# (scripts/bench_predictor.py --preset fast): enwik6 1.8365 at 19.1 / 21.3, book1 2.1167 at
# 18.7 / 21.3 µs/byte.
# Twelfth session, 2026-12-03: the extra contexts, the found-count weight set and the SSE pair,
# chosen on 256 KB prefixes (benchmarks/sweep-2026-12-03-context.md). The context side alone
# with DEFAULT's tables, enwik6/book1/alice29.txt/obj2: 1.9393/2.2889/1.9643/1.8629 ->
# 1.9075/2.2406/1.9205/1.7971 bits/byte; FAST's (classes and the found set only):
# 1.9434/2.2913/1.9657/1.9661 -> 1.9168/2.2712/1.9506/1.8903. The whole default preset (its
# Mamba from the seeded init): enwik6/book1/alice29.txt 1.8841/2.2552/1.9387 -> 1.8712/2.2191/
# 1.9063; with the bit histories and combiner_lr 4 (level 1) 1.8704/2.2176/1.9095, obj2
# 1.6221 -> 1.6043. MAX leaves out the SSE pair (71 MB at its apm_log 20) and the histories
# (256 MiB beside 2^24 slots): either would pass the default --memlimit (768 MiB).
# Twenty-fourth session, 2026-12-06: FAST at level 7 with orders 0-4 (the level's contexts,
# bit histories, runs, byte histories, sets, SSE chain and match recovery; one order less, as
# each context costs about 1.5 us/byte). 256 KB prefixes, enwik6/book1/alice29.txt/obj2:
# 1.9168/2.2712/1.9506/1.8903 -> 1.8310/2.2037/1.8814/1.6423 (level 7 with order 5:
# 1.8296/2.2021/1.8811/1.6416); whole enwik6 in-process on an idle AMD EPYC: 1.8159 at
# 118 / 80 KB/s -> 1.7296 at 50 / 44 KB/s, compress / decompress (order 5: 1.7266 at
# 48 / 41; benchmarks/bench-2026-12-06-fast-level7.md).
# Twenty-sixth session, 2026-12-07: bits (the byte's 8 nodes alone, each coded as its bit is
# due), FAST and DEFAULT alike; with the time that freed, FAST takes order 5 and the sparse
# contexts again. 256 KB prefixes, enwik6/book1/alice29.txt/obj2, ideal bits: 1.8265/2.2005/
# 1.8773/1.6269 -> 1.8238/2.1993/1.8777/1.5680 (benchmarks/bench-2026-12-07-bits.md).
FAST = MixConfig(ctx_log=20, full_log=6, slot_log=8, level=7, bits=True, max_order=5)
# DEFAULT, the mix: the Mamba's weight set by whether the match model expects its byte, an APM
# keyed by its expected byte, its inputs stepping at 4/2^14. First 300 KB of enwik6 / book1 and
# alice29.txt: 1.9027 / 2.2324 / 1.9307 bits/byte at ~28 µs/byte in the experiment script
# (MixConfig(mamba=True): 1.9052 / 2.2386 / 1.9350; the same with full_log 8, slot_log 10:
# 1.9006 / 2.2312 / 1.9291 at ~31 µs/byte). Alone on the machine, enwik6[:300K]: 27.1 (advance)
# / 28.2 (advance_byte) µs/byte; 185.4 MB.
# Thirteenth session, 2026-12-03: level 2 (three more weight sets, the slow counter rates, the
# APMs' mean alone, the combiners' dead zone, the last byte per slot), 256 KB prefixes, the
# context side alone enwik6/book1/alice29.txt/obj2: 1.8913/2.2368/1.9197/1.6940 ->
# 1.8696/2.2137/1.8964/1.6690
# (benchmarks/sweep-2026-12-03-level2.md).
# Fourteenth session, 2026-12-03: level 3 (the nest context, the runs of the last byte):
# 1.8496/2.2136/1.8971/1.6642 (benchmarks/sweep-2026-12-03-level3.md).
# Fifteenth session, 2026-12-03: level 4 (a run input per context model, 16-bit final
# probabilities), the Mamba's inputs promoted, final_lr 1: the whole default's ideal bits on
# the same Mamba pdfs, enwik6/book1/alice29.txt/obj2 1.7632/2.1490/1.8303/1.5551 ->
# 1.7561/2.1466/1.8280/1.5430 (benchmarks/sweep-2026-12-03-mamba-mix.md, scripts/sweep_mix.py).
# Seventeenth session, 2026-12-04: level 5 (the match model's recovery and second
# candidate), the default preset's mix since V6_BASES entry 8: the whole default's ideal bits
# on the same Mamba pdfs 1.7546/2.1464/1.8279/1.5413 -> 1.7540/2.1467/1.8278/1.5155
# (benchmarks/sweep-2026-12-04-match.md).
# Eighteenth session, 2026-12-04: level 6 (each weight row's own rate, the history maps by
# depth), the default preset's mix since V6_BASES entry 10: 1.7347/2.1330/1.8160/1.5274 ->
# 1.7284/2.1254/1.8068/1.5225 on the same Mamba pdfs (benchmarks/sweep-2026-12-04-rates.md).
# Nineteenth session, 2026-12-05: level 7 (the byte histories, the history and run inputs at
# half), the default preset's mix since V6_BASES entry 12: 1.7284/2.1254/1.8068/1.5225 ->
# 1.7230/2.1193/1.8005/1.5180 on the level-6 default's Mamba pdfs
# (benchmarks/sweep-2026-12-05-bytes.md).
# Twenty-seventh session, 2026-12-07: four more contexts (indirect1, indirect2, wordgap,
# wordclass), two more weight sets (c3, hibits) and a deterministic input per context model
# (det_inputs 3), the default preset's mix since V6_BASES entry 21: 1.7133/2.1130/1.7918/
# 1.5028 -> 1.7101/2.1129/1.7903/1.4827 on its own Mamba pdfs
# (benchmarks/sweep-2026-12-07-contexts.md).
# Twenty-eighth session, 2026-12-07: the found set by the models that have seen each node
# (found_node) and a dead zone of 8 (level 2's 32 skipped steps that were worth taking), the
# default preset's mix since V6_BASES entry 23: 1.7101/2.1129/1.7903/1.4827 ->
# 1.7095/2.1118/1.7890/1.4818 -> 1.7086/2.1114/1.7886/1.4815 on the same Mamba pdfs
# (benchmarks/sweep-2026-12-07-found.md).
# Twenty-ninth session, 2026-12-07: the word1b context, the bit histories as states (states
# 1), the match model's recovery up to 6 misses of 16, counter_limit 15 and the order-4 APM,
# the default preset's mix since V6_BASES entry 25: 1.7086/2.1114/1.7886/1.4815 ->
# 1.7072/2.1087/1.7859/1.4762 on the same Mamba pdfs (benchmarks/sweep-2026-12-07-states.md).
# Thirtieth session, 2026-12-07: the word set (the word so far in 8 bits), the default preset's
# mix since V6_BASES entry 28: enwik6/book1/alice29.txt 1.7072/2.1087/1.7859 ->
# 1.7071/2.1074/1.7840 on the same Mamba pdfs; binary input takes the preset's "binary_mix"
# (benchmarks/sweep-2026-12-07-binary.md).
DEFAULT = MixConfig(mamba=True, mamba_sel=2, mamba_eapm=1, mamba_lr=4, full_log=6, slot_log=8,
                    level=7, combiner_lr=4, final_lr=1, promote=True, bits=True,
                    contexts=("indirect1", "indirect2", "wordgap", "wordclass", "word1b"),
                    sets=("c3", "hibits", "word"), det_inputs=3, found_node=True, dead_zone=8,
                    states=1, match_recover=6, counter_limit=15, sse_order4=True)  # fmt: skip
# MAX, ratio regardless of speed: 2^24 slots (512 MiB), 2^24 match entries, 2^20 APM contexts,
# every node in full: 1.8999 / 2.2308 / 1.9283 at ~82 µs/byte.
MAX = MixConfig(
    mamba=True, mamba_sel=2, mamba_eapm=1, mamba_lr=4, ctx_log=24, match_log=24, apm_log=20,
    full_log=24, slot_log=24, contexts=LEVEL1_CONTEXTS, found_sel=True, c2_sel=True, final_sel=1,
)  # fmt: skip
# Small tables for tests: compiles the same kernels, allocates 5.3 MB.
SMALL = MixConfig(ctx_log=14, hist_log=16, match_log=12, apm_log=10)
