"""benchmarks/replay_seeds.py's variants: each sets fast's constants for its replay only."""

from __future__ import annotations

import pytest

from allocator.policies import fast as fastlib
from allocator.policies import realtime
from benchmarks.replay_seeds import MODULES, VARIANTS


def test_a_variant_sets_its_constants_and_restores_them_even_on_an_error() -> None:
    before = (fastlib.HOT_MAX_GPUS, fastlib.HOT_EVAC_MIN_GPUS, realtime.STACK_LAG)
    with VARIANTS["hot14"].applied():
        assert fastlib.HOT_MAX_GPUS == 14 and fastlib.HOT_EVAC_MIN_GPUS > 1024
    assert before == (fastlib.HOT_MAX_GPUS, fastlib.HOT_EVAC_MIN_GPUS, realtime.STACK_LAG)
    with pytest.raises(RuntimeError), VARIANTS["lag2"].applied():
        assert realtime.STACK_LAG == 2
        raise RuntimeError("a replay failed")
    assert before == (fastlib.HOT_MAX_GPUS, fastlib.HOT_EVAC_MIN_GPUS, realtime.STACK_LAG)


def test_every_variant_names_constants_that_exist() -> None:
    # a renamed constant would otherwise be set as a new attribute and change nothing
    for name, variant in VARIANTS.items():
        for module, constant, _ in variant.constants:
            assert hasattr(MODULES[module], constant), (name, constant)
