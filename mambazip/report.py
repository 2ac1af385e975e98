"""Where the bits go: one self-contained HTML page that colours each byte by its code length
and shows, region by region, which part of the predictor the mixer trusted most.

Inputs: the file's bytes, each byte's code length (bits, float64 (n,)), and optionally each
byte's trust shares (float32 (n, P), P parts, rows summing to 1 or 0) with the parts' names.
The page needs nothing beyond itself: inline CSS, no script, no external resource.
"""

import html

import numpy as np

REGION = 4096  # bytes per row of the region table
SHOWN = 1 << 17  # bytes drawn as text; the region table always covers the whole file
BUCKETS = 16  # colour classes over 0..8+ bits, half a bit each

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { padding: 2px 8px; text-align: right; border-bottom: 1px solid #ddd; }
th { background: #f4f4f4; }
td.part { text-align: left; }
pre.text { white-space: pre-wrap; word-break: break-all; font: 13px/1.35 monospace;
           border: 1px solid #ccc; padding: 8px; }
.legend span { display: inline-block; width: 2.2em; text-align: center; font: 11px monospace; }
.bar { display: inline-block; height: 0.8em; background: #4a7; vertical-align: middle; }
"""


def _bucket_css():
    return "".join(f".k{k} {{ background: {_bucket_colour(k)}; }}\n" for k in range(BUCKETS))


def _bucket_colour(k):
    """Green (cheap) through yellow to red (expensive): k in 0..BUCKETS-1."""
    t = k / (BUCKETS - 1)
    red = int(255 * min(1.0, 2 * t))
    green = int(255 * min(1.0, 2 * (1 - t)))
    return f"rgb({red},{green},90)"


def _shown_char(byte):
    """One visible character per byte, so the page keeps the file's layout and length."""
    if byte == 10:
        return "\n"
    if 32 <= byte < 127:
        return chr(byte)
    if byte == 9:
        return "\u2192"  # a tab, drawn as one arrow
    return "\u00b7"  # any other byte: a middle dot


def buckets(bits):
    """Colour class of each byte: floor(2 * bits), clipped to 0..BUCKETS-1. int (n,)."""
    return np.clip(np.floor(2.0 * np.asarray(bits, dtype=np.float64)), 0, BUCKETS - 1).astype(int)


def render(data, bits, trust=None, part_names=(), title="mambazip score"):
    """The page as a str. ``bits`` float64 (n,): the code length of each of the file's n
    bytes; ``data``: the file's first bytes (at most n; SHOWN is a sensible number), drawn
    as text; ``trust`` float32 (n, P) or None, ``part_names`` P names."""
    data = bytes(data)
    bits = np.asarray(bits, dtype=np.float64)
    n = bits.shape[0]
    shown = len(data)
    if bits.ndim != 1 or shown > n:
        raise ValueError(f"{shown} bytes to show but {bits.shape} code lengths")
    total = float(bits.sum())
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}{_bucket_css()}</style></head>",
        "<body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p id="summary" data-bytes="{n}" data-bits="{total:.3f}">{n} bytes, '
        f"{total / max(n, 1):.4f} bits/byte, {total / 8:.0f} bytes of code.</p>",
    ]
    if trust is not None and n:
        out += _parts_table(np.asarray(trust, dtype=np.float64), part_names)
    out += _regions_table(bits, trust, part_names)
    out.append('<p class="legend">bits per byte: ')
    for k in range(BUCKETS):
        out.append(f'<span class="k{k}">{k / 2:g}</span>')
    out.append("</p>")
    out.append(f'<pre class="text" data-shown="{shown}">')
    out += _text_spans(data, bits[:shown])
    out.append("</pre>")
    if n > shown:
        out.append(f"<p>The text shows the first {shown} of {n} bytes.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def _parts_table(trust, names):
    shares = trust.mean(axis=0)
    rows = ['<table id="parts"><tr><th>part</th><th>mean share of the combiner\'s trust</th></tr>']
    for name, share in zip(names, shares, strict=True):
        width = int(200 * share)
        rows.append(
            f'<tr><td class="part">{html.escape(name)}</td><td>{100 * share:.1f} % '
            f'<span class="bar" style="width:{width}px"></span></td></tr>'
        )
    rows.append("</table>")
    return rows


def _regions_table(bits, trust, names):
    rows = ['<table id="regions"><tr><th>offset</th><th>bytes</th><th>bits/byte</th>'
            "<th>trusted most</th></tr>"]  # fmt: skip
    for start in range(0, bits.shape[0], REGION):
        part = bits[start : start + REGION]
        top = ""
        if trust is not None:
            shares = np.asarray(trust[start : start + REGION], dtype=np.float64).mean(axis=0)
            best = int(np.argmax(shares))
            top = f"{html.escape(names[best])} ({100 * shares[best]:.0f} %)"
        rows.append(
            f"<tr><td>{start}</td><td>{part.shape[0]}</td><td>{part.mean():.3f}</td>"
            f'<td class="part">{top}</td></tr>'
        )
    rows.append("</table>")
    return rows


def _text_spans(data, bits):
    """Runs of bytes in the same colour class, one span each, the class in a short name
    styled once in the page's CSS (a megabyte of text stays a few megabytes of page)."""
    classes = buckets(bits)
    spans = []
    start = 0
    for i in range(1, len(data) + 1):
        if i == len(data) or classes[i] != classes[start]:
            text = "".join(_shown_char(b) for b in data[start:i])
            spans.append(f"<span class=k{classes[start]}>{html.escape(text, quote=False)}</span>")
            start = i
    return ["".join(spans)]
