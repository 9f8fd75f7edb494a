"""The line of a key in an experiment file: tomllib gives values, not positions.

:class:`Locator` splits the file into its tables (``[data]``, the n-th ``[[variant]]``,
the k-th ``[[variant.clients]]`` of that variant, ...) and finds a key by its path in the
parsed document, e.g. ``("variant", 2, "method", "consensus")``: inside the table it
belongs to, on a ``key =`` line of its own, as a dotted key, or inside an inline table
(``method = { consensus = "..." }``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Locator"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?")


@dataclass
class _Block:
    path: tuple[str | int, ...]
    start: int  # the header's line (1-based; 1 for the top level)
    end: int  # the block's last line


class Locator:
    """Finds the line of a key path in the text of a TOML file.

    Parameters
    ----------
    path : Path
        The file (for the ``file:line`` prefix).
    text : str
        Its text.

    Examples
    --------
    >>> text = '''name = "x"
    ... [method]
    ... consensus = "majorty"
    ... [[variant]]
    ... label = "a"
    ... [[variant]]
    ... label = "b"
    ... method = { name = "fedct", consensus = "mean" }
    ... [[variant.clients]]
    ... learner = "DT"
    ... '''
    >>> where = Locator(Path("exp.toml"), text)
    >>> where.line("method", "consensus")
    'exp.toml:3'
    >>> where.line("variant", 1, "method", "consensus")
    'exp.toml:8'
    >>> where.line("variant", 1, "clients", 0, "learner")
    'exp.toml:10'
    >>> where.line("nowhere")
    'exp.toml:1'
    """

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.blocks = self._blocks()

    def _blocks(self) -> list[_Block]:
        blocks = [_Block((), 1, len(self.lines))]
        counts: dict[tuple[str | int, ...], int] = {}  # array-of-tables occurrences
        for number, raw in enumerate(self.lines, 1):
            match = _HEADER.match(raw)
            if not match:
                continue
            blocks[-1].end = number - 1
            names = [n.strip().strip("\"'") for n in match.group(2).split(".")]
            path: tuple[str | int, ...] = ()
            for name in names[:-1]:  # a parent that is an array: its last element
                path += (name,)
                if path in counts:
                    path += (counts[path] - 1,)
            path += (names[-1],)
            if match.group(1) == "[[":
                counts[path] = counts.get(path, 0) + 1
                # a new element forgets the arrays nested in the previous one
                for key in [k for k in counts if k[: len(path)] == path and k != path]:
                    del counts[key]
                path += (counts[path] - 1,)
            blocks.append(_Block(path, number, len(self.lines)))
        return blocks

    def number(self, *keys: str | int) -> int | None:
        """The 1-based line of a key path, or None where the file does not show it.

        Examples
        --------
        >>> Locator(Path("e.toml"), "[split]\\nn_public = 5\\n").number("split", "n_public")
        2
        """
        best = None
        for block in self.blocks:
            size = len(block.path)
            if keys[:size] == block.path and (best is None or size >= len(best.path)):
                if best is None or size > len(best.path) or block.start > best.start:
                    best = block
        if best is None:
            return None
        rest = [k for k in keys[len(best.path) :]]
        if not rest:
            return best.start
        first = rest[0]
        if not isinstance(first, str):
            return best.start
        found = None
        for number in range(best.start, best.end + 1):
            raw = self.lines[number - 1]
            if number == best.start and _HEADER.match(raw) and best.path:
                continue
            if re.match(rf"^\s*{re.escape(first)}\s*(=|\.)", raw):
                found = number
                break
        if found is None:
            return None
        for position, key in enumerate(rest[1:], 1):
            if isinstance(key, int):
                continue  # the item of an inline list: the key after it says which
            skip = rest[position - 1] if isinstance(rest[position - 1], int) else 0
            hit = self._inline(key, found, best.end, skip)
            if hit is None:
                return found
            found = hit
        return found

    def _inline(self, key: str, start: int, end: int, skip: int) -> int | None:
        pattern = re.compile(rf"(^|[\s{{,.]){re.escape(key)}\s*=")
        seen = 0
        for number in range(start, end + 1):
            for _ in pattern.finditer(self.lines[number - 1]):
                if seen == skip:
                    return number
                seen += 1
        return None

    def line(self, *keys: str | int) -> str:
        """``file:line`` of a key path (the nearest enclosing table's line when the key
        itself is not written there, line 1 when nothing is).

        Examples
        --------
        >>> Locator(Path("e.toml"), "[split]\\nn_public = 5\\n").line("split", "n_test")
        'e.toml:1'
        """
        for cut in range(len(keys), 0, -1):
            number = self.number(*keys[:cut])
            if number is not None:
                return f"{self.path}:{number}"
        return f"{self.path}:1"
