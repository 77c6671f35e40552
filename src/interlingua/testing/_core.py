"""The machinery every battery shares: a named check, the error that names it, running a battery."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from interlingua.core.errors import InterlinguaError

__all__ = ["Check", "CheckFailed", "run_checks"]


class CheckFailed(InterlinguaError, AssertionError):
    """A contract check failed: ``check`` names it (e.g. ``"invariance[orthogonal]"``), ``subject`` what was checked.

    An :class:`AssertionError`, so pytest reports it as a failed test, and an
    :class:`~interlingua.core.errors.InterlinguaError`, so the CLI prints it as one line.
    """

    def __init__(self, subject: str, check: str, detail: str) -> None:
        self.subject, self.check, self.detail = subject, check, detail
        super().__init__(f"{subject}: check {check!r} failed: {detail}")


@dataclass(frozen=True)
class Check:
    """One named contract check of one subject; calling it runs it (raises :class:`CheckFailed`, or returns None).

    ``str(check)`` is ``"<subject>::<name>"``, a ready-made pytest id::

        @pytest.mark.parametrize("check", measure_checks("cka_linear_biased"), ids=str)
        def test_contract(check): check()
    """

    subject: str
    name: str
    fn: Callable[[], None]

    def __call__(self) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a battery reports failed checks, not the subject's warnings
                self.fn()
        except CheckFailed:
            raise
        except AssertionError as err:
            raise CheckFailed(self.subject, self.name, str(err) or "assertion failed") from err
        except Exception as err:  # an unexpected error is a failed check too, named as such
            raise CheckFailed(self.subject, self.name, f"raised {type(err).__name__}: {err}") from err

    def __str__(self) -> str:
        return f"{self.subject}::{self.name}"


def run_checks(checks: Iterable[Check]) -> list[str]:
    """Run every check in order, stopping at the first failure (its :class:`CheckFailed`); the names run."""
    names = []
    for check in checks:
        check()
        names.append(check.name)
    return names


def expect(condition: bool, message: str) -> None:
    """``assert`` that survives ``python -O``: raises AssertionError with ``message`` when ``condition`` is false."""
    if not condition:
        raise AssertionError(message)


def checks_of(pairs: Iterable[tuple[str, Callable[[], None]]], subject: str) -> Iterator[Check]:
    """Wrap ``(name, fn)`` pairs as :class:`Check` objects of one subject."""
    for name, fn in pairs:
        yield Check(subject, name, fn)
