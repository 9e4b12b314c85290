"""Every relative link of README.md and docs/*.md resolves: to a file of the checkout and, where
the link names a heading (``page.md#anchor`` or ``#anchor``), to a heading of that page.

Anchors follow GitHub's rule: the heading's text, lower-cased, with every character that is not
a letter, digit, ``_``, ``-`` or space dropped, and spaces turned into ``-``; a repeated anchor
gets ``-1``, ``-2``, ... Links inside fenced code blocks and inline code are not links. The
README must also list every page of ``docs/`` (its "Where the docs are").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.layout import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`(?:[^`\n]|\n(?!\n))*`")  # may wrap, never across a blank line


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (``` or ~~~), blank where a fence is."""
    lines, fence = [], ""
    for line in text.splitlines():
        marker = line.lstrip()[:3]
        if marker in ("```", "~~~") and (not fence or marker == fence):
            fence = "" if fence else marker
            lines.append("")
            continue
        lines.append("" if fence else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: ``Ingest: `POST /v1/traces``` -> ``ingest-post-v1traces``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page``, repeated ones numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link of ``page`` (no scheme, no ``mailto:``); a
    link's text may wrap onto the next lines."""
    text = "\n".join(prose_lines(page.read_text(encoding="utf-8")))
    text = INLINE_CODE.sub(lambda code: re.sub(r"[^\n]", " ", code.group()), text)
    found = []
    for match in LINK.finditer(text):
        target = match.group(1).strip("<>")
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE):
            found.append((text.count("\n", 0, match.start(1)) + 1, target))
    return found


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """One line per link of ``page`` that points at no file, or at no heading of its page."""
    problems = []
    for number, target in links(page):
        path_part, _, anchor = target.partition("#")
        where = (page.parent / path_part).resolve() if path_part else page
        name = f"{page.relative_to(root)}:{number}: {target}"
        if not where.exists():
            problems.append(f"{name}: no file {where}")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            problems.append(f"{name}: no heading #{anchor} in {where.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_the_readme_lists_every_docs_page() -> None:
    listed = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert sorted(pages - listed) == []


def test_the_checker_sees_a_broken_link_and_anchor(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing heading and a good link, in one page."""
    (tmp_path / "other.md").write_text("# Other page\n\n## Ingest: `POST /v1/traces`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#ingest-post-v1traces) [self](#page) [web](https://x.org/a)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) `[code](missing.md)` [a\nwrapped\n"
        "text](other.md)\n\n```\n[in code](missing.md)\n```\n"
    )
    assert [target for _, target in links(page)] == [
        "other.md#ingest-post-v1traces",
        "#page",
        "missing.md",
        "other.md#nowhere",
        "other.md",
    ]
    assert [number for number, _ in links(page)] == [3, 3, 4, 4, 6]
    assert [problem.split(": ", 2)[:2] for problem in broken(page, tmp_path)] == [
        ["page.md:4", "missing.md"],
        ["page.md:4", "other.md#nowhere"],
    ]
    assert anchors(tmp_path / "other.md") == {"other-page", "ingest-post-v1traces"}
    assert slug("The SQL interface: views `ett_v1_*` (migration 0002)") == (
        "the-sql-interface-views-ett_v1_-migration-0002"
    )
