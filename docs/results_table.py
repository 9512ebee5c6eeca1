"""Write the tables of shipped results in README.md and docs/ from the shipped ``reports/*/results.json``.

- ``results-table`` (README.md, docs/index.md): one row per committed report: the table it was
  made from, the runs fitted, phi with its 95% block-bootstrap interval, R² (raw nats) and the
  verdicts on phi = 0 and phi = 1 with their wild cluster bootstrap p-values;
- ``study-table`` (docs/study.md): phifit on the study's read-off runs next to the study's
  published numbers;
- ``cpu-table``, ``recipes-table`` and ``prediction-table`` (docs/cpu-runs.md): what the two
  bundled CPU sweeps give, and the planned sweep's predictions against its outcome;
- ``adaptive-headline`` (README.md) and ``adaptive-table`` (docs/cpu-runs.md): the third CPU
  reproduction (``reports/cpu_adaptive``): phi, its interval and whether (0, 1) holds it, against
  its prediction of record, and the adaptive loop round by round (the report's ``adaptive``
  section, read from ``data/cpu_adaptive_rounds.jsonl``);
- ``bpe-headline`` (README.md) and ``bpe-table`` (docs/cpu-runs.md): the fourth CPU reproduction
  (``reports/cpu_bpe``): its free multipliers m_r and phi with their intervals against (0, 1) and
  against its prediction of record, and its adaptive loop round by round.

Each table sits between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``; only that block is
replaced, so every number these pages quote from a report comes from the report.

    python docs/results_table.py          # rewrite the blocks
    python docs/results_table.py --check  # exit 1 if a block is not what the reports say
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the files holding the table, and whether their rows link to the report folders
TARGETS = {"README.md": True, "docs/index.md": False}
START, END = "<!-- results-table:start -->", "<!-- results-table:end -->"
#: the shipped reports (the folders under ``reports/`` that git tracks), in the tables' order. Only
#: these are read: a report a user writes there (the README's quick start writes
#: ``reports/quickstart/``, git-ignored) never enters a table. A new shipped report is added here;
#: tests/test_docs.py checks that this list is exactly the tracked ``reports/*/results.json``.
SHIPPED = ("looped_study", "paper_design_simulated", "cpu_small", "cpu_planned", "cpu_adaptive", "cpu_bpe")


def _reports(root: Path) -> list[Path]:
    return [root / "reports" / name / "results.json" for name in SHIPPED]


def _number(value: float) -> str:
    """Three decimals with a true minus sign, as the search-bound ends print."""
    return f"{value:.3f}".replace("-", "\u2212")


def _number4(value: float) -> str:
    return f"{value:+.4f}".replace("-", "\u2212")


def _number1(value: float) -> str:
    return f"{value:.1f}".replace("-", "\u2212")


def interval_text_(lo: float, hi: float, box) -> str:
    """phi's interval as the report prints it (an end on the search box marked as censored)."""
    from phifit.intervals import interval_text

    return interval_text(lo, hi, box, fmt=_number)


def _verdict(fit: dict | None) -> str:
    if not fit or fit.get("rejected") is None:
        return "not tested"
    if fit.get("undecided"):
        return "undecided"
    p = fit.get("wild_p_value")
    word = "rejected" if fit["rejected"] else "not rejected"
    if p is None:
        return word
    if not fit["rejected"] and p < 0.05:  # kept by the held-out budgets (the verdict rule)
        return f"{word} (p = {p:.2g}: in-sample only, it predicts held-out budgets better)"
    return f"{word} (p = {p:.2g})"


def _lack_of_fit(results: dict) -> str:
    """The lack-of-fit test of r^phi against free multipliers m_r (its wild p-value)."""
    mult = results.get("multipliers") or {}
    p = mult.get("p_value")
    if p is None:
        return "not tested"
    return f"{'rejected' if p < 0.05 else 'not rejected'} (p = {p:.2g})"


def row(results: dict, report: str, *, link: bool = True) -> str:
    """One table row for one report's ``results.json``."""
    fit = results["fit"]
    phi = fit["params"].get("phi")
    fits = (results.get("comparison") or {}).get("fits", {})
    runs = str(fit["n_runs"])
    if results.get("n_table_runs") not in (None, fit["n_runs"]):
        runs += f" of {results['n_table_runs']}"
    if phi is None:
        phi_text = interval = "—"
    else:
        lo, hi = fit["ci"]["phi"]
        phi_text = _number(phi)
        interval = interval_text_(lo, hi, fit["bounds"]["phi"])
    name = f"[`{report}`](reports/{report}/)" if link else f"`{report}`"
    return (
        f"| {name} | `{results['source']}` | {runs} | {phi_text} | {interval} "
        f"| {fit['r2']:.4f} | {_verdict(fits.get('phi=0'))} | {_verdict(fits.get('phi=1'))} "
        f"| {_lack_of_fit(results)} |"
    )


def table(root: Path = ROOT, *, link: bool = True) -> str:
    """The markdown table of every shipped report (:data:`SHIPPED`) under ``root/reports``."""
    lines = [
        "| report | run table | runs | phi | 95% interval | R² | phi = 0 | phi = 1 | r^phi (lack of fit) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in _reports(root):
        results = json.loads(path.read_text(encoding="utf-8"))
        lines.append(row(results, path.parent.name, link=link))
    return "\n".join(lines)


def _load(root: Path, report: str) -> dict:
    return json.loads((root / "reports" / report / "results.json").read_text(encoding="utf-8"))


def _by_r(results: dict) -> str:
    """Mean residual per r in nats, with its t; a flagged (systematic) offset in bold."""
    parts = []
    for g in results["diagnostics"]["residuals"]["by_r"]:
        text = f"r = {g['group']}: {g['mean']:+.4f} (t = {g['t']:.1f})".replace("-", "\u2212")
        parts.append(f"**{text}**" if g["flagged"] else text)
    return "; ".join(parts)


def _tests(results: dict) -> str:
    fits = results["comparison"]["fits"]
    return f"{_verdict(fits['phi=0'])} / {_verdict(fits['phi=1'])}"


#: the study's published numbers (arXiv 2604.21106 v3: Table 2, Table 7, Appendix F)
PUBLISHED = {
    "phi": "0.459 [0.41, 0.53] (200 replicates)",
    "alpha, beta, E": "0.199, 0.369, 1.57",
    "r2": "0.9972 / 0.9858 / 0.9552",
    "tests": "both rejected (by R²)",
    "r4": "\u22120.006 (Table 7)",
}


def study_table(root: Path = ROOT) -> str:
    """phifit on the digitized study table (``reports/looped_study``) next to the published fit."""
    res = _load(root, "looped_study")
    fit, fits = res["fit"], res["comparison"]["fits"]
    p = fit["params"]
    lo, hi = fit["ci"]["phi"]
    interval = interval_text_(lo, hi, fit["bounds"]["phi"])
    r4 = next(g for g in res["diagnostics"]["residuals"]["by_r"] if g["group"] == 4)
    flag = ", flagged as systematic" if r4["flagged"] else ""
    cv = [fits[k]["cv_rmse"] for k in ("phi=0", "phi=1", "free")]
    rows = [
        (
            "phi, 95% cell-bootstrap interval",
            f"{_number(p['phi'])} {interval} ({res['bootstrap']['n_boot']} replicates)",
            PUBLISHED["phi"],
        ),
        ("alpha, beta, E", f"{p['alpha']:.3f}, {p['beta']:.3f}, {p['E']:.3f}", PUBLISHED["alpha, beta, E"]),
        (
            "R² free / phi = 0 / phi = 1",
            " / ".join(f"{fits[k]['r2']:.4f}" for k in ("free", "phi=0", "phi=1")),
            PUBLISHED["r2"],
        ),
        (
            "phi = 0 / phi = 1",
            f"{_tests(res)}; leave-one-budget-out RMSE {cv[0]:.4f} and {cv[1]:.4f} vs {cv[2]:.4f} nats",
            PUBLISHED["tests"],
        ),
        (
            "mean residual at r = 4 (nats)",
            f"{_number4(r4['mean'])} (t = {_number1(r4['t'])}{flag})",
            PUBLISHED["r4"],
        ),
    ]
    lines = ["| | phifit on the read-off runs | the study (published) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def cpu_table(root: Path = ROOT) -> str:
    """The two bundled CPU sweeps side by side (``reports/cpu_small``, ``reports/cpu_planned``)."""
    reports = {name: _load(root, name) for name in ("cpu_small", "cpu_planned")}

    def cells(fn):
        return " | ".join(fn(res) for res in reports.values())

    def interval(res, key="ci"):
        lo, hi = res["fit"][key]["phi"]
        return interval_text_(lo, hi, res["fit"]["bounds"]["phi"])

    def width(res):
        lo, hi = res["fit"]["ci"]["phi"]
        box = res["fit"]["bounds"]["phi"]
        if _on_box(lo, hi, box):
            return "not determined (an end on the box)"
        return f"{hi - lo:.3g}"

    def regions(res):
        reg, n = res["bootstrap"]["phi_regions"], res["bootstrap"]["n_boot"]
        return f"{reg['at lower bound']:.1%} / {reg['phi <= 0']:.1%} (of {n:,})"

    rows = [
        (
            "runs fitted (of the table), (budget, r) cells",
            lambda r: f"{r['fit']['n_runs']} (of {r['n_table_runs']}), {r['bootstrap']['n_blocks']}",
        ),
        ("phi", lambda r: _number(r["fit"]["params"]["phi"])),
        ("95% percentile interval", interval),
        ("its width", width),
        ("95% BCa interval", lambda r: interval(r, "ci_bca")),
        ("replicates at the lower search bound / with phi ≤ 0", regions),
        ("R², RMSE (nats)", lambda r: f"{r['fit']['r2']:.4f}, {r['fit']['rmse']:.4f}"),
        ("mean residual by r (nats; bold: flagged as systematic)", _by_r),
        ("phi = 0 / phi = 1 (wild cluster bootstrap)", _tests),
    ]
    lines = ["| | `cpu_small` (baseline) | `cpu_planned` |", "|---|---|---|"]
    lines += [f"| {label} | {cells(fn)} |" for label, fn in rows]
    return "\n".join(lines)


def recipes_table(root: Path = ROOT) -> str:
    """Delta-phi of the cpu_small case studies against the baseline refit on their budgets."""
    rec = _load(root, "cpu_small")["recipes"]
    lines = [
        "| recipe | phi | baseline phi, same budgets | Δphi, 95% paired-bootstrap interval | p | cells |",
        "|---|---|---|---|---|---|",
    ]
    for name, d in rec["delta_phi"].items():
        lo, hi = d["ci"]
        lines.append(
            f"| `{name}` | {_number(d['variant_phi'])} | {_number(d['baseline_phi'])} "
            f"| {d['estimate']:+.3f} [{lo:+.2f}, {hi:+.2f}] | {d['p_value']:.2f} | {d['n_blocks']} |".replace(
                "-", "\u2212"
            )
        )
    joint = rec["joint"]
    lines.append("")
    lines.append(
        f"One phi per recipe against a shared phi (joint fit, {joint['n_runs']} runs): wild cluster "
        f"bootstrap p = {joint['wild_p_value']:.2g}; the chi-square LR test, which assumes independent "
        f"runs, gives p = {joint['lr_p_value']:.1e}."
    )
    return "\n".join(lines)


def prediction_table(root: Path = ROOT) -> str:
    """The cpu_planned sweep's predictions (``data/cpu_planned_prediction*.json``, the report's own
    retrospective plan) against the interval and tests its report gave."""
    res = _load(root, "cpu_planned")
    lo, hi = res["fit"]["ci"]["phi"]
    box = res["fit"]["bounds"]["phi"]
    realised = hi - lo
    data = root / "data"
    columns = {
        "of record (before training)": json.loads((data / "cpu_planned_prediction.json").read_text())[
            "simulation"
        ],
        "misfit-aware (after training began)": json.loads(
            (data / "cpu_planned_prediction_misfit.json").read_text()
        )["simulation"],
        "retrospective (the report's `--plan`: this table's law and noise)": res["plan"]["simulation"],
    }

    def power(s, key):
        se = (s.get("power_mc_se") or {}).get(key)
        return f"{s['power'][key]:.2f}" + (f" ± {se:.2f}" if se is not None else "")

    def narrower(s):
        widths = [t["width"] for t in s["tables"] if t.get("width") is not None]
        return f"{sum(w < realised for w in widths) / len(widths):.0%} of {len(widths)}"

    fits = res["comparison"]["fits"]
    on_box = _on_box(lo, hi, box)
    rows = [
        (
            "width of phi's 95% interval",
            lambda s: f"median {s['width_median']:.3g} (10–90%: {s['width_q10']:.3g}–{s['width_q90']:.3g})",
            f"{realised:.3g}",
        ),
        ("interval reaches the search box", lambda s: f"P = {s['p_box']:.2f}", "yes" if on_box else "no"),
        ("phi = 0 rejected (wild test)", lambda s: f"P = {power(s, 'phi=0')}", _verdict(fits["phi=0"])),
        ("phi = 1 rejected (wild test)", lambda s: f"P = {power(s, 'phi=1')}", _verdict(fits["phi=1"])),
        ("simulated tables narrower than the realised interval", narrower, "—"),
    ]
    head = " | ".join(f"predicted, {name}" for name in columns)
    lines = [f"| | {head} | realised |", "|---" * (len(columns) + 2) + "|"]
    for label, fn, real in rows:
        lines.append(f"| {label} | " + " | ".join(fn(s) for s in columns.values()) + f" | {real} |")
    return "\n".join(lines)


#: the third CPU reproduction: its report (whose ``adaptive`` section is its round log, read by
#: :func:`phifit.plan.rounds.load_rounds`) and its prediction of record
ADAPTIVE = "cpu_adaptive"
ADAPTIVE_PREDICTION = Path("reports") / ADAPTIVE / "prediction_of_record.json"


def _on_box(lo: float, hi: float, box) -> bool:
    return lo <= box[0] + 1e-9 or hi >= box[1] - 1e-9


def _inside_unit(lo: float, hi: float, box) -> str:
    """Whether phi's interval lies inside (0, 1), and if not, which way it leaves."""
    if 0 < lo and hi < 1:
        return "lies inside (0, 1)"
    where = []
    if lo <= 0:
        where.append("reaches the box's lower end" if lo <= box[0] + 1e-9 else "reaches below 0")
    if hi >= 1:
        where.append("reaches the box's upper end" if hi >= box[1] - 1e-9 else "reaches above 1")
    return "does not lie inside (0, 1): it " + " and ".join(where)


def _width(lo: float, hi: float, box) -> str:
    text = f"{hi - lo:.3g}"
    return text + " (an end on the box)" if _on_box(lo, hi, box) else text


def _prediction(root: Path, path: Path = ADAPTIVE_PREDICTION) -> tuple[dict, dict]:
    pred = json.loads((root / path).read_text(encoding="utf-8"))
    return pred, pred["simulation"]


def adaptive_headline(root: Path = ROOT) -> str:
    """The README's sentence on the third CPU reproduction: phi, its interval, whether (0, 1) holds
    it, against the prediction of record made before its first run."""
    res = _load(root, ADAPTIVE)
    rounds = res["adaptive"]
    pred, sim = _prediction(root)
    fit = res["fit"]
    lo, hi = fit["ci"]["phi"]
    box = fit["bounds"]["phi"]
    finished = [r for r in rounds["rounds"] if r["finished"]]
    pilot = next(r for r in finished if r["round"] == 0)
    stopped = f"; stopped: {rounds['stop']['reason']}" if rounds.get("stop") else ""
    widths = [t["width"] for t in sim["tables"] if t.get("width") is not None]
    wider = sum(w < hi - lo for w in widths) / len(widths)
    reaches = "reaches" if _on_box(lo, hi, box) else "does not reach"
    return (
        f"**Third CPU reproduction** ([`cpu_adaptive`](reports/cpu_adaptive/), {fit['n_runs']} runs of "
        f"the study's recipe: a {pilot['n_runs']}-run pilot and {max(r['round'] for r in finished)} rounds "
        f"of `phifit sweep --adaptive`{stopped}): phi = {_number(fit['params']['phi'])}, 95% cell-bootstrap "
        f"interval {interval_text_(lo, hi, box)}, which {_inside_unit(lo, hi, box)}; width "
        f"{_width(lo, hi, box)}. Its prediction of record, committed before its first run (all "
        f"{pred['design']['n_runs']} runs of the design, {sim['n_tables']} simulated tables): a median "
        f"width of {sim['width_median']:.3g} (10–90%: {sim['width_q10']:.3g}–{sim['width_q90']:.3g}), the "
        f"interval reaching the box in {sim['p_box']:.0%} of tables. Realised: wider than {wider:.0%} of "
        f"those tables, and it {reaches} the box. Round by round: "
        f"[docs/cpu-runs.md](docs/cpu-runs.md#cpu_adaptive-the-third-reproduction-run-by-the-adaptive-loop)."
    )


def adaptive_table(root: Path = ROOT, report: str = ADAPTIVE, prediction: Path = ADAPTIVE_PREDICTION) -> str:
    """The adaptive loop round by round (the report's ``adaptive`` section): what each round trained,
    the width its decision predicted (asymptotic) and the width the cell bootstrap then measured; the
    report's final interval last, then the prediction of record."""
    res = _load(root, report)
    lines = [
        "| round | trained (r · width · budget) | runs | training FLOPs | phi | 95% interval "
        "| width: predicted | width: realised |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in res["adaptive"]["rounds"]:
        if not row["finished"]:
            continue
        k, ci, predicted = row["round"], row.get("phi_ci"), row.get("width_predicted")
        if ci and row.get("width_realised") is not None:
            interval, realised = f"[{_number(ci[0])}, {_number(ci[1])}]", f"{row['width_realised']:.3g}"
        else:
            interval, realised = "not bootstrapped", "—"
        trained = (
            "; ".join(f"r {p['r']} · d {p['size']:g} · {p['budget']:.3g}" for p in row["picks"])
            if k
            else "the pilot grid"
        )
        lines.append(
            f"| {'pilot' if k == 0 else k} | {trained} | {row['n_runs']} | {row['flops']:.3g} "
            f"| {_number(row['phi'])} | {interval} | {'—' if predicted is None else f'{predicted:.3g}'} "
            f"| {realised} |"
        )
    fit = res["fit"]
    lo, hi = fit["ci"]["phi"]
    box = fit["bounds"]["phi"]
    lines.append(
        f"| report | ({res['bootstrap']['n_boot']:,} replicates) | {fit['n_runs']} | — "
        f"| {_number(fit['params']['phi'])} | {interval_text_(lo, hi, box)} | — | {_width(lo, hi, box)} |"
    )
    pred, sim = _prediction(root, prediction)
    lines.append("")
    lines.append(
        f"The prediction of record (`{prediction.as_posix()}`, before the first run; all "
        f"{pred['design']['n_runs']} runs of the design, misfit carried, {sim['n_tables']} simulated "
        f"tables): median width {sim['width_median']:.3g} (10–90%: {sim['width_q10']:.3g}–"
        f"{sim['width_q90']:.3g}), the interval reaching the box in {sim['p_box']:.0%} of tables."
    )
    return "\n".join(lines)


#: the fourth CPU reproduction, in the regime the regime study picked (docs/regime.md)
BPE = "cpu_bpe"
BPE_PREDICTION = Path("reports") / BPE / "prediction_of_record.json"


def _multipliers_text(res: dict) -> str:
    """ "m_2 = 1.2 [1.1, 1.3], ..." from the report's free multipliers (m_1 = 1)."""
    mult = res["multipliers"]
    parts = []
    for r, m, ci in zip(mult["r"], mult["multiplier"], mult["multiplier_ci"], strict=True):
        iv = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and None not in ci else ""
        parts.append(f"m_{int(r)} = {m:.2f}{iv}")
    return ", ".join(parts)


def _worth(res: dict) -> str:
    """What the free multipliers say a recurrence is worth, read from their intervals against 1."""
    mult = res["multipliers"]
    cis = [ci for ci in mult["multiplier_ci"] if ci and None not in ci]
    if len(cis) < len(mult["r"]):
        return "no interval of m_r could be given (see the report), so the table does not say"
    above = [int(r) for r, ci in zip(mult["r"], cis, strict=True) if ci[0] > 1]
    below = [int(r) for r, ci in zip(mult["r"], cis, strict=True) if ci[1] < 1]
    if len(above) == len(mult["r"]):
        return "every looped r is worth more than one unique block"
    if len(below) == len(mult["r"]):
        return "every looped r is worth less than one unique block"
    words = []
    if above:
        words.append(f"worth more than one unique block at r = {', '.join(map(str, above))}")
    if below:
        words.append(f"less at r = {', '.join(map(str, below))}")
    return "; ".join(words) or "no looped r is told apart from one unique block"


def bpe_headline(root: Path = ROOT) -> str:
    """The README's sentence on the fourth CPU reproduction: the free multipliers with their
    intervals, phi's interval against (0, 1), and the outcome against the prediction of record."""
    res = _load(root, BPE)
    rounds = res["adaptive"]
    pred, sim = _prediction(root, BPE_PREDICTION)
    fit = res["fit"]
    lo, hi = fit["ci"]["phi"]
    box = fit["bounds"]["phi"]
    phi = fit["params"]["phi"]
    finished = [r for r in rounds["rounds"] if r["finished"]]
    pilot = next(r for r in finished if r["round"] == 0)
    widths = [t["width"] for t in sim["tables"] if t.get("width") is not None]
    wider = sum(w < hi - lo for w in widths) / len(widths)
    phi_pred = pred["law"]["phi"]
    inside = "inside" if lo <= phi_pred <= hi else "outside"
    given = all(ci and None not in ci for ci in res["multipliers"]["multiplier_ci"])
    with_ci = ", 95% cell-bootstrap intervals" if given else ""
    return (
        f"**Fourth CPU reproduction** ([`cpu_bpe`](reports/cpu_bpe/), {fit['n_runs']} runs in the regime "
        f"[the regime study](docs/regime.md) picked, a 4,096-token BPE with context 256: a "
        f"{pilot['n_runs']}-run pilot and {max(r['round'] for r in finished)} rounds of `phifit sweep "
        f"--adaptive`): free multipliers {_multipliers_text(res)} (m_1 = 1{with_ci}): {_worth(res)}. "
        f"phi = {_number(phi)}, 95% cell-bootstrap interval {interval_text_(lo, hi, box)}, which "
        f"{_inside_unit(lo, hi, box)}; width {_width(lo, hi, box)}. {_parts_text(res, box)}"
        f"{_in_sample_text(res)}Its prediction of record, committed "
        f"before its first new run (the regime study's 16 BPE runs as pilot, all {pred['design']['n_runs']} "
        f"runs of the design): phi = {phi_pred:.2f} with a median width of {sim['width_median']:.2f} "
        f"(10–90%: {sim['width_q10']:.2f}–{sim['width_q90']:.2f}). Realised: phi {_number(phi)}, the "
        f"predicted {phi_pred:.2f} lies {inside} its interval, which is wider than {wider:.0%} of the "
        f"predicted tables. Round by round, and phi against compute: [docs/cpu-runs.md](docs/cpu-runs.md"
        f"#cpu_bpe-the-fourth-reproduction-in-the-regime-the-regime-study-picked)."
    )


def _parts_text(res: dict, box) -> str:
    """The leave-one-part-out reading in a sentence (with a trailing space), from ``res["parts"]``:
    which part, left out, changes phi's reading beyond Monte-Carlo error, and how; "" without it."""
    parts = res.get("parts")
    if not parts or not parts["rows"]:
        return ""
    carrying = [row for row in parts["rows"] if row["flips"]]
    if not carrying:
        return "No single size, budget or r carries that reading (each left out in turn). "
    said = "; ".join(
        f"without its {row['n_left_out']} runs at {row['name']} phi = {_number(row['phi'])} "
        f"{interval_text_(*row['ci'], box)}: " + ", ".join(row["flips"])
        for row in carrying
    )
    return (
        "**But it rests on one corner of the design**: left out in turn, every size, budget and r keeps "
        f"that reading except {', '.join(row['name'] for row in carrying)} ({said}). "
    )


def _in_sample_text(res: dict) -> str:
    """A sentence (with a trailing space) when the wild tests reject phi = 0 and phi = 1 but both
    restricted laws predict the held-out budgets no worse than the free law; "" otherwise."""
    fits = res["comparison"]["fits"]
    free, zero, one = fits["free"], fits.get("phi=0"), fits.get("phi=1")
    if not zero or not one or free.get("cv_rmse") is None:
        return ""
    tests_reject = all((f.get("wild_p_value") or 1) < 0.05 for f in (zero, one))
    predict_better = all(f["cv_rmse"] <= free["cv_rmse"] for f in (zero, one))
    if not (tests_reject and predict_better):
        return ""
    return (
        "The wild tests reject phi = 0 and phi = 1 in sample only: left out one budget at a time, both "
        f"restricted laws predict the held-out budget better (RMSE {zero['cv_rmse']:.3f} and "
        f"{one['cv_rmse']:.3f} nats against {free['cv_rmse']:.3f}). "
    )


def bpe_table(root: Path = ROOT) -> str:
    """The fourth reproduction's adaptive loop round by round (:func:`adaptive_table`)."""
    return adaptive_table(root, BPE, BPE_PREDICTION)


#: block name -> (file, builder); the README's rows link to the report folders, the docs' do not
BLOCKS = (
    ("results-table", "README.md", lambda root: table(root, link=True)),
    ("results-table", "docs/index.md", lambda root: table(root, link=False)),
    ("study-table", "docs/study.md", study_table),
    ("cpu-table", "docs/cpu-runs.md", cpu_table),
    ("recipes-table", "docs/cpu-runs.md", recipes_table),
    ("prediction-table", "docs/cpu-runs.md", prediction_table),
    ("adaptive-headline", "README.md", adaptive_headline),
    ("adaptive-table", "docs/cpu-runs.md", adaptive_table),
    ("bpe-headline", "README.md", bpe_headline),
    ("bpe-table", "docs/cpu-runs.md", bpe_table),
)


def rewrite(text: str, block: str, name: str = "results-table") -> str:
    """``text`` with the part between the markers of ``name`` replaced by ``block``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, sep, rest = text.partition(start)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"no block between {start} and {end}")
    return f"{head}{start}\n{block}\n{end}{tail}"


def stale(root: Path = ROOT) -> dict[str, str]:
    """Each file whose blocks differ from the reports, with the text it should have."""
    texts: dict[str, str] = {}
    for name, path, build in BLOCKS:
        text = texts.get(path) or (root / path).read_text(encoding="utf-8")
        texts[path] = rewrite(text, build(root), name)
    return {path: text for path, text in texts.items() if text != (root / path).read_text(encoding="utf-8")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the tables are current")
    args = parser.parse_args(argv)
    changed = stale()
    if args.check:
        for name in changed:
            print(f"{name}: a table is out of date; run python docs/results_table.py")
        return 1 if changed else 0
    for name, text in changed.items():
        (ROOT / name).write_text(text, encoding="utf-8")
        print(f"rewrote the tables in {name}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
