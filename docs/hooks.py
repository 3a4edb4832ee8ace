"""MkDocs hook: option tables generated from the options models, so the docs cannot
drift from the code. A page writes ``<!-- options: search -->`` (or ``survey``) where the
table belongs."""

from __future__ import annotations

import re

MODELS = {
    "search": ("drafts_ops.search.config", "SearchOptions"),
    "survey": ("drafts_ops.survey.options", "SurveyOptions"),
}


def on_page_markdown(markdown: str, **_: object) -> str:
    import importlib

    from drafts_ops.cli.options import options_table

    def table(match: re.Match[str]) -> str:
        module, name = MODELS[match.group(1)]
        return options_table(getattr(importlib.import_module(module), name))

    return re.sub(r"<!-- options: (\w+) -->", table, markdown)
