"""The lock files in requirements/ say what the README's commands and .ci/run install.

They are written by ``requirements/update`` from pyproject.toml's ranges; these tests fail when
the two disagree (a range changed without the lock files following it), when a pin lacks the
hashes pip's ``--require-hashes`` checks, or when the service's lock would install anything at
another version than the tests run.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;\\]+)(?:\s*;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Pin:
    version: Version
    marker: str | None
    hashes: frozenset[str]


def _pins(name: str) -> dict[str, Pin]:
    """``requirements/<name>``'s pins by canonical name; every line is a pin, one of its
    hashes, or a comment."""
    pins: dict[str, Pin] = {}
    current: str | None = None
    hashes: dict[str, set[str]] = {}
    for number, line in enumerate((ROOT / "requirements" / name).read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pinned = PIN.match(line)
        if pinned:
            current = canonicalize_name(pinned["name"])
            assert current not in pins, f"{name}:{number}: {current} pinned twice"
            pins[current] = Pin(Version(pinned["version"]), pinned["marker"], frozenset())
            hashes[current] = set()
            continue
        assert current is not None, f"{name}:{number}: not a pin: {line!r}"
        assert HASH.fullmatch(stripped.removesuffix("\\").strip()), f"{name}:{number}: {line!r}"
        hashes[current].add(stripped.removesuffix("\\").strip())
    return {key: Pin(pin.version, pin.marker, frozenset(hashes[key])) for key, pin in pins.items()}


def _requirements(*groups: str) -> list[Requirement]:
    project = PYPROJECT["project"]
    found = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    found += [Requirement(r) for r in project["dependencies"]]
    for group in groups:
        found += [Requirement(r) for r in project["optional-dependencies"][group]]
    return found


@pytest.mark.parametrize(
    ("lock", "groups"), [("serve.txt", ()), ("test.txt", ("test",))], ids=["serve", "test"]
)
def test_the_lock_pins_every_requirement_within_its_range(
    lock: str, groups: tuple[str, ...]
) -> None:
    pins = _pins(lock)
    for requirement in _requirements(*groups):
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} is not in requirements/{lock}"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"requirements/{lock} pins {requirement.name} {pin.version}, outside pyproject.toml's"
            f" {requirement.specifier}: run requirements/update"
        )


@pytest.mark.parametrize("lock", ["serve.txt", "test.txt"])
def test_every_pin_has_the_hashes_of_its_files(lock: str) -> None:
    unhashed = sorted(name for name, pin in _pins(lock).items() if not pin.hashes)
    assert not unhashed, f"requirements/{lock} pins without hashes: {unhashed}"


def test_the_service_installs_what_the_tests_run() -> None:
    serve, test = _pins("serve.txt"), _pins("test.txt")
    differ = {name: (pin, test.get(name)) for name, pin in serve.items() if test.get(name) != pin}
    assert not differ, f"requirements/serve.txt differs from test.txt: {differ}"
