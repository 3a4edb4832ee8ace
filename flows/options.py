"""Flow parameters: frozen pydantic models that validate inputs and build the CLI options.

Each field's type is the one source of its allowed values: a ``Literal`` becomes the
command-line ``choices``, its ``description`` the ``--help`` text. :meth:`SearchOptions.config`
turns the options into the science side's search configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drafts_ops import search
from drafts_ops.dedisp.modes import Backend, Mode
from drafts_ops.dedisp.registry import Algorithm
from drafts_ops.detect.preprocess import NormMethod
from drafts_ops.search import Detector

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(search.SearchConfig)}


def _default(name: str) -> Any:
    """The science side's default of a search option (one source of defaults)."""
    return _DEFAULTS[name]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one ``--option`` per field (defaults ``None``: unset options keep the model's)."""
        for name, info in cls.model_fields.items():
            flag = "--" + name.replace("_", "-")
            kind, choices = _cli_type(info.annotation)
            help_text = info.description
            if info.default is not None:
                help_text += f" (default: {info.default})"
            if typing.get_origin(info.annotation) is tuple:
                item = typing.get_args(info.annotation)[0]
                metavar = name.split("_")[-1].upper()
                parser.add_argument(flag, dest=name, type=item, nargs="*", default=None,
                                    metavar=metavar, help=help_text)  # fmt: skip
            elif kind is bool:
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
    """Parameters of a search of one observation (DM in pc cm^-3, sizes in samples).

    Fields other than ``max_workers`` and ``trace_memory`` are those of
    :class:`drafts_ops.search.SearchConfig`, with its defaults.
    """

    dedisp_mode: Mode = Field(
        _default("dedisp_mode"), description="direct-launched kernel or packaged operator"
    )
    algorithm: Algorithm = Field(_default("algorithm"), description="dedispersion algorithm")
    backend: Backend = Field(_default("backend"), description="where dedispersion runs")
    detector: Detector = Field(
        _default("detector"), description="boxcar search, neural detector, or both"
    )
    dm_min: float = Field(_default("dm_min"), ge=0, description="lowest DM trial, pc cm^-3")
    dm_max: float = Field(_default("dm_max"), ge=0, description="highest DM trial, pc cm^-3")
    dm_step: float | None = Field(
        _default("dm_step"), gt=0, description="fixed DM step, pc cm^-3 (unset: tolerance rule)"
    )
    dm_tol: float = Field(_default("dm_tol"), gt=1, description="DM-trial tolerance factor")
    block_size: int | None = Field(
        _default("block_size"), gt=0, description="samples per block (default: from the budget)"
    )
    memory_budget_mib: float = Field(
        _default("memory_budget_mib"), ge=64, description="memory for block buffers, MiB"
    )
    snr_threshold: float = Field(_default("snr_threshold"), gt=0, description="boxcar S/N cut")
    max_width_samples: int = Field(
        _default("max_width_samples"), ge=1, description="widest boxcar, samples"
    )
    search_subbands: int = Field(
        _default("search_subbands"), ge=1, le=64,
        description="also search this many sub-bands on their own (band-limited bursts; "
        "threshold raised for the extra trials; 1: full band only)",
    )  # fmt: skip
    detector_subbands: int = Field(
        _default("detector_subbands"), ge=1, le=64,
        description="the neural detector also sees this many sub-bands' DM-time data and "
        "keeps its peaks at their sub-band S/N (band-limited bursts; no extra network "
        "pass; 1: full band only)",
    )  # fmt: skip
    zero_dm: bool = Field(_default("zero_dm"), description="subtract the zero-DM series")
    clip_pixels: float = Field(
        _default("clip_pixels"),
        ge=0,
        description="hold normalised samples within this many sigmas (0: off; held "
        "samples go to the sub-band kernel as 8-bit integers, 2x faster)",
    )
    clip_impulses: float = Field(
        _default("clip_impulses"),
        ge=0,
        description="blank broadband impulses above this many "
        "sigmas of the zero-DM series (0: off)",
    )
    auto_mask: bool = Field(_default("auto_mask"), description="mask outlier channels")
    time_decimation: int = Field(_default("time_decimation"), ge=1, description="samples averaged")
    freq_decimation: int = Field(_default("freq_decimation"), ge=1, description="channels averaged")
    classify: bool = Field(
        _default("classify"), description="score candidates with the burst classifier"
    )
    decimate: bool = Field(
        _default("decimate"),
        description="per-DM time decimation, Heimdall/DDplan rule (production mode only)",
    )
    write_h5: bool = Field(_default("write_h5"), description="write FETCH .h5 candidate files")
    write_plots: bool = Field(_default("write_plots"), description="write candidate PNGs")
    max_outputs: int = Field(
        _default("max_outputs"), ge=0, description="cap on .h5 files and PNGs per observation"
    )
    mask_channels: tuple[int, ...] = Field(
        _default("mask_channels"), description="channels always masked (file order)"
    )
    mask_threshold: float = Field(
        _default("mask_threshold"), gt=0, description="automatic mask threshold, robust sigma"
    )
    norm_method: NormMethod = Field(_default("norm_method"), description="channel noise")
    baseline_s: float = Field(_default("baseline_s"), gt=0, description="baseline window, s")
    time_link: int = Field(_default("time_link"), ge=0, description="clustering link, samples")
    dm_link: int = Field(_default("dm_link"), ge=0, description="clustering link, DM trials")
    width_link: int = Field(_default("width_link"), ge=0, description="clustering link, log2 w")
    detector_threshold: float = Field(
        _default("detector_threshold"), ge=0, le=1, description="neural detector score cut"
    )
    ml_min_snr: float = Field(
        _default("ml_min_snr"), ge=0, description="boxcar S/N floor of neural detections"
    )
    detector_faint_threshold: float = Field(
        _default("detector_faint_threshold"), ge=0, le=1,
        description="neural detector score needed below the boxcar S/N threshold",
    )  # fmt: skip
    classifier_threshold: float = Field(
        _default("classifier_threshold"), ge=0, le=1,
        description="classifier probability from which a candidate is a burst (is_burst)",
    )  # fmt: skip
    max_workers: int = Field(
        2, ge=1, le=64, description="segments of blocks searched concurrently on Dask"
    )
    trace_memory: bool = Field(False, description="tracemalloc peaks per stage in perf.json")
    keep_intermediates: bool = Field(
        False, description="keep OUT/work (per-segment giants, cutouts) after success"
    )

    @model_validator(mode="after")
    def _dm_range(self) -> SearchOptions:
        if self.dm_max < self.dm_min:
            raise ValueError(f"dm_max {self.dm_max} < dm_min {self.dm_min}")
        return self

    def config(self) -> search.SearchConfig:
        """The science side's search configuration for these options."""
        values = self.model_dump()
        return search.SearchConfig(**{k: v for k, v in values.items() if k in _DEFAULTS})


class SurveyOptions(_Options):
    """Parameters of a survey run over a directory of observations."""

    pattern: str = Field("*.fil", description="glob of observation files in the directory")
    max_files: int = Field(2, ge=1, le=64, description="observations searched concurrently")
    settle_s: float = Field(
        60.0, ge=0, description="seconds a file must be unchanged before it is searched"
    )
    max_attempts: int = Field(
        3, ge=1, le=100, description="searches of a failing file before it is left alone"
    )
    wait: bool = Field(False, description="wait for another survey of --out to finish")
    beams: str | None = Field(
        None,
        description="beam layout (fast19, parkes13 or a YAML file): coincidence "
        "across the beams of each pointing, RFI flagged",
    )
    beam_pattern: str = Field(
        r"M(\d{2})", description="regular expression of the beam number in file names"
    )
    join_files: bool = Field(
        True,
        description="search each file with the files of its beam just before and after "
        "it (headers say they follow without a gap), so that bursts sweeping across a "
        "boundary are found once",
    )
