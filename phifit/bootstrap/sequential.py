"""Sequential Monte-Carlo p-values: stop a bootstrap test once its decision at the level is settled.

A bootstrap p-value p_B = (1 + k) / (1 + B) estimates the test's exact p (the one infinitely
many replicates would give); k, the replicates whose statistic reaches the observed one, is
Binomial(B, p).  Most tests are far from the level: T is far beyond every T* (p ~ 0) or well
inside them (p ~ 0.3), and their decision is settled long before B = 999.  So the replicates
are drawn in one go (the same draws as the full test, in the same order) and refitted in
stages: after the first 199, 399 and 799, the Clopper-Pearson interval of p at confidence
1 - ``risk`` (k exceedances in n valid replicates) is checked against the level; once it lies
wholly below (reject) or wholly above it (keep), the test stops and reports p_n = (1 + k) / (1 + n)
from the n replicates it refitted.  Otherwise it goes on to all B.

The chance that a stopped test's decision differs from the exact p's is at most ``risk / 2``
per look (the interval misses p on the wrong side), so at most 0.15% with three looks at
``risk`` = 1e-3.  This is the sequential Monte-Carlo test of Besag and Clifford (1991,
"Sequential Monte Carlo p-values", Biometrika 78(2)) with a decision rule on both sides of the
level (in the spirit of Gandy 2009, "Sequential implementation of Monte Carlo tests with
uniformly bounded resampling risk", JASA 104(488)): a test at p ~ 0 stops after 199 replicates
(k = 0: upper bound 0.038 < 0.05), one at p >~ 0.12 after 199, and only tests whose p lies near
the level run all B.  The reported p of a stopped test moves within its Monte-Carlo error of the
full test's (it is the same draws' first n), and the result records how many were used.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Replicate counts after which a test may stop (then, if undecided, all B).
LOOKS = (199, 399, 799)
#: One minus the Clopper-Pearson confidence at each look.
RISK = 1e-3


def p_bounds(exceed: int, n: int, risk: float = RISK) -> tuple[float, float]:
    """Clopper-Pearson interval of a binomial proportion at confidence 1 - ``risk``:
    ``exceed`` successes in ``n`` trials (Beta quantiles, the exact interval)."""
    from scipy.special import betaincinv  # here: the CLI's parser reads this module's constants

    lower = 0.0 if exceed <= 0 else float(betaincinv(exceed, n - exceed + 1, risk / 2))
    upper = 1.0 if exceed >= n else float(betaincinv(exceed + 1, n - exceed, 1 - risk / 2))
    return lower, upper


@dataclass(frozen=True)
class StopRule:
    """When a bootstrap test may stop early: at ``looks`` replicates, once the Clopper-Pearson
    interval (confidence 1 - ``risk``) of its exact p lies wholly on one side of ``level``."""

    level: float = 0.05
    risk: float = RISK
    looks: tuple[int, ...] = LOOKS

    def stages(self, n_boot: int) -> list[int]:
        """The replicate counts at which the test is checked, ending at ``n_boot``."""
        return [n for n in self.looks if n < n_boot] + [n_boot]

    def decided(self, exceed: int, n_valid: int) -> bool:
        """Whether ``exceed`` of ``n_valid`` replicates settle p's side of the level."""
        if n_valid <= 0:
            return False
        lower, upper = p_bounds(exceed, n_valid, self.risk)
        return upper < self.level or lower > self.level

    def error_bound(self, n_looks: int) -> float:
        """Largest chance that a stopped test decides otherwise than its exact p would."""
        return n_looks * self.risk / 2


#: The rule every wild test of a report uses unless told to run all its replicates.
DEFAULT_RULE = StopRule()
