"""Which blocks the noise test (``blocks.Noise``) marks to be skipped, file by file, as the
command line cuts them: an input shorter than one block is the short form (one test of the
whole input), a longer one frames of ``frames.DEFAULT_FRAME`` bytes, each with a fresh
``Noise``, tested block by block in order. A file with no marked block codes exactly as it
would with the test disabled.

    python scripts/noise_marks.py FILE...
"""

import sys
from pathlib import Path

import numpy as np

from mambazip import container, frames
from mambazip.blocks import Noise


def marks(data, block=container.DEFAULT_BLOCK, frame=frames.DEFAULT_FRAME):
    """(number of blocks tested, the offsets of the blocks marked)."""
    view = np.frombuffer(data, dtype=np.uint8)
    if len(data) < block:
        return 1, [0] if data and Noise().incompressible(view) else []
    tested, marked = 0, []
    for start in range(0, len(data), frame):
        noise = Noise()
        for at in range(start, min(start + frame, len(data)), block):
            tested += 1
            if noise.incompressible(view[at : min(at + block, start + frame)]):
                marked.append(at)
    return tested, marked


def main():
    print("| file | bytes | blocks tested | blocks marked |")
    print("|---|---:|---:|---|")
    for name in sys.argv[1:]:
        data = Path(name).read_bytes()
        tested, marked = marks(data)
        shown = ", ".join(f"at {at:,}" for at in marked) or "none"
        print(f"| {name} | {len(data):,} | {tested} | {shown} |")


if __name__ == "__main__":
    main()
