"""Where a table or key of a TOML text is, so that every problem can point at its line.

tomllib gives values without positions; ``LineLocator`` walks the text once and records
where each ``[table]`` / ``[[array]]`` header and each top-level ``key =`` of a table is.
Sub-tables of a workaround are keyed by that workaround's index. Only built when there
is a problem to point at: a valid manifest never pays for it.
"""

from __future__ import annotations

import re


class LineLocator:
    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"'-]+)\s*\]")
    _KEY = re.compile(r"^([A-Za-z0-9_\"'-]+)\s*=")

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.header: dict[tuple[str, int, int], int] = {}
        self.keys: dict[tuple[str, int, int], dict[str, int]] = {}
        current: tuple[str, int, int] = ("", 0, -1)
        workaround = -1
        counters: dict[str, int] = {}
        arrays: dict[str, int] = {}
        for number, line in enumerate(self.lines, start=1):
            header = self._HEADER.match(line)
            if header:
                table = header.group(2).replace('"', "").replace("'", "")
                if table == "workaround":
                    workaround += 1
                    counters = {}
                    current = (table, workaround, -1)
                elif table.startswith("workaround."):
                    index = counters.get(table, 0)
                    counters[table] = index + 1
                    current = (table, index, workaround)
                elif header.group(1) == "[[":  # another top-level array, e.g. [[tracked]]
                    arrays[table] = arrays.get(table, -1) + 1
                    current = (table, arrays[table], -1)
                else:
                    current = (table, 0, -1)
                self.header.setdefault(current, number)
                continue
            key = self._KEY.match(line)
            if key:
                name = key.group(1).strip("\"'")
                self.keys.setdefault(current, {}).setdefault(name, number)

    def of(self, table: str = "", index: int = 0, key: str | None = None, workaround: int = -1) -> int:
        """Line of ``key`` in the table, else of the table's header, else 1."""
        where = (table, index, workaround)
        if key is not None and key in self.keys.get(where, {}):
            return self.keys[where][key]
        return self.header.get(where, 1)

    def find(self, text: str, start: int, default: int) -> int:
        """First line at or after ``start`` containing ``text``."""
        for number in range(max(start, 1), len(self.lines) + 1):
            if text in self.lines[number - 1]:
                return number
        return default

