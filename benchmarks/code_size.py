"""How big the code is: the largest modules and the longest functions of the three packages.

Sizes are reported, not capped (DESIGN.md, "Inside cotrain/"): a big module or a long function
is a question about cohesion — is it one job? — never a reason to pack lines or to split one
job in two. The report lists the 15 largest modules (lines of the file) and the 15 longest
functions and methods (lines from their ``def`` to their last line, as :mod:`ast` reads them;
nested functions count inside their parent and on their own) of ``cotrain``, ``consensus`` and
``learners``. Nothing is imported: the files are read as text.

    python benchmarks/code_size.py
    python benchmarks/code_size.py --top 30
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("cotrain", "consensus", "learners")
#: the repository this script is in (its packages, not an installed copy)
ROOT = Path(__file__).resolve().parents[1]


def module_files(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> dict[str, Path]:
    """Every ``.py`` file of the packages under ``root`` by dotted name (a package is its
    ``__init__``)."""
    files = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = [package, *path.relative_to(root / package).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def functions(tree: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method under ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}.{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, name)
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}.{node.name}")
        else:
            yield from functions(node, prefix)


def sizes(
    packages: tuple[str, ...] = PACKAGES,
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Modules by lines and functions by lines, each largest first (ties by name)."""
    modules, funcs = [], []
    for name, path in module_files(packages).items():
        source = path.read_text(encoding="utf-8")
        modules.append((name, len(source.splitlines())))
        funcs.extend(functions(ast.parse(source, filename=str(path)), name))
    order = lambda item: (-item[1], item[0])  # noqa: E731
    return sorted(modules, key=order), sorted(funcs, key=order)


def report(top: int = 15, packages: tuple[str, ...] = PACKAGES) -> str:
    """The two tables as text."""
    modules, funcs = sizes(packages)
    width = max(len(name) for name, _ in [*modules[:top], *funcs[:top]])
    lines = [f"{len(modules)} modules, {sum(n for _, n in modules)} lines", ""]
    lines.append(f"the {top} largest modules (lines)")
    lines += [f"  {name:<{width}}  {n:>5}" for name, n in modules[:top]]
    lines += ["", f"the {top} longest functions (lines, def to end)"]
    lines += [f"  {name:<{width}}  {n:>5}" for name, n in funcs[:top]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    print(report(parser.parse_args().top))


if __name__ == "__main__":
    main()
