"""phifit: how much is one recurrence of a looped transformer worth?

Fits the joint iso-depth scaling law of looped language models,

    L = E + A * (N_once + r**phi * N_rec)**(-alpha) + B * D**(-beta),

to tables of training runs, with honest uncertainty and model comparison.
"""

__version__ = "0.1.0"

from .fit import fit  # noqa: E402
from .law import JointLaw, LawSpec  # noqa: E402
from .result import FitResult  # noqa: E402
from .runs import RunTable, RunTableError, load_runs  # noqa: E402
from .simulate import simulate  # noqa: E402

__all__ = ["FitResult", "JointLaw", "LawSpec", "RunTable", "RunTableError", "fit", "load_runs",
           "simulate", "__version__"]
