"""FitResult: the one result type every fitter returns.

A plain, inert record: the fitted parameters, goodness of fit, residuals,
status and warnings, plus optional uncertainty (bootstrap intervals,
standard errors) and a method-specific ``extras`` dict.  It prints a readable
:meth:`FitResult.summary`, and round-trips through JSON
(:meth:`FitResult.to_json` / :meth:`FitResult.from_json`, :class:`~phifit.serialize.JsonIO`).

Goodness of fit, as defined in the reference study (paper-notes section 1.2):

- residual_i = L_i - L_hat_i, in nats (actual minus predicted);
- R^2 = 1 - sum(residual^2) / sum((L - mean L)^2), on raw nats;
- RMSE = sqrt(mean(residual^2)), nats.

The ``objective`` is the fitter's own criterion at the optimum, named by
``objective_name`` (for the Huber fit: the *sum* over runs of Huber_delta on
log-loss residuals).

``log_lik``, ``aic`` and ``bic`` score every fit on one scale, whatever its objective: the
Gaussian working likelihood on log-loss residuals with sigma profiled out
(:mod:`phifit.fitters.likelihood`, the one ``phifit compare`` uses), with e_i = log L_i -
log L_hat_i summed over the n runs: log lik = -n/2 (log(2 pi RSS / n) + 1), RSS = sum e_i^2,
k = free law parameters + 1 (sigma), AIC = -2 log lik + 2 k, BIC = -2 log lik + k log n.
"""

from __future__ import annotations

import dataclasses
import html
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__, defaults
from .cautions import Caution
from .extras import import_optional
from .intervals import censored_ends, interval_text, param_bounds
from .law import DEFAULT_BOUNDS, PARAM_NAMES, THETA_NAMES, JointLaw, LawSpec, params_to_theta
from .serialize import JsonIO, to_plain

GENERATOR = "phifit"

#: The per-run loss a fit minimised: "huber" (Huber_delta on log-loss residuals, summed),
#: "squares" (half squared log-loss residuals, summed: least squares), "student_t" (the
#: Bayesian likelihood; no optimisation objective to refit).
LOSSES = ("huber", "squares", "student_t")


@dataclass(frozen=True)
class FitResult(JsonIO):
    """Result of fitting the joint law to a run table.

    Attributes
    ----------
    method : "huber", "lsq" or "bayes".
    params : {E, A, alpha, B, beta, phi}; phi is None when the data cannot identify it.
    fixed : parameters held fixed in the fit (e.g. {"phi": 0.0}).
    n_runs : number of runs fitted.
    objective, objective_name : the fitter's criterion at the optimum and its definition.
    r2, rmse : on raw nats (see module docstring).
    converged : the optimiser (or sampler) reports success.
    at_bounds : parameters that ended at a box bound.
    bounds : the box searched, internal coordinates {a, alpha, b, beta, e, phi: [lo, hi]}
        (a, b, e are log A, log B, log E).
    loss, delta : the per-run loss minimised ("huber" with threshold ``delta``, "squares",
        or "student_t" for the Bayesian fit).  With ``fixed`` and ``bounds`` they say
        exactly how to refit this result (diagnostics, bootstrap and comparisons do).
    warnings : :class:`~phifit.cautions.Caution` records about anything suspect.
    residuals : actual - predicted loss per run, nats, in table order.
    run_ids : run names in table order.
    stderr : standard errors where the method provides them.
    ci, ci_bca : intervals {param: [lo, hi]} at level ``ci_level`` (percentile and BCa
        bootstrap, or the Bayesian HDI in ``ci``).
    ci_level : the level of ``ci`` and ``ci_bca`` (0.95 unless asked otherwise).
    bootstrap : bootstrap bookkeeping {n, n_failed, block, ...} when run.
    extras : method-specific details (starts, solver messages, correlations, ...).
    log_lik, aic, bic : the Gaussian working log-likelihood of the log-loss residuals (a sum
        over runs, sigma profiled out) and its AIC and BIC with k = :attr:`n_free` + 1 (module
        docstring); computed once when the fit is assembled.  None when it is not defined
        (residuals exactly zero) or for a result saved before phifit stored them.
    idata : a Bayesian fit's posterior as ArviZ ``InferenceData`` (groups in
        :mod:`phifit.fitters.bayes.store`: ``az.summary(fit.idata)``, ``az.plot_trace(...)``);
        None for the other methods.  It is not part of the JSON (:meth:`to_dict` writes plain
        data only): :func:`phifit.load` reads it back from the netCDF file the fit was saved to
        (``save=``, ``extras["netcdf"]``) when that file exists, and
        :meth:`to_inference_data` reads it on demand.  Equality and ``repr`` ignore it.
    """

    method: str
    params: dict[str, float | None]
    n_runs: int
    objective: float
    objective_name: str
    r2: float
    rmse: float
    converged: bool
    fixed: dict[str, float] = field(default_factory=dict)
    at_bounds: list[str] = field(default_factory=list)
    bounds: dict[str, list[float]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_BOUNDS.items()}
    )
    loss: str = "huber"
    delta: float | None = 1e-3
    warnings: list[Caution] = field(default_factory=list)
    residuals: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    source: str = ""
    stderr: dict[str, float] | None = None
    ci: dict[str, list[float]] | None = None
    ci_bca: dict[str, list[float]] | None = None
    ci_level: float = defaults.LEVEL
    bootstrap: dict[str, Any] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    log_lik: float | None = None
    aic: float | None = None
    bic: float | None = None
    idata: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; expected one of {', '.join(LOSSES)}")
        if self.loss == "huber" and not (self.delta is not None and self.delta > 0):
            raise ValueError(f"a Huber fit needs a positive delta, got {self.delta!r}")
        if not 0 < self.ci_level < 1:
            raise ValueError(f"ci_level must be in (0, 1), got {self.ci_level!r}")
        if any(not isinstance(w, Caution) for w in self.warnings):
            raise TypeError("FitResult.warnings holds Caution records (phifit.cautions.Caution)")
        # one parameter order everywhere (E, A, alpha, B, beta, phi), whatever order built them
        for name in ("params", "stderr", "ci", "ci_bca"):
            values = getattr(self, name)
            if values is not None:
                first = {k: values[k] for k in PARAM_NAMES if k in values}
                object.__setattr__(
                    self, name, {**first, **{k: v for k, v in values.items() if k not in first}}
                )

    # -- derived ---------------------------------------------------------------
    @property
    def spec(self) -> LawSpec:
        """The law specification fitted: the fixed values and the box searched."""
        return LawSpec(fixed=dict(self.fixed), bounds={k: tuple(v) for k, v in self.bounds.items()})

    @property
    def loss_delta(self) -> float:
        """Huber threshold of the fitted objective; ``inf`` for least squares.

        Raises ``ValueError`` for a Bayesian fit, which has no optimisation objective:
        refit-based diagnostics need a Huber or least-squares fit.
        """
        if self.loss == "huber":
            return float(self.delta)
        if self.loss == "squares":
            return math.inf
        raise ValueError(
            f"a {self.method} fit ({self.loss} likelihood) has no optimisation objective to refit; "
            "use a Huber or least-squares fit for refit-based diagnostics"
        )

    @property
    def phi(self) -> float | None:
        return self.params.get("phi")

    @property
    def phi_identified(self) -> bool:
        """Whether the design identifies phi (looped runs at two values of r; phi is then
        reported, not null).  A design question only: at a particular optimum phi can still be
        undetermined (a singular information matrix, e.g. alpha on its bound 0); :func:`phifit.fit`
        then adds the caution ``ill_conditioned`` naming the parameters concerned."""
        return self.params.get("phi") is not None

    @property
    def unidentified(self) -> list[str]:
        """Law parameters the runs cannot identify, reported as null (phi, B, beta)."""
        return [name for name in PARAM_NAMES if self.params.get(name) is None]

    @property
    def d_term_identified(self) -> bool:
        """False when the fit could not separate B, beta and E (a single token count)."""
        return self.params.get("B") is not None and self.params.get("beta") is not None

    @property
    def law(self) -> JointLaw:
        """The fitted law; when phi was not identified, N_eff = N_once + N_rec (phi = 0); a
        parameter reported as null because the runs cannot identify it (B, beta on one
        token count) takes the value the fit held it at (``fixed``)."""
        p = dict(self.params)
        if p.get("phi") is None:
            p["phi"] = 0.0
        for name, value in self.fixed.items():
            if p.get(name) is None:
                p[name] = value
        return JointLaw.from_params(p)

    @property
    def theta(self) -> np.ndarray:
        return params_to_theta(self.law.params)

    def with_updates(self, **changes: Any) -> FitResult:
        """A copy with some fields replaced (results are never mutated)."""
        return dataclasses.replace(self, **changes)

    # -- views -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of plain Python types (NaN and inf become null)."""
        out = {"generator": GENERATOR, "phifit_version": __version__}
        for f in dataclasses.fields(self):
            if f.name == "idata":  # the posterior lives in its netCDF file, not in the JSON
                continue
            value = getattr(self, f.name)
            if value is None and f.name in ("stderr", "ci", "ci_bca", "bootstrap", "log_lik", "aic", "bic"):
                continue
            out[f.name] = [w.to_dict() for w in value] if f.name == "warnings" else value
        return to_plain(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitResult:
        names = {f.name for f in dataclasses.fields(cls)} - {"idata"}
        kwargs = {k: v for k, v in data.items() if k in names}
        saved = kwargs["params"]
        names = [k for k in saved if k in PARAM_NAMES] + [k for k in PARAM_NAMES if k not in saved]
        kwargs["params"] = {k: (None if saved.get(k) is None else float(saved[k])) for k in names}
        for key in ("objective", "r2", "rmse"):
            kwargs[key] = float("nan") if kwargs.get(key) is None else float(kwargs[key])
        for key in ("log_lik", "aic", "bic"):
            kwargs[key] = None if kwargs.get(key) is None else float(kwargs[key])
        kwargs["warnings"] = [Caution.from_dict(w, source="fit") for w in kwargs.get("warnings") or []]
        if "bounds" in kwargs:
            kwargs["bounds"] = {k: [float(v[0]), float(v[1])] for k, v in kwargs["bounds"].items()}
        return cls(**kwargs)

    @property
    def n_free(self) -> int:
        """Free law parameters: the six of the law less the fixed ones (and phi when the
        table cannot identify it)."""
        return sum(1 for name in PARAM_NAMES if name not in self.fixed and self.params.get(name) is not None)

    def summary(self) -> str:
        """Readable multi-section text in the manner of lmfit's ``fit_report``: fit
        statistics (runs, free parameters, degrees of freedom, objective, R^2, RMSE, the
        stored log-likelihood, AIC and BIC, how the uncertainty was obtained), parameters,
        correlations (least squares), notes.  A low R^2 (caution ``low_r2``, R^2 < 0.9) and
        an ill-conditioned information matrix (caution ``ill_conditioned``: the stderr
        column then means nothing) are flagged next to the numbers they concern and in the notes
        (:func:`phifit.fit` adds both checks).

        A Bayesian fit prints the posterior's own table (median, mean, sd, HDI, MCSE, ESS,
        R-hat per parameter; :func:`bayes_summary`)."""
        if self.method == "bayes" and self.extras.get("posterior"):
            return bayes_summary(self)
        lines = [
            f"[[phifit: joint law, method={self.method}]]",
            "L = E + A * (N_once + r**phi * N_rec)**(-alpha) + B * D**(-beta)",
            "",
        ]
        # what cannot be estimated comes first: the numbers below are read in its light
        lines += [f"NOT ESTIMATED: {c.message}" for c in self.warnings if c.kind == "d_term_unidentified"]
        if len(lines) > 3:
            lines.append("")
        lines.append("[[Fit statistics]]")
        stats = self._summary_statistics()
        width = max(len(k) for k, _ in stats)
        for key, value in stats:
            first, *rest = value.split("\n")
            lines.append(f"    {key:<{width}}  {first}")
            lines += [f"    {'':<{width}}  {more}" for more in rest]
        lines += ["", "[[Parameters]]"]
        lines += self._summary_parameters()
        profile = self.extras.get("profile_ci", {}).get("phi") if self.extras.get("profile_ci") else None
        if profile and None not in profile:
            level = self.extras.get("profile_level", 0.95)
            lines.append(
                f"    profile-likelihood {level:.0%} interval for phi: [{profile[0]:.5g}, {profile[1]:.5g}] "
                "(assumes independent runs)"
            )
        corr = _correlations(self.extras.get("correlation"))
        if corr:
            lines += ["", "[[Correlations]] (unreported correlations are < 0.100; A, B, E on log scale)"]
            width = max(len(label) for label, _ in corr)
            lines += [f"    {label:<{width}} = {c:+.3f}" for label, c in corr]
        if self.warnings:
            lines += ["", "[[Notes]]"]
            lines += [f"    [{i}] {w}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def _summary_statistics(self) -> list[tuple[str, str]]:
        """The [[Fit statistics]] rows of :meth:`summary` as (label, value); a value holding a
        newline continues on the next line."""
        k = self.n_free
        kinds = {c.kind for c in self.warnings}
        stats = [
            ("runs", f"{self.n_runs}"),
            (
                "free parameters",
                f"{k}"
                + (f" ({', '.join(self.fixed)} fixed)" if self.fixed and not self.unidentified else "")
                + (
                    f" ({', '.join(self.fixed)} held: not identified)"
                    if self.fixed and self.unidentified
                    else ""
                ),
            ),
            ("degrees of freedom", f"{self.n_runs - k}"),
            ("objective", f"{self.objective:.10g}"),
            ("  definition", self.objective_name),
            ("R^2 (raw nats)", f"{self.r2:.5f}" + ("  (low: see [[Notes]])" if "low_r2" in kinds else "")),
            ("RMSE (nats)", f"{self.rmse:.5f}"),
        ]
        if self.residuals:
            stats.append(("max |resid| (nats)", f"{np.max(np.abs(self.residuals)):.5f}"))
        if self.log_lik is not None:
            # k as scored (AIC = -2 log lik + 2 k); a grouped fit counts one phi per recipe
            k_scored = round((self.aic + 2 * self.log_lik) / 2)
            stats.append(("log lik", f"{self.log_lik:.4f}"))
            stats.append(("AIC / BIC", f"{self.aic:.2f} / {self.bic:.2f}"))
            stats.append(
                (
                    "  definition",
                    f"Gaussian on log-loss residuals, sigma profiled out (k = {k_scored - 1} + 1 sigma)",
                )
            )
        if "sigma_log" in self.extras:
            stats.append(("sigma (log-loss)", f"{self.extras['sigma_log']:.5g}"))
        stats.append(("converged", str(self.converged)))
        if "n_starts" in self.extras:
            at_best = self.extras.get("n_starts_at_best")
            stats.append(
                ("starts", f"{self.extras['n_starts']}" + (f" ({at_best} at the best)" if at_best else ""))
            )
        if self.stderr and self.extras.get("stderr_method"):
            stats.append(("stderr", str(self.extras["stderr_method"])))
        if self.stderr and "ill_conditioned" in kinds:  # phifit.fitters.common.conditioning_cautions
            stats.append(("", "MEANINGLESS: the information matrix is ill-conditioned (see [[Notes]])"))
        if self.bootstrap:
            b = self.bootstrap
            n, failed = b.get("n"), b.get("n_failed", 0)
            blocks = f"{_plural(b['n_blocks'], 'block')} " if b.get("n_blocks") else "blocks "
            stats.append(
                (
                    "bootstrap",
                    f"{_plural(n, 'replicate')} resampling {blocks}'{b.get('block')}'; "
                    f"{failed} of {n} failed"
                    + (
                        "\n(no interval: too many replicates failed, see [[Notes]])"
                        if self.ci and all(None in (iv or [None]) for iv in self.ci.values())
                        else ""
                    ),
                )
            )
        elif self.ci is None and self.loss in ("huber", "squares"):
            stats.append(
                (
                    "interval",
                    "none computed"
                    + ("\n(the stderr column assumes independent runs)" if self.stderr else ""),
                )
            )
        return stats

    def _summary_parameters(self) -> list[str]:
        """The [[Parameters]] lines of :meth:`summary`: a header, one line per parameter (value,
        stderr, intervals, fixed / at bound / not identified) and a line naming the parameters
        whose interval ends on the search box."""
        lines: list[str] = []
        head = f"    {'':<6} {'value':>12}"
        if self.stderr:
            head += f" {'stderr':>10}"
        if self.ci:
            pct = f"{100 * self.ci_level:g}%"
            kind = f"{pct} HDI" if self.method == "bayes" else f"{pct} CI (percentile)"
            head += f"   {kind:>24}"
        if self.ci_bca:
            head += f"   {f'{100 * self.ci_level:g}% CI (BCa)':>24}"
        lines.append(head)
        censored: list[str] = []
        for name in PARAM_NAMES:
            value = self.params.get(name)
            text = f"    {name:<6} {'n/a':>12}" if value is None else f"    {name:<6} {value:>12.6g}"
            if self.stderr:
                se = self.stderr.get(name)
                text += f" {se:>10.3g}" if se is not None else f" {'':>10}"
            for ci in (self.ci, self.ci_bca):
                if ci:
                    iv = ci.get(name)
                    box = param_bounds(self, name)
                    if iv and None not in iv and box and any(censored_ends(iv[0], iv[1], *box)):
                        # an end on the search box is not an estimate: say so
                        text += f"   {interval_text(iv[0], iv[1], box, fmt=lambda v: f'{v:.5g}'):>24}"
                        censored.append(name)
                    else:
                        text += (
                            f"   [{iv[0]:>10.5g}, {iv[1]:>10.5g}]"
                            if iv and None not in iv
                            else f"   {'withheld' if iv else '':>24}"
                        )
            if name in self.fixed and value is None:
                text += "  (not identified: one token count; E is E + B D^-beta there)"
            elif name in self.fixed:
                text += "  (fixed)"
            if name in self.at_bounds:
                text += "  (at bound)"
            if value is None and name == "phi" and name not in self.fixed:
                text += "  (not identified: no looped runs, or one r)"
            lines.append(text)
        if censored:
            lines.append(
                f"    an interval end on the search box ({', '.join(dict.fromkeys(censored))}) is not an "
                "estimate: the replicates ran into the bound"
            )
        return lines

    def __str__(self) -> str:
        return self.summary()

    # -- notebook views ------------------------------------------------------------
    def __repr__(self) -> str:
        p = " ".join(f"{k}={v:.4g}" for k, v in self.params.items() if v is not None)
        return (
            f"FitResult(method={self.method!r}, n_runs={self.n_runs}, {p}, r2={self.r2:.4g}, "
            f"converged={self.converged}, n_warnings={len(self.warnings)})"
        )

    def to_frame(self):
        """The parameters as a DataFrame, one row per law parameter in the order E, A, alpha,
        B, beta, phi: ``estimate`` (NaN when not identified), ``fixed`` (held fixed in the fit),
        ``stderr`` when the method gives it, and ``ci_lo``, ``ci_hi`` (percentile bootstrap or
        Bayesian HDI) and ``bca_lo``, ``bca_hi`` when the fit carries intervals (at ``ci_level``)."""
        import pandas as pd

        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        cols: dict[str, list[Any]] = {
            "estimate": [num(self.params.get(k)) for k in PARAM_NAMES],
            "fixed": [k in self.fixed for k in PARAM_NAMES],
        }
        if self.stderr is not None:
            cols["stderr"] = [num(self.stderr.get(k)) for k in PARAM_NAMES]
        for prefix, ci in (("ci", self.ci), ("bca", self.ci_bca)):
            if ci is not None:
                ends = [ci.get(k) or [None, None] for k in PARAM_NAMES]
                cols[f"{prefix}_lo"] = [num(e[0]) for e in ends]
                cols[f"{prefix}_hi"] = [num(e[1]) for e in ends]
        return pd.DataFrame(cols, index=pd.Index(list(PARAM_NAMES), name="param"))

    def residuals_frame(self, runs: Any = None):
        """Per-run residuals as a DataFrame, in table order: ``run_id``, ``residual`` (actual -
        predicted loss, nats) and, given the run table fitted (a :class:`~phifit.runs.RunTable`
        or its DataFrame), every column of it beside them plus ``predicted`` = loss - residual."""
        import pandas as pd

        out = pd.DataFrame({"run_id": list(self.run_ids), "residual": np.asarray(self.residuals, float)})
        if runs is None:
            return out
        frame = getattr(runs, "frame", runs)
        if len(frame) != len(out):
            raise ValueError(
                f"runs has {len(frame)} rows, the fit {len(out)} residuals: pass the table fitted"
            )
        frame = frame.reset_index(drop=True).drop(columns=["run_id"], errors="ignore")
        out = pd.concat([out, frame], axis=1)
        if "loss" in out:
            out["predicted"] = out["loss"] - out["residual"]
        return out

    def to_inference_data(self):
        """A Bayesian fit's posterior as ArviZ ``InferenceData``: :attr:`idata`, or, when the
        fit was reloaded from JSON without it, the netCDF file it was saved to
        (``extras["netcdf"]``).  ``ValueError`` for a fit of another method, or a Bayesian fit
        neither holding its posterior nor saved to a file that still exists."""
        if self.idata is not None:
            return self.idata
        if self.method != "bayes":
            raise ValueError(f"a {self.method} fit has no posterior; fit with method='bayes'")
        path = self.extras.get("netcdf")
        if not path or not os.path.isfile(path):
            raise ValueError(
                "this Bayesian fit holds no posterior: it was reloaded from JSON and "
                + (f"its netCDF file {path} does not exist" if path else "was not saved (save=PATH)")
            )
        return load_posterior(path)

    def draws_frame(self):
        """The draws this fit carries as a DataFrame with columns E, A, alpha, B, beta, phi: a
        Bayesian fit's posterior draws (from :attr:`idata`; sigma, nu and tau follow, and the
        index is (chain, draw)), or the bootstrap replicates (``BootstrapResult.attach(fit,
        draws=True)``, index ``replicate``); None when it carries none."""
        import pandas as pd

        if self.idata is not None:
            post = self.idata.posterior
            index = pd.MultiIndex.from_product(
                [post["chain"].values, post["draw"].values], names=["chain", "draw"]
            )
            values = idata_draws(self.idata)
            names = [k for k in PARAM_NAMES if k in values] + [k for k in values if k not in PARAM_NAMES]
            return pd.DataFrame({k: np.asarray(values[k], dtype=float) for k in names}, index=index)
        draws = (self.bootstrap or {}).get("draws")
        if not draws:
            return None
        frame = pd.DataFrame({k: np.asarray(draws[k], dtype=float) for k in PARAM_NAMES if k in draws})
        frame.index.name = "replicate"
        return frame

    def _repr_html_(self) -> str:
        from .serialize import html_table

        stats = {
            "method": self.method,
            "runs": self.n_runs,
            "R^2": f"{self.r2:.5f}",
            "RMSE": f"{self.rmse:.5f}",
            "converged": self.converged,
        }
        notes = "".join(f"<li>{html.escape(w.message)}</li>" for w in self.warnings)
        return (
            html_table(self.to_frame(), caption="FitResult")
            + html_table(stats)
            + (f"<ol>{notes}</ol>" if notes else "")
        )


def _plural(n: Any, word: str) -> str:
    """'1 replicate', '2 replicates'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


#: Labels of the internal coordinates in printed tables (a, b, e are log A, log B, log E).
_COORD_LABELS = {"a": "log A", "b": "log B", "e": "log E"}


def _correlations(corr: Mapping[str, Mapping[str, float | None]] | None, min_correl: float = 0.1):
    """Pairs [(label 'C(log A, alpha)', value)] with |value| >= min_correl, largest first
    (lmfit's ``fit_report`` convention)."""
    if not corr:
        return []
    names = list(corr)
    pairs = []
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            value = (corr.get(x) or {}).get(y)
            if value is not None and math.isfinite(value) and abs(value) >= min_correl:
                label = f"C({_COORD_LABELS.get(x, x)}, {_COORD_LABELS.get(y, y)})"
                pairs.append((label, float(value)))
    return sorted(pairs, key=lambda p: -abs(p[1]))


def _num(x: Any, fmt: str) -> str:
    return "nan" if x is None or not np.isfinite(x) else format(x, fmt)


def bayes_summary(result: FitResult) -> str:
    """Text summary of a Bayesian fit, like ``arviz.summary`` plus sampler and LOO facts.

    Reads only ``result`` (its ``extras`` as :func:`phifit.fitters.bayes.sample_posterior` stores
    them), so it works on a result reloaded from JSON.  Columns: the posterior median
    (phifit's point value), mean, sd, the HDI at ``result.ci_level``, MCSE of mean and sd,
    bulk and tail ESS, R-hat; then divergences, the thresholds, PSIS-LOO and the cautions.
    """
    if result.method != "bayes":
        raise ValueError(f"bayes_summary needs a Bayesian fit, got method={result.method!r}")
    ex = result.extras
    post = ex.get("posterior", {})
    diag = ex.get("diagnostics", {})
    pct = f"{100 * result.ci_level:g}%"
    lines = [
        "[[phifit: joint law, method=bayes]]",
        "L = E + A * (N_once + r**phi * N_rec)**(-alpha) + B * D**(-beta)",
        f"likelihood: {ex.get('likelihood', '')}",
        f"sampler: {ex.get('sampler')} NUTS, {ex.get('chains')} chains x {ex.get('draws')} draws after "
        f"{ex.get('tune')} tuning steps (seed {ex.get('seed')}, target_accept {ex.get('target_accept')})",
        f"runs: {result.n_runs}" + (f"   source: {result.source}" if result.source else ""),
        "",
        f"[[Posterior]] value = posterior median; sd = posterior sd; {pct} HDI = highest-density interval",
        f"    {'':<6} {'median':>11} {'mean':>11} {'sd':>10} {f'{pct} HDI':>25} {'mcse_mean':>10} "
        f"{'mcse_sd':>9} {'ess_bulk':>9} {'ess_tail':>9} {'r_hat':>7}",
    ]
    for name in (*PARAM_NAMES, "sigma", "nu", "tau"):
        s = post.get(name)
        if s is None:
            value = result.params.get(name)
            if name in result.fixed:
                lines.append(f"    {name:<6} {_num(value, '11.5g')}  (fixed)")
            elif name in PARAM_NAMES:
                lines.append(f"    {name:<6} {'n/a':>11}  (not identified by these runs)")
            continue
        lo, hi = s.get("hdi") or [float("nan"), float("nan")]
        lines.append(
            f"    {name:<6} {_num(s['median'], '11.5g')} {_num(s['mean'], '11.5g')} {_num(s['sd'], '10.3g')} "
            f"[{_num(lo, '11.5g')}, {_num(hi, '11.5g')}] {_num(s.get('mcse_mean'), '10.2g')} "
            f"{_num(s.get('mcse_sd'), '9.2g')} {_num(s['ess_bulk'], '9.0f')} {_num(s['ess_tail'], '9.0f')} "
            f"{_num(s['r_hat'], '7.3f')}"
        )
    cells = ex.get("cell_effects") or {}
    if cells.get("cells"):
        tau = cells["tau"]
        lo, hi = tau["hdi"]
        lines += [
            "",
            f"[[Cell effects]] u_c = log-loss the runs of a (budget, r) cell share beyond the law; "
            f"tau = sd of u_c = {_num(tau['median'], '.4g')} [{_num(lo, '.4g')}, {_num(hi, '.4g')}] "
            f"(the law's misfit at the cell level, with the noise a cell's runs share)",
        ]
        for row in cells["cells"]:
            c_lo, c_hi = row["hdi"]
            away = "  HDI excludes 0" if c_lo > 0 or c_hi < 0 else ""
            lines.append(
                f"    {row['cell']:<28} n={row['n']:<3d} {_num(row['median'], '+10.4f')} "
                f"[{_num(c_lo, '+.4f')}, {_num(c_hi, '+.4f')}]{away}"
            )
    n_draws = (ex.get("chains") or 0) * (ex.get("draws") or 0)
    loo = ex.get("loo", {})
    lines += [
        "",
        "[[Sampler diagnostics]]",
        f"    divergences       {ex.get('divergences')} of {n_draws} draws",
        f"    max R-hat         {_num(diag.get('max_r_hat'), '.4f')} (warn above {diag.get('r_hat_max')})",
        f"    min ESS bulk/tail {_num(diag.get('min_ess_bulk'), '.0f')} / "
        f"{_num(diag.get('min_ess_tail'), '.0f')} (warn below {diag.get('ess_min')})",
        f"    converged         {result.converged} "
        + (
            f"(every R-hat <= {diag.get('r_hat_max')} and no divergence)"
            if result.converged
            else f"(needs every R-hat <= {diag.get('r_hat_max')} and no divergence; see the warnings)"
        ),
        f"    sampling          {_num(ex.get('sampling_s'), '.1f')} s "
        f"(compile {_num(ex.get('compile_s'), '.1f')} s)",
        "",
        "[[Fit statistics]]",
        f"    ELPD-LOO          {_num(loo.get('elpd_loo'), '.3f')} +- {_num(loo.get('se'), '.3f')} "
        f"(p_loo {_num(loo.get('p_loo'), '.2f')}; {loo.get('n_high_pareto_k')} runs with Pareto k > "
        f"{_num(loo.get('good_k'), '.2f')})",
        f"    R^2 (raw nats)    {result.r2:.5f}   at the posterior median",
        f"    RMSE (nats)       {result.rmse:.5f}   at the posterior median",
    ]
    ppc = (ex.get("ppc") or {}).get("by_r") or []
    if ppc:
        lines += ["", "[[Posterior predictive check]] Bayesian p per r (near 0 or 1: misfit)"]
        lines += [
            f"    r={row['r']:<4g} n={row['n']:<4d} p(mean log-loss) {row['p_mean']:.3f}   "
            f"p(residual RMS) {row['p_rmse']:.3f}"
            for row in ppc
        ]
    if result.warnings:
        lines += ["", "[[Notes]]"]
        lines += [f"    [{i}] ({w.kind}) {w.message}" for i, w in enumerate(result.warnings, 1)]
    return "\n".join(lines)


# -- a Bayesian fit's posterior as ArviZ holds it (kept here, not with the sampler, so that a FitResult
# reaches its posterior without importing the model) ----------------------------------------------------
#: Per-draw scalars of the posterior besides theta: the noise sd, Student-t's nu, the cell effects' sd.
SCALAR_VARS = ("sigma", "nu", "tau")


def natural_params(post: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays of E, A, alpha, B, beta, phi (+ sigma, nu and the cell model's tau) from internal
    ones (any shape): E = exp(e), A = exp(a), B = exp(b); the exponents as they are."""
    out = {
        "E": np.exp(post["e"]),
        "A": np.exp(post["a"]),
        "alpha": post["alpha"],
        "B": np.exp(post["b"]),
        "beta": post["beta"],
        "phi": post["phi"],
    }
    for k in SCALAR_VARS:
        if k in post:
            out[k] = post[k]
    return out


def load_posterior(path: str | os.PathLike):
    """Reload a posterior saved by ``fit_bayes(..., save=PATH)`` as ArviZ InferenceData."""
    az = import_optional("arviz", "bayes", "reading a saved posterior")

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such posterior file")
    try:
        idata = az.from_netcdf(str(path))
    except Exception as err:  # noqa: BLE001 - any reader failure means "not a posterior"
        raise ValueError(f"{path}: not a readable netCDF posterior ({err})") from None
    if "posterior" not in idata.groups() or idata.posterior.attrs.get("generator") != "phifit":
        raise ValueError(f"{path}: not a phifit posterior (no phifit attributes in its posterior group)")
    return idata


def idata_draws(idata) -> dict[str, np.ndarray]:
    """Per-draw natural parameters of an InferenceData's posterior as flat, chain-major arrays."""
    names = tuple(THETA_NAMES) + SCALAR_VARS
    post = {k: np.asarray(idata.posterior[k].values, float) for k in names if k in idata.posterior}
    return {k: v.ravel() for k, v in natural_params(post).items()}
