"""Options models: one declaration per option (type, default, bounds, unit, help, group).

A model is a frozen pydantic model whose fields are declared with :func:`option`; the same
declaration validates the Python API, builds the command line
(:func:`drafts_ops.cli.options.add_option_arguments`), validates flow parameters and
deployment files, is documented on the docs site and is recorded in ``perf.json``.
Constructing a model with bad values raises
:class:`~drafts_ops.core.errors.OptionError`, one of the project's errors.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drafts_ops.core.errors import OptionError

#: The groups options are listed in, in ``--help`` order, with their titles.
GROUPS: dict[str, str] = {
    "input": "input",
    "dm-plan": "DM plan and dedispersion",
    "rfi": "RFI and normalisation",
    "detection": "detection",
    "products": "products",
    "execution": "execution",
    "survey": "survey",
}


def option(default: Any, group: str, help: str, *, unit: str | None = None, **bounds: Any) -> Any:
    """A model field: ``default``, its ``group`` (:data:`GROUPS`), a one-line ``help``, its
    ``unit`` and pydantic ``bounds`` (``ge``, ``gt``, ``le``, ``lt``)."""
    if group not in GROUPS:
        raise KeyError(f"unknown option group {group!r}")
    extra = {"group": group, **({"unit": unit} if unit else {})}
    return Field(default, description=help, json_schema_extra=extra, **bounds)


def field_group(info: Any) -> str:
    """The group of a field declared with :func:`option`."""
    return (info.json_schema_extra or {}).get("group", "execution")


def field_unit(info: Any) -> str | None:
    """The unit of a field declared with :func:`option` (``None``: dimensionless)."""
    return (info.json_schema_extra or {}).get("unit")


def problems_of(err: ValidationError) -> list[tuple[str, str, object]]:
    """``(option, message, value)`` of each error of a pydantic validation."""
    out = []
    for item in err.errors():
        name = ".".join(str(x) for x in item.get("loc", ()) if not isinstance(x, int))
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        message = message.replace("Input should be", "must be")
        if item.get("type") == "extra_forbidden":
            message = "unknown option"
        out.append((name, message, item.get("input")))
    return out


class Options(BaseModel):
    """Base of the options models: frozen, unknown options refused, errors of the family."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: What the options configure, in error messages ("search", "survey").
    what: ClassVar[str] = "drafts-ops"

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise OptionError(self.what, problems_of(err)) from None

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON-friendly values."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Options:
        """Build from a mapping (a deployment file, a perf.json); unknown keys are refused."""
        return cls(**values)
