"""What every command prints with: sizes in units of 1000 bytes, one-line messages on
stderr, an error described in one line, a settings dict in one line."""

import click

KB = 1000  # every size and speed the command line prints is in units of 1000 bytes


EXIT_HELP = """\b
Exit codes: 0 success, 1 error in data or files (one line on stderr, no output left
behind), 2 usage error, 128 + signal when stopped by one (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP; the temporary output is removed)."""


def say(message):
    click.echo(f"mambazip: {message}", err=True)


def format_kb(n):
    if n < KB:
        return f"{n} B"
    if n < KB * KB:
        return f"{n / KB:.1f} kB"
    return f"{n / KB / KB:.2f} MB"


def describe(path, exc):
    if isinstance(exc, MemoryError):
        # The machine (or a ulimit) has less memory than --memlimit allowed.
        detail = " ".join(str(exc).split()) or "an allocation failed"
        return f"{path}: out of memory ({detail}); lower --memlimit to refuse such files early"
    if isinstance(exc, OSError):
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return f"{path}: {exc}"


class Discard:
    def write(self, data):
        return len(data)


def format_fields(d):
    def show(v):
        return ",".join(v) if isinstance(v, (list, tuple)) else v

    return " ".join(f"{k}={show(v)}" for k, v in d.items())
