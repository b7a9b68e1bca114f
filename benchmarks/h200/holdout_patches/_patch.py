"""The one edit every hold-out patch makes: replace an anchor that must occur exactly once in a FlagGems source.

Imported by the patch scripts beside it (they run from the trimmed tree's root; their own folder is on sys.path).
"""

from pathlib import Path


def replace_once(path: str, anchor: str, new: str, *, where: str) -> None:
    """Replace ``anchor`` in ``path`` by ``new``; stop with a message naming ``where`` unless it occurs once."""
    p = Path(path)
    src = p.read_text()
    assert src.count(anchor) == 1, f"{p.name} changed upstream: {where} is not where it was"
    p.write_text(src.replace(anchor, new))
