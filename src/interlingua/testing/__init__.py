"""Contract batteries for plugin authors, in the style of scikit-learn's ``check_estimator``.

One call checks a measure, a map estimator or a capability against the contract the package relies on::

    from interlingua.testing import check_capability, check_map_estimator, check_measure

    check_measure("cka_linear_biased")      # or your own Measure object
    check_map_estimator("procrustes")       # or your own Map instance
    check_capability(MY_CAPABILITY)         # a Capability declaration

Each runs its battery in order and raises :class:`CheckFailed` (an ``AssertionError``) naming the first
check that failed; ``measure_checks``, ``map_estimator_checks`` and ``capability_checks`` yield the same
checks one by one (:class:`Check` objects, ``str(check)`` a pytest id) so a test suite can parametrize
over them and see every failure at once.
"""

from __future__ import annotations

from interlingua.testing._core import Check, CheckFailed
from interlingua.testing.capabilities import capability_checks, check_capability
from interlingua.testing.maps import check_map_estimator, map_estimator_checks
from interlingua.testing.measures import check_measure, measure_checks

__all__ = [
    "Check",
    "CheckFailed",
    "capability_checks",
    "check_capability",
    "check_map_estimator",
    "check_measure",
    "map_estimator_checks",
    "measure_checks",
]
