"""No function of the package takes more than eight parameters, outside the compiled kernels
(``kernels/``, ``predictor/``), whose arguments are the arrays they work on: a bundle of
arguments that travels through every layer is a plan or an observer, not a parameter list."""

from __future__ import annotations

import ast
from pathlib import Path

import mambazip

PACKAGE = Path(mambazip.__file__).resolve().parent
KERNEL_FOLDERS = ("kernels", "predictor")
MOST = 8


def parameters(node):
    """How many parameters ``node`` (a function definition) takes, ``self`` and ``cls`` not
    counted; ``*args`` and ``**options`` count one each."""
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return sum(1 for a in names if a is not None and a.arg not in ("self", "cls"))


def too_long(source, name="<source>"):
    """[(function name, line, parameters)] of the functions in ``source`` over MOST."""
    return [
        (node.name, node.lineno, parameters(node))
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > MOST
    ]


def test_the_count_takes_every_kind_of_parameter_but_self():
    source = "class C:\n    def m(self, a, /, b, *c, d, e=1, **f): pass\n"
    (method,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    assert parameters(method) == 6
    nine = "def f(a, b, c, d, e, f, g, h, i): pass\n"
    assert too_long(nine) == [("f", 1, 9)]
    assert too_long("def f(a, b, c, d, e, f, g, h): pass\n") == []


def test_no_function_outside_the_kernels_takes_more_than_eight_parameters():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in KERNEL_FOLDERS:
            continue
        for name, line, count in too_long(path.read_text(), str(path)):
            found.append(f"{path.relative_to(PACKAGE)}:{line} {name}: {count} parameters")
    assert found == [], "\n".join(found)
