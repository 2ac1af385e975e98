"""Write the golden .mz files of the current format version into tests/golden/.

Run once per format version, when that version is final:

    python scripts/make_golden.py

A case added later is written alone (``python scripts/make_golden.py NAME``), by the code of
the release it pins.

A version's cases use the feature it introduced (version 2: truncated BPTT).
Each golden case is NAME.bin (the original) and NAME.mz (its compressed form). Later
releases must decode every golden file bit-exact (tests/test_golden.py); never regenerate the
files of a released version.
"""

import hashlib
import sys
from pathlib import Path

import mambazip
from mambazip.container import VERSION, format_version

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / f"v{VERSION}"

TEXT = (
    b"mambazip golden file. A Mamba-1 byte model learns this text while coding it;\n"
    b"the decoder replays the same training bit for bit.\n"
) * 6 + bytes(range(256))

TINY = {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}
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
}


def main(only=None):
    """Write the current version's cases, or only the case named ``only``."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, (data, model, train) in CASES[VERSION].items():
        if only is not None and name != only:
            continue
        settings = mambazip.resolve_settings("default", model=model, train=train, seed=1234)
        assert format_version(settings) == VERSION, name
        blob = mambazip.compress(data, settings)
        assert mambazip.decompress(blob) == data
        (GOLDEN / f"{name}.bin").write_bytes(data)
        (GOLDEN / f"{name}.mz").write_bytes(blob)
        digest = hashlib.sha256(blob).hexdigest()
        print(f"{name}: {len(data)} -> {len(blob)} bytes, sha256 {digest}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
