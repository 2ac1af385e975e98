"""gzip's mode flags on the main command (-d, -z, -l, -t and bundles such as -dc) as the
commands they stand for; a file name where a command belongs is told what to type."""

import shlex

# gzip's mode flags on the main command: the command they stand for, and its arguments.
_MODES = {"d": ("decompress",), "z": ("compress",), "l": ("info",), "t": ("decompress", "-t")}


_LONG_MODES = {"--decompress": "d", "--uncompress": "d", "--compress": "z", "--list": "l",
               "--test": "t"}  # fmt: skip


_BUNDLE_LETTERS = set("cdfklnNqtvz")  # the one-letter flags that may share a dash with a mode


def translate(args, commands):
    """``mambazip -d FILE`` -> ``mambazip decompress FILE`` (and -z, -l, -t, bundles such as
    -dc); other arguments are left to click."""
    if not args or args[0] in commands or args[0] in ("-h", "--help", "-V", "--version"):
        return args
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in _LONG_MODES:
            return [*_MODES[_LONG_MODES[arg]], *args[:i], *args[i + 1 :]]
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and letters:
            if not set(letters) <= _BUNDLE_LETTERS or not set(letters) & set("dzlt"):
                continue
            mode = next(m for m in "dzlt" if m in letters)  # -dt: decompress -t
            rest = letters.replace(mode, "", 1)
            return [*_MODES[mode], *args[:i], *([f"-{rest}"] if rest else []), *args[i + 1 :]]
    return args


def not_a_command(word, commands):
    """gzip users type ``mambazip FILE``: say what to type instead."""
    quoted = shlex.quote(word)
    if word.endswith(".mz"):
        return f"{word!r} is not a command; to decompress it: mambazip decompress {quoted}"
    return (
        f"{word!r} is not a command; to compress it: mambazip compress {quoted} "
        f"(commands: {', '.join(sorted(commands))})"
    )
