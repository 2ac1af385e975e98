"""What settings chosen from the input's size would give the short form (issue 26): the
file size of prefixes of a text with the default preset, its prior and each variant of the
settings a short-form stream is coded with (``container.short_settings``, which both sides
derive from the size in the header: a variant costs no header byte). Each output is
decoded back under the same variant and compared. A variant is JSON: {"mix": {field:
value}, "train": {field: value}}; {} is the settings of today.

    python scripts/sweep_short.py --sizes 50,200,1000,4000 '{}' \\
        '{"mix": {"combiner_lr": 16, "final_lr": 8}}' '{"train": {"warmup": 4000}}'

The variants apply to the preset's own settings (``plan.Layout``'s small_input off). One
adopted is a new ``container.V6_BASES`` entry, the preset's small-input counterpart
(``container.SMALL_BASES``): what existing files decode to stays as it was.
"""

import argparse
import dataclasses
import io
import json
from pathlib import Path

from mambazip import codec, container, plan

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "corpus"


def sized_by(variant):
    """``container.short_settings`` with ``variant`` applied after it."""
    today = container.short_settings

    def short_settings(settings, n):
        s = today(settings, n)
        mix = dataclasses.replace(s.mix, **variant.get("mix", {}))
        return dataclasses.replace(
            s, mix=mix, train=dataclasses.replace(s.train, **variant.get("train", {}))
        )

    return short_settings


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="JSON settings variants ({}: today's)")
    parser.add_argument("--sizes", default="50,200,1000,4000")
    parser.add_argument("--text", type=Path, default=CORPUS / "canterbury" / "alice29.txt")
    args = parser.parse_args()
    text = args.text.read_bytes()
    sizes = [int(n) for n in args.sizes.split(",")]
    start = plan.start("default")
    today = container.short_settings
    print(f"bytes of `mambazip compress -n` of {args.text.name}'s first N bytes, default preset")
    print()
    print("| variant | " + " | ".join(f"{n:,}" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for spec in args.variants:
        container.short_settings = sized_by(json.loads(spec))
        row = []
        try:
            for n in sizes:
                out, back = io.BytesIO(), io.BytesIO()
                codec.encode(io.BytesIO(text[:n]), out, plan.Plan(start))
                codec.decode(io.BytesIO(out.getvalue()), back, plan.Plan(plan.Start()))
                assert back.getvalue() == text[:n], f"{spec} does not round-trip at {n} bytes"
                row.append(f"{len(out.getvalue()):,}")
        finally:
            container.short_settings = today
        print(f"| `{spec}` | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
