"""``MODEL_CARD.md``: the shipped models' card, written by people, with generated figures.

The card's prose is plain markdown. Every figure that a command measures lives in a
section of its own between two markers, which that command rewrites and nothing else
touches::

    <!-- generated: validation (drafts train --evaluate) -->
    ...
    <!-- end generated: validation -->

:data:`SECTIONS` names them and the command that writes each one. The prose refers to
them instead of copying their numbers, so a retrained model or a new evaluation cannot
leave the card contradicting itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import ParameterError
from drafts_ops.core.resources import resource_path

#: The card's file name, beside the models.
CARD_FILE = "MODEL_CARD.md"
#: Generated sections of the card and the command that writes each.
SECTIONS: dict[str, str] = {
    "recipe": "drafts train",
    "training": "drafts train",
    "validation": "drafts train --evaluate",
    "classifier-candidates": "drafts evaluate classifier --card",
    "end-to-end": "drafts evaluate search --card",
    "stale-bands": "drafts train",
}


def _markers(name: str) -> tuple[str, str]:
    if name not in SECTIONS:
        raise ParameterError(f"unknown model-card section {name!r} (one of {sorted(SECTIONS)})")
    return f"<!-- generated: {name} ({SECTIONS[name]}) -->", f"<!-- end generated: {name} -->"


def _pattern(name: str) -> re.Pattern[str]:
    begin, end = _markers(name)
    return re.compile(re.escape(begin) + r"\n(.*?)" + re.escape(end), flags=re.S)


def generated_section(text: str, name: str) -> str | None:
    """The body of section ``name`` in card ``text`` (``None`` when it has no markers)."""
    found = _pattern(name).search(text)
    return found.group(1) if found else None


def with_generated(text: str, name: str, body: str, *, where: str = "model card") -> str:
    """``text`` with section ``name``'s body replaced by ``body``; nothing else changes.

    Raises :class:`~drafts_ops.core.errors.ParameterError` naming ``where`` when the card
    has no markers for the section (a card is never rewritten around its prose).
    """
    if generated_section(text, name) is None:
        begin, end = _markers(name)
        raise ParameterError(f"{where}: no generated section {name!r} (add the lines "
                             f"{begin!r} and {end!r} where it belongs)")  # fmt: skip
    begin, end = _markers(name)
    body = body.rstrip("\n") + "\n" if body.strip() else ""
    return _pattern(name).sub(lambda _: f"{begin}\n{body}{end}", text, count=1)


def card_path(folder: str | Path) -> Path:
    """The card in ``folder``; a copy of the shipped card is put there first when the
    folder has none (a retrained model's folder starts with the shipped card's prose)."""
    card = Path(folder) / CARD_FILE
    if not card.exists():
        card.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(card, resource_path("models", CARD_FILE).read_text(encoding="utf-8"))
    return card


def write_generated(card: str | Path, sections: dict[str, str]) -> Path:
    """Rewrite the given generated sections of the card file ``card`` (atomically)."""
    card = Path(card)
    text = card.read_text(encoding="utf-8")
    for name, body in sections.items():
        text = with_generated(text, name, body, where=str(card))
    return write_text_atomic(card, text)
