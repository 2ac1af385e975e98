"""The where-the-bits-go page (mambazip/report.py), read back with an HTML parser."""

from html.parser import HTMLParser

import numpy as np

from mambazip import report


class Page(HTMLParser):
    """Collects the text spans (attributes and text), the summary and the table rows."""

    def __init__(self):
        super().__init__()
        self.spans, self.rows, self.summary = [], {}, None
        self._span = self._table = self._row = None
        self._in_text = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "span" and attrs.get("class", "").startswith("k") and self._in_text:
            self._span = [attrs, ""]
        elif tag == "pre":
            self._in_text = True
        elif tag == "p" and attrs.get("id") == "summary":
            self.summary = attrs
        elif tag == "table":
            self._table = attrs["id"]
            self.rows[self._table] = []
        elif tag == "tr" and self._table:
            self._row = []

    def handle_endtag(self, tag):
        if tag == "span" and self._span is not None:
            self.spans.append(tuple(self._span))
            self._span = None
        elif tag == "tr" and self._row is not None:
            self.rows[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._span is not None:
            self._span[1] += data
        if self._row is not None and data.strip():
            self._row.append(data.strip())


def parse(page):
    parser = Page()
    parser.feed(page)
    return parser


DATA = b"hello <world> & friends\n\ttab\x00\xff" * 3
BITS = np.linspace(0.0, 9.0, len(DATA))


def test_every_byte_appears_once_coloured_by_its_code_length():
    page = parse(report.render(DATA, BITS))
    assert sum(len(text) for _, text in page.spans) == len(DATA)
    offset = 0
    for attrs, text in page.spans:
        n = len(text)
        expected = {min(int(2 * b), report.BUCKETS - 1) for b in BITS[offset : offset + n]}
        assert expected == {int(attrs["class"][1:])}
        offset += n


def test_text_keeps_printable_bytes_and_marks_the_others():
    page = parse(report.render(DATA, BITS))
    text = "".join(t for _, t in page.spans)
    assert text[: len("hello <world> & friends\n")] == "hello <world> & friends\n"
    assert text[len("hello <world> & friends\n") :].startswith("\u2192tab\u00b7\u00b7")


def test_summary_gives_the_total_code_length():
    page = parse(report.render(DATA, BITS))
    assert int(page.summary["data-bytes"]) == len(DATA)
    assert abs(float(page.summary["data-bits"]) - BITS.sum()) < 1e-3


def test_region_table_names_the_part_trusted_most_in_each_region():
    n = 2 * report.REGION + 10
    data = bytes(n)
    trust = np.zeros((n, 2), dtype=np.float32)
    trust[: report.REGION, 0] = 1.0  # first region: the first part
    trust[report.REGION :, 1] = 1.0
    page = parse(report.render(data, np.ones(n), trust, ("orders", "mamba")))
    regions = page.rows["regions"][1:]
    assert [row[0] for row in regions] == ["0", str(report.REGION), str(2 * report.REGION)]
    assert [row[3].split()[0] for row in regions] == ["orders", "mamba", "mamba"]


def test_only_the_first_bytes_are_drawn_but_the_table_covers_the_file():
    n = 3 * report.REGION
    page = parse(report.render(bytes(100), np.ones(n)))
    assert sum(len(text) for _, text in page.spans) == 100
    assert len(page.rows["regions"]) == 1 + 3
