"""Command-line options built from an options model (:mod:`drafts_ops.core.options`): one
``--flag`` per field, in argument groups by purpose, with the field's help, unit, bounds
and default; and the model back from the parsed arguments."""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Literal

from drafts_ops.core.options import GROUPS, Options, field_group, field_unit


def _cli_type(annotation: Any) -> tuple[Any, list[Any] | None]:
    """argparse ``type`` and ``choices`` for a field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _cli_type(args[0])
    if origin is Literal:
        choices = list(typing.get_args(annotation))
        return type(choices[0]), choices
    return annotation, None


def _help(info: Any) -> str:
    """The field's help with its unit and default (``%`` escaped for argparse)."""
    text = (info.description or "").replace("%", "%%")
    unit = field_unit(info)
    if unit:
        text += f" [{unit}]"
    if info.default is not None and info.default != ():
        text += f" (default: {info.default})"
    return text


def option_groups(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """An argument group of ``parser`` for each of :data:`GROUPS`, in order (for the
    arguments a command adds itself, e.g. its input files)."""
    return {name: parser.add_argument_group(title) for name, title in GROUPS.items()}


def add_option_arguments(
    parser: argparse.ArgumentParser, model: type[Options],
    groups: dict[str, argparse._ArgumentGroup] | None = None,
) -> dict[str, argparse._ArgumentGroup]:  # fmt: skip
    """Add one ``--option`` per field of ``model`` to its group (defaults ``None``: options
    not given keep the model's defaults); returns the groups."""
    groups = groups if groups is not None else option_groups(parser)
    for name, info in model.model_fields.items():
        flag = "--" + name.replace("_", "-")
        kind, choices = _cli_type(info.annotation)
        where = groups[field_group(info)]
        if typing.get_origin(info.annotation) is tuple:
            item = typing.get_args(info.annotation)[0]
            where.add_argument(flag, dest=name, type=item, nargs="*", default=None,
                               metavar=name.split("_")[-1].upper(), help=_help(info))  # fmt: skip
        elif kind is bool:
            where.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction,
                               default=None, help=_help(info))  # fmt: skip
        else:
            where.add_argument(flag, dest=name, type=kind, choices=choices, default=None,
                               metavar=name.upper() if choices is None else None,
                               help=_help(info))  # fmt: skip
    return groups


def options_from_args(model: type[Options], args: argparse.Namespace) -> Options:
    """``model`` from parsed arguments; fields not given on the command line keep defaults."""
    given = {k: getattr(args, k) for k in model.model_fields if getattr(args, k, None) is not None}
    return model(**given)


def options_table(model: type[Options]) -> str:
    """Every option of ``model`` as markdown tables, one per group (the docs' reference)."""
    out = []
    for group, title in GROUPS.items():
        rows = [(n, i) for n, i in model.model_fields.items() if field_group(i) == group]
        if not rows:
            continue
        out += [f"### {title[0].upper()}{title[1:]}", "", "| option | default | unit | meaning |",
                "|---|---|---|---|"]  # fmt: skip
        for name, info in rows:
            default = "" if info.default is None else f"`{info.default}`"
            out.append(f"| `--{name.replace('_', '-')}` | {default} | "
                       f"{field_unit(info) or ''} | {info.description} |")  # fmt: skip
        out.append("")
    return "\n".join(out)
