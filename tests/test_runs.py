"""Run-table loading: every kind of bad input is refused with file, row and column."""

from __future__ import annotations

import re
import string
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phifit.cli import main
from phifit.runs.table import RunTableError, as_runs, load_runs, parse_column_mapping, table_from_frame
from phifit.simulation import simulate

DATA = Path(__file__).resolve().parents[1] / "data"
GOOD = "run_id,r,n_once,n_rec,tokens,loss\na,1,100,900,1e9,3.1\nb,2,100,400,1e9,3.2\n"


def write(tmp_path, text, name="runs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_table_loads(tmp_path):
    runs = load_runs(write(tmp_path, GOOD + "c,4,100,200,2e9,3.0\n"))
    assert len(runs) == 3 and runs.looped and runs.phi_identifiable
    np.testing.assert_array_equal(runs.r, [1, 2, 4])
    assert runs.run_ids == ["a", "b", "c"]


def test_extra_columns_are_kept(tmp_path):
    runs = load_runs(write(tmp_path, "r,n_once,n_rec,tokens,loss,lr\n1,1,2,3,4,0.1\n"))
    assert "lr" in runs.frame.columns


def test_column_mapping(tmp_path):
    text = "num_recur,n_once,n_rec,tokens,val_loss\n1,100,900,1e9,3.1\n2,100,400,1e9,3.2\n"
    runs = load_runs(write(tmp_path, text), columns=parse_column_mapping("r=num_recur,loss=val_loss"))
    assert list(runs.loss) == [3.1, 3.2]


def test_non_looped_table(tmp_path):
    runs = load_runs(write(tmp_path, "n_once,tokens,loss\n1e8,1e9,3.0\n2e8,1e9,2.9\n"))
    assert not runs.looped and not runs.phi_identifiable
    assert list(runs.r) == [1, 1] and list(runs.n_rec) == [0, 0]


BAD_CASES = {
    "missing column": ("r,n_once,n_rec,tokens\n1,1,1,1\n", r"missing required column\(s\) 'loss'"),
    "empty file": ("", "file is empty"),
    "no rows": ("r,n_once,n_rec,tokens,loss\n", "no rows"),
    "non-numeric": (
        GOOD + "c,2,100,abc,1e9,3\n",
        r"row 3 \(line 4\), column 'n_rec': expected a number, got 'abc'",
    ),
    "empty cell": (GOOD + "c,2,100,,1e9,3\n", r"row 3 \(line 4\), column 'n_rec': empty cell"),
    "nan": (
        GOOD + "c,2,100,200,1e9,nan\n",
        r"row 3 \(line 4\), column 'loss': expected a finite number, got 'nan'",
    ),
    "inf": (
        GOOD + "c,2,100,200,inf,3\n",
        r"row 3 \(line 4\), column 'tokens': expected a finite number, got 'inf'",
    ),
    "zero loss": (
        GOOD + "c,2,100,200,1e9,0\n",
        r"row 3 \(line 4\), column 'loss': loss \(nats\) must be > 0",
    ),
    "negative tokens": (GOOD + "c,2,100,200,-5,3\n", r"column 'tokens': tokens must be > 0"),
    "negative params": (GOOD + "c,2,-100,200,1e9,3\n", r"column 'n_once': parameter count must be >= 0"),
    "no params": (GOOD + "c,1,0,0,1e9,3\n", r"n_once \+ n_rec must be > 0"),
    "fractional r": (GOOD + "c,2.5,100,200,1e9,3\n", r"column 'r': expected an integer >= 1, got '2.5'"),
    "zero r": (GOOD + "c,0,100,200,1e9,3\n", r"column 'r': expected an integer >= 1, got '0'"),
    "r past int64": (
        GOOD + "c,9.223372036854776e+18,100,200,1e9,3\n",
        r"column 'r': expected an integer below 2\^53, got '9.223372036854776e\+18'",
    ),
    "duplicate run_id": (
        GOOD + "a,4,100,200,1e9,3\n",
        r"row 3 \(line 4\), column 'run_id': duplicate run_id 'a' \(first at row 1\)",
    ),
    "looped without n_rec": (
        GOOD.replace("b,2", "b,8") + "c,8,100,0,1e9,3\n",
        r"column 'n_rec': r = 8 > 1 needs n_rec > 0",
    ),
    "r>1 and no n_rec column": ("r,n_once,tokens,loss\n2,100,1e9,3\n", "column 'n_rec' is missing but 1 row"),
    "not csv": ('r,n_once\n"unterminated\n', None),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_refused_with_location(tmp_path, case):
    text, match = BAD_CASES[case]
    path = write(tmp_path, text)
    with pytest.raises(RunTableError) as info:
        load_runs(path)
    assert str(path) in str(info.value)
    if match:
        assert re.search(match, str(info.value)), str(info.value)


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_cli_exit_code_2_one_line(tmp_path, case, capsys):
    path = write(tmp_path, BAD_CASES[case][0])
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err


def test_all_problems_listed(tmp_path):
    text = "r,n_once,n_rec,tokens,loss\n1,1,1,x,1\n2,1,1,1,-1\n"
    with pytest.raises(RunTableError) as info:
        load_runs(write(tmp_path, text))
    assert len(info.value.problems) == 2


def test_missing_file_and_bad_mapping(tmp_path):
    with pytest.raises(RunTableError, match="file not found"):
        load_runs(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="unknown canonical column 'rr'"):
        parse_column_mapping("rr=num_recur")
    with pytest.raises(RunTableError, match="mapped column 'num_recur'"):
        load_runs(write(tmp_path, GOOD), columns={"r": "num_recur"})


CELL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-5, 10**12).map(str),
    st.text(alphabet=string.ascii_letters + string.digits + " .-+e", max_size=6),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(st.lists(CELL, min_size=5, max_size=5), min_size=0, max_size=6),
    header=st.permutations(["r", "n_once", "n_rec", "tokens", "loss"]),
)
def test_loader_fuzz_never_crashes_or_drops_rows(tmp_path, rows, header):
    """Any table either loads whole and valid, or raises RunTableError naming the file."""
    path = tmp_path / "fuzz.csv"
    pd.DataFrame(rows, columns=header).to_csv(path, index=False)
    try:
        runs = load_runs(path)
    except RunTableError as err:
        assert str(path) in str(err)
        return
    assert len(runs) == len(rows)
    assert np.all(np.isfinite(runs.frame[["r", "n_once", "n_rec", "tokens", "loss"]].to_numpy(float)))
    assert np.all(runs.loss > 0) and np.all(runs.tokens > 0) and np.all(runs.r >= 1)
    assert np.all((runs.r == 1) | (runs.n_rec > 0))


# -- input conveniences and guards ------------------------------------------------------------
def test_semicolon_and_tab_separators_detected(tmp_path):
    semi = "r;n_once;n_rec;tokens;loss\n1;100;900;1e9;3,1\n2;100;400;1e9;3,2\n"
    runs = load_runs(write(tmp_path, semi, "excel.csv"))
    assert list(runs.loss) == [3.1, 3.2] and list(runs.r) == [1, 2]
    tsv = GOOD.replace(",", "\t")
    runs = load_runs(write(tmp_path, tsv, "runs.tsv"))
    assert runs.run_ids == ["a", "b"] and list(runs.n_rec) == [900, 400]
    # an explicit separator wins over detection
    with pytest.raises(RunTableError, match="missing required column"):
        load_runs(write(tmp_path, GOOD, "plain.csv"), sep=";")


def test_counts_accept_suffixes_and_thousands_separators(tmp_path):
    text = 'r,n_once,n_rec,tokens,loss\n1,200M,"1,000,000",20B,3.1\n4,1_000,2.5K,1.5e9,3.2\n'
    runs = load_runs(write(tmp_path, text))
    np.testing.assert_allclose(runs.n_once, [2e8, 1000])
    np.testing.assert_allclose(runs.n_rec, [1e6, 2500])
    np.testing.assert_allclose(runs.tokens, [2e10, 1.5e9])
    with pytest.raises(RunTableError, match=r"column 'loss': expected a number, got '3M'"):
        load_runs(write(tmp_path, "n_once,tokens,loss\n1,1,3M\n", "bad.csv"))


UNMAPPED = (
    "run_id,num_loops,p_once,p_shared,tokens,loss\n"
    "a,1,1e6,9e6,1e9,3.1\nb,2,1e6,4e6,1e9,3.2\nc,4,1e6,2e6,1e9,3.3\n"
)


def test_unmapped_looped_columns_refused_with_the_mapping(tmp_path):
    path = write(tmp_path, UNMAPPED.replace("p_once", "n_once"))
    with pytest.raises(RunTableError, match=r"--columns r=num_loops,n_rec=p_shared") as info:
        load_runs(path)
    assert str(path) in str(info.value) and "--non-looped" in str(info.value)
    runs = load_runs(path, columns=parse_column_mapping("r=num_loops,n_rec=p_shared"))
    assert runs.looped and list(runs.r) == [1, 2, 4]
    assert not load_runs(path, non_looped=True).looped


def test_duplicate_and_short_runs_are_cautions(tmp_path):
    text = (
        "run_id,r,n_once,n_rec,tokens,loss,budget,steps\n"
        "a,1,100,900,1e9,3.1,1e18,500\nb,2,100,400,1e9,3.2,1e18,12\nc,2,100,400,1e9,3.2,1e18,500\n"
    )
    runs = load_runs(write(tmp_path, text))
    kinds = {w.kind: w for w in runs.warnings}
    assert set(kinds) == {"duplicate_rows", "short_runs"}
    assert kinds["duplicate_rows"].values["run_ids"] == [["b", "c"]]
    assert "row 2 (b) = row 3 (c)" in kinds["duplicate_rows"].message
    assert kinds["short_runs"].values["rows"] == [2] and "12 steps" in kinds["short_runs"].message
    assert all(w.source == "runs" for w in runs.warnings)
    # the trainer's note marks a short run too; a table without budget gets a note
    noted = load_runs(
        write(
            tmp_path,
            GOOD.replace("\n", ",notes\n", 1).replace("3.1\n", "3.1,short run\n").replace("3.2\n", "3.2,\n"),
            "noted.csv",
        )
    )
    kinds = {w.kind: w for w in noted.warnings}
    assert "short_runs" in kinds and kinds["no_budget"].level == "note"


def test_a_frame_read_by_pandas_with_empty_notes_loads():
    """pandas reads an all-empty ``notes`` column as NaN floats: no crash, no short-run caution."""
    frame = pd.read_csv(DATA / "cpu_planned_runs.csv")
    assert frame["notes"].isna().any()
    runs = table_from_frame(frame, source="cpu_planned_runs.csv")
    assert len(runs.frame) == len(frame) and "short_runs" not in {w.kind for w in runs.warnings}


def test_shipped_tables_load_without_cautions():
    for name in ("paper_design_simulated.csv", "cpu_small_runs.csv"):
        assert load_runs(DATA / name).warnings == []


def test_load_runs_validates_a_dataframe_exactly_like_a_csv(tmp_path):
    frame = simulate("paper", noise=0.003, seed=2)
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    from_csv, from_frame = load_runs(path), load_runs(frame)
    assert from_frame.source == "<DataFrame>" and len(from_frame) == len(from_csv)
    for col in ("r", "n_once", "n_rec", "tokens", "loss", "budget"):
        np.testing.assert_array_equal(from_frame.frame[col].to_numpy(), from_csv.frame[col].to_numpy())
    bad = frame.copy()
    bad.loc[3, "loss"] = -1.0
    with pytest.raises(
        RunTableError, match=r"^<DataFrame>: row 4 \(line 5\), column 'loss': loss \(nats\) must be > 0"
    ):
        load_runs(bad)
    with pytest.raises(RunTableError, match=r"^<DataFrame>: missing required column\(s\) 'tokens'"):
        load_runs(frame.drop(columns=["tokens"]))


def test_every_entry_point_converts_runs_the_same_way():
    frame = simulate("paper")
    table = as_runs(frame)
    assert as_runs(table) is table and table.source == "<DataFrame>"
    with pytest.raises(TypeError, match="expected a RunTable or a pandas DataFrame of runs, got list"):
        as_runs([1, 2, 3])
