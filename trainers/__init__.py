"""phifit.trainers: a minimal torch trainer for looped (depth-recurrent) GPTs that writes phifit run CSVs.

Prelude -> shared block stack iterated r times -> coda, at fixed effective depth (the iso-depth design of
Schwethelm et al. 2026, arXiv 2604.21106). Trains one configuration on a FLOP budget (``phifit train``) or a
grid of them (``phifit sweep SPEC.toml``) and appends one row per finished run to a CSV that ``phifit fit``
reads.

Modules: ``config`` and ``flops`` (the run configuration and the study's parameter / FLOP accounting,
re-imported from :mod:`phifit.spec.run_config` and :mod:`phifit.study`, where planning uses them without the
trainer; no torch), ``model`` (the network), ``data`` (corpus, tokenisation, split), ``optim``, ``train`` (the
loop), ``runlog`` (atomic CSV rows, task markers; no torch), ``sweep`` (grid runner over the specs of
:mod:`phifit.spec.sweep_spec`), ``launch`` (job arrays through submitit), ``cli`` (subcommands, registered
with ``phifit`` through the entry points ``phifit.commands``; torch imported lazily).

The trainer depends on phifit, never the other way round. Importing this package does not import torch;
without torch (``pip install 'phifit[train]'``) the commands that need it stop with one line saying so.
"""
