"""The ``testing`` extra pins trio to the versions the stress kit was verified with."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from trio_agent.testing.stress import TESTED_TRIO

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_testing_extra_pins_the_tested_trio() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    (trio,) = [r for r in map(Requirement, extras["testing"]) if r.name == "trio"]
    (low_major, low_minor), (high_major, high_minor) = TESTED_TRIO
    assert trio.specifier.contains(Version(f"{low_major}.{low_minor}.0"))
    assert trio.specifier.contains(Version(f"{high_major}.{high_minor}.99"))
    assert not trio.specifier.contains(Version(f"{low_major}.{low_minor - 1}.99"))
    assert not trio.specifier.contains(Version(f"{high_major}.{high_minor + 1}.0"))
