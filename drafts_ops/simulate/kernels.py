"""Numba kernels of the simulator (they import nothing else from drafts-ops).

Noise is *counter-based*: the standard-normal deviate of element ``i = sample * nchans +
channel`` is a pure function of ``(key, i)`` (a SplitMix64 hash of the counter, mapped
through the inverse normal CDF). Any block can therefore be generated independently, in
parallel, in any order, and the noise under an injected signal can be recomputed exactly:
the signal is added to the *same* deviate before quantisation.

The inverse CDF uses a 65,537-entry table with linear interpolation inside the table cells
(error < 2e-3 sigma in the outermost interpolated cell, < 1e-5 sigma for |z| < 3) and the
exact Wichura AS241 algorithm (the one Python's ``statistics.NormalDist.inv_cdf`` uses) in
the two outermost cells, with 53-bit uniforms, so the tails reach about 8 sigma.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S48 = np.uint64(48)
_S32 = np.uint64(32)
_S11 = np.uint64(11)
_S16 = np.uint64(16)
_LOW16 = np.uint64(0xFFFF)
#: Cells of the inverse-CDF table (16 bits of the hash select the cell).
TABLE_CELLS = 65536
_TAIL_SALT = np.array([0x632BE59BD9B4E019, 0x8CB92BA72F3D8DD7], dtype=np.uint64)


@njit(cache=True, inline="always")
def mix64(z):
    """SplitMix64 finaliser: a bijective 64-bit hash (uint64 → uint64)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True)
def ndtri(p):
    """Inverse standard-normal CDF (Wichura 1988, AS241 PPND16; relative error ~1e-16)."""
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        num = (
            ((((((2.5090809287301226727e3 * r + 3.3430575583588128105e4) * r
                 + 6.7265770927008700853e4) * r + 4.5921953931549871457e4) * r
               + 1.3731693765509461125e4) * r + 1.9715909503065514427e3) * r
             + 1.3314166789178437745e2) * r + 3.3871328727963666080e0
        )
        den = (
            ((((((5.2264952788528545610e3 * r + 2.8729085735721942674e4) * r
                 + 3.9307895800092710610e4) * r + 2.1213794301586595867e4) * r
               + 5.3941960214247511077e3) * r + 6.8718700749205790830e2) * r
             + 4.2313330701600911252e1) * r + 1.0
        )
        return q * num / den
    r = p if q < 0.0 else 1.0 - p
    r = math.sqrt(-math.log(r))
    if r <= 5.0:
        r -= 1.6
        num = (
            ((((((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r
                 + 2.41780725177450611770e-1) * r + 1.27045825245236838258e0) * r
               + 3.64784832476320460504e0) * r + 5.76949722146069140550e0) * r
             + 4.63033784615654529590e0) * r + 1.42343711074968357734e0
        )
        den = (
            ((((((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r
                 + 1.51986665636164571966e-2) * r + 1.48103976427480074590e-1) * r
               + 6.89767334985100004550e-1) * r + 1.67638483018380384940e0) * r
             + 2.05319162663775882187e0) * r + 1.0
        )
    else:
        r -= 5.0
        num = (
            ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r
                 + 1.24266094738807843860e-3) * r + 2.65321895265761230930e-2) * r
               + 2.96560571828504891230e-1) * r + 1.78482653991729133580e0) * r
             + 5.46378491116411436990e0) * r + 6.65790464350110377720e0
        )
        den = (
            ((((((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r
                 + 1.84631831751005468180e-5) * r + 7.86869131145613259100e-4) * r
               + 1.48753612908506148525e-2) * r + 1.36929880922735805310e-1) * r
             + 5.99832206555887937690e-1) * r + 1.0
        )
    val = num / den
    return -val if q < 0.0 else val


@njit(cache=True)
def normal_table():
    """``table[i] = ndtri(i / 65536)`` (float32) for the interior cells; the ends are unused."""
    table = np.empty(TABLE_CELLS + 1, dtype=np.float32)
    for i in range(1, TABLE_CELLS):
        table[i] = ndtri(i / TABLE_CELLS)
    table[0] = ndtri(0.5 / 2.0**53)
    table[TABLE_CELLS] = -table[0]
    return table


@njit(cache=True, inline="always")
def _interpolated(cell_bits, frac_bits, table):
    """Table interpolation (branch-free): 16-bit cell number, 16-bit position inside it."""
    cell = np.int64(cell_bits)
    frac = np.float32(np.int32(frac_bits)) * np.float32(1.0 / TABLE_CELLS) + np.float32(
        0.5 / TABLE_CELLS
    )
    t0 = table[cell]
    return t0 + (table[cell + 1] - t0) * frac


@njit(cache=True)
def _tail(x, half, cell):
    """Exact deviate in an outermost cell, from 53 further bits hashed out of ``x``."""
    fine = ((mix64(x ^ _TAIL_SALT[half]) >> _S11) + 0.5) * 2.0**-53
    return np.float32(ndtri((cell + fine) / TABLE_CELLS))


@njit(cache=True, inline="always")
def _halves(key, pair):
    x = mix64(key + pair * GOLDEN)
    return x, x >> _S48, (x >> _S32) & _LOW16, (x >> _S16) & _LOW16, x & _LOW16


@njit(cache=True)
def element_normal(key, element, table):
    """Standard-normal deviate (float32) number ``element`` (int >= 0) of stream ``key``.

    Element ``e`` is half ``e & 1`` of the 64-bit hash of counter ``e >> 1``; each 32-bit
    half is a 16-bit table cell and a 16-bit position inside it.
    """
    half = element & 1
    x, c0, f0, c1, f1 = _halves(key, np.uint64(element >> 1))
    cell = c1 if half else c0
    frac = f1 if half else f0
    if cell == 0 or cell == TABLE_CELLS - 1:
        return _tail(x, half, np.int64(cell))
    return _interpolated(cell, frac, table)


@njit(cache=True, inline="always")
def _row_normals(key, first, nchan, table, z):
    """Deviates of elements ``first .. first + nchan - 1`` into ``z[offset:offset+nchan]``.

    Returns ``offset`` (``first & 1``). A branch-free pass interpolates every element;
    elements in the two outermost cells (recognised by their value beyond the table's
    second and second-last entries) are then recomputed exactly.
    """
    offset = first & 1
    npair = (offset + nchan + 1) >> 1
    pair0 = np.uint64(first >> 1)
    for j in range(npair):
        _, c0, f0, c1, f1 = _halves(key, pair0 + np.uint64(j))
        z[2 * j] = _interpolated(c0, f0, table)
        z[2 * j + 1] = _interpolated(c1, f1, table)
    low = table[1]
    high = table[TABLE_CELLS - 1]
    for i in range(2 * npair):
        if z[i] < low or z[i] > high:
            z[i] = element_normal(key, 2 * (first >> 1) + i, table)
    return offset


@njit(cache=True, inline="always")
def _quantise(value, top, integer):
    if not integer:
        return value
    return min(max(math.floor(value + np.float32(0.5)), 0.0), top)


@njit(cache=True, parallel=True)
def fill_noise(out, start, key, mean, sigma, table, top, integer):
    """Fill ``out [nsamp, nchan]`` (file layout) with quantised Gaussian noise.

    Element ``(r, c)`` is ``quantise(mean[c] + sigma[c] * z)`` with ``z`` the deviate of
    element ``(start + r) * nchan + c``; integers are rounded and clipped to ``[0, top]``,
    float output (``integer=False``) is left as it is.
    """
    nsamp, nchan = out.shape
    for r in prange(nsamp):
        z = np.empty(nchan + 2, dtype=np.float32)
        offset = _row_normals(key, (start + r) * nchan, nchan, table, z)
        for c in range(nchan):
            out[r, c] = _quantise(mean[c] + sigma[c] * z[c + offset], top, integer)


@njit(cache=True, parallel=True)
def add_signal(out, start, samples, chans, values, key, mean, sigma, table, top, integer):
    """Re-quantise the listed elements with ``values`` (in units of sigma) added to the noise.

    ``samples`` are absolute sample numbers (``start`` is the first row of ``out``); each
    ``(sample, chan)`` pair must appear once. The noise deviate is the one
    :func:`fill_noise` used, so the signal rides on the same noise.
    """
    nchan = out.shape[1]
    for k in prange(samples.size):
        s = samples[k]
        c = chans[k]
        z = element_normal(key, s * nchan + c, table)
        out[s - start, c] = _quantise(
            mean[c] + sigma[c] * (z + np.float32(values[k])), top, integer
        )


@numba.vectorize(["float64(float64)"], cache=True)
def ndtr(x):
    """Standard-normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@njit(cache=True)
def scatter_exponential(mass, ratio):
    """Convolve fine-binned masses with a one-sided exponential, in place.

    ``mass [nchan, nfine]``; ``ratio[c] = tau_c / h`` (scattering time over the bin width).
    The response is exact for mass spread uniformly within each bin, and conserves it.
    """
    nchan, nfine = mass.shape
    for c in range(nchan):
        rho = ratio[c]
        if rho <= 0.0:
            continue
        a = math.exp(-1.0 / rho)
        keep = 1.0 - rho * (1.0 - a)
        leak = rho * (1.0 - a) * (1.0 - a)
        carried = 0.0
        previous = 0.0
        for m in range(nfine):
            carried = a * carried + leak * previous
            previous = mass[c, m]
            mass[c, m] = keep * previous + carried
