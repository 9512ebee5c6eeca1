"""The design rules of the next runs (phifit.plan.design_rules, applied by choose_next): every r at
every budget used, bracketed isoFLOP curves, no r in a single (budget, r) cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phifit.law import Design, loss, params_to_theta
from phifit.plan import design_rules as dr
from phifit.plan.next_runs import choose_next
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate
from phifit.study import REFERENCE_PARAMS

STUDY = "data/looped_study_runs_digitized.csv"
LAW = dict(REFERENCE_PARAMS)
RS = (1, 2, 4, 8)
BUDGETS = (1e17, 4e17, 1.6e18)
#: Five sizes per (budget, r), a factor 2.5 apart around the law's compute-optimal size.
STEPS = (-2, -1, 0, 1, 2)
NOISE = 0.003


# ---- a simulated pool ------------------------------------------------------------------------------------------
def runs_at(budget: float, r: int, size: np.ndarray) -> pd.DataFrame:
    """Runs of (budget, r) at the given sizes: half the parameters once, half in the looped block, and
    the tokens the budget buys at 6 FLOPs per parameter applied per token."""
    size = np.asarray(size, float)
    n_once, n_rec = size / 2, size / 2
    tokens = budget / (6 * (n_once + r * n_rec))
    return pd.DataFrame(
        {
            "budget": budget,
            "r": r,
            "n_once": n_once,
            "n_rec": n_rec,
            "tokens": tokens,
            "flops": budget,
            "size": size,
        }
    )


def law_loss(frame: pd.DataFrame, params: dict[str, float]) -> np.ndarray:
    design = Design.from_arrays(
        frame["r"].to_numpy(float), frame["n_once"], frame["n_rec"], frame["tokens"].to_numpy(float)
    )
    return loss(params_to_theta(params), design)


def optimal_size(budget: float, r: int) -> float:
    grid = np.logspace(5, 11, 3001)
    return float(grid[np.argmin(law_loss(runs_at(budget, r, grid), LAW))])


@pytest.fixture(scope="module")
def pool() -> pd.DataFrame:
    cells = []
    for b in BUDGETS:
        for r in RS:
            cells.append(runs_at(b, r, optimal_size(b, r) * 2.5 ** np.array(STEPS, float)))
    frame = pd.concat(cells, ignore_index=True)
    return frame.assign(run_id=[f"run{i}" for i in range(len(frame))])


def with_losses(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    return simulate(frame.reset_index(drop=True), params=LAW, noise=NOISE, seed=seed)


def violations(frame: pd.DataFrame, params: dict[str, float], rs) -> list[str]:
    """The three rules checked afresh (not with the module's functions): each broken one, in words."""
    out = []
    for b in sorted(frame["budget"].unique()):
        have = set(frame.loc[frame["budget"] == b, "r"].astype(int))
        out += [f"r {r} missing at budget {b:.3g}" for r in rs if r not in have]
    for (b, r), curve in frame.groupby(["budget", "r"]):
        if curve["size"].nunique() >= 2:
            by_size = curve.assign(law=law_loss(curve, params)).groupby("size")["law"].mean()
            if by_size.idxmin() in (by_size.index.min(), by_size.index.max()):
                out.append(f"curve ({b:.3g}, r {r}) not bracketed")
    cells = frame.groupby("r")["budget"].nunique()
    out += [f"r {r} in a single cell" for r, n in cells.items() if n == 1]
    return out


def pilot_frame(pool: pd.DataFrame) -> pd.DataFrame:
    """The lowest budget, every r at its two smallest sizes, and r = 1 at the middle budget: each r of
    the pilot but r = 1 sits in one cell and every curve's optimum is beyond its largest size."""
    low = pd.concat(
        [pool[(pool["budget"] == BUDGETS[0]) & (pool["r"] == r)].nsmallest(2, "size") for r in RS]
    )
    mid = pool[(pool["budget"] == BUDGETS[1]) & (pool["r"] == 1)].iloc[[1, 3]]
    return with_losses(pd.concat([low, mid]), seed=0)


def rounds(pool: pd.DataFrame, rules: bool, n_rounds: int = 3, k: int = 6):
    """Simulated rounds of choose_next from the pilot; each round's picks get losses from the law."""
    table = pilot_frame(pool)
    for i in range(n_rounds):
        nxt = choose_next(table_from_frame(table, source=f"round {i}"), pool, k, misfit=False, rules=rules)
        table = pd.concat([table, with_losses(nxt.frame, seed=i + 1)], ignore_index=True)
    return table, nxt


@pytest.fixture(scope="module")
def ruled(pool):
    return rounds(pool, rules=True)


@pytest.fixture(scope="module")
def greedy(pool):
    return rounds(pool, rules=False)


def test_rounds_under_the_rules_end_with_a_design_that_keeps_them(ruled, pool):
    table, last = ruled
    assert violations(table, last.law, RS) == []
    assert last.rules and last.rule_notes == []
    assert set(table["r"]) == set(RS)
    # the same through the module's own functions, with the law the last round planned with
    assert dr.unmet(table, params_to_theta(last.law), list(RS)) == []


def test_the_greedy_batch_alone_breaks_a_rule(greedy):
    table, last = greedy
    assert not last.rules and all("rule" not in p for p in last.picks)
    assert violations(table, last.law, RS)


def test_forced_picks_say_which_rule_added_them(pool):
    pilot = table_from_frame(pilot_frame(pool), source="pilot")
    nxt = choose_next(pilot, pool, 6, misfit=False)
    forced = [p for p in nxt.picks if "rule" in p]
    assert forced and all(
        p["rule"] in dr.RULES and p["why"].startswith(f"design rule {p['rule']}") for p in forced
    )
    brackets = [p for p in forced if p["rule"] == "bracket"]
    assert all("brackets the isoFLOP curve of (" in p["why"] and "largest size" in p["why"] for p in brackets)
    assert len(nxt.picks) <= 6 and nxt.to_frame()["rule"].notna().sum() == len(forced)
    assert "rule" not in nxt.frame.columns  # the frame to train from keeps the pool's columns
    back = type(nxt).from_dict(nxt.to_dict())
    assert back.picks == nxt.picks and back.rules and back.rule_notes == nxt.rule_notes


def test_rules_beyond_the_batch_are_noted_not_dropped(pool):
    """One run per batch cannot meet the pilot's needs: what is left is said, with why."""
    pilot = table_from_frame(pilot_frame(pool), source="pilot")
    nxt = choose_next(pilot, pool, 1, misfit=False)
    assert len(nxt.picks) == 1 and nxt.picks[0]["rule"] == "every_r"
    assert nxt.rule_notes and all("the batch of 1 runs is full" in n for n in nxt.rule_notes)
    assert "design rule not met: " in nxt.summary()
    capped = choose_next(pilot, pool, 6, misfit=False, max_flops=1.5 * BUDGETS[0])
    assert capped.flops_added <= 1.5 * BUDGETS[0] and capped.rule_notes
    assert any("FLOP cap" in n or "batch" in n for n in capped.rule_notes)


def test_one_round_on_the_study_pool_keeps_the_rules():
    """The study's runs as the pool, a pilot of half of each cell at its two lowest budgets: after one
    round of 8 the rules hold, but for what the study never trained, and that is noted.  (The pilot's
    law puts (4.64e17, r 4)'s optimum at its largest size, 12, the largest the study ran there.)"""
    study = pd.read_csv(STUDY)
    rng = np.random.default_rng(0)
    low = sorted(study["budget"].unique())[:2]
    rows = []
    for _, cell in study[study["budget"].isin(low)].groupby(["budget", "r"]):
        rows += list(rng.choice(cell.index.to_numpy(), size=(len(cell) + 1) // 2, replace=False))
    pilot = table_from_frame(study.loc[sorted(rows)].reset_index(drop=True), source="pilot")
    nxt = choose_next(pilot, study, 8)
    assert len(nxt.picks) == 8 and any("rule" in p for p in nxt.picks)
    both = pd.concat([pilot.frame, nxt.frame], ignore_index=True)
    left = violations(both, nxt.law, RS)
    assert left == ["curve (4.64e+17, r 4) not bracketed"]
    assert nxt.rule_notes == [
        "bracket: the law's minimum of (4.64e+17, r 4) sits at its largest size (5.782e+07): "
        "the pool has no run that meets it"
    ]
    # with 4 runs the batch is full before every need is met: said, with why
    small = choose_next(pilot, study, 4)
    assert len(small.picks) == 4 and any("the batch of 4 runs is full" in n for n in small.rule_notes)


# ---- each rule on a tiny hand-made frame ----------------------------------------------------------------------
def test_rule_every_r_at_every_budget_used():
    frame = pd.concat([runs_at(1e17, 1, [1e7]), runs_at(1e17, 2, [1e7]), runs_at(4e17, 1, [2e7])])
    assert dr.missing_r(frame, [1, 2]) == [dr.Need("every_r", 4e17, 2)]
    assert dr.missing_r(frame, [1]) == []
    pool = pd.concat([runs_at(4e17, 2, [1e7, 2e7]), runs_at(4e17, 4, [1e7])], ignore_index=True)
    assert dr.meets(dr.Need("every_r", 4e17, 2), frame, pool).tolist() == [True, True, False]
    assert dr.rule_rs(frame[frame["r"] == 2], pool.assign(r=1)) == [1, 2]


def test_rule_bracketed_curves():
    theta = params_to_theta(LAW)
    opt = optimal_size(1e18, 2)
    small = runs_at(1e18, 2, opt * np.array([0.05, 0.1]))  # far below the optimum: lowest at the largest
    large = runs_at(1e18, 2, opt * np.array([10.0, 20.0]))  # far above: lowest at the smallest
    inside = runs_at(1e18, 2, opt * np.array([0.4, 1.0, 2.5]))
    alone = runs_at(1e18, 2, opt * np.array([0.05]))  # one size: no curve to bracket
    need = dr.unbracketed(small, theta)
    assert need == [dr.Need("bracket", 1e18, 2, "largest", pytest.approx(opt * 0.1))]
    assert dr.unbracketed(large, theta)[0].side == "smallest"
    assert dr.unbracketed(inside, theta) == [] and dr.unbracketed(alone, theta) == []
    pool = runs_at(1e18, 2, opt * np.array([0.05, 0.1, 0.2, 0.4, 0.8]))
    assert dr.meets(need[0], small, pool).tolist() == [False, False, True, False, False]  # the next size up
    down = dr.Need("bracket", 1e18, 2, "smallest", opt * 0.2)
    assert dr.meets(down, small, pool).tolist() == [False, True, False, False, False]
    assert not dr.meets(dr.Need("bracket", 1e18, 2, "largest", opt * 0.8), small, pool).any()
    assert "at its largest size" in need[0].why()


def test_rule_no_lone_cell():
    frame = pd.concat([runs_at(1e17, 1, [1e7]), runs_at(4e17, 1, [1e7]), runs_at(1e17, 8, [1e7, 2e7])])
    assert dr.lone_cells(frame) == [dr.Need("no_lone_cell", 1e17, 8)]
    pool = pd.concat(
        [runs_at(1e17, 8, [3e7]), runs_at(4e17, 8, [1e7]), runs_at(1.6e18, 8, [1e7])], ignore_index=True
    )
    need = dr.lone_cells(frame)[0]
    assert dr.meets(need, frame, pool).tolist() == [False, True, False]  # another budget already used
    one_budget = frame[frame["budget"] == 1e17]
    assert dr.meets(dr.Need("no_lone_cell", 1e17, 8), one_budget, pool).tolist() == [False, True, False]
    assert [n.r for n in dr.lone_cells(one_budget)] == [1, 8]


def test_the_stop_rule_is_declared_in_words():
    from phifit.trainers.adaptive import AdaptiveOptions

    options = AdaptiveOptions(target_width=0.1, max_rounds=3, max_flops=2e15)
    text = options.stop_rule()
    assert text.startswith("stop when phi's realised 95% width is at or below 0.1")
    assert "3 round(s)" in text and "2e+15 training FLOPs" in text and "narrows" in text
    assert options.rules()["design_rules"] is True
    assert AdaptiveOptions(design_rules=False).rules()["design_rules"] is False


def test_the_round_log_declares_the_stop_rule_before_the_first_decision(tmp_path, monkeypatch):
    """One adaptive round on the recorded cpu_small runs (the sweep replays their rows, no torch): the
    pilot's outcome holds the stop rule, the decision its predicted width and the rules' notes, the
    outcome after it the realised width."""
    import csv
    import io
    from pathlib import Path

    import phifit.trainers.sweep as tsweep
    from phifit.trainers import runlog
    from phifit.trainers.adaptive import AdaptiveOptions, run_adaptive

    from phifit.plan.rounds import read_records, rounds_path

    recorded = Path(__file__).resolve().parents[1] / "data" / "cpu_small_runs.csv"
    with recorded.open(newline="") as f:
        rows = {row["run_id"]: row for row in csv.DictReader(f)}

    def replay(spec, out, grids=None, file=None, run_ids=None, jobs=1) -> int:
        runlog.append_rows(out, [rows[i] for i in run_ids])
        return 0

    monkeypatch.setattr(tsweep, "run_sweep", replay)
    spec, out = tsweep.load_spec("cpu_small"), str(tmp_path / "runs.csv")
    options = AdaptiveOptions(batch=4, n_boot=20, n_jobs=1, max_rounds=1, target_width=0.01)
    assert run_adaptive(spec, out, options=options, file=io.StringIO()) == 0
    records = read_records(rounds_path(out))[0]
    assert [(r["event"], r["round"]) for r in records] == [
        ("outcome", 0),
        ("decision", 1),
        ("outcome", 1),
        ("stop", 1),
    ]
    pilot, decision, outcome, _ = records
    assert pilot["stop_rule"] == options.stop_rule() and "0.01" in pilot["stop_rule"]
    assert pilot["rules"]["design_rules"] is True
    assert decision["width_predicted"] > 0 and "rule_notes" in decision
    assert outcome["width_predicted"] == decision["width_predicted"] and "width_realised" in outcome
    # the pilot is one budget: every r lived in a single cell, so the picks hold every r at a second one
    picks = pd.DataFrame(decision["picks"])
    assert set(picks["r"]) == {1, 2, 4, 8} and picks["budget"].nunique() == 1
    assert all(p.get("rule") in dr.RULES for p in decision["picks"])
