"""The main command as gzip, xz and zstd users type it: their mode flags (-d, -z, -l, -t and
bundles such as -dc) as the commands they stand for, a file or an option where a command
belongs as ``compress`` (``mambazip FILE``, ``mambazip -k FILE``, and ``mambazip`` alone,
the filter ``tar -I`` runs), and the levels -1/--fast and -9/--best as presets."""

# gzip's mode flags on the main command: the command they stand for, and its arguments.
_MODES = {"d": ("decompress",), "z": ("compress",), "l": ("info",), "t": ("decompress", "-t")}


_LONG_MODES = {"--decompress": "d", "--uncompress": "d", "--compress": "z", "--list": "l",
               "--test": "t"}  # fmt: skip


_BUNDLE_LETTERS = set("cdfklnNqrtvz")  # the one-letter flags that may share a dash with a mode


# zstd's and gzip's levels: the preset they choose when compressing; decoding ignores them,
# as ``zstd -d -19`` does, so that ``tar --use-compress-program='mambazip --fast'`` also
# decompresses with the flag it was given.
_LEVELS = {"-1": "fast", "--fast": "fast", "-9": "max", "--best": "max"}


def translate(args, commands):
    """``mambazip -d FILE`` -> ``mambazip decompress FILE`` (and -z, -l, -t, bundles such as
    -dc); ``mambazip [OPTIONS] FILE...`` and a bare ``mambazip`` -> ``mambazip compress``;
    -1/--fast and -9/--best -> ``--preset fast``/``max``. A command named first, -h and -V
    are left to click."""
    if args and (args[0] in commands or args[0] in ("-h", "--help", "-V", "--version")):
        return args
    mode = _mode(args)
    command = ["compress"] if mode is None else mode
    return [*command, *_levels(args if mode is None else _without_mode(args), command)]


def _mode(args):
    for arg in args:
        if arg == "--":
            return None
        if arg in _LONG_MODES:
            return list(_MODES[_LONG_MODES[arg]])
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and _is_bundle(letters):
            return list(_MODES[next(m for m in "dzlt" if m in letters)])  # -dt: decompress -t
    return None


def _is_bundle(letters):
    return bool(letters) and set(letters) <= _BUNDLE_LETTERS and bool(set(letters) & set("dzlt"))


def _without_mode(args):
    """``args`` with the first mode flag taken out (the rest of its bundle kept)."""
    for i, arg in enumerate(args):
        if arg in _LONG_MODES:
            return [*args[:i], *args[i + 1 :]]
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and _is_bundle(letters):
            mode = next(m for m in "dzlt" if m in letters)
            rest = letters.replace(mode, "", 1)
            return [*args[:i], *([f"-{rest}"] if rest else []), *args[i + 1 :]]
    return args


def _levels(args, command):
    out = []
    for i, arg in enumerate(args):
        if arg == "--":
            return [*out, *args[i:]]
        if arg not in _LEVELS:
            out.append(arg)
        elif command == ["compress"]:
            out += ["--preset", _LEVELS[arg]]
    return out
