"""phifit.trainers: a minimal torch trainer for looped (depth-recurrent) GPTs that writes phifit run CSVs.

Prelude -> shared block stack iterated r times -> coda, at fixed effective depth (the iso-depth design of
Schwethelm et al. 2026, arXiv 2604.21106). Trains one configuration on a FLOP budget (``phifit train``) or a
grid of them (``phifit sweep SPEC.toml``) and appends one row per finished run to a CSV that ``phifit fit``
reads.

Modules: ``config`` (model configuration, iso-depth rule; no torch), ``flops`` (n_once / n_rec and FLOPs per
token; no torch), ``model`` (the network), ``data`` (corpus, tokenisation, split), ``optim``, ``train`` (the
loop), ``runlog`` (atomic CSV rows; no torch), ``sweep`` (grid runner), ``cli`` (subcommands; torch imported
lazily).

Importing this package does not import torch.
"""
