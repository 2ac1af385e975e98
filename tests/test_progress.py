"""The progress bar: on stderr when it is a terminal and the input is worth waiting for,
showing bytes, speed and bits/byte; never with -q, for small inputs, or off a terminal."""

import io

from mambazip import cli


def bar_output(monkeypatch, total, quiet=False, tty=True):
    """What the progress reporter writes to stderr for one 500 kB chunk at 2 bits/byte.
    (Without a bar the reporter still exists: it is where a deferred Ctrl-C is raised.)"""
    stream = io.StringIO()
    stream.isatty = lambda: tty
    monkeypatch.setattr(cli.sys, "stderr", stream)
    with cli._progress(total, "notes.txt", quiet) as update:
        update(500_000, 2.0 * 500_000)
    return stream.getvalue()


def test_bar_shows_name_bytes_and_bits_per_byte_on_a_terminal(monkeypatch):
    text = bar_output(monkeypatch, 1 << 20)
    assert "notes.txt" in text and "2.000 bits/byte" in text and "500k" in text.lower()


def test_no_bar_when_quiet(monkeypatch):
    assert bar_output(monkeypatch, 1 << 20, quiet=True) == ""


def test_no_bar_off_a_terminal(monkeypatch):
    assert bar_output(monkeypatch, 1 << 20, tty=False) == ""


def test_no_bar_for_small_inputs(monkeypatch):
    assert bar_output(monkeypatch, 1000) == ""


def test_bar_for_input_of_unknown_size(monkeypatch):
    text = bar_output(monkeypatch, None)
    assert "notes.txt" in text and "2.000 bits/byte" in text
