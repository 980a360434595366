"""What the Dockerfile and compose pull is pinned (issue 35): every image by digest, every Debian
package by version, so that a rebuild next month installs what was tested.

The digests come from public sources (docs/scaling.md lists them); no registry answers here, so
they are checked for form only. The Debian versions are checked against this machine's apt when
it runs the same Debian release as the base image (`apt-cache policy`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PINNED = re.compile(r"^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$")
# The fleet's own image: built from the Dockerfile by compose (`build:`), tagged by the release.
OWN = "jobfleet:latest"


def base_images() -> list[str]:
    return re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.M)


def apt_packages() -> list[str]:
    """The arguments of every `apt-get install` of the Dockerfile (continuation lines joined)."""
    joined = DOCKERFILE.replace("\\\n", " ")
    found: list[str] = []
    for command in re.findall(r"apt-get install ([^&\n]+)", joined):
        found += [word for word in command.split() if not word.startswith("-")]
    return found


def test_the_base_image_is_pinned_by_digest_on_a_named_debian_release() -> None:
    images = base_images()
    assert images
    for image in images:
        assert PINNED.match(image), f"FROM {image}: pin it by digest (name:tag@sha256:...)"
        # The tag names the Debian release, which the package versions below belong to.
        assert re.search(r":[^@]*-(bookworm|trixie)@", image), image


def test_every_debian_package_is_pinned_by_version() -> None:
    packages = apt_packages()
    assert packages
    unpinned = [p for p in packages if not re.fullmatch(r"[a-z0-9.+-]+=[A-Za-z0-9.+:~-]+", p)]
    assert not unpinned, f"apt-get install without a version: {unpinned}"


def test_every_compose_image_is_pinned_by_digest() -> None:
    compose = yaml.safe_load((ROOT / "compose" / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        image = service.get("image")
        if image is None or image == OWN:
            continue  # built here from the Dockerfile
        assert PINNED.match(image), f"service {name}: image {image} is not pinned by digest"


def _codename() -> str | None:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    found = re.search(r"^VERSION_CODENAME=(\S+)", text, re.M)
    return found.group(1) if found else None


def test_the_pinned_debian_versions_exist_in_the_base_images_release() -> None:
    (image,) = base_images()
    release = re.search(r"-(bookworm|trixie)@", image)
    assert release
    if shutil.which("apt-cache") is None or _codename() != release.group(1):
        pytest.skip(f"this machine's apt is not Debian {release.group(1)}'s")
    pinned = dict(package.split("=", 1) for package in apt_packages())
    # One `apt-cache policy` for every package (one each took ~5 s on a loaded machine).
    policy = subprocess.run(
        ["apt-cache", "policy", *pinned], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    sections = dict(re.findall(r"^(\S+):\n((?:\s.*\n?)*)", policy, re.M))
    for name, version in pinned.items():
        versions = sections.get(name, "")
        assert re.search(rf"^\s+(\*\*\* )?{re.escape(version)} ", versions, re.M), (
            f"{name} {version} is not in this machine's {release.group(1)} apt:\n{versions}"
        )
