"""Reading the docs' Markdown as GitHub and MkDocs do: links, heading anchors, marked blocks."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
EXAMPLE_MARK = "<!-- demo-example -->"


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (a link in a code block is not a link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def links(text: str) -> list[str]:
    """Every link and image target in the prose, inline code left out."""
    found = []
    for line in prose(text):
        found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (and MkDocs' default, for these headings)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown file's headings make."""
    found: set[str] = set()
    for line in prose(path.read_text()):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            name, n = base, 1
            while name in found:
                name, n = f"{base}-{n}", n + 1
            found.add(name)
    return found


def examples(path: Path) -> list[str]:
    """The shell blocks marked as examples to run against the demo, in order."""
    blocks, lines = [], path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() != EXAMPLE_MARK:
            continue
        assert lines[i + 1].strip() == "```sh", f"{path.name}:{i + 2}: a ```sh block must follow"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        blocks.append("\n".join(lines[i + 2 : end]) + "\n")
    return blocks
