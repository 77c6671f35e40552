"""One registry style: things declared once under a name, looked up by that name.

A :class:`Registry` holds items of one type by name, in declaration order. Each item is declared once
(``add``; a second declaration of a name is a bug and raises ``ValueError``), ``get`` looks it up and
raises the owning package's own error class with a message that lists the known names, and
``names`` lists them. Parameterised names (``mknn_k5``, ``svcca_var0.9``) come from families: a
regular expression matched against the whole name and a factory that builds the item from the match
(``add_family``); an exact name wins over a family, and families are tried in declaration order.

The measures (:mod:`interlingua.analysis.measures.base`), the map estimators
(:mod:`interlingua.maps.estimators`) and the merge methods (:mod:`interlingua.mergeability.merge`)
are registries of this kind; the capabilities (:mod:`interlingua.pipeline.registry`) follow the same
style as an explicit list (one declaration per capability, listed once) because they are imported lazily.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")

#: The default message of an unknown name. Fields: ``what`` (the registry's noun), ``name`` (the name
#: asked for), ``names`` (the known names, comma-separated), ``families`` (the families' examples,
#: comma-separated; empty when there are none).
UNKNOWN = "unknown {what} {name!r}; known: {names}."


class Registry(Generic[T]):
    """Items of type ``T`` by name, in declaration order.

    ``what`` names an item in messages ("measure id", "map", "merge method"); ``error`` is the
    exception class ``get`` raises for an unknown name (the package's own bad-input error) and
    ``unknown`` its message (a :meth:`str.format` template, fields as in :data:`UNKNOWN`), so each
    package keeps the message its users and tests know.
    """

    def __init__(self, what: str, *, error: type[Exception] = LookupError, unknown: str = UNKNOWN) -> None:
        self.what = what
        self.error = error
        self.unknown = unknown
        self._items: dict[str, T] = {}
        self._families: list[tuple[re.Pattern[str], Callable[[re.Match[str]], T], str]] = []

    def add(self, name: str, item: T) -> T:
        """Declare ``item`` under ``name`` (returned, so a declaration can be one expression)."""
        if name in self._items:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self._items[name] = item
        return item

    def add_family(self, pattern: str, factory: Callable[[re.Match[str]], T], example: str) -> None:
        """Parameterised names: ``factory(match)`` builds the item when ``pattern`` matches a whole name.

        ``example`` (e.g. ``"mknn_k<k>"``) is what an unknown-name message lists for the family.
        """
        compiled = re.compile(pattern + r"\Z")
        if any(p.pattern == compiled.pattern for p, _, _ in self._families):
            raise ValueError(f"{self.what} family {pattern!r} registered twice")
        self._families.append((compiled, factory, example))

    def get(self, name: str) -> T:
        """The item declared as ``name``, or built by the first family whose pattern matches it."""
        if name in self._items:
            return self._items[name]
        for pattern, factory, _ in self._families if isinstance(name, str) else ():
            match = pattern.match(name)
            if match:
                return factory(match)
        raise self.error(
            self.unknown.format(
                what=self.what, name=name, names=", ".join(self._items), families=", ".join(self.families())
            )
        )

    def names(self) -> list[str]:
        """The declared names (not the families' parameterised ones), in declaration order."""
        return list(self._items)

    def families(self) -> list[str]:
        """The families' examples, in declaration order."""
        return [example for _, _, example in self._families]

    def items(self) -> list[tuple[str, T]]:
        """The declared ``(name, item)`` pairs, in declaration order."""
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is declared (families not consulted: use :meth:`get`)."""
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._items)})"
