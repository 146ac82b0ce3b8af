"""The documentation site builds with mkdocs-material in strict mode: a page left out of the
navigation, a link to a page that does not exist or to a missing anchor fails the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
         "-d", str(site)],
        capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1",
                                                            "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_the_docs_site_builds_and_every_page_is_in_it(tmp_path: Path) -> None:
    built = _build(REPO, tmp_path / "site")
    assert built.returncode == 0, built.stderr[-3000:]
    pages = {p.stem for p in (REPO / "docs").glob("*.md")}
    html = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    assert pages - {"index"} <= html
    assert "architecture" in html


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [the old page](no-such-page.md).\n")
    built = _build(copy, tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr
