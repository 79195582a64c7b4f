"""Grammar in messages: one plural helper, and no counted noun left in the fixed plural."""

from __future__ import annotations

import re
from pathlib import Path

from reelstore.wording import plural

ROOT = Path(__file__).resolve().parents[2]
COUNTED = re.compile(
    r"\{[^{}]+\} (new )?(objects|effects|problems|packs|refs|views|records|reads|drains|operations"
    r"|invariants|entries|files|changes)\b|[a-z]\(s\) (?!for\b)"
)
KEPT = {
    # git's own output format, which scripts parse: `git count-objects` says "1 objects" too.
    "plumbing/count_objects.py": "text = f\"{stats['count']} objects, {stats['size']} kilobytes\"",
    # always two or more.
    "reelstore/backend/object_store.py": "is ambiguous: {len(found)} objects match",
}


def test_plural() -> None:
    assert [plural(n, "object") for n in (0, 1, 2)] == ["0 objects", "1 object", "2 objects"]
    assert plural(1, "reflog entry") == "1 reflog entry" and plural(3, "reflog entry") == "3 reflog entries"
    assert plural(2, "damaged unreachable object") == "2 damaged unreachable objects"
    assert plural(5, "new object") == "5 new objects"


def test_no_message_counts_in_a_fixed_plural() -> None:
    found = []
    for base in ("reelstore", "cli", "porcelain", "plumbing"):
        for path in sorted((ROOT / base).rglob("*.py")):
            if path.is_symlink() or any(p.is_symlink() for p in path.relative_to(ROOT).parents if p != Path(".")):
                continue
            rel = path.relative_to(ROOT).as_posix()
            if rel == "reelstore/wording.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if COUNTED.search(line.replace("http(s)", "")) and not (rel in KEPT and KEPT[rel] in line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "use reelstore.wording.plural:\n" + "\n".join(found)


def test_no_doc_shows_one_of_a_counted_noun_in_the_plural() -> None:
    """The docs show what the commands print, and those count through `plural`: every noun a message
    counts (found in the code's own `plural(…, "NOUN")` calls) never follows a 1 in the plural."""
    nouns = set()
    for base in ("reelstore", "cli", "porcelain", "plumbing"):
        for path in (ROOT / base).rglob("*.py"):
            nouns |= set(re.findall(r"plural\([^,()]+(?:\([^()]*\))?, [\"']([^\"']+)[\"']\)", path.read_text()))
    assert {"effect", "pack", "loose file", "object"} <= nouns
    one = re.compile(r"(?<![\d.,])1 (" + "|".join(re.escape(plural(2, n)[2:]) for n in sorted(nouns)) + r")\b")
    found = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if one.search(line) and "count-objects" not in line and "objects, " not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "a doc shows a count the commands no longer print:\n" + "\n".join(found)
