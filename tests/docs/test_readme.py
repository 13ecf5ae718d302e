"""The README is a front page: short, and every link in it leads somewhere that exists."""

from urllib.parse import unquote, urlsplit

from tests.docs.markdown import ROOT, anchors, links, slug

README = ROOT / "README.md"
MAX_LINES = 200


def test_the_readme_is_at_most_200_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move text into docs/"


def test_every_relative_link_and_anchor_in_the_readme_resolves() -> None:
    targets = [t for t in links(README.read_text()) if not urlsplit(t).scheme]
    assert len(targets) > 20  # positive control: the links were found
    broken = []
    for target in targets:
        parts = urlsplit(target)
        path = (README.parent / unquote(parts.path)).resolve() if parts.path else README
        if not path.exists() or ROOT not in path.parents:
            broken.append(f"{target}: no such file in the repository")
        elif parts.fragment and (path.suffix != ".md" or parts.fragment not in anchors(path)):
            broken.append(f"{target}: no heading in {path.name} makes #{parts.fragment}")
    assert broken == []


def test_anchors_are_made_as_github_makes_them() -> None:
    assert slug("Every event of your account, live: `GET /v1/events/stream`") == (
        "every-event-of-your-account-live-get-v1eventsstream"
    )
    assert slug("The deploy protocol: one order, one VM, one debit") == (
        "the-deploy-protocol-one-order-one-vm-one-debit"
    )
