"""Print the shell (or Python) block of README.md that follows the marker
``<!-- ci:NAME ... -->``.

``.ci/run`` runs the README's install line, quick start and test command through this, so
that what CI runs and what a user copies from the README cannot drift apart:

    python scripts/readme_block.py quick-start     # the lines of that block, as written
"""

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def block(name, text):
    """The lines of the fenced block (``sh`` or ``python``) right after the marker
    ``<!-- ci:NAME``."""
    match = re.search(
        rf"^<!-- ci:{re.escape(name)}\b[^\n]*-->\n```(?:sh|python)\n(.*?)^```$", text, re.M | re.S
    )
    if match is None:
        raise SystemExit(f"readme_block: README.md has no block marked ci:{name}")
    return match.group(1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: readme_block.py NAME")
    sys.stdout.write(block(sys.argv[1], README.read_text()))
