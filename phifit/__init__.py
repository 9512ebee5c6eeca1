"""phifit: how much is one recurrence of a looped transformer worth?

Fits the joint iso-depth scaling law of looped language models,

    L = E + A * (N_once + r**phi * N_rec)**(-alpha) + B * D**(-beta),

to tables of training runs, with honest uncertainty and model comparison.

- :func:`load_runs` validates a run CSV into a :class:`RunTable`;
- :func:`fit` fits the law (``method="huber"`` the reference protocol, ``"lsq"``, ``"bayes"``)
  and returns a :class:`FitResult`;
- :func:`block_bootstrap`, :func:`compare_fits`, :func:`compare_recipes` give intervals,
  restricted-fit comparisons and Delta-phi between recipes;
- :mod:`phifit.diagnostics`, :mod:`phifit.derived` and :mod:`phifit.report` judge the fit,
  answer "what is my looped model worth" and write the HTML report;
- :mod:`phifit.trainers` (torch, imported only on demand) produces run tables.
"""

__version__ = "0.1.0"

from .bootstrap import block_bootstrap  # noqa: E402
from .compare import compare_fits  # noqa: E402
from .fit import fit  # noqa: E402
from .law import JointLaw, LawSpec  # noqa: E402
from .recipes import compare_recipes  # noqa: E402
from .result import FitResult  # noqa: E402
from .runs import RunTable, RunTableError, load_runs  # noqa: E402
from .simulate import simulate  # noqa: E402

__all__ = [
    "FitResult",
    "JointLaw",
    "LawSpec",
    "RunTable",
    "RunTableError",
    "block_bootstrap",
    "compare_fits",
    "compare_recipes",
    "fit",
    "load_runs",
    "simulate",
    "__version__",
]
