"""The survey setups every measurement uses: one home for FAST-like, FAST raw, GBT-like.

``drafts bench search``, ``drafts evaluate search`` and the classifier's training data
(:mod:`drafts_ops.training.harvest`) all simulate these bands and search them with the
decimation a survey would use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s


@dataclass(frozen=True)
class SurveyBand:
    """A receiver setup: ``nchans`` channels down from ``fch1`` (MHz) by ``foff`` (MHz),
    sampled every ``tsamp`` s, searched after ``time_decimation`` x ``freq_decimation``."""

    name: str
    nchans: int
    fch1: float
    foff: float
    tsamp: float
    time_decimation: int = 1
    freq_decimation: int = 1

    @property
    def fmax(self) -> float:
        """Highest channel frequency, MHz."""
        return max(self.fch1, self.fch1 + self.foff * (self.nchans - 1))

    @property
    def fmin(self) -> float:
        """Lowest channel frequency, MHz."""
        return min(self.fch1, self.fch1 + self.foff * (self.nchans - 1))

    def sweep_s(self, dm: float) -> float:
        """Dispersion delay across the band at ``dm`` (pc cm^-3), s."""
        return float(dispersion_delay_s(dm, self.fmin, self.fmax))

    def simulation_fields(self) -> dict[str, Any]:
        """The :class:`~drafts_ops.simulate.SimulationConfig` fields of this band."""
        return {"nchans": self.nchans, "fch1": self.fch1, "foff": self.foff,
                "tsamp": self.tsamp}  # fmt: skip

    def search_options(self) -> dict[str, int]:
        """The :class:`~drafts_ops.search.SearchConfig` decimation of this band."""
        return {"time_decimation": self.time_decimation, "freq_decimation": self.freq_decimation}


#: FAST 1000-1500 MHz (19-beam receiver; 1024 ch as FAST surveys search, 4096 ch raw);
#: GBT-like as ``../shared/data/real/28.fil``; demo-like as ``data/demo.fil``. FAST raw is
#: searched at x8 in time (393 us) and x2 in frequency (2048 channels of 0.24 MHz): wider
#: channels smear a high-DM burst (0.98 MHz channels at x8 f: 7 ms at DM 1700, 1.25 GHz),
#: and at x8 x8 the search found 0.70 of the FAST raw bursts of injected S/N >= 8 of a
#: tuning set (seed 780) against 0.93 at x8 x2, at x1.5 real time instead of x4.4.

SURVEY_BANDS: dict[str, SurveyBand] = {
    "fast": SurveyBand("fast", 1024, 1500.0 - 500.0 / 2048, -500.0 / 1024, 196.608e-6),
    "fast-raw": SurveyBand("fast-raw", 4096, 1500.0 - 500.0 / 8192, -500.0 / 4096, 49.152e-6,
                           time_decimation=8, freq_decimation=2),
    "gbt": SurveyBand("gbt", 336, 1465.0, -1.0, 1.26646875e-3),
    "demo": SurveyBand("demo", 256, 1499.4140625, -1.171875, 512e-6),
}  # fmt: skip


def survey_band(name: str) -> SurveyBand:
    """The band called ``name`` (a key of :data:`SURVEY_BANDS`)."""
    try:
        return SURVEY_BANDS[name]
    except KeyError:
        raise ParameterError(f"unknown band {name!r}; known: {', '.join(SURVEY_BANDS)}") from None
