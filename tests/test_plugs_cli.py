"""The command line as gzip, xz and zstd users type it and as other tools call it (issue 27):
``tar -I mambazip``, ``mambazip FILE``, the stdin-to-stdout filter, the levels and -r."""

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mambazip import container

CORPUS = Path("/work/shared/bench/corpus/canterbury")
SMALLEST = ("grammar.lsp", "xargs.1")  # the two smallest corpus files: 8 KB in all
MAMBAZIP = shutil.which("mambazip", path=os.path.dirname(sys.executable))


def run(args, cwd=None, input=b"", stdin=None):
    """The installed ``mambazip`` script, as tar and a shell run it."""
    proc = subprocess.run([MAMBAZIP, *map(str, args)], cwd=cwd, input=None if stdin else input,
                          stdin=stdin, capture_output=True, timeout=600)  # fmt: skip
    proc.stderr = proc.stderr.decode()
    return proc


def tree(root):
    """{relative path: bytes, or the target of a symlink} of everything under ``root``."""
    out = {}
    for path in sorted(Path(root).rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def corpus_dir(tmp_path, sample):
    """A directory of the two smallest Canterbury corpus files (one in a subdirectory); where
    the corpus is not, two files of ``sample``."""
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    for name, where in zip(SMALLEST, (d, d / "sub"), strict=True):
        if CORPUS.is_dir():
            shutil.copy(CORPUS / name, where)
        else:
            (where / name).write_bytes(sample)
    return d


@pytest.fixture
def text_dir(tmp_path, sample):
    """A tree of small files, a subdirectory, a symlink and a file already ending in .mz."""
    d = tmp_path / "t"
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "a.txt").write_bytes(sample)
    (d / "sub" / "b.txt").write_bytes(sample[::-1])
    (d / "sub" / "deeper" / "c.bin").write_bytes(bytes(range(256)) * 4)
    (d / "link").symlink_to("a.txt")
    return d


# ------------------------------------------------------------------------------ GNU tar


@pytest.mark.parametrize(
    "program", [("-I", "mambazip"), ("--use-compress-program=mambazip --fast",)]
)
def test_tar_round_trips_a_directory_through_mambazip(corpus_dir, tmp_path, program):
    if shutil.which("tar") is None:
        pytest.skip("no tar")
    env = {**os.environ, "PATH": f"{os.path.dirname(MAMBAZIP)}:{os.environ['PATH']}"}
    out = tmp_path / "out"
    out.mkdir()
    for args in (["-cf", "d.tar.mz", "d"], ["-xf", "d.tar.mz", "-C", str(out)]):
        proc = subprocess.run(["tar", *program, *args], cwd=tmp_path, env=env,
                              capture_output=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
    with open(tmp_path / "d.tar.mz", "rb") as f:
        # A .mz file; no transform changes a tar of text, so it is version 6's bytes.
        assert container.read_header(f)["version"] == container.COMPACT
    assert tree(out / "d") == tree(corpus_dir)


# ------------------------------------------------------------- the form zstd users type


def test_a_file_alone_is_compressed_as_the_compress_command_does(tmp_path, sample, tiny_flags):
    for name in ("one.txt", "two.txt"):
        (tmp_path / name).write_bytes(sample)
    # -n: the headers would differ by the stored name
    assert run(["-n", *tiny_flags, "one.txt"], cwd=tmp_path).returncode == 0
    assert run(["compress", "-n", *tiny_flags, "two.txt"], cwd=tmp_path).returncode == 0
    assert (tmp_path / "one.txt.mz").read_bytes() == (tmp_path / "two.txt.mz").read_bytes()


def test_keep_and_force_before_a_file_work_as_on_compress(tmp_path, sample, tiny_flags):
    path = tmp_path / "notes.txt"
    path.write_bytes(sample)
    (tmp_path / "notes.txt.mz").write_bytes(b"in the way")
    assert run(["-k", "-f", *tiny_flags, path]).returncode == 0
    assert path.read_bytes() == sample
    assert (
        run(["compress", "-c", *tiny_flags, path]).stdout
        == (tmp_path / "notes.txt.mz").read_bytes()
    )


@pytest.mark.parametrize("options", [["-c"], ["-o", "out.mz"], ["-q", "--rm"], ["-v", "-T", "2"],
                                     ["-n", "-k"]])  # fmt: skip
def test_options_before_a_file_mean_what_they_mean_on_compress(tmp_path, sample, tiny_flags,
                                                               options):  # fmt: skip
    """The same file (name, bytes and mtime) in two directories: ``mambazip OPTIONS FILE``
    in one, ``mambazip compress OPTIONS FILE`` in the other, leave the same files and write
    the same stdout."""
    results = []
    for form in ([], ["compress"]):
        where = tmp_path / ("compress" if form else "bare")
        where.mkdir()
        (where / "notes.txt").write_bytes(sample)
        os.utime(where / "notes.txt", (1_700_000_000, 1_700_000_000))
        proc = run([*form, *options, *tiny_flags, "notes.txt"], cwd=where)
        assert proc.returncode == 0, proc.stderr
        results.append((proc.stdout, tree(where)))
    assert results[0] == results[1]


def test_stdin_is_filtered_to_stdout_and_back(sample, tiny_flags):
    packed = run(tiny_flags, input=sample)
    assert packed.returncode == 0, packed.stderr
    assert packed.stdout == run(["compress", *tiny_flags], input=sample).stdout
    back = run(["-d"], input=packed.stdout)
    assert back.returncode == 0, back.stderr
    assert back.stdout == sample


@pytest.mark.parametrize("level, preset", [("-9", "max"), ("--best", "max"), ("-1", "fast"),
                                           ("--fast", "fast")])  # fmt: skip
def test_levels_choose_presets(sample, level, preset, tiny_flags):
    by_level = run([level, *tiny_flags], input=sample)
    assert by_level.returncode == 0, by_level.stderr
    assert (
        by_level.stdout == run(["compress", "--preset", preset, *tiny_flags], input=sample).stdout
    )
    assert run(["-d", level], input=by_level.stdout).stdout == sample


def test_a_terminal_on_stdin_is_refused_in_one_line():
    leader, follower = pty.openpty()
    try:
        for args in ([], ["-9"], ["-d"]):
            proc = run(args, stdin=follower)
            assert proc.returncode != 0
            assert proc.stdout == b""
            assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("mambazip: "), (
                proc.stderr
            )
            assert "terminal" in proc.stderr
    finally:
        os.close(leader)
        os.close(follower)


def test_a_terminal_on_stdout_is_refused_in_one_line(sample, tiny_flags):
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([MAMBAZIP, *tiny_flags], input=sample, stdout=follower,
                              stderr=subprocess.PIPE, timeout=600)  # fmt: skip
    finally:
        os.close(leader)
        os.close(follower)
    message = proc.stderr.decode()
    assert proc.returncode == 1
    assert message.count("\n") == 1 and "terminal" in message, message


def test_help_shows_both_forms():
    text = run(["--help"]).stdout.decode()
    assert "mambazip COMMAND [OPTIONS] [FILES]" in text
    assert "mambazip [OPTIONS] FILE..." in text


def test_a_subcommand_still_means_itself(tmp_path, sample, tiny_flags):
    (tmp_path / "info").write_bytes(sample)  # a file named like a command is not compressed
    proc = run(["info"], cwd=tmp_path, input=b"")
    assert not (tmp_path / "info.mz").exists()
    assert proc.returncode != 0


# ---------------------------------------------------------------------------------- -r


def test_recursive_compresses_every_file_and_decompress_restores_the_tree(text_dir, tiny_flags):
    before = tree(text_dir)
    assert run(["-r", "--rm", *tiny_flags, text_dir]).returncode == 0
    after = tree(text_dir)
    files = sorted(k for k, v in before.items() if isinstance(v, bytes))
    assert sorted(k for k, v in after.items() if isinstance(v, bytes)) == [f + ".mz" for f in files]
    assert after["link"] == before["link"]
    assert run(["-d", "-r", "--rm", text_dir]).returncode == 0
    assert tree(text_dir) == before


def test_recursive_skips_files_already_compressed(text_dir, tiny_flags, sample):
    (text_dir / "old.txt.mz").write_bytes(b"not touched")
    assert run(["-r", *tiny_flags, text_dir]).returncode == 0
    assert (text_dir / "old.txt.mz").read_bytes() == b"not touched"
    assert not (text_dir / "old.txt.mz.mz").exists()
    assert (text_dir / "sub" / "deeper" / "c.bin.mz").exists()


def test_a_directory_without_recursive_is_still_skipped(text_dir, tiny_flags):
    proc = run([*tiny_flags, text_dir])
    assert proc.returncode == 1
    assert "is a directory" in proc.stderr
    assert not list(text_dir.rglob("*.mz"))
