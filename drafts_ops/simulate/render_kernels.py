"""Numba kernels of the simulator (they import nothing else from drafts-ops).

Noise is *counter-based*: the standard-normal deviate of element ``i = sample * nchans +
channel`` is a pure function of ``(key, i)`` (a SplitMix64 hash of the counter, mapped
through the inverse normal CDF). Any block can therefore be generated independently, in
parallel, in any order, and the noise under an injected signal can be recomputed exactly:
the signal is added to the *same* deviate before quantisation.

One 64-bit hash gives three deviates: each 21-bit part selects one of 65,536 equal-
probability cells of the normal distribution (16 bits) and one of 32 positions inside it (5
bits); the value is interpolated linearly in a float32 table of the inverse CDF (error <
2e-3 sigma in the outermost interpolated cell, < 1e-5 sigma for |z| < 3). The two
outermost cells (|z| > 3.8) use the exact Wichura AS241 algorithm (the one Python's
``statistics.NormalDist.inv_cdf`` uses) with 53 further hashed bits, so the tails are exact
out to about 8 sigma.
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
_S11 = np.uint64(11)
_S5 = np.uint64(5)
_LOW5 = np.uint64(0x1F)
_LOW21 = np.uint64(0x1FFFFF)
_S43 = np.uint64(43)
_S22 = np.uint64(22)
_S1 = np.uint64(1)
#: Cells of the inverse-CDF table (16 bits of the hash select the cell).
TABLE_CELLS = 65536
_TAIL_SALT = np.array([0x632BE59BD9B4E019, 0x8CB92BA72F3D8DD7, 0x3C6EF372FE94F82B], dtype=np.uint64)


@njit(cache=True, inline="always")
def mix64(z):
    """SplitMix64 finaliser: a bijective 64-bit hash (uint64 → uint64)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


# Wichura (1988) AS241 PPND16 coefficients, lowest order first: central region, then the
# intermediate and far tails (numerators _xN, denominators _xD).
_CN = (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
       1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
       3.3430575583588128105e4, 2.5090809287301226727e3)  # fmt: skip
_CD = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
       2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
       5.2264952788528545610e3)  # fmt: skip
_IN = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
       3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
       2.27238449892691845833e-2, 7.74545014278341407640e-4)  # fmt: skip
_ID = (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
       1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
       1.05075007164441684324e-9)  # fmt: skip
_TN = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
       2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
       2.71155556874348757815e-5, 2.01033439929228813265e-7)  # fmt: skip
_TD = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
       7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
       2.04426310338993978564e-15)  # fmt: skip


@njit(cache=True, inline="always")
def _ratio(num, den, r):
    """``num(r) / den(r)`` for two degree-7 polynomials (coefficients lowest first)."""
    top = num[7]
    bottom = den[7]
    for i in range(6, -1, -1):
        top = top * r + num[i]
        bottom = bottom * r + den[i]
    return top / bottom


@njit(cache=True)
def ndtri(p):
    """Inverse standard-normal CDF (Wichura 1988, AS241 PPND16; relative error ~1e-16)."""
    q = p - 0.5
    if abs(q) <= 0.425:
        return q * _ratio(_CN, _CD, 0.180625 - q * q)
    r = math.sqrt(-math.log(p if q < 0.0 else 1.0 - p))
    val = _ratio(_IN, _ID, r - 1.6) if r <= 5.0 else _ratio(_TN, _TD, r - 5.0)
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
def _interpolated(bits, table):
    """Table interpolation (branch-free) of a 21-bit part: 16-bit cell, 5-bit position."""
    cell = np.int64(bits >> _S5)
    frac = np.float32(np.int32(bits & _LOW5)) * np.float32(1.0 / 32) + np.float32(1.0 / 64)
    t0 = table[cell]
    return t0 + (table[cell + 1] - t0) * frac


@njit(cache=True)
def _tail(x, part, cell):
    """Exact deviate in an outermost cell, from 53 further bits hashed out of ``x``."""
    fine = ((mix64(x ^ _TAIL_SALT[part]) >> _S11) + 0.5) * 2.0**-53
    return np.float32(ndtri((cell + fine) / TABLE_CELLS))


@njit(cache=True, inline="always")
def _parts(x):
    """The three 21-bit parts of a 64-bit hash (bits 43-63, 22-42, 1-21)."""
    return (x >> _S43) & _LOW21, (x >> _S22) & _LOW21, (x >> _S1) & _LOW21


@njit(cache=True)
def element_normal(key, element, table):
    """Standard-normal deviate (float32) number ``element`` (int >= 0) of stream ``key``.

    Element ``e`` is part ``e % 3`` of the 64-bit hash of counter ``e // 3``; each 21-bit
    part is a 16-bit table cell and a 5-bit position inside it.
    """
    part = element % 3
    x = mix64(key + np.uint64(element // 3) * GOLDEN)
    b0, b1, b2 = _parts(x)
    bits = b0 if part == 0 else (b1 if part == 1 else b2)
    cell = np.int64(bits >> _S5)
    if cell == 0 or cell == TABLE_CELLS - 1:
        return _tail(x, part, cell)
    return _interpolated(bits, table)


@njit(cache=True, inline="always")
def _row_normals(key, first, nchan, table, z):
    """Deviates of elements ``first .. first + nchan - 1`` into ``z[offset:offset+nchan]``.

    Returns ``offset`` (``first % 3``). A branch-free pass interpolates every element; if
    any fell in one of the two outermost cells (a row of 4096 in eight), those elements,
    recognised by their value beyond the table's second and second-last entries, are
    recomputed exactly.
    """
    offset = first % 3
    ntriple = (offset + nchan + 2) // 3
    triple0 = np.uint64(first // 3)
    last = np.uint64(TABLE_CELLS - 1)
    zero = np.uint64(0)
    flag = 0
    for j in range(ntriple):
        x = mix64(key + (triple0 + np.uint64(j)) * GOLDEN)
        b0, b1, b2 = _parts(x)
        z[3 * j] = _interpolated(b0, table)
        z[3 * j + 1] = _interpolated(b1, table)
        z[3 * j + 2] = _interpolated(b2, table)
        c0 = b0 >> _S5
        c1 = b1 >> _S5
        c2 = b2 >> _S5
        flag |= (c0 == zero) | (c0 == last) | (c1 == zero) | (c1 == last)
        flag |= (c2 == zero) | (c2 == last)
    if flag:
        low = table[1]
        high = table[TABLE_CELLS - 1]
        for i in range(3 * ntriple):
            if z[i] < low or z[i] > high:
                z[i] = element_normal(key, 3 * (first // 3) + i, table)
    return offset


@njit(cache=True, inline="always")
def _quantise(value, top, integer):
    if not integer:
        return value
    return min(max(np.floor(value + np.float32(0.5)), np.float32(0.0)), top)


@njit(cache=True, parallel=True, nogil=True)
def fill_noise(out, start, key, mean, sigma, table, top, integer):  # noqa: PLR0917
    """Fill ``out [nsamp, nchan]`` (file layout) with quantised Gaussian noise.

    Element ``(r, c)`` is ``quantise(mean[c] + sigma[c] * z)`` with ``z`` the deviate of
    element ``(start + r) * nchan + c``; integers are rounded and clipped to ``[0, top]``,
    float output (``integer=False``) is left as it is.
    """
    nsamp, nchan = out.shape
    for r in prange(nsamp):
        z = np.empty(nchan + 3, dtype=np.float32)
        offset = _row_normals(key, (start + r) * nchan, nchan, table, z)
        for c in range(nchan):
            out[r, c] = _quantise(mean[c] + sigma[c] * z[c + offset], top, integer)


@njit(cache=True, parallel=True, nogil=True)
def add_signal(  # noqa: PLR0917
    out, start, samples, chans, values, key, mean, sigma, table, top, integer
):
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
def _gauss_cdf(x, sigma):  # pragma: no cover - compiled
    if sigma > 0.0:
        return ndtr(x / sigma)
    return 1.0 if x > 0.0 else (0.5 if x == 0.0 else 0.0)


@njit(cache=True)
def _gauss_cdf_integral(y, sigma):  # pragma: no cover - compiled
    """Antiderivative of the Gaussian CDF: ``y Phi(y/sigma) + sigma phi(y/sigma)``."""
    if sigma > 0.0:
        u = y / sigma
        return y * ndtr(u) + sigma * math.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    return max(y, 0.0)


@njit(parallel=True, cache=True)
def smeared_cdf_rows(start, grid, sigma, smear, narrow, out):  # noqa: PLR0917
    """``out[c, j]``: CDF at ``start[c] + grid[j]`` (s) of a Gaussian of standard deviation
    ``sigma`` (s) convolved with a centred boxcar of ``smear[c]`` (s; a plain Gaussian
    where ``smear[c] <= narrow``), float64. One compiled pass per channel row instead of
    numpy temporaries (a FAST raw burst: 4096 rows of thousands of points)."""
    for c in prange(out.shape[0]):
        s = smear[c]
        for j in range(out.shape[1]):
            x = start[c] + grid[j]
            if s > narrow:
                upper = _gauss_cdf_integral(x + s / 2, sigma)
                out[c, j] = (upper - _gauss_cdf_integral(x - s / 2, sigma)) / s
            else:
                out[c, j] = _gauss_cdf(x, sigma)


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
