"""Write the golden .mz files of the current format version into tests/golden/.

Run once per format version, when that version is final:

    python scripts/make_golden.py

Each golden case is NAME.bin (the original) and NAME.mz (its compressed form). Later
releases must decode every golden file bit-exact (tests/test_golden.py); never regenerate the
files of a released version.
"""

import hashlib
from pathlib import Path

import mambazip
from mambazip.container import VERSION

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / f"v{VERSION}"

TEXT = (
    b"mambazip golden file. A Mamba-1 byte model learns this text while coding it;\n"
    b"the decoder replays the same training bit for bit.\n"
) * 6 + bytes(range(256))

CASES = {
    "tiny-adam": (TEXT, {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}, {}),
    "tiny-sgd-scoped": (
        TEXT,
        {"d_model": 8, "n_layer": 2, "d_state": 4, "d_conv": 4},
        {"optimizer": "sgd", "lr": 0.01, "scope": ["mixer_ssm", "head", "bias"], "clip": 1.0},
    ),
    "default-preset": (TEXT[:400], {}, {}),
}


def main():
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, (data, model, train) in CASES.items():
        settings = mambazip.resolve_settings("default", model=model, train=train, seed=1234)
        blob = mambazip.compress(data, settings)
        assert mambazip.decompress(blob) == data
        (GOLDEN / f"{name}.bin").write_bytes(data)
        (GOLDEN / f"{name}.mz").write_bytes(blob)
        digest = hashlib.sha256(blob).hexdigest()
        print(f"{name}: {len(data)} -> {len(blob)} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
