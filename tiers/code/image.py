"""Builds the default sandbox image offline: debootstrap a minimal Debian and `docker import` it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

IMAGE_LABEL = "verifier-service.sandbox-image"
SANDBOX_UID = 1000
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"
PACKAGES = ("python3-minimal", "python3-pytest")

# Dropped from the rootfs to keep the image small; nothing at run time needs them.
_TRIM = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "var/log",
)


class ImageBuildError(RuntimeError):
    """The sandbox image could not be built; the message says which step failed and why."""


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt is configured with (deb822 or one-line format), else the default."""
    candidates: list[Path] = []
    if (sources_dir / "sources.list").is_file():
        candidates.append(sources_dir / "sources.list")
    listing = sources_dir / "sources.list.d"
    if listing.is_dir():
        candidates.extend(sorted(listing.glob("*.sources")) + sorted(listing.glob("*.list")))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            match = re.match(r"^URIs:\s*(\S+)", line) or re.match(
                r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", line
            )
            if match and "security" not in match.group(1) and "/debian" in match.group(1):
                return match.group(1).rstrip("/")
    return DEFAULT_MIRROR


def image_exists(client: Any, tag: str) -> bool:
    """Whether the engine behind `client` has an image called `tag`."""
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _add_sandbox_user(rootfs: Path) -> None:
    """A non-root user and group the containers run as (uid/gid SANDBOX_UID)."""
    passwd = rootfs / "etc" / "passwd"
    group = rootfs / "etc" / "group"
    if f":{SANDBOX_UID}:" not in passwd.read_text():
        with passwd.open("a") as fh:
            fh.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/work:/usr/sbin/nologin\n")
    if f":{SANDBOX_UID}:" not in group.read_text():
        with group.open("a") as fh:
            fh.write(f"sandbox:x:{SANDBOX_UID}:\n")
    work = rootfs / "work"
    work.mkdir(exist_ok=True)
    os.chown(work, SANDBOX_UID, SANDBOX_UID)


def build_image(
    client: Any,
    tag: str,
    *,
    mirror: str | None = None,
    suite: str = DEFAULT_SUITE,
    log: Callable[[str], None] = print,
    packages: Sequence[str] = PACKAGES,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Build `tag` from Debian packages (no registry needed) and return the image id.

    `packages` are installed on top of a minimal Debian (a language family's toolchain, see
    tiers.code.languages); `labels` are added to the image. Needs root (debootstrap) and the
    `debootstrap` and `tar` programs.
    """
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageBuildError(
            "debootstrap is not installed; run `apt-get install -y debootstrap` "
            "(or build docker/sandbox.Dockerfile where base images can be pulled)"
        )
    mirror = mirror or apt_mirror()
    with tempfile.TemporaryDirectory(prefix="verifier-sandbox-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap {suite} from {mirror} with {', '.join(packages)} (a minute or more)...")
        cmd = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(packages)}",
            suite,
            str(rootfs),
            mirror,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise ImageBuildError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
        for rel in _TRIM:
            target = rootfs / rel
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir(parents=True)
        _add_sandbox_user(rootfs)
        tarball = Path(tmp) / "rootfs.tar"
        log("packing the root filesystem...")
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], check=True
        )
        repository, _, version = tag.rpartition(":") if ":" in tag else (tag, "", "latest")
        if "/" in version:  # a registry port, not a tag: "host:5000/name"
            repository, version = tag, "latest"
        log(f"importing as {repository}:{version}...")
        changes = [
            f"LABEL {IMAGE_LABEL}=1",
            *(f"LABEL {key}={value}" for key, value in (labels or {}).items()),
            f"USER {SANDBOX_UID}:{SANDBOX_UID}",
            "WORKDIR /work",
            "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/work LANG=C.UTF-8",
            'CMD ["sleep", "infinity"]',
        ]
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=version, changes=changes
        )
    image = client.images.get(f"{repository}:{version}")
    image_id: str = image.id
    log(f"built {repository}:{version} ({image_id[:19]}, {image.attrs['Size'] / 1e6:.0f} MB)")
    return image_id
