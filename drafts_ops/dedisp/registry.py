"""The operator registry: every dedispersion implementation, by name, with its contract.

An :class:`OperatorSpec` declares what an operator consumes and produces (a
:class:`TensorSpec` per input/output), how the output shape and dtype follow from the
input (``infer_shape``, ``infer_dtype``, which raise :class:`OperatorError` with a clear
message for a wrong rank, a channel-count mismatch, too few samples for the maximum delay
or an unsupported dtype), its mode (``prototype`` / ``production``), algorithm and
backend, and the function that runs it. :func:`describe` lists them. The flows reach
dedispersion only through :func:`drafts_ops.dedisp.operator.dedisperse`, which looks
operators up here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp.modes import ALGORITHMS, BACKENDS, MODES, Algorithm, Backend, Mode

__all__ = ["ALGORITHMS", "BACKENDS", "MODES", "Algorithm", "Backend", "Mode", "OperatorSpec"]

#: Input dtypes the kernels consume directly (1-8 bit data arrive unpacked as uint8).
SUPPORTED_DTYPES: tuple[str, ...] = ("uint8", "uint16", "float32")


@dataclass(frozen=True)
class TensorSpec:
    """One operator input or output: name, dimension names and allowed dtypes."""

    name: str
    dims: tuple[str, ...]
    dtypes: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}[{', '.join(self.dims)}] {'|'.join(self.dtypes)}"


DATA_SPEC = TensorSpec("data", ("[nbatch]", "nchan", "nsamp"), SUPPORTED_DTYPES)
OUT_SPEC = TensorSpec("dm_time", ("[nbatch]", "ndm", "nsamp - max_delay"), ("float32",))


def infer_dtype(dtype: np.dtype | str) -> np.dtype:
    """Output dtype (float32) for an input dtype, or OperatorError when unsupported."""
    dtype = np.dtype(dtype)
    if dtype.name not in SUPPORTED_DTYPES:
        raise OperatorError(
            f"unsupported input dtype {dtype}: dedispersion takes "
            f"{', '.join(SUPPORTED_DTYPES)} (convert other data to float32)"
        )
    return np.dtype(np.float32)


def infer_shape(shape: tuple[int, ...], plan) -> tuple[int, ...]:
    """Output shape for input ``shape`` ``[nchan, nsamp]`` or ``[nbatch, nchan, nsamp]``."""
    shape = tuple(int(n) for n in shape)
    if len(shape) not in (2, 3):
        raise OperatorError(
            f"input has rank {len(shape)} (shape {shape}); expected [nchan, nsamp] or "
            "[nbatch, nchan, nsamp]"
        )
    nchan, nsamp = shape[-2:]
    if nchan != plan.nchan:
        raise OperatorError(f"input has {nchan} channels but the DM plan has {plan.nchan}")
    if nsamp <= plan.max_delay:
        raise OperatorError(
            f"input has {nsamp} samples, not more than the maximum delay {plan.max_delay} "
            f"of the DM plan (DM up to {plan.dms[-1]:g} pc cm^-3): no output sample"
        )
    return (*shape[:-2], plan.ndm, nsamp - plan.max_delay)


#: ``run(data3 [nbatch, nchan, nsamp], plan, out3 [nbatch, ndm, nout], ctx) -> None``
RunFn = Callable[..., None]


@dataclass(frozen=True)
class OperatorSpec:
    """A registered dedispersion operator."""

    mode: str
    algorithm: str
    backend: str
    run: RunFn
    description: str
    available: Callable[[], bool] = lambda: True
    inputs: tuple[TensorSpec, ...] = (DATA_SPEC,)
    outputs: tuple[TensorSpec, ...] = (OUT_SPEC,)

    @property
    def name(self) -> str:
        return f"dedisperse/{self.mode}/{self.algorithm}/{self.backend}"

    def infer_shape(self, shape: tuple[int, ...], plan) -> tuple[int, ...]:
        return infer_shape(shape, plan)

    def infer_dtype(self, dtype: np.dtype | str) -> np.dtype:
        return infer_dtype(dtype)


_REGISTRY: dict[tuple[str, str, str], OperatorSpec] = {}


def register(spec: OperatorSpec, *, replace: bool = False) -> OperatorSpec:
    """Add an operator; re-registering a key needs ``replace=True``."""
    for value, allowed, what in (
        (spec.mode, MODES, "mode"),
        (spec.algorithm, ALGORITHMS, "algorithm"),
        (spec.backend, BACKENDS, "backend"),
    ):
        if value not in allowed:
            raise OperatorError(f"unknown {what} {value!r}; choose from {', '.join(allowed)}")
    key = (spec.mode, spec.algorithm, spec.backend)
    if key in _REGISTRY and not replace:
        raise OperatorError(f"operator {spec.name} is already registered")
    _REGISTRY[key] = spec
    return spec


def get_operator(mode: str, algorithm: str, backend: str) -> OperatorSpec:
    """The registered operator, or OperatorError listing what exists."""
    spec = _REGISTRY.get((mode, algorithm, backend))
    if spec is None:
        known = ", ".join(sorted(s.name for s in _REGISTRY.values()))
        raise OperatorError(
            f"no dedispersion operator for mode={mode!r}, algorithm={algorithm!r}, "
            f"backend={backend!r}; registered: {known}"
        )
    if not spec.available():
        raise OperatorError(f"operator {spec.name} is not available on this machine")
    return spec


def operators() -> list[OperatorSpec]:
    """All registered operators, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda s: s.name)


def describe() -> str:
    """A readable table of the registered operators and their contracts."""
    lines = ["dedispersion operators:"]
    for spec in operators():
        state = "available" if spec.available() else "unavailable here"
        lines.append(f"  {spec.name:<38} {state}")
        lines.append(f"      {spec.description}")
        lines.append(
            f"      in: {', '.join(map(str, spec.inputs))}; "
            f"out: {', '.join(map(str, spec.outputs))}"
        )
    return "\n".join(lines)
