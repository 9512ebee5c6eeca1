"""The input layer on the tables users bring: one set of reading options (``--columns``,
``--where``, loss and FLOP units, preambles) on every subcommand that reads a run table, and
tracker exports' quirks read with a note rather than tripping the loader."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import phifit.runs.table as table_module
from phifit import load_runs
from phifit.cli import main
from phifit.runs import RunTableError

DATA = Path(__file__).resolve().parents[1] / "data"

#: a small valid looped table; the loss column is named val_loss, not loss
TABLE = (
    "run_id,r,n_once,n_rec,tokens,val_loss,flops,budget,variant\n"
    "a,1,100,900,1e9,3.1,6,6,baseline\n"
    "b,2,100,400,1e9,3.2,6,6,baseline\n"
    "c,4,100,200,2e9,3.0,12,12,baseline\n"
    "d,1,100,900,2e9,2.9,12,12,wide\n"
)


def write(tmp_path, text: str, name: str = "runs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


class _Stop(Exception):
    """Raised by the stand-in loader once it has recorded its arguments."""


# one command line per subcommand that reads a run table; RUNS is the table's path
TABLE_COMMANDS = {
    "fit": ["fit", "RUNS"],
    "compare": ["compare", "RUNS"],
    "diagnose": ["diagnose", "RUNS"],
    "report": ["report", "RUNS", "--out", "OUT"],
    "predict": ["predict", "--runs", "RUNS", "--compute", "1e20"],
    "equiv": ["equiv", "--runs", "RUNS", "--n-once", "100", "--n-rec", "200", "--r", "2"],
    "plan": ["plan", "--pilot", "RUNS"],
}
READING = [
    "--columns",
    "run_id=run_id",
    "--where",
    "r<=2",
    "--loss",
    "val_loss",
    "--loss-unit",
    "bits",
    "--bytes-per-token",
    "4",
    "--flops-unit",
    "GFLOP",
    "--skip-rows",
    "1",
]


@pytest.mark.parametrize("command", sorted(TABLE_COMMANDS))
def test_every_table_subcommand_takes_the_reading_options(tmp_path, monkeypatch, command):
    """Each subcommand hands the same reading options to the one loader (plan --pilot
    refused --columns before)."""
    seen: list[tuple[str, dict]] = []

    def loader(path, **kwargs):
        seen.append((str(path), kwargs))
        raise _Stop

    monkeypatch.setattr(table_module, "load_runs", loader)
    path = write(tmp_path, TABLE)
    argv = [
        str(path) if a == "RUNS" else str(tmp_path / "out") if a == "OUT" else a
        for a in TABLE_COMMANDS[command]
    ]
    with pytest.raises(_Stop):
        main(argv + READING)
    assert seen, f"{command} did not load the table through phifit.runs.load_runs"
    got_path, kwargs = seen[0]
    assert got_path == str(path)
    assert kwargs["columns"] == {"run_id": "run_id"}
    assert kwargs["where"] == "r<=2"
    assert kwargs["loss"] == "val_loss"
    assert (kwargs["loss_unit"], kwargs["bytes_per_token"]) == ("bits", 4.0)
    assert (kwargs["flops_unit"], kwargs["skip_rows"]) == ("GFLOP", 1)


def test_plan_pilot_reads_a_mapped_table(tmp_path, capsys):
    """plan --pilot with --columns runs (exit 0) on a table whose loss column is renamed."""
    text = (DATA / "cpu_small_runs.csv").read_text().replace(",loss,", ",val_loss,", 1)
    path = write(tmp_path, text)
    args = [
        "plan",
        "--pilot",
        str(path),
        "--columns",
        "loss=val_loss",
        "--design",
        "paper",
        "--simulate",
        "0",
    ]
    assert main(args) == 0
    assert "Huber fit of the pilot" in capsys.readouterr().out


# -- --where ---------------------------------------------------------------------------------


def test_where_selects_rows_and_reports_the_count(tmp_path):
    runs = load_runs(write(tmp_path, TABLE), loss="val_loss", where="variant==baseline and r>=2")
    assert runs.run_ids == ["b", "c"]
    note = next(c for c in runs.warnings if c.kind == "rows_selected")
    assert (note.values["kept"], note.values["dropped"]) == (2, 2)
    assert note.values["dropped_rows"] == [1, 4]
    assert "kept 2 of 4 rows" in note.message


def test_where_lists_and_not_equal(tmp_path):
    path = write(tmp_path, TABLE)
    assert load_runs(path, loss="val_loss", where="run_id==a,d").run_ids == ["a", "d"]
    assert load_runs(path, loss="val_loss", where="variant!=wide").run_ids == ["a", "b", "c"]
    assert load_runs(path, loss="val_loss", where="tokens>1e9").run_ids == ["c", "d"]
    assert load_runs(path, loss="val_loss", where="tokens==2B").run_ids == ["c", "d"]


@pytest.mark.parametrize(
    "expr, match",
    [
        ("__import__('os').system('true')", "cannot read"),
        ("r<=2 or r>3", "cannot read"),
        ("(r<=2)", "cannot read"),
        ("variant<wide", "needs one number"),
        ("lr>0.1", "no column 'lr'"),
        ("r>9", "selects no rows"),
    ],
)
def test_where_refuses_anything_outside_the_grammar(tmp_path, expr, match):
    with pytest.raises(RunTableError, match=match):
        load_runs(write(tmp_path, TABLE), loss="val_loss", where=expr)


def test_where_keeps_the_file_row_in_messages(tmp_path):
    """A bad cell in a kept row is named by its row in the file, not in the selection."""
    text = TABLE.replace("d,1,100,900,2e9,2.9", "d,1,100,900,2e9,oops")
    with pytest.raises(RunTableError, match=r"row 4 \(line 5\), column 'loss'"):
        load_runs(write(tmp_path, text), loss="val_loss", where="variant==wide")


def test_where_numeric_comparison_names_unreadable_cells(tmp_path):
    text = TABLE.replace("c,4,100,200,2e9", "c,4,100,200,n/a")
    with pytest.raises(RunTableError, match=r"row 3, column 'tokens'.*compares numbers, got 'n/a'"):
        load_runs(write(tmp_path, text), loss="val_loss", where="tokens>1")


# -- units -----------------------------------------------------------------------------------


def test_loss_in_bits_and_bits_per_byte_become_nats(tmp_path):
    path = write(tmp_path, TABLE)
    nats = load_runs(path, loss="val_loss").loss
    bits = load_runs(path, loss="val_loss", loss_unit="bits")
    np.testing.assert_allclose(bits.loss, nats * math.log(2), rtol=1e-15)
    assert any(c.kind == "loss_unit" for c in bits.warnings)
    per_byte = load_runs(path, loss="val_loss", loss_unit="bits", bytes_per_token=4.2)
    np.testing.assert_allclose(per_byte.loss, nats * math.log(2) * 4.2, rtol=1e-15)
    with pytest.raises(ValueError, match="loss_unit='bits'"):
        load_runs(path, loss="val_loss", bytes_per_token=4.2)
    with pytest.raises(ValueError, match="loss_unit"):
        load_runs(path, loss="val_loss", loss_unit="bpb")
    with pytest.raises(ValueError, match="disagree"):
        load_runs(path, loss="val_loss", columns={"loss": "other"})


def test_flops_unit_scales_flops_and_budget(tmp_path):
    runs = load_runs(write(tmp_path, TABLE), loss="val_loss", flops_unit="GFLOP")
    np.testing.assert_allclose(runs.frame["flops"], [6e9, 6e9, 12e9, 12e9])
    np.testing.assert_allclose(runs.budget, [6e9, 6e9, 12e9, 12e9])
    assert any(c.kind == "flops_unit" for c in runs.warnings)
    with pytest.raises(ValueError, match="flops_unit"):
        load_runs(write(tmp_path, TABLE), loss="val_loss", flops_unit="EFLOP")


def test_cli_bits_table_fits_like_the_nats_table(tmp_path, capsys):
    """fit --loss-unit bits on a table written in bits gives the nats table's fit."""
    study = (DATA / "looped_study_runs_digitized.csv").read_text().splitlines()
    header, rows = study[0].split(","), [line.split(",") for line in study[1:]]
    k = header.index("loss")
    for row in rows:
        row[k] = repr(float(row[k]) / math.log(2))
    bits = write(tmp_path, "\n".join(",".join(r) for r in [header, *rows]) + "\n")
    assert (
        main(
            [
                "fit",
                str(DATA / "looped_study_runs_digitized.csv"),
                "--quiet",
                "--json",
                str(tmp_path / "n.json"),
            ]
        )
        == 0
    )
    assert main(["fit", str(bits), "--loss-unit", "bits", "--quiet", "--json", str(tmp_path / "b.json")]) == 0
    a = json.loads((tmp_path / "n.json").read_text())["params"]
    b = json.loads((tmp_path / "b.json").read_text())["params"]
    for name in ("E", "A", "B", "phi", "alpha", "beta"):
        assert b[name] == pytest.approx(a[name], rel=1e-6), name
    warned = json.loads((tmp_path / "b.json").read_text())["warnings"]
    assert [w["values"]["loss_unit"] for w in warned if w["kind"] == "loss_unit"] == ["bits"]
    assert "converted to nats per token" in capsys.readouterr().out  # the summary's [[Notes]]


def test_plan_pilot_reads_a_decimal_comma_budget(tmp_path, capsys):
    """A budget written 4,64e+17 is a number: plan --pilot no longer says it needs a numeric budget."""
    lines = (DATA / "looped_study_runs_digitized.csv").read_text().splitlines()
    k = lines[0].split(",").index("budget")
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[k] = '"' + row[k].replace(".", ",") + '"'
    path = write(tmp_path, "\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    assert main(["plan", "--pilot", str(path), "--simulate", "0"]) == 0, capsys.readouterr().err
    assert "Huber fit of the pilot" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--where", "r<=2 or r>3"], "--where: cannot read"),
        (["--where", "lr>1"], "--where: no column 'lr'"),
        (["--bytes-per-token", "4"], "loss_unit='bits'"),
    ],
)
def test_cli_bad_reading_options_exit_2_with_one_line(tmp_path, capsys, extra, match):
    path = write(tmp_path, TABLE)
    assert main(["fit", str(path), "--loss", "val_loss", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and "Traceback" not in err


# -- tracker exports -------------------------------------------------------------------------


def test_preamble_and_comment_lines_are_skipped_and_lines_counted(tmp_path):
    text = "exported from tracker, project x\n# filters: none\n" + TABLE.replace("\nc,", "\n# a comment\nc,")
    text = text.replace("b,2,100,400,1e9,3.2", "b,2,100,400,1e9,bad")
    with pytest.raises(RunTableError, match=r"row 2 \(line 5\), column 'loss'"):
        load_runs(write(tmp_path, text), loss="val_loss", skip_rows=1)
    good = text.replace("bad", "3.2")
    assert load_runs(write(tmp_path, good), loss="val_loss", skip_rows=1).run_ids == ["a", "b", "c", "d"]
    with pytest.raises(RunTableError):  # without --skip-rows the preamble is the header
        load_runs(write(tmp_path, good), loss="val_loss")


def test_trailing_empty_row_is_skipped_with_a_note(tmp_path):
    runs = load_runs(write(tmp_path, TABLE + ",,,,,,,,\n"), loss="val_loss")
    assert len(runs) == 4
    note = next(c for c in runs.warnings if c.kind == "empty_rows")
    assert note.values["rows"] == [5] and note.level == "note"


def test_blank_n_rec_on_plain_runs_reads_as_zero(tmp_path):
    text = TABLE.replace("a,1,100,900,", "a,1,1000,,")
    runs = load_runs(write(tmp_path, text), loss="val_loss")
    assert runs.n_rec[0] == 0 and runs.n_once[0] == 1000
    assert next(c for c in runs.warnings if c.kind == "blank_n_rec").values["rows"] == [1]
    with pytest.raises(RunTableError, match=r"row 2 \(line 3\), column 'n_rec'"):  # r > 1 still needs it
        load_runs(write(tmp_path, TABLE.replace("b,2,100,400,", "b,2,100,,")), loss="val_loss")


def test_decimal_comma_budget_is_a_number(tmp_path):
    text = "r;n_once;n_rec;tokens;loss;budget\n1;100;900;1e9;3,1;4,64e+17\n2;100;400;1e9;3,2;4,64e+17\n"
    runs = load_runs(write(tmp_path, text))
    assert runs.budget.dtype.kind == "f"
    np.testing.assert_allclose(runs.budget, [4.64e17, 4.64e17])
    quoted = 'r,n_once,n_rec,tokens,loss,budget\n1,100,900,1e9,3.1,"4,64e+17"\n'
    np.testing.assert_allclose(load_runs(write(tmp_path, quoted)).budget, [4.64e17])


def test_blank_variant_is_the_baseline_with_a_note(tmp_path):
    text = TABLE.replace(",6,6,baseline\n", ",6,6,\n")
    runs = load_runs(write(tmp_path, text), loss="val_loss")
    assert runs.frame["variant"].tolist() == ["baseline", "baseline", "baseline", "wide"]
    note = next(c for c in runs.warnings if c.kind == "blank_variant")
    assert note.values["rows"] == [1, 2] and "2 row(s)" in note.message


# -- ambiguous headers, encodings, tables that carry no information ----------------------------


def test_a_column_named_twice_is_refused_naming_both(tmp_path, capsys):
    """A second 'loss' column (a note renamed 'loss') was read as 'loss.1' and ignored silently."""
    text = TABLE.replace("variant\n", "variant,val_loss\n").replace("baseline\n", "baseline,9\n")
    path = write(tmp_path, text.replace("wide\n", "wide,9\n"))
    with pytest.raises(RunTableError, match=r"line 1: columns 6 and 10 are both named 'val_loss'"):
        load_runs(path, loss="val_loss")
    assert main(["fit", str(path), "--loss", "val_loss"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "runs.csv" in err and "columns 6 and 10" in err
    spaced = write(tmp_path, "r,n_once,loss, loss\n1,2,3,4\n", "spaced.csv")  # equal once stripped
    with pytest.raises(RunTableError, match=r"columns 3 and 4 are both named 'loss'"):
        load_runs(spaced)


def test_a_mapping_onto_an_existing_column_or_twice_is_refused(tmp_path):
    path = write(tmp_path, TABLE.replace("val_loss", "loss").replace("flops,", "note,"))
    with pytest.raises(RunTableError, match=r"column 'loss' exists and 'note' is also mapped onto it"):
        load_runs(path, columns={"loss": "note"})
    path = write(tmp_path, TABLE, "mapped.csv")
    with pytest.raises(RunTableError, match=r"'val_loss' is mapped onto 'loss' and 'tokens'"):
        load_runs(path, columns={"loss": "val_loss", "tokens": "val_loss"})


@pytest.mark.parametrize(
    "encoding, sep",
    [("utf-16", "\t"), ("utf-16-le", "\t"), ("utf-16-be", ","), ("utf-8-sig", ","), ("utf-8-sig", ";")],
)
def test_unicode_exports_read_like_the_csv(tmp_path, encoding, sep):
    """A spreadsheet's "Unicode text" save (UTF-16 with a BOM, tab-separated) and UTF-8 with a
    BOM give the same table, and the same fit, as the original CSV."""
    text = (DATA / "cpu_small_runs.csv").read_text()
    if sep != ",":
        text = "\n".join(",".join(row) for row in [line.split(",") for line in text.splitlines()])
        text = text.replace(",", sep)
    path = tmp_path / "export.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode(encoding))
    got, want = load_runs(path), load_runs(DATA / "cpu_small_runs.csv")
    assert len(got) == len(want) == 86
    np.testing.assert_array_equal(got.loss, want.loss)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    assert got.run_ids == want.run_ids


def test_utf16_export_fits_like_the_csv(tmp_path, capsys):
    text = (DATA / "cpu_small_runs.csv").read_text().replace(",", "\t")
    path = tmp_path / "export.txt"
    path.write_bytes(text.encode("utf-16"))
    phis = []
    for source in (path, DATA / "cpu_small_runs.csv"):
        assert main(["fit", str(source), "--starts", "20", "--quiet", "--variant", "baseline"]) == 0
        out = capsys.readouterr().out
        phis.append(next(line for line in out.splitlines() if line.strip().startswith("phi ")))
    assert phis[0] == phis[1]


def test_undecodable_bytes_name_the_line(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(TABLE.replace("wide", "wid\xe9").encode("cp1252"))
    with pytest.raises(RunTableError, match=r"line 5: not a readable CSV file"):
        load_runs(path, loss="val_loss")


def test_a_row_of_tabs_is_an_empty_row_with_a_note(tmp_path):
    """In a tab-separated file a line of tabs alone is a row of empty cells (skipped with a
    note), not a blank line dropped without one."""
    text = TABLE.replace(",", "\t")
    runs = load_runs(write(tmp_path, text + "\t" * 8 + "\n"), loss="val_loss")
    assert len(runs) == 4
    assert next(c for c in runs.warnings if c.kind == "empty_rows").values["rows"] == [5]


#: the fuzz study's rows_lost case, minimal: an unquoted export whose note cells hold a lone '"'
#: (the first opens a quoted cell, the next closes it two rows down)
UNBALANCED = 'r,n_once,n_rec,tokens,loss,note\n1,100,900,1e9,3.1,"\n2,100,400,1e9,3.2,\n4,100,200,2e9,3.0,"\n'


def test_an_unbalanced_quote_swallowing_rows_is_refused(tmp_path, capsys):
    """Three data rows read as one run (the lines below the lone quote became its note) was a
    silent loss of two rows; the table is refused naming the row, its lines and the column."""
    path = write(tmp_path, UNBALANCED)
    match = r"row 1 \(lines 2-4\), column 'note': a quoted cell runs over 3 lines and holds 2 line\(s\)"
    with pytest.raises(RunTableError, match=match):
        load_runs(path)
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs.csv: row 1 (lines 2-4), column 'note'" in err
    header = write(tmp_path, UNBALANCED.replace(",note\n", ',"note\n', 1).replace('3.1,"', "3.1,x"))
    with pytest.raises(
        RunTableError, match=r"line 1: the header's column 6 \('note'\) is a quoted cell over 4 lines"
    ):
        load_runs(header)


def test_a_quoted_note_over_lines_loads_with_a_warning_naming_it(tmp_path):
    """A note written over lines (no separator in them) is one cell, named in a warning with the
    lines it holds (a lone '"' on a line of its own reads so too); rows below are named by their
    own lines (they were numbered as if every row took one line)."""
    text = 'r,n_once,n_rec,tokens,loss,note\n1,100,900,1e9,3.1,"first\nsecond"\n2,100,400,1e9,3.2,x\n'
    runs = load_runs(write(tmp_path, text))
    assert len(runs) == 2 and runs.frame["note"].tolist() == ["first\nsecond", "x"]
    held = next(c for c in runs.warnings if c.kind == "multiline_cells")
    assert held.level == "warning" and held.values["rows"] == [1] and held.values["extra_lines"] == 1
    assert "row 1 (line 2), column 'note': 2 lines" in held.message
    with pytest.raises(RunTableError, match=r"row 2 \(line 4\), column 'loss'"):
        load_runs(write(tmp_path, text.replace("3.2", "bad")))
    lone = load_runs(write(tmp_path, text.replace('"first\nsecond"', '"\n"')))  # a row of one '"' held
    assert len(lone) == 2 and [c.values["extra_lines"] for c in lone.warnings if "cells" in c.kind] == [1]


def _no_information(tmp_path, what: str):
    frame = load_runs(DATA / "cpu_small_runs.csv", where="variant==baseline").frame
    if what == "loss":
        frame["loss"] = 3.0
    else:
        for col in ("r", "n_once", "n_rec", "tokens"):
            frame[col] = frame[col].iloc[0]
    path = tmp_path / f"{what}.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "what, match",
    [
        (
            "loss",
            r"column 'loss': the losses do not vary \(all 44 runs have loss 3\).*no parameter can be estimated",
        ),
        ("design", r"all 44 runs have the same design.*no parameter of the law can be estimated"),
    ],
)
def test_a_table_without_information_is_refused(tmp_path, capsys, what, match):
    """All losses equal (or one design point): no parameter is printed with stderr 0; like a
    table with no more runs than parameters, the fit is refused (exit 2) saying why."""
    path = _no_information(tmp_path, what)
    from phifit.fitters import fit

    with pytest.raises(ValueError, match=match):
        fit(load_runs(path), n_starts=5)
    for argv in (["fit", str(path), "--starts", "5"], ["predict", "--runs", str(path), "--compute", "1e20"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert "stderr" not in captured.out
        assert re.search(match, captured.err) and f"{what}.csv" in captured.err


def test_plan_refuses_a_pilot_whose_fit_lacks_parameters(tmp_path, capsys):
    """A pilot at one token count leaves B and beta unidentified: plan said only
    'missing parameter(s): B, beta' without the file; it now names the pilot and why."""
    frame = load_runs(DATA / "cpu_small_runs.csv", where="variant==baseline").frame
    frame["tokens"] = 2e6
    path = tmp_path / "pilot.csv"
    frame.to_csv(path, index=False)
    assert main(["plan", "--pilot", str(path), "--design", "paper", "--simulate", "0"]) == 2
    err = capsys.readouterr().err
    assert "pilot.csv" in err and "does not identify B, beta" in err and "two or more token counts" in err


def test_a_separator_ending_every_data_line_is_refused_naming_the_lines(tmp_path, capsys):
    """Data rows one cell longer than the header made pandas take the first column as row labels
    and move every other column one name to the left; the table is refused naming the lines."""
    text = "r,n_once,n_rec,tokens,loss\n1,100,900,1e9,3.1,\n2,100,400,1e9,3.2,\n4,100,200,2e9,3.0,\n"
    path = write(tmp_path, text)
    match = r"row 1 \(line 2\), row 2 \(line 3\), row 3 \(line 4\): 6 cells, expected 5 \(one per name"
    with pytest.raises(RunTableError, match=match):
        load_runs(path)
    assert main(["fit", str(path)]) == 2
    assert "runs.csv: row 1 (line 2), row 2 (line 3), row 3 (line 4): 6 cells" in capsys.readouterr().err
    assert len(load_runs(write(tmp_path, text.replace(",\n", "\n")))) == 3  # without the separators


def test_a_closed_pipe_ends_the_command_without_a_traceback():
    """``phifit fit T.csv | head -1``: the reader leaves early; no traceback on stderr."""
    import subprocess
    import sys

    study = Path(__file__).resolve().parents[1] / "data" / "looped_study_runs_digitized.csv"
    code = f"import sys; from phifit.cli import main; sys.exit(main(['fit', {str(study)!r}]))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the summary is printed
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and proc.returncode in (0, 1)
