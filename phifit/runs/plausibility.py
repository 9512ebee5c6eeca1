"""Is the loss a loss in nats per token?  Two checks on a run table's ``loss`` column.

- **Magnitude.** A language model's validation loss per token is below ln V, the loss of a
  uniform guess over its vocabulary of V tokens, once it has learnt anything: ln 256 = 5.5 (bytes),
  ln 50,257 = 10.8 (GPT-2), ln 256,000 = 12.5 (the largest common vocabularies).  A loss above
  :data:`MAX_LOSS_NATS` = 20 nats (ln 4.9e8, a uniform guess over half a billion tokens) is no
  per-token loss in nats: a loss summed over a sequence, a perplexity or a percentage, or a loss
  scaled by 100.  Such a table is refused, naming each run, the column and the value.
- **Unit in the name.** A column whose name says bits (``val_bpb``, ``bits_per_byte``, ``bpc``,
  ``loss_bits``) mapped onto ``loss`` while the unit was left to its default (nats) would fit
  bits as nats (x 0.69, or x ln 2 x bytes per token for bits per byte) without a word: it is
  refused, pointing at ``--loss-unit bits`` (and ``--bytes-per-token F`` for bits per byte);
  ``--loss-unit nats`` says the column holds nats despite its name.
"""

from __future__ import annotations

import re

import numpy as np

#: Largest plausible loss per token, in nats: ln of a 485-million-token vocabulary (module docstring).
MAX_LOSS_NATS = 20.0
#: Words of a column name that say its unit is bits (per token, per byte or per character).
_BITS_WORDS = {"bit", "bits", "bpb", "bpc", "bpt", "bpw", "bpd"}
#: Words that say the bits are per byte or per character (the conversion needs bytes per token).
_PER_BYTE_WORDS = {"bpb", "bpc", "byte", "bytes", "char", "chars", "character", "characters"}


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z]+", name.lower()) if w]


def bits_in_name(name: str) -> bool:
    """True when a column's name says its unit is bits (a word such as ``bits``, ``bpb``, ``bpc``;
    ``val_bpb``, ``bits_per_byte``, ``loss_bits``)."""
    return any(w in _BITS_WORDS or w.startswith("bitsper") for w in _words(name))


def per_byte_in_name(name: str) -> bool:
    """True when a column's name says bits per byte or per character (``bpb``, ``bits_per_byte``)."""
    return bits_in_name(name) and any(w in _PER_BYTE_WORDS for w in _words(name))


def loss_unit_problem(column: str | None, loss_unit: str | None) -> str | None:
    """The problem of a loss column whose name says bits while no unit was declared (None when
    the unit was declared, or the name says nothing of bits)."""
    if column is None or loss_unit is not None or not bits_in_name(column):
        return None
    per_byte = per_byte_in_name(column)
    how = (
        "--loss-unit bits --bytes-per-token F (loss_unit='bits', bytes_per_token=F), F the bytes "
        "per token of the tokenizer on this data"
        if per_byte
        else "--loss-unit bits (loss_unit='bits')"
    )
    return (
        f"column {column!r} is mapped onto 'loss' and its name says bits{' per byte' if per_byte else ''}, "
        f"but the loss would be read as nats per token: declare the unit with {how}, or "
        "--loss-unit nats (loss_unit='nats') if the column holds nats"
    )


def per_byte_caution_text(
    column: str | None, loss_unit: str | None, bytes_per_token: float | None
) -> str | None:
    """Why a loss declared in bits per token may be bits per byte (its column's name says so),
    or None."""
    if column is None or loss_unit != "bits" or bytes_per_token is not None or not per_byte_in_name(column):
        return None
    return (
        f"column {column!r} was read as bits per token (--loss-unit bits), but its name says bits per "
        "byte: if it is, give --bytes-per-token F (bytes_per_token=F), or every loss is off by that factor"
    )


def implausible_losses(loss_nats: np.ndarray) -> np.ndarray:
    """Positions of the losses (in nats per token, after any unit conversion) above
    :data:`MAX_LOSS_NATS`."""
    with np.errstate(invalid="ignore"):
        return np.flatnonzero(np.isfinite(loss_nats) & (loss_nats > MAX_LOSS_NATS))


def implausible_loss_text(cells: list[str], n: int, column: str) -> str:
    """The problem of ``n`` losses above :data:`MAX_LOSS_NATS` (``cells``: where each is and its
    value, for the first few), ``column`` the file's name of the loss column."""
    of = "" if column == "loss" else f" (the file's {column!r})"
    more = n - len(cells)
    return (
        f"column 'loss'{of}: {n} loss(es) above {MAX_LOSS_NATS:g} nats per token ({', '.join(cells)}"
        f"{f' and {more} more' if more > 0 else ''}); no per-token loss in nats is that large (20 = ln of a "
        "485-million-token vocabulary; a uniform guess over any real vocabulary scores below 13): a loss "
        "summed over a sequence, a perplexity, or scaled by 100? fix the column"
    )
