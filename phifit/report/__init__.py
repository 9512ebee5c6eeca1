"""The report: run the whole analysis as plain results, then render it (the rendering computes nothing).

- :mod:`~phifit.report.analysis`: :func:`analyse` runs fit, bootstrap, comparison, diagnostics,
  recipes, derived quantities and (optionally) the plan, and returns an :class:`Analysis`;
- :mod:`~phifit.report.honest`: :func:`answer` runs the analysis without figures and words it
  with the report's headline (:class:`Answer`, ``phifit.answer``);
- :mod:`~phifit.report.figures`: the figures, drawn from the typed results through the public
  ``phifit.plot`` functions where there is one;
- :mod:`~phifit.report.html`: HTML building blocks (page shell, tables, notes);
- :mod:`~phifit.report.format`: the formatting helpers every section shares;
- ``sections_*``: the page's sections (fit, diagnostics, derived quantities, plan);
- :mod:`~phifit.report.write`: :func:`write_report` writes ``index.html``, ``results.json`` and
  ``figures/``.
"""

from __future__ import annotations

from .analysis import Analysis, AnalysisOptions, analyse
from .honest import Answer, answer
from .write import ReportFiles, write_report

__all__ = ["Analysis", "AnalysisOptions", "Answer", "ReportFiles", "analyse", "answer", "write_report"]
