"""``drafts simulate OUT``: write a synthetic observation and its truth table."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from drafts_ops.core.errors import ParameterError

_RFI_HELP = (
    "inject RFI: KIND[:COUNT[:STRENGTH]] with KIND persistent, impulsive or drifting "
    "(repeatable; STRENGTH in noise rms), or 'all' for one of each"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="write a synthetic filterbank with bursts and RFI (plus OUT.truth.csv)",
        description=(
            "Simulate an observation: Gaussian noise with a bandpass quantised to NBITS, "
            "dispersed bursts of given S/N (matched-filter S/N of the best dedispersed "
            "boxcar), RFI. Writes a SIGPROC .fil and OUT.truth.csv beside it. Burst options "
            "take one value per burst (a single value applies to all)."
        ),
    )
    p.add_argument("out", type=Path, metavar="OUT", help="output .fil file")
    p.add_argument("--demo", action="store_true", help="the standard demo observation")
    obs = p.add_argument_group("observation")
    obs.add_argument("--nchans", type=int, default=256, help="channels (default 256)")
    obs.add_argument(
        "--fch1", type=float, help="first channel, MHz (default: 1200-1500 MHz band, top first)"
    )
    obs.add_argument("--foff", type=float, help="channel step, MHz (default -300 / nchans)")
    obs.add_argument(
        "--tsamp", type=float, default=512e-6, help="sampling time, s (default 512e-6)"
    )
    obs.add_argument(
        "--nbits", type=int, default=8, help="bits per sample: 1, 2, 4, 8, 16 or 32 (default 8)"
    )
    obs.add_argument("--duration", type=float, default=8.0, help="length, s (default 8)")
    obs.add_argument(
        "--bandpass",
        choices=("smooth", "flat"),
        default="smooth",
        help="bandpass shape (default smooth)",
    )
    obs.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    burst = p.add_argument_group("bursts")
    burst.add_argument("--dm", type=float, nargs="+", help="DM of each burst, pc cm^-3")
    burst.add_argument(
        "--snr", type=float, nargs="+", default=[15.0], help="target S/N (default 15)"
    )
    burst.add_argument(
        "--width", type=float, nargs="+", default=[1e-3], help="FWHM, s (default 1e-3)"
    )
    burst.add_argument(
        "--burst-time", type=float, nargs="+", help="arrival at the band top, s (default spread)"
    )
    burst.add_argument(
        "--scattering",
        type=float,
        nargs="+",
        default=[0.0],
        help="scattering time at the band top, s (default 0)",
    )
    burst.add_argument(
        "--spectral-index",
        type=float,
        nargs="+",
        default=[0.0],
        help="power-law spectral index (default 0)",
    )
    burst.add_argument("--n-bursts", type=int, help="add N random bursts (DM 50-1000, S/N 8-30)")
    p.add_argument("--rfi", action="append", default=[], metavar="SPEC", help=_RFI_HELP)
    p.add_argument("--beams", default=None, metavar="LAYOUT",
                   help="write one file per beam of LAYOUT (fast19, parkes13 or a YAML file): "
                   "OUT_M01_0001.fil ..., independent noise, the same RFI in every beam, "
                   "each burst at --beam-position in the beams' Gaussian responses")  # fmt: skip
    p.add_argument("--beam-position", type=float, nargs=2, action="append", default=None,
                   metavar=("X", "Y"), help="sky position of a burst in units of the beam "
                   "spacing (one per burst; default the centre of beam 1)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)


def parse_rfi(texts: list[str]) -> tuple:
    """``KIND[:COUNT[:STRENGTH]]`` strings → RFISpec tuple."""
    # lazy: keeps drafts --help fast
    from drafts_ops.simulate.rfi import RFI_KINDS, RFISpec

    specs = []
    for text in texts:
        if text == "all":
            specs.extend(RFISpec(kind=k) for k in RFI_KINDS)
            continue
        kind, *rest = text.split(":")
        if kind not in RFI_KINDS or len(rest) > 2:
            raise ParameterError(
                f"--rfi {text!r}: expected KIND[:COUNT[:STRENGTH]], KIND in {RFI_KINDS}"
            )
        try:
            count = int(rest[0]) if rest else 1
            strength = float(rest[1]) if len(rest) > 1 else 5.0
        except ValueError:
            raise ParameterError(
                f"--rfi {text!r}: COUNT must be an integer, STRENGTH a number"
            ) from None
        specs.append(RFISpec(kind=kind, count=count, strength=strength))
    return tuple(specs)


def _per_burst(name: str, values: list[float] | None, n: int) -> list[float | None]:
    if values is None:
        return [None] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ParameterError(f"--{name} has {len(values)} values for {n} bursts")
    return values


def explicit_bursts(args: argparse.Namespace, tobs: float) -> tuple:
    """Bursts from --dm/--snr/--width/...; one default burst when neither --dm nor
    --n-bursts is given."""
    # lazy: keeps drafts --help fast
    from drafts_ops.simulate.burst import BurstSpec

    dms = args.dm
    if dms is None:
        if args.n_bursts is not None:
            return ()
        dms = [300.0]
    n = len(dms)
    times = _per_burst("burst-time", args.burst_time, n)
    columns = zip(
        dms,
        _per_burst("snr", args.snr, n),
        _per_burst("width", args.width, n),
        _per_burst("scattering", args.scattering, n),
        _per_burst("spectral-index", args.spectral_index, n),
        times,
        strict=True,
    )
    return tuple(
        BurstSpec(
            t_s=round((i + 1) * tobs / (n + 3), 3) if t is None else t,
            dm=dm,
            snr=snr,
            width_s=width,
            scattering_s=tau,
            spectral_index=index,
        )
        for i, (dm, snr, width, tau, index, t) in enumerate(columns)
    )


def build_config(args: argparse.Namespace):
    """The SimulationConfig the arguments describe."""
    # lazy: keeps drafts --help fast
    import dataclasses

    import numpy as np

    from drafts_ops.simulate.config import SimulationConfig, demo_config, random_bursts

    if args.demo:
        return demo_config()
    foff = -300.0 / max(args.nchans, 1) if args.foff is None else args.foff
    fch1 = (
        (1500.0 - abs(foff) / 2 if foff < 0 else 1200.0 + foff / 2)
        if args.fch1 is None
        else args.fch1
    )
    config = SimulationConfig(
        nchans=args.nchans,
        fch1=fch1,
        foff=foff,
        tsamp=args.tsamp,
        nbits=args.nbits,
        duration_s=args.duration,
        bandpass=args.bandpass,
        seed=args.seed,
        rfi=parse_rfi(args.rfi),
    )
    header = config.header()
    bursts = explicit_bursts(args, header.tobs)
    if args.n_bursts:
        rng = np.random.default_rng([args.seed, 2])
        bursts += random_bursts(args.n_bursts, header, rng)
    return dataclasses.replace(config, bursts=bursts)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.simulate.observation import write_simulation
    from drafts_ops.simulate.truth import truth_path

    config = build_config(args)
    header = config.header()
    if args.beams:
        return _run_multibeam(args, config)
    t0 = time.perf_counter()
    write_simulation(args.out, config, progress=not args.quiet and sys.stderr.isatty())
    elapsed = time.perf_counter() - t0
    if not args.quiet:
        size = args.out.stat().st_size
        print(
            f"wrote {args.out} ({header.nchans} channels x {header.nsamples} samples, "
            f"{header.nbits}-bit, {size / 1e6:.1f} MB in {elapsed:.1f} s, "
            f"{size / 1e6 / max(elapsed, 1e-9):.0f} MB/s) and {truth_path(args.out)} "
            f"({len(config.bursts)} bursts, "
            f"{sum(s.count for s in config.rfi)} RFI signals)",
            file=sys.stderr,
        )
    return 0


def _run_multibeam(args: argparse.Namespace, config) -> int:
    """``--beams``: one file per beam (see :func:`drafts_ops.simulate.write_multibeam`)."""
    # lazy: keeps drafts --help fast
    from drafts_ops.simulate import write_multibeam
    from drafts_ops.survey.beams import load_layout

    layout = load_layout(args.beams)
    positions = args.beam_position or [list(layout.positions[layout.beams[0]])]
    positions = _per_burst("beam-position", positions, len(config.bursts))
    sources = [(b, float(x), float(y)) for b, (x, y) in zip(config.bursts, positions,
                                                                strict=True)]  # fmt: skip
    stem = args.out.name.removesuffix(args.out.suffix)
    files = write_multibeam(args.out.parent, config, layout, sources, stem=stem)
    if not args.quiet:
        print(f"wrote {len(files)} beams {args.out.parent / stem}_M01..M{max(files):02d}_0001.fil "
              f"and {args.out.parent / stem}.beams.json", file=sys.stderr)  # fmt: skip
    return 0
