"""Distributed Skellam noise for vote histograms summed across sites, with exact accounting.

The building block of cross-site teacher votes (issue 29): every private site adds integer
noise to its teachers' vote histogram on U, and only the sum over sites is revealed (under
secure aggregation), so the noise is paid once for the whole federation. Skellam noise fits
this because it is closed under summation: ``Sk(a) + Sk(b) = Sk(a + b)`` for independent
draws, where ``Sk(μ)`` is the difference of two independent ``Poisson(μ / 2)`` draws
(mean 0, variance ``μ``, integer-valued, as secure aggregation needs).

**Over-provisioning.** With ``n_sites`` sites, of which up to ``dropouts`` may fail to
contribute and up to ``colluders`` may reveal their own noise to the server, each site adds
``Sk(μ / (n_sites - dropouts - colluders))`` (:func:`skellam_site_share`): the noise left in the sum
that nobody but the honest, answering sites knows is then ``Sk(μ')`` with ``μ' ≥ μ``, and
more Skellam noise is never less private (``Sk(μ') = Sk(μ) + Sk(μ' - μ)``, the second term
post-processing). The price: with every site answering and honest, the sum carries
``μ · n_sites / (n_sites - dropouts - colluders)``.

**Exact accounting** (unit: one private record of one site; relation add/remove; adversary:
the server and anyone who sees the sum, given the assumptions above). A record lies in one
teacher's shard at its site (keyed-hash shards), so adding or removing it changes that one
teacher's vote on each public example: per example, one count goes down by one and another
up by one (or one count up by one when the teacher had abstained). Over ``n_labels``
examples of a round, at most ``2 · n_labels`` coordinates of the summed histogram move, each
by exactly one, and the coordinates' noise is independent. The privacy loss distribution of
the release is therefore exactly that of ``Sk(μ) + 1`` against ``Sk(μ)`` (the shift's sign
does not matter: ``Sk`` is symmetric) composed ``2 · n_labels`` times per round, and
composed again over rounds. :func:`skellam_pld` builds it from the Skellam probability mass
function with dp-accounting's ``from_two_probability_mass_functions`` (pessimistic
discretisation: the ε it reports is an upper bound within the discretisation step of the
exact one). Replace-one (two teachers may move) is not accounted here.

Examples
--------
>>> share = skellam_site_share(mu=4000.0, n_sites=20, dropouts=2, colluders=2)
>>> share
250.0
>>> round(skellam_epsilon(mu=4000.0, n_labels=100, delta=1e-5), 2)  # Gaussian, σ² = μ: 0.82
0.83
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from cotrain.privacy.mechanisms.param_checks import check_delta, check_positive
from learners.checks import check_int

__all__ = [
    "skellam_epsilon",
    "skellam_log_pmf",
    "skellam_mu",
    "skellam_noise",
    "skellam_pld",
    "skellam_site_share",
]


def _positive(value: Any, name: str) -> float:
    checked = check_positive(value, name)
    assert checked is not None  # None is refused without allow_none
    return checked


def skellam_site_share(mu: float, n_sites: int, dropouts: int = 0, colluders: int = 0) -> float:
    """The Skellam parameter each site adds so that the sum keeps ``Sk(μ)`` of noise that
    no colluder knows, with up to ``dropouts`` sites missing.

    Parameters
    ----------
    mu : float
        The noise the sum must keep (its variance), > 0.
    n_sites : int
        Sites that are asked to contribute.
    dropouts, colluders : int, default=0
        Sites that may not contribute, and sites that may reveal their noise; together
        fewer than ``n_sites``.

    Returns
    -------
    float
        ``mu / (n_sites - dropouts - colluders)``.

    Examples
    --------
    >>> skellam_site_share(100.0, n_sites=4)
    25.0
    >>> skellam_site_share(100.0, n_sites=4, dropouts=3, colluders=1)
    Traceback (most recent call last):
    ...
    ValueError: dropouts + colluders must be below n_sites (some honest site must answer), \
got 3 + 1 for 4 sites
    """
    mu = _positive(mu, "mu")
    n = check_int(n_sites, "n_sites", 1)
    d, t = check_int(dropouts, "dropouts", 0), check_int(colluders, "colluders", 0)
    if d + t >= n:
        raise ValueError(
            "dropouts + colluders must be below n_sites (some honest site must answer), "
            f"got {d} + {t} for {n} sites"
        )
    return mu / (n - d - t)


def skellam_noise(mu: float, size: Any, rng: np.random.Generator) -> np.ndarray:
    """Draws of ``Sk(μ)``: ``Poisson(μ/2) - Poisson(μ/2)``, int64, variance ``μ``.

    Examples
    --------
    >>> draws = skellam_noise(50.0, 100_000, np.random.default_rng(0))
    >>> draws.dtype, bool(abs(draws.mean()) < 0.1), bool(abs(draws.var() / 50 - 1) < 0.02)
    (dtype('int64'), True, True)
    """
    mu = _positive(mu, "mu")
    return (rng.poisson(mu / 2, size) - rng.poisson(mu / 2, size)).astype(np.int64)


def skellam_log_pmf(mu: float, tail: float = 40.0) -> tuple[np.ndarray, np.ndarray]:
    """The support and log probabilities of ``Sk(μ)``, out to ``tail`` standard deviations.

    ``P(k) = exp(-μ) · I_|k|(μ)`` (``I`` the modified Bessel function of the first kind),
    computed as ``log(ive(|k|, μ))`` so that it neither overflows nor underflows near the
    centre; points whose probability underflows to 0 are dropped.

    Examples
    --------
    >>> ks, logp = skellam_log_pmf(2.0)
    >>> round(float(np.exp(logp).sum()), 12), int(ks[np.argmax(logp)])
    (1.0, 0)
    """
    mu = _positive(mu, "mu")
    reach = math.ceil(tail * math.sqrt(mu) + 20)
    ks = np.arange(-reach, reach + 1)
    with np.errstate(divide="ignore"):
        logp = np.log(special.ive(np.abs(ks), mu))
    keep = np.isfinite(logp)
    return ks[keep], logp[keep]


def skellam_pld(mu: float, n_shifts: int, value_discretization_interval: float = 1e-4) -> Any:
    """dp-accounting's privacy loss distribution of ``n_shifts`` independent coordinates
    of ``Sk(μ)`` noise, each shifted by one (see the module docstring).

    Examples
    --------
    >>> pld = skellam_pld(1000.0, n_shifts=20)  # one round of 10 labels
    >>> round(pld.get_epsilon_for_delta(1e-5), 2)
    0.5
    """
    from dp_accounting.pld import privacy_loss_distribution

    check_int(n_shifts, "n_shifts", 1)
    ks, logp = skellam_log_pmf(mu)
    lower = dict(zip(ks.tolist(), logp.tolist(), strict=True))
    upper = dict(zip((ks + 1).tolist(), logp.tolist(), strict=True))
    one = privacy_loss_distribution.from_two_probability_mass_functions(
        lower, upper, value_discretization_interval=value_discretization_interval
    )
    return one.self_compose(n_shifts) if n_shifts > 1 else one


def skellam_epsilon(mu: float, n_labels: int, delta: float, rounds: int = 1) -> float:
    """ε (add/remove of one record) of ``rounds`` releases of a summed vote histogram on
    ``n_labels`` public examples with ``Sk(μ)`` noise on every count.

    Examples
    --------
    >>> e1 = skellam_epsilon(4000.0, n_labels=100, delta=1e-5)
    >>> e2 = skellam_epsilon(4000.0, n_labels=100, delta=1e-5, rounds=2)
    >>> e1 < e2 < 2 * e1
    True
    """
    n_labels = check_int(n_labels, "n_labels", 1)
    rounds = check_int(rounds, "rounds", 1)
    delta = check_delta(delta)
    return float(skellam_pld(mu, 2 * n_labels * rounds).get_epsilon_for_delta(delta))


def skellam_mu(epsilon: float, n_labels: int, delta: float, rounds: int = 1) -> float:
    """The smallest ``μ`` (to 0.5 %) whose :func:`skellam_epsilon` is at most ``epsilon``.

    Examples
    --------
    >>> mu = skellam_mu(4.0, n_labels=100, delta=1e-5, rounds=2)
    >>> skellam_epsilon(mu, 100, 1e-5, rounds=2) <= 4.0
    True
    """
    epsilon = _positive(epsilon, "epsilon")
    # the Gaussian limit (variance μ, L2² = 2·n_labels·rounds) starts the search
    shifts = 2 * check_int(n_labels, "n_labels", 1) * check_int(rounds, "rounds", 1)
    lo, hi = 1e-3, max(1.0, 2 * shifts * math.log(1.25 / delta) / epsilon**2) * 4
    while skellam_epsilon(hi, n_labels, delta, rounds) > epsilon:
        lo, hi = hi, hi * 4
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        if skellam_epsilon(mid, n_labels, delta, rounds) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi
