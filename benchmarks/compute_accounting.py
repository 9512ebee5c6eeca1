"""What the law's N leaves out of the compute, and what counting it does to phi on the shipped tables.

The law counts N = N_once + r^phi N_rec, the non-embedding parameters (paper §3, Eq. 2). A run's FLOPs per
token (the trainer's and the study's, paper Eq. 1 and 6, full BPTT) are

    F / 6 = [N_once + r N_rec]  +  V_pad d  +  2 d T (l_prelude + l_coda + r l_recur)
            (the law's N)          (head)     (attention scores and values)

so where the vocabulary is large against d, or the context T against d, most of a token's compute is not in
N. The budget C = F D labels a run's isoFLOP curve and its bootstrap cell; the law itself sees only N and D.
This script prints, per table and model size, the share of the law's N in F / 6 (r = 1 and the largest r),
then refits the law with four accountings of N:

- ``law``: the table's n_once, n_rec (the shipped fits);
- ``+head``: n_once + V_pad d (the untied head's matmul, a parameter used once per token);
- ``+head+emb``: n_once + 2 V_pad d (Kaplan et al. 2020's "total parameters": the embedding costs no
  FLOPs but is a parameter);
- ``flops``: the compute-equivalent split, n_once + V_pad d + 2 d T (l_prelude + l_coda) and
  n_rec + 2 d T l_recur, so that n_once' + r n_rec' = F / 6 (less the 3 d norm gains).

Each refit is phifit's reference Huber fit (500 starts) with a (budget, r) cell bootstrap; the CPU tables are
read as their reports read them (the ``baseline`` recipe). The study's table carries d only, so its layers
come from the study's 2 / (16 / r) / 2 split (r = 1: 0 / 20 / 0), V_pad = 32,064 and T = 2,048.

    python benchmarks/compute_accounting.py [--n-boot 400] [--tables cpu_bpe,looped_study]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pandas as pd

import phifit
from phifit.bootstrap import block_bootstrap
from phifit.runs.table import table_from_frame
from phifit.spec.run_config import pad_vocab
from phifit.study import paper_layers

DATA = Path(__file__).resolve().parents[1] / "data"

TABLES = {
    "looped_study": "looped_study_runs_digitized.csv",
    "cpu_small": "cpu_small_runs.csv",
    "cpu_planned": "cpu_planned_runs.csv",
    "cpu_adaptive": "cpu_adaptive_runs.csv",
    "cpu_bpe": "cpu_bpe_runs.csv",
}
ACCOUNTINGS = ("law", "+head", "+head+emb", "flops")


def shape_columns(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """d, V_pad, T and the layer split of every run (the study's table: from its published design)."""
    out = pd.DataFrame(index=df.index)
    out["d"] = df["d_model"].astype(float)
    if name == "looped_study":
        layers = [paper_layers(int(r)) for r in df["r"]]
        out["prelude"] = [s["prelude"] for s in layers]
        out["n_recur"] = [s["recur"] for s in layers]
        out["coda"] = [s["coda"] for s in layers]
        out["V"] = 32064.0
        out["T"] = 2048.0
    else:
        out["prelude"] = df["prelude"].astype(float)
        out["n_recur"] = df["n_recur"].astype(float)
        out["coda"] = df["coda"].astype(float)
        out["V"] = [float(pad_vocab(int(v))) for v in df["vocab_size"]]
        out["T"] = df["seq_len"].astype(float)
    return out


def accounted(df: pd.DataFrame, shape: pd.DataFrame, how: str) -> pd.DataFrame:
    """The table with n_once / n_rec counted the ``how`` way (module docstring)."""
    out = df.copy()
    head = shape["V"] * shape["d"]
    attn = 2.0 * shape["d"] * shape["T"]
    if how == "+head":
        out["n_once"] = df["n_once"] + head
    elif how == "+head+emb":
        out["n_once"] = df["n_once"] + 2 * head
    elif how == "flops":
        out["n_once"] = df["n_once"] + head + attn * (shape["prelude"] + shape["coda"])
        out["n_rec"] = df["n_rec"] + attn * shape["n_recur"]
    return out


def load(name: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / TABLES[name])
    if "variant" in df.columns:
        df = df[df["variant"] == "baseline"].reset_index(drop=True)
    return df


def law_share(df: pd.DataFrame, shape: pd.DataFrame) -> pd.DataFrame:
    """Per size and r: the law's N_once + r N_rec as a share of F / 6."""
    n_law = df["n_once"] + df["r"] * df["n_rec"]
    f6 = accounted(df, shape, "flops")
    f6 = f6["n_once"] + df["r"] * f6["n_rec"] + 3 * shape["d"]
    return pd.DataFrame({"size": df["size"], "r": df["r"], "share": n_law / f6}).drop_duplicates(
        ["size", "r"]
    )


def refit(df: pd.DataFrame, n_boot: int, seed: int) -> dict[str, float]:
    runs = table_from_frame(
        df[["r", "n_once", "n_rec", "tokens", "loss", "budget", "size"]].copy(), source="-"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = phifit.fit(runs)
        boot = block_bootstrap(runs, fit, n_boot=n_boot, seed=seed, progress=False)
    lo, hi = boot.ci["phi"]
    return {"phi": fit.params["phi"], "lo": lo, "hi": hi, "r2": fit.r2, "alpha": fit.params["alpha"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-boot", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", default=",".join(TABLES))
    args = ap.parse_args()
    names = args.tables.split(",")

    print("## The law's N as a share of the compute (F / 6), per model size\n")
    print("| table | size | r = 1 | largest r |")
    print("|---|---|---|---|")
    for name in names:
        df = load(name)
        share = law_share(df, shape_columns(name, df))
        for size, g in share.groupby("size"):
            g = g.sort_values("r")
            first, last = g["share"].iloc[0], g["share"].iloc[-1]
            print(f"| {name} | {size:g} | {first:.0%} | {last:.0%} (r = {g['r'].iloc[-1]}) |")

    print("\n## phi with each accounting of N (95% cell-bootstrap percentile interval)\n")
    print("| table | " + " | ".join(ACCOUNTINGS) + " |")
    print("|---|" + "---|" * len(ACCOUNTINGS))
    for name in names:
        df = load(name)
        shape = shape_columns(name, df)
        cells = []
        for how in ACCOUNTINGS:
            res = refit(accounted(df, shape, how), args.n_boot, args.seed)
            cells.append(f"{res['phi']:.3f} [{res['lo']:.3f}, {res['hi']:.3f}], R² {res['r2']:.4f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
