"""A typed config section that is also a read-only mapping of the section as written (with defaults).

Readers in pedl use the typed fields; the mapping view keeps what shows the config as the user wrote
it (equality with the written section, `.get`, `in`) working on the same object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class SectionView(Mapping[str, Any]):
    """Subclasses are frozen dataclasses with a `section` field holding the section as written."""

    section: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.section[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.section)

    def __len__(self) -> int:
        return len(self.section)
