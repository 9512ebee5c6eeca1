"""Run tables that are not plain CSV text: compressed files, Parquet, JSON lines, and the hint for
text that is not UTF-8.

- :func:`unwrap`: the bytes of a gzip, bzip2, xz or zip file (a single member) decompressed,
  found by their leading bytes (magic numbers), not by the file's name; an Excel workbook, an
  Arrow/Feather file or a zstd file is refused naming the format and what to save instead;
- :func:`is_parquet` / :func:`read_parquet`: a Parquet file (``PAR1``), read with pyarrow, an
  optional extra (refused naming the format and the install when it is missing), every cell
  turned into the text a CSV would hold so that one validation reads both;
- :func:`looks_like_json` / :func:`read_json_lines`: JSON lines (one object per line; the keys
  are the columns), each line checked (a line that is not one JSON object, or an object naming a
  key twice, is refused naming the line); a JSON array is refused naming the format;
- :func:`not_utf8_problem`: the problem of bytes that are not UTF-8 (a Windows-1252 export),
  naming the line and the character, with the hint to save as UTF-8.  Such a file is not read in
  a guessed encoding: a wrong guess would change the text silently.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import math
import zipfile
import zlib

import pandas as pd

from ..extras import MissingExtraError, import_optional
from .lines import split_lines
from .schema import RunTableError, listed

#: leading bytes of the compressed formats :func:`unwrap` reads, and their names
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
)
#: leading bytes of formats refused with what to do instead
_REFUSED = (
    (
        b"\x28\xb5\x2f\xfd",
        "a zstd-compressed file, which phifit does not decompress: decompress it (zstd -d) or "
        "compress it with gzip",
    ),
    (b"ARROW1", "an Arrow/Feather file: save the table as CSV or Parquet"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Excel workbook (.xls): save the sheet as 'CSV UTF-8'"),
)
PARQUET_MAGIC = b"PAR1"


def _decompress(name: str, data: bytes) -> bytes:
    if name == "gzip":
        return gzip.decompress(data)
    if name == "bzip2":
        return bz2.decompress(data)
    return lzma.decompress(data)


def _zip_member(source: str, data: bytes) -> bytes:
    """The one file of a zip archive (an Excel .xlsx workbook, or several files, is refused)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = [i.filename for i in archive.infolist() if not i.is_dir()]
        if "[Content_Types].xml" in names and any(n.startswith("xl/") for n in names):
            raise RunTableError(
                source, ["an Excel workbook (.xlsx), not a CSV: save the sheet as 'CSV UTF-8'"]
            )
        if len(names) != 1:
            raise RunTableError(
                source,
                [
                    f"a zip archive of {len(names)} files ({listed([repr(n) for n in names])}); "
                    "expected one run table: unzip it and give the table's file"
                ],
            )
        return archive.read(names[0])


def unwrap(source: str, data: bytes) -> bytes:
    """``data`` decompressed when it is a gzip, bzip2, xz or zip file (one level), else as is.

    Raises :class:`RunTableError` naming the format for a file that cannot be decompressed or
    is a format phifit does not read (zstd, Arrow/Feather, Excel)."""
    for magic, what in _REFUSED:
        if data.startswith(magic):
            raise RunTableError(source, [f"{what}, not a CSV"])
    for magic, name in _COMPRESSED:
        if not data.startswith(magic):
            continue
        if name == "bzip2" and data[4:10] != b"1AY&SY":  # "BZh" then the block size and block magic
            continue
        try:
            return _zip_member(source, data) if name == "zip" else _decompress(name, data)
        except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error, zipfile.BadZipFile) as err:
            if isinstance(err, RunTableError):
                raise
            raise RunTableError(
                source, [f"a {name}-compressed file that cannot be decompressed ({err})"]
            ) from None
    return data


def is_parquet(data: bytes) -> bool:
    """True for a Parquet file (``PAR1`` at its start and its end)."""
    return data.startswith(PARQUET_MAGIC) and data.endswith(PARQUET_MAGIC) and len(data) >= 8


def cell_text(value: object) -> str:
    """The text a CSV would hold for a value of a typed table: numbers as Python writes them
    (every float round-trips), a missing value (None, NaN, NA) as an empty cell."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        x = float(value)
        return "" if math.isnan(x) else repr(x)
    if type(value).__name__.startswith(("int", "uint")):
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Every cell of ``frame`` as :func:`cell_text`, under the column names as text."""
    out = pd.DataFrame(
        {k: [cell_text(v) for v in frame.iloc[:, k].tolist()] for k in range(frame.shape[1])},
        dtype=object,
    )
    out.columns = [str(c) for c in frame.columns]
    return out


def read_parquet(source: str, data: bytes) -> pd.DataFrame:
    """A Parquet table as text cells (:func:`cell_text`); needs pyarrow (``phifit[parquet]``)."""
    try:
        parquet = import_optional("pyarrow.parquet", "parquet", "reading a Parquet run table")
    except MissingExtraError as err:
        raise RunTableError(source, [f"a Parquet file: {err} (or save the table as CSV)"]) from None
    try:
        table = parquet.read_table(io.BytesIO(data))
    except Exception as err:  # noqa: BLE001 (pyarrow raises its own error types for a damaged file)
        raise RunTableError(
            source, [f"a Parquet file that cannot be read ({type(err).__name__}: {err})"]
        ) from None
    names = [str(n) for n in table.column_names]
    frame = pd.DataFrame({k: table.column(k).to_pylist() for k in range(len(names))}, dtype=object)
    frame.columns = names
    return _as_text(frame)


def looks_like_json(text: str) -> str | None:
    """ "jsonl" when the first non-blank line of ``text`` opens a JSON object (JSON lines),
    "json" when the whole text is a JSON array, else None (a CSV)."""
    for line in split_lines(text[:65536]):
        stripped = line.strip().lstrip("\ufeff")
        if not stripped:
            continue
        if stripped.startswith("{"):
            return "jsonl"
        if stripped.startswith("["):
            try:
                return "json" if isinstance(json.loads(text.lstrip("\ufeff")), list) else None
            except ValueError:
                return None
        return None
    return None


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(
            f"key(s) {', '.join(map(repr, twice))} given twice (which one holds the value is ambiguous)"
        )
    return dict(pairs)


def read_json_lines(source: str, text: str) -> tuple[pd.DataFrame, list[int], list[int]]:
    """(every cell as text, the file line of each row, the blank lines skipped) of JSON lines.

    Each non-blank line must be one JSON object; the columns are the keys in the order they
    first appear, a key missing from a line is an empty cell, a nested value is kept as its
    JSON text.  Anything else is refused naming the line."""
    if looks_like_json(text) == "json":
        raise RunTableError(
            source,
            [
                "a JSON array, not a CSV or JSON lines: write one JSON object per line (JSON lines) "
                "or save as CSV"
            ],
        )
    records: list[dict[str, object]] = []
    lines: list[int] = []
    blanks: list[int] = []
    problems: list[str] = []
    for k, line in enumerate(split_lines(text), start=1):
        stripped = line.strip().lstrip("\ufeff")
        if not stripped:
            blanks.append(k)
            continue
        try:
            record = json.loads(stripped, object_pairs_hook=_no_repeated_keys)
        except ValueError as err:
            problems.append(
                f"line {k}: not a JSON object ({str(err).splitlines()[0]}); JSON lines hold one per line"
            )
            continue
        if not isinstance(record, dict):
            problems.append(f"line {k}: a JSON {type(record).__name__}, expected one object per line")
            continue
        records.append(record)
        lines.append(k)
    if problems:
        raise RunTableError(source, problems)
    if not records:
        raise RunTableError(source, ["JSON lines without a record; expected one object per run"])
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))

    def text_of(value: object) -> str:
        return json.dumps(value) if isinstance(value, (dict, list)) else cell_text(value)

    frame = pd.DataFrame(
        {name: [text_of(r[name]) if name in r else "" for r in records] for name in names}, dtype=object
    )
    return frame, lines, blanks


#: how a non-UTF-8 file is most likely written, for the hint
_SAVE_AS_UTF8 = (
    "the file is not UTF-8: probably Windows-1252 or Latin-1 (a spreadsheet's plain 'CSV' save); save it "
    "as 'CSV UTF-8' (or convert it: iconv -f cp1252 -t utf-8)"
)


def not_utf8_problem(data: bytes, err: UnicodeDecodeError, encoding: str) -> str:
    """The problem of bytes that do not decode as ``encoding``: the line (counted at ``\\n``,
    ``\\r\\n`` and ``\\r``), the byte and, for UTF-8, what it would be in Windows-1252, with
    the hint to save as UTF-8."""
    line = len(split_lines(data[: err.start].decode(encoding, errors="replace") + "x"))
    byte = data[err.start : err.start + 1]
    where = f"line {line}: not a readable CSV file ({err.reason} at byte {err.start}; read as {encoding})"
    if encoding not in ("utf-8", "utf-8-sig"):
        return where
    try:
        guess = byte.decode("cp1252")
    except UnicodeDecodeError:
        guess = None
    shown = f"byte 0x{byte.hex().upper()}" + (f", {guess!r} in Windows-1252" if guess else "")
    return f"{where}: {shown}; {_SAVE_AS_UTF8}"
