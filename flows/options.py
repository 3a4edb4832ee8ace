"""Flow parameters: frozen pydantic models that validate inputs and build the CLI options.

Each field's type is the one source of its allowed values: a ``Literal`` becomes the
command-line ``choices``, its ``description`` the ``--help`` text. :meth:`SearchOptions.config`
turns the options into the science side's search configuration.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drafts_ops.searchrun import pipeline

DedispMode = Literal["prototype", "production"]
Algorithm = Literal["brute", "fdmt", "subband"]
Detector = Literal["classical", "ml", "both"]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one ``--option`` per field (defaults ``None``: unset options keep the model's)."""
        for name, info in cls.model_fields.items():
            flag = "--" + name.replace("_", "-")
            kind, choices = _cli_type(info.annotation)
            help_text = f"{info.description} (default: {info.default})"
            if kind is bool:
                parser.add_argument(
                    flag,
                    dest=name,
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=help_text,
                )
            else:
                parser.add_argument(
                    flag, dest=name, type=kind, choices=choices, default=None, help=help_text
                )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> _Options:
        """Options from parsed arguments; fields not given on the command line keep defaults."""
        given = {
            k: getattr(args, k) for k in cls.model_fields if getattr(args, k, None) is not None
        }
        return cls(**given)


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


class SearchOptions(_Options):
    """Parameters of a search of one observation (DM in pc cm^-3, sizes in samples)."""

    dedisp_mode: DedispMode = Field(
        "production", description="dedispersion: direct-launched kernel or packaged operator"
    )
    algorithm: Algorithm = Field("brute", description="dedispersion algorithm")
    detector: Detector = Field("classical", description="matched filter, neural detector or both")
    dm_min: float = Field(0.0, ge=0, description="lowest DM trial, pc cm^-3")
    dm_max: float = Field(1000.0, ge=0, description="highest DM trial, pc cm^-3")
    dm_step: float | None = Field(
        None, gt=0, description="fixed DM step, pc cm^-3; unset: tolerance rule"
    )
    dm_tol: float = Field(1.25, gt=1, description="DM-trial tolerance (smearing growth factor)")
    block_size: int = Field(16384, gt=0, description="samples per dedispersion block")
    snr_threshold: float = Field(7.0, gt=0, description="S/N threshold of the classical search")
    max_workers: int = Field(2, ge=1, le=64, description="blocks searched concurrently")
    trace_memory: bool = Field(False, description="tracemalloc peaks per stage in perf.json")

    @model_validator(mode="after")
    def _dm_range(self) -> SearchOptions:
        if self.dm_max < self.dm_min:
            raise ValueError(f"dm_max {self.dm_max} < dm_min {self.dm_min}")
        return self

    def config(self) -> pipeline.SearchConfig:
        """The science side's search configuration for these options."""
        names = pipeline.SearchConfig.__dataclass_fields__
        return pipeline.SearchConfig(**{k: v for k, v in self.model_dump().items() if k in names})


class SurveyOptions(_Options):
    """Parameters of a survey run over a directory of observations."""

    pattern: str = Field("*.fil", description="glob of observation files in the directory")
    max_files: int = Field(2, ge=1, le=64, description="observations searched concurrently")
