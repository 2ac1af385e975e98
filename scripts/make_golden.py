"""Write the golden .mz files of the current format version into tests/golden/.

Run once per format version, when that version is final:

    python scripts/make_golden.py

A case added later is written alone (``python scripts/make_golden.py NAME``), by the code of
the release it pins.

A version's cases use the feature it introduced (version 2: truncated BPTT; version 3: the
context-mixing predictor with and without the Mamba, stored blocks, the stored name, mtime
and size, the short header of an empty stream; version 4: frames and the seek index;
version 5: mixing coded by nibbles, only the byte's path evaluated; version 6: the compact
header, the short form of an input of one block, blocks of noise skipped; version 7:
transformed segments, a deflate stream and x86 code, in the short and the long form). Each
golden case is NAME.bin (the original) and NAME.mz (its compressed form). Later
releases must decode every golden file bit-exact (tests/test_golden.py); never regenerate the
files of a released version.
"""

import dataclasses
import gzip
import hashlib
import io
import struct
import sys
import zlib
from pathlib import Path

import mambazip
from mambazip import plan, priors
from mambazip.codec import compress_stream
from mambazip.container import DEFAULT_BLOCK, VERSION, read_header
from mambazip.predictor import SMALL

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / f"v{VERSION}"

TEXT = (
    b"mambazip golden file. A Mamba-1 byte model learns this text while coding it;\n"
    b"the decoder replays the same training bit for bit.\n"
) * 6 + bytes(range(256))

# Little-endian integers, most of their bytes zero: not text (priors.looks_like_text).
BINARY = struct.pack("<200I", *range(0, 2_000_000, 10_000))

TINY = {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}


def x86_program():
    """A made-up PE program (the header x86.is_executable knows, then 300 calls into earlier
    code), which the x86 transform filters."""
    header = bytearray(0x200)
    header[:2] = b"MZ"
    header[60:64] = struct.pack("<I", 0x80)
    header[0x80:0x86] = b"PE\0\0" + struct.pack("<H", 0x8664)
    code = bytearray()
    for k in range(300):  # push rbp; call f_k; ret
        code += b"\x55\xe8" + struct.pack("<i", -len(code) - 6 + 16 * (k % 7)) + b"\xc3"
    return bytes(header + code)


def noise(n, state=0x9E3779B97F4A7C15):
    """n bytes no model predicts (a 64-bit LCG's top bytes): coded, they grow, so stored."""
    out = bytearray()
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(state >> 56)
    return bytes(out)


# Version 3 options: "mix" (none, cm or full) with the small tables of predictor.SMALL,
# "preset" for the preset's own tables, or "fast" for the fast preset; "extras" (name, mtime,
# size); "block_size"; "seed" (else 1234); "small_input" (plan.Layout's); "prior" (a
# preset whose prior starts the Mamba, or a shipped prior's SHA-256) and "from_prior" (with
# that preset's "prior_train").
NAMED = {"name": "golden.txt", "mtime": 1_796_000_000}
# The default preset's prior from 2026-12-03 to 12-05: the cases of the V6_BASES entries
# that name it.
PRIOR1 = "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"
CASES = {
    1: {
        "tiny-adam": (TEXT, TINY, {}),
        "tiny-sgd-scoped": (
            TEXT,
            {"d_model": 8, "n_layer": 2, "d_state": 4, "d_conv": 4},
            {"optimizer": "sgd", "lr": 0.01, "scope": ["mixer_ssm", "head", "bias"], "clip": 1.0},
        ),
        "default-preset": (TEXT[:400], {}, {}),
    },
    2: {
        # 1024 bytes: the last segment is cut short, and learned at the end of the stream.
        "tiny-bptt7-schedule": (
            TEXT,
            TINY,
            {"bptt": 7, "lr": 0.003, "warmup": 100, "decay": 300},
        ),
        "tiny-bptt16-sgd-scoped": (
            TEXT,
            {"d_model": 8, "n_layer": 2, "d_state": 4, "d_conv": 4},
            {"bptt": 16, "optimizer": "sgd", "lr": 0.05, "scope": ["mixer_ssm", "mixer_conv"]},
        ),
        "default-preset": (TEXT[:400], {}, {}),
        # Added in the fifth session, written by the code of the fourth (fedccd1): a tied head,
        # every bias, and d_inner and d_state that are not multiples of the 16-lane vectors.
        "tied-biases-e20-n20-bptt5": (
            TEXT,
            {
                "d_model": 12,
                "n_layer": 2,
                "d_inner": 20,
                "dt_rank": 2,
                "d_state": 20,
                "d_conv": 3,
                "proj_bias": True,
                "x_proj_bias": True,
                "head_bias": True,
                "tie_embeddings": True,
            },
            {"bptt": 5, "lr": 0.003},
        ),
    },
    3: {
        "tiny-mix-full": (TEXT, TINY, {}, {"mix": "full", "extras": NAMED}),
        "tiny-mix-cm": (TEXT, TINY, {}, {"mix": "cm", "extras": NAMED}),
        "default-preset": (TEXT[:400], {}, {}, {"mix": "preset", "extras": NAMED}),
        # Blocks of 512 bytes: the noise is stored raw, the text coded, the model learns both.
        "stored-blocks-mamba-alone": (
            TEXT[:1024] + noise(1024) + TEXT[:1024],
            TINY,
            {"bptt": 4},
            {"mix": "none", "extras": {**NAMED, "size": 3072}, "block_size": 512},
        ),
        "empty": (b"", TINY, {}, {"mix": "cm", "extras": NAMED}),
    },
    4: {
        # Frames of 500 bytes in blocks of 128: frames that blocks do not divide, a last
        # frame of 1 byte, and a frame of noise stored raw.
        "tiny-mix-full-frames": (
            TEXT[:1000] + noise(500) + TEXT[:1],
            TINY,
            {},
            {"mix": "full", "extras": NAMED, "block_size": 128, "frame_size": 500},
        ),
        "tiny-mamba-alone-frames": (
            TEXT * 2,
            TINY,
            {"bptt": 4, "lr": 0.01},
            {"mix": "none", "extras": NAMED, "block_size": 256, "frame_size": 768},
        ),
        # Every training-recipe knob at once (config.RECIPE_DEFAULTS), recorded in the header.
        "tiny-recipe-frames": (
            TEXT * 2,
            TINY,
            {
                "bptt": 4,
                "lr": 0.01,
                "beta1": 0.0,
                "beta2_warmup": True,
                "lr_scale": {"head": 2.0},
                "horizon": 12,
                "curriculum": 300,
                "iters": 2,
                "replay_every": 512,
                "replay_window": 400,
                "replay_passes": 2,
            },
            {"mix": "none", "extras": NAMED, "block_size": 256, "frame_size": 1024},
        ),
        "default-preset-one-frame": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": NAMED, "frame_size": 4 << 20},
        ),
        # Started from the default preset's prior (one golden file per prior ever shipped:
        # add one named after each new prior, by the code of the release that ships it).
        "default-prior-PRIOR": (
            TEXT[:600],
            {},
            {},
            {"mix": "preset", "extras": NAMED, "frame_size": 256, "prior": "default"},
        ),
    },
    5: {
        # Frames of 500 bytes in blocks of 128, a frame of noise stored raw, a last frame
        # of 1 byte: the nibble coding with the Mamba mixed in.
        "tiny-mix-full-frames": (
            TEXT[:1000] + noise(500) + TEXT[:1],
            TINY,
            {},
            {"mix": "full", "extras": NAMED, "block_size": 128, "frame_size": 500},
        ),
        # The context models alone, as the library writes an unframed stream: one frame of
        # any length.
        "tiny-mix-cm-one-frame": (TEXT, TINY, {}, {"mix": "cm", "extras": NAMED}),
        # The context models alone with level 1's parts (mix.level 1, default's since 8b554c5).
        "tiny-mix-level1": (TEXT, TINY, {}, {"mix": "level1", "extras": NAMED}),
        # Level 2: level 1 with three more weight sets, slow counters, the APMs' mean alone.
        "tiny-mix-level2": (TEXT, TINY, {}, {"mix": "level2", "extras": NAMED}),
        # The fast preset's own tables (its mix is the context models alone).
        "fast-preset": (
            TEXT[:600],
            {},
            {},
            {"mix": "fast", "extras": NAMED, "frame_size": 4 << 20},
        ),
    },
    6: {
        # The short form: the whole input one block, no block header, end or index.
        "tiny-mix-full-short": (TEXT[:600], TINY, {}, {"mix": "full", "extras": NAMED}),
        # The short form of noise: stored, the predictor never run.
        "tiny-mix-cm-short-noise": (noise(5000), TINY, {}, {"mix": "cm", "extras": {}}),
        # The long form: blocks of 4096, the one all noise skipped between blocks the
        # predictor codes and learns.
        "tiny-mix-full-skipped": (
            TEXT + noise(8192) + TEXT,
            TINY,
            {},
            {"mix": "full", "extras": NAMED, "block_size": 4096},
        ),
        # The default preset, named by its base alone: an empty file and one started from
        # its prior.
        "default-empty": (b"", {}, {}, {"mix": "preset", "extras": {}}),
        # Level 3: level 2 with the nest context and the run of each slot's last byte.
        "tiny-mix-level3": (TEXT, TINY, {}, {"mix": "level3", "extras": NAMED}),
        "default-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default"},
        ),
        # The default preset of V6_BASES entry 7 (level 4, the Mamba promoted, final_lr 1,
        # no rerun): its header names that base alone.
        "default-base7-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": PRIOR1},
        ),
        # V6_BASES entry 8 (entry 7 with overlapped updates, level 5): the default preset on
        # an input that does not start from its prior.
        "default-base8-short": (TEXT[:400], {}, {}, {"mix": "preset", "extras": {}}),
        # V6_BASES entry 9: the default preset from its prior, with its "prior_train".
        "default-base9-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": PRIOR1, "from_prior": True},
        ),
        # V6_BASES entry 10 (entry 8 with level 6): the default preset on an input that does
        # not start from its prior.
        "default-base10-short": (TEXT[:400], {}, {}, {"mix": "preset", "extras": {}}),
        # V6_BASES entry 11: entry 10 from the prior, with its "prior_train".
        "default-base11-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": PRIOR1, "from_prior": True},
        ),
        # V6_BASES entry 12 (entry 10 with level 7): the default preset on an input that does
        # not start from its prior.
        "default-base12-short": (TEXT[:400], {}, {}, {"mix": "preset", "extras": {}}),
        # V6_BASES entry 13: entry 12 from the prior, with its "prior_train".
        "default-base13-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": PRIOR1, "from_prior": True},
        ),
        # V6_BASES entry 15: entry 13 from the prior 31e2540a, the default preset's from
        # 2026-12-05 (entry 14: entry 12 naming it).
        "default-base15-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True},
        ),
        # V6_BASES entry 17: the fast preset at mix level 7, named by its base alone.
        "fast-base17-short": (TEXT[:400], {}, {}, {"mix": "fast", "extras": {}, "seed": 0}),
        # V6_BASES entries 18 to 20: entries 14, 15 and 17 coding bits (mix.bits), the
        # default preset's (as it codes an input it does not start from its prior for, and
        # from its prior) and the fast preset's (also orders 0-5 and the sparse contexts)
        # from 2026-12-07.
        "default-base18-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "bits": True},
        ),
        "default-base19-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True, "bits": True},
        ),
        "fast-base20-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "fast", "extras": {}, "seed": 0, "bits": True},
        ),
        # V6_BASES entries 21 and 22: entries 18 and 19 with four more contexts, two more
        # weight sets and the deterministic inputs, the default preset's from 2026-12-07 (its
        # second change that day).
        "default-base21-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "bits": True},
        ),
        "default-base22-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True, "bits": True},
        ),
        # V6_BASES entries 23 and 24: entries 21 and 22 with the found set by the models
        # that have seen each node and dead zone 8, the default preset's from 2026-12-07 (its
        # third change).
        "default-base23-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "bits": True},
        ),
        "default-base24-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True, "bits": True},
        ),
        # V6_BASES entries 25 and 26: entries 23 and 24 with the word1b context, the states,
        # the match recovery up to 6, counter_limit 15 and the order-4 APM, the default
        # preset's from 2026-12-07 (its fourth change).
        "default-base25-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "bits": True},
        ),
        "default-base26-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True, "bits": True},
        ),
        # Entry 25 with combiners 1.5 times as fast and the pos4 set, the default preset's mix
        # for an input that does not look like text (its "binary_mix"), from 2026-12-07.
        "default-base27-binary-short": (
            BINARY[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "binary": True, "bits": True},
        ),
        # Entry 25 with the word set, the default preset from 2026-12-07 (its fifth change).
        "default-base28-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "bits": True},
        ),
        "default-base29-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "from_prior": True, "bits": True},
        ),
        # Entry 27 with the record model's three contexts and record_pos set, the default
        # preset's mix for an input that does not look like text from 2026-12-08: 200
        # little-endian integers, whose record length of 4 it finds after 75 bytes.
        "default-base30-binary-short": (
            BINARY,
            {},
            {},
            {"mix": "preset", "extras": {}, "binary": True, "bits": True},
        ),
        # Entry 20 with the record model and the pos4 set, the fast preset's mix for an
        # input that does not look like text from 2026-12-08.
        "fast-base31-binary-short": (
            BINARY,
            {},
            {},
            {"mix": "fast", "extras": {}, "seed": 0, "binary": True, "bits": True},
        ),
        # The default preset as the command line runs it (seed 0) on a short input: coded
        # with its small-input counterpart, named by that base alone.
        "default-small-prior-PRIOR-short": (
            TEXT[:400],
            {},
            {},
            {"mix": "preset", "extras": {}, "prior": "default", "seed": 0, "small_input": True},
        ),
    },
    7: {
        # The short form of a gzip member (GNU gzip's header, zlib's deflate at level 9):
        # the predictor codes the text it inflates to.
        "tiny-mix-cm-gzip-short": (
            gzip.compress(TEXT * 2, 9, mtime=0),
            TINY,
            {},
            {"mix": "cm", "extras": NAMED},
        ),
        # Frames of 1024 bytes in blocks of 256: a zlib stream (level 9) inside the first
        # frame, x86 code in the frames after it (a PE program cut by the frames), and a
        # last frame of text no transform changes.
        "tiny-mix-full-frames-zlib-x86": (
            TEXT[:200] + zlib.compress(TEXT * 2, 9) + TEXT[:300] + x86_program() + TEXT[:700],
            TINY,
            {},
            {"mix": "full", "extras": NAMED, "block_size": 256, "frame_size": 1024},
        ),
    },
}


LEVELS = {"level1": 1, "level2": 2, "level3": 3}  # mix.level of the context models alone


def prior_sha(prior):
    """The SHA-256 a case's "prior" names: itself, or its preset's prior."""
    return prior if priors.is_sha(prior) else priors.preset_prior(prior)


def settings_of(model, train, options):
    """The case's Settings: the default preset with the case's model and training, and for
    version 3 its mixing (the preset's tables only for "preset"); "fast": the fast preset.
    Its mixing codes bits (mix.bits, the presets' since 2026-12-07) only where the case's
    "bits" says so: the cases from before keep the nibbles they were written with."""
    settings = _preset_settings(model, train, options)
    if settings.mix is not None:
        mix = dataclasses.replace(settings.mix, bits=options.get("bits", False))
        settings = dataclasses.replace(settings, mix=mix)
    return settings


def _preset_settings(model, train, options):
    mix = options.get("mix", "none")
    if mix == "fast":
        return mambazip.resolve_settings(
            "fast", seed=options.get("seed", 1234), binary=options.get("binary", False)
        )
    settings = mambazip.resolve_settings(
        "default",
        model=model,
        train=train,
        seed=options.get("seed", 1234),
        mix=None if mix == "preset" else ("cm" if mix in LEVELS else mix),
        from_prior=options.get("from_prior", False),
        binary=options.get("binary", False),
    )
    if mix in ("full", "cm", *LEVELS):
        small = dataclasses.replace(SMALL, mamba=mix == "full", level=LEVELS.get(mix, 0))
        settings = dataclasses.replace(settings, mix=small)
    return settings


def compress_case(data, settings, options):
    """The case's .mz bytes, written as the command line writes a file (stored blocks on;
    from version 4, frames) for versions 3 and 4, as the library writes bytes before."""
    if not options:
        return mambazip.compress(data, settings)
    out = io.BytesIO()
    prior = None
    if "prior" in options and priors.is_sha(options["prior"]):
        prior = priors.load(options["prior"])
    elif "prior" in options:
        prior = plan.prior_for(options["prior"], settings)
    compress_stream(io.BytesIO(data), out, settings, options.get("block_size", DEFAULT_BLOCK),
                    stored_blocks=True, frame_size=options.get("frame_size"), prior=prior,
                    small_input=options.get("small_input", False),
                    **options.get("extras", {}))  # fmt: skip
    return out.getvalue()


def main(only=None):
    """Write the current version's cases, or only the case named ``only`` (of any version:
    a case added later to an older version's list, such as a new prior's file of version
    6, is written into that version's folder)."""
    versions = [VERSION] if only is None else sorted(CASES)
    written = 0
    for version in versions:
        golden = GOLDEN.parent / f"v{version}"
        for name, (data, model, train, *rest) in CASES[version].items():
            options = rest[0] if rest else {}
            if "prior" in options:
                name = name.replace("PRIOR", prior_sha(options["prior"])[:16])
            if only is not None and name != only:
                continue
            settings = settings_of(model, train, options)
            blob = compress_case(data, settings, options)
            assert read_header(io.BytesIO(blob))["version"] == version, name
            assert mambazip.decompress(blob) == data
            golden.mkdir(parents=True, exist_ok=True)
            (golden / f"{name}.bin").write_bytes(data)
            (golden / f"{name}.mz").write_bytes(blob)
            digest = hashlib.sha256(blob).hexdigest()
            print(f"{name}: {len(data)} -> {len(blob)} bytes, sha256 {digest}")
            written += 1
    if not written:
        sys.exit(f"make_golden: no case named {only!r} (a prior's cases are named by its sha)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
