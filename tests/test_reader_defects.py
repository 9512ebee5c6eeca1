"""The run-table reader keeps every row and changes nothing silently: one test per defect a
user reported ("Nothing lost and nothing silently changed").

Each starts from the study's table (``data/looped_study_runs_digitized.csv``, 116 runs) or the
paper design, changed the way the report describes."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit import extras, load_runs
from phifit.cli import main
from phifit.runs import RunTableError

DATA = Path(__file__).resolve().parents[1] / "data"
STUDY = DATA / "looped_study_runs_digitized.csv"
LINES = STUDY.read_text(encoding="utf-8").splitlines()
HEADER = next(csv.reader([LINES[0]]))


def write(tmp_path: Path, lines: list[str], name: str = "runs.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    return path


def cell(line: str, column: str, value: str) -> str:
    """``line`` (a row of the study's table) with ``column``'s cell replaced by ``value``."""
    cells = next(csv.reader([line]))
    cells[HEADER.index(column)] = value
    return ",".join(cells)


def test_a_run_id_starting_with_hash_is_a_row_and_comment_lines_are_counted(tmp_path, capsys):
    """Defect 1: '#C4.64e+17_r2_s8' was dropped as a comment (114 runs of 116, no note).  A '#'
    line is a comment before the header, or after it when it holds no separator; every comment
    and blank line skipped is listed in a note."""
    lines = list(LINES)
    lines[5] = "#" + lines[5]
    lines[9] = "#" + lines[9]
    assert next(csv.reader([lines[5]]))[0].startswith("#C")
    runs = load_runs(write(tmp_path, lines))
    assert len(runs) == 116 and runs.run_ids[4].startswith("#C")
    assert not [c for c in runs.warnings if c.kind == "skipped_lines"]
    commented = ["# exported by a tracker", *lines[:3], "# a comment", "", *lines[3:], "# 116 runs"]
    runs = load_runs(write(tmp_path, commented))
    note = next(c for c in runs.warnings if c.kind == "skipped_lines")
    assert len(runs) == 116 and note.level == "note"
    assert note.values["comment_lines"] == [1, 5, 121] and note.values["blank_lines"] == [6]
    assert main(["fit", str(tmp_path / "runs.csv"), "--starts", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 note: skipped_lines (runs)" in out and re.search(r"^\s+runs\s+116\s*$", out, re.MULTILINE)


@pytest.mark.parametrize("mark", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c"])
def test_line_separators_in_a_cell_keep_its_row_and_the_line_numbers(tmp_path, mark):
    """Defect 2: str.splitlines() broke a note at U+2028, U+0085, form feed or vertical tab: a
    valid CSV failed with "row 9 (line 10), column 'n_once': empty cell", or (quoted) loaded with
    a false multi-line warning and later errors one line off.  Lines end at \\n, \\r\\n, \\r only."""
    lines = list(LINES)
    lines[9] = cell(lines[9], "note", f"a{mark}b")
    lines[11] = cell(lines[11], "note", f'"c{mark}d"')
    path = write(tmp_path, lines)
    assert len(pd.read_csv(path)) == 116  # pandas reads the file as it is
    runs = load_runs(path)
    assert len(runs) == 116 and runs.frame["note"].iloc[8] == f"a{mark}b"
    assert runs.frame["note"].iloc[10] == f"c{mark}d"
    assert not [c for c in runs.warnings if c.kind == "multiline_cells"]
    lines[20] = cell(lines[20], "loss", "bad")
    with pytest.raises(RunTableError, match=r"row 20 \(line 21\), column 'loss'"):
        load_runs(write(tmp_path, lines))


def test_an_overlong_row_after_comment_lines_names_its_file_line_row_and_expected_cells(tmp_path, capsys):
    """Defect 3: a row with an extra cell after comment and blank lines got pandas' "line 11" for
    file line 14, and no row or column count."""
    lines = [LINES[0], "# a comment", *LINES[1:4], "", "# another", *LINES[4:20]]
    assert lines[13] == LINES[10]
    lines[13] += ",extra"  # file line 14, the study's 10th run
    path = write(tmp_path, lines)
    match = r"runs\.csv: row 10 \(line 14\): 16 cells, expected 15 \(one per name of the header, line 1\)"
    with pytest.raises(RunTableError, match=match):
        load_runs(path)
    assert main(["fit", str(path)]) == 2
    assert "row 10 (line 14): 16 cells, expected 15" in capsys.readouterr().err


def test_a_budget_column_is_numbers_or_refused_naming_the_cell(tmp_path):
    """Defect 4: one 'n/a' budget kept the column as text, so 1e+18 and 1E18 were two bootstrap
    cells (29 blocks instead of 24), without a note."""
    lines = list(LINES)
    respelled = [k for k, line in enumerate(lines) if k and "1e+18" in next(csv.reader([line]))[1]]
    for k in respelled[::2]:
        lines[k] = cell(lines[k], "budget", "1E18")
    spelled = load_runs(write(tmp_path, lines))
    assert spelled.budget.dtype.kind == "f" and spelled.cells()[0].max() + 1 == 24
    lines[9] = cell(lines[9], "budget", "n/a")
    with pytest.raises(RunTableError, match=r"row 9 \(line 10\), column 'budget': expected a number like"):
        load_runs(write(tmp_path, lines))
    lines[9] = cell(lines[9], "budget", "")
    with pytest.raises(RunTableError, match=r"row 9 \(line 10\), column 'budget': .* got an empty cell"):
        load_runs(write(tmp_path, lines))
    labels = load_runs(
        write(tmp_path, [cell(line, "budget", "C") if k else line for k, line in enumerate(LINES)])
    )
    assert set(labels.budget) == {"C"}  # a column of labels stays text


@pytest.mark.parametrize("infinite", ["-inf", "inf", "1e999"])
def test_an_infinite_budget_is_refused_among_labels_and_among_numbers(tmp_path, infinite):
    """Found by the fuzz study: an infinite budget among labels was kept as one more label (and
    pandas reads it as a number: a number among labels, kept as text without a word)."""
    labels = [cell(line, "budget", "C") if k else line for k, line in enumerate(LINES)]
    labels[9] = cell(labels[9], "budget", infinite)
    where = r"row 9 \(line 10\), column 'budget': expected a finite number of FLOPs \(or a label\)"
    with pytest.raises(RunTableError, match=where):
        load_runs(write(tmp_path, labels))
    numbers = list(LINES)
    numbers[9] = cell(numbers[9], "budget", infinite)
    with pytest.raises(RunTableError, match=where) as err:
        load_runs(write(tmp_path, numbers))
    assert "like the column's" not in str(err.value)  # one problem for the cell, not two


def test_compressed_parquet_and_json_lines_tables_read_like_the_csv(tmp_path, monkeypatch):
    """Defect 5: gzip, Parquet and JSON lines were refused as "invalid start byte" or missing
    columns, with no word about the format; a Windows-1252 file got no "save as UTF-8" hint."""
    expected = load_runs(STUDY).frame
    data = STUDY.read_bytes()
    (tmp_path / "gz.csv.gz").write_bytes(gzip.compress(data))
    (tmp_path / "gz.csv").write_bytes(gzip.compress(data))  # found by its bytes, not its name
    frame = pd.read_csv(STUDY)
    frame.to_parquet(tmp_path / "runs.parquet")
    frame.to_json(tmp_path / "runs.jsonl", orient="records", lines=True)
    for name in ("gz.csv.gz", "gz.csv", "runs.parquet", "runs.jsonl"):
        got = load_runs(tmp_path / name).frame
        pd.testing.assert_frame_equal(
            got.drop(columns="note"), expected.drop(columns="note"), check_dtype=False
        )
    jsonl = (tmp_path / "runs.jsonl").read_text().splitlines()
    jsonl[6] = json.dumps({**json.loads(jsonl[6]), "loss": "bad"})
    with pytest.raises(RunTableError, match=r"row 7 \(line 7\), column 'loss': expected a number"):
        load_runs(write(tmp_path, jsonl, "bad.jsonl"))
    real_import = extras.import_module

    def no_pyarrow(module: str):
        if module.startswith("pyarrow"):
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        return real_import(module)

    monkeypatch.setattr(extras, "import_module", no_pyarrow)
    with pytest.raises(
        RunTableError, match=r"a Parquet file: .*needs pyarrow: pip install 'phifit\[parquet\]'"
    ):
        load_runs(tmp_path / "runs.parquet")
    monkeypatch.undo()
    latin = tmp_path / "latin.csv"
    latin.write_bytes(
        STUDY.read_text(encoding="utf-8").replace("C4.64e+17_r2_s8", "C4.64e+17_r2_s\xe9").encode("cp1252")
    )
    with pytest.raises(
        RunTableError, match=r"line \d+: .*'é' in Windows-1252; the file is not UTF-8.*save it as 'CSV UTF-8'"
    ):
        load_runs(latin)


def test_implausible_losses_and_loss_columns_in_bits_are_refused(tmp_path, capsys):
    """Defect 6: losses 100x too large (288 nats per token) loaded with generic warnings only, and
    a val_bpb column mapped onto loss loaded as nats."""
    frame = pd.read_csv(STUDY)
    scaled = frame.assign(loss=frame["loss"] * 100)
    scaled.to_csv(tmp_path / "x100.csv", index=False)
    with pytest.raises(
        RunTableError,
        match=r"column 'loss': 116 loss\(es\) above 20 nats per token \(row 1 \(line 2\): '288.4'",
    ):
        load_runs(tmp_path / "x100.csv")
    bpb = frame.rename(columns={"loss": "val_bpb"})
    bpb.to_csv(tmp_path / "bpb.csv", index=False)
    with pytest.raises(
        RunTableError,
        match=r"column 'val_bpb' is mapped onto 'loss' and its name says bits per byte.*--loss-unit bits --bytes-per-token F",
    ):
        load_runs(tmp_path / "bpb.csv", columns={"loss": "val_bpb"})
    assert main(["fit", str(tmp_path / "bpb.csv"), "--columns", "loss=val_bpb"]) == 2
    assert "bpb.csv: column 'val_bpb' is mapped onto 'loss'" in capsys.readouterr().err
    per_byte = load_runs(tmp_path / "bpb.csv", loss="val_bpb", loss_unit="bits", bytes_per_token=4.0)
    np.testing.assert_allclose(per_byte.loss, frame["loss"] * np.log(2) * 4.0)
    as_nats = load_runs(tmp_path / "bpb.csv", loss="val_bpb", loss_unit="nats")  # said on purpose
    np.testing.assert_allclose(as_nats.loss, frame["loss"])


def test_the_duplicate_rows_note_stays_one_short_line(tmp_path):
    """Defect 7: the duplicate-rows note on a 232,000-run table was one 230,004-character line."""
    row = next(csv.reader([LINES[1]]))
    k = HEADER.index("run_id")
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(HEADER)
    for i in range(3000):
        out.writerow(row[:k] + [f"copy-{i}"] + row[k + 1 :])
    for line in LINES[2:]:
        buf.write(line + "\n")
    path = tmp_path / "copies.csv"
    path.write_text(buf.getvalue())
    note = next(c for c in load_runs(path).warnings if c.kind == "duplicate_rows")
    assert len(note.message) < 600 and "\n" not in note.message
    assert "(and 2995 more copies)" in note.message and len(note.values["rows"][0]) == 3000


def test_compare_leaves_out_a_fold_whose_training_runs_carry_no_information(tmp_path, capsys):
    """Defect 8: a table whose leave-one-budget-out fold has constant losses made compare exit 2
    with "all 100 runs have loss 3", describing the fold, not the file (116 runs that vary).  The
    fold is left out of the held-out errors with a note saying why."""
    frame = pd.read_csv(DATA / "paper_design_simulated.csv")
    smallest = frame["budget"].min()
    frame.loc[frame["budget"] != smallest, "loss"] = 3.0
    path = tmp_path / "fold.csv"
    frame.to_csv(path, index=False)
    assert (
        main(
            [
                "compare",
                str(path),
                "--wild",
                "0",
                "--no-multipliers",
                "--parts",
                "0",
                "--starts",
                "4",
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "[[phifit compare: 116 runs" in out
    assert (
        "leave-one-budget-out fold of budget 4.64e+17 not estimated (without budget 4.64e+17, the other 100 runs"
        in out
    )
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["free"])
    assert float(row[-2]) > 0  # the CV RMSE over the other five folds
