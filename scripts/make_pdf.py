"""Write a small PDF whose page contents are zlib-compressed text (FlateDecode), the kind
of file the deflate transform is for (issue 24). No dependencies beyond the standard library;
the output is the same on every run for the same input text.

Each page shows up to LINES lines of the text in Courier; each page's content stream is
compressed with ``zlib.compress`` at LEVEL (default 6, zlib's and most PDF writers' default).

    python scripts/make_pdf.py /work/shared/bench/corpus/canterbury/alice29.txt alice.pdf
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def page_content(lines) -> bytes:
    ops = ["BT", "/F1 9 Tf", "11 TL", "50 800 Td"]
    ops += [f"({_escape(line)}) '" for line in lines]
    ops.append("ET")
    return "\n".join(ops).encode("latin-1", "replace")


def make_pdf(text: str, lines_per_page: int = 70, level: int = 6) -> bytes:
    lines = text.splitlines()
    pages = [lines[i : i + lines_per_page] for i in range(0, len(lines), lines_per_page)]
    # Objects: 1 catalog, 2 page tree, 3 font, then a page and its contents per page.
    objects = {}
    kids = []
    for n, page in enumerate(pages):
        page_id, content_id = 4 + 2 * n, 5 + 2 * n
        kids.append(f"{page_id} 0 R")
        body = zlib.compress(page_content(page), level)
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ).encode()
        objects[content_id] = (
            f"<< /Length {len(body)} /Filter /FlateDecode >>\nstream\n".encode()
            + body
            + b"\nendstream"
        )
    objects[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[2] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    objects[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>"

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n".encode() + objects[number] + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for number in sorted(objects):
        out += f"{offsets[number]:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=70)
    parser.add_argument("--level", type=int, default=6)
    args = parser.parse_args()
    text = args.text.read_bytes().decode("latin-1")
    args.out.write_bytes(make_pdf(text, args.lines, args.level))


if __name__ == "__main__":
    main()
