#!/usr/bin/env bash
# The trainer's CUDA path in one short script (about 5 minutes on one H100/H200-class GPU):
#
#   1. bf16 autocast, eager:          phifit train --device cuda            (a row, a loss curve, a checkpoint)
#   2. bf16 autocast + torch.compile:  the same run with --compile          (its loss next to the eager one's)
#   3. 1-GPU DDP through torchrun:     NCCL, world size 1                   (its loss next to the plain run's)
#   4. checkpoint resume on the GPU:   stopped after 90 % of its steps, resumed (loss next to the whole run's)
#   5. a short sweep:                  6 runs with --device cuda --compile, then --status
#   6. benchmarks/train_speed.py:      tokens/s against a plain loop, and model FLOPs utilisation (MFU)
#
# Run from the repository root, with a CUDA build of torch and the corpus installed:
#     bash benchmarks/gpu_check.sh [OUT_DIR]          # default OUT_DIR: ./gpu_check_out
# Everything it writes goes to OUT_DIR (the run tables, logs, checkpoints and gpu_check.log); it changes
# nothing else. Needs no SLURM. Exit status 0 only if every step ran.
set -euo pipefail

OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
PY="${PYTHON:-python}"
exec > >(tee -a "$LOG") 2>&1

step() { printf '\n== %s  [%s]\n' "$1" "$(date +%H:%M:%S)"; }

step "0. environment"
"$PY" - <<'EOF'
import torch
assert torch.cuda.is_available(), "no CUDA device visible: this script checks the GPU path"
p = torch.cuda.get_device_properties(0)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {p.name}, {p.total_memory / 2**30:.0f} GiB, "
      f"bf16 supported: {torch.cuda.is_bf16_supported()}")
EOF
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv || true

# One small-but-real GPU run: width 512, 12 effective layers (1 / 10/r x r / 1), r = 2, context 512.
RUN=(--recurrences 2 --width 512 --depth 12 --head-dim 64 --seq-len 512 --batch-size 32
     --steps 300 --val-tokens 262144 --eval-every 50 --ckpt-every 50 --no-progress)

step "1. bf16 autocast, eager"
"$PY" -m phifit.trainers.cli train "${RUN[@]}" --device cuda --out "$OUT/eager.csv" --plot

step "2. bf16 autocast + torch.compile"
"$PY" -m phifit.trainers.cli train "${RUN[@]}" --device cuda --compile --out "$OUT/compiled.csv"

step "3. 1-GPU DDP through torchrun (NCCL)"
torchrun --standalone --nproc_per_node=1 -m phifit.trainers.cli train "${RUN[@]}" --device cuda \
    --out "$OUT/ddp1.csv"

step "4. checkpoint resume on the GPU (stopped at step 275 of 300, resumed from the checkpoint of step 270)"
"$PY" - "$OUT" <<'EOF'
import sys
from phifit.trainers.config import make_train_config
from phifit.trainers.train import TrainingStopped, train

out = sys.argv[1]
cfg = make_train_config(r=2, width=512, depth=12, head_dim=64, seq_len=512, batch_size=32, steps=300,
                        val_tokens=262144, eval_every=50, ckpt_every=30, device="cuda", progress=False)
whole = train(cfg, log=lambda s: None)
try:
    train(cfg, log=lambda s: None, ckpt_path=f"{out}/resume.pt", stop_after=275)
except TrainingStopped as err:
    print(err)
resumed = train(cfg, log=lambda s: None, ckpt_path=f"{out}/resume.pt", resume=True)
print(f"whole run {whole.loss!r}, resumed from step {resumed.resumed_from}: {resumed.loss!r}, "
      f"|difference| {abs(whole.loss - resumed.loss):.3g} (bf16 autocast on CUDA: not required to be bitwise)")
EOF

step "5. a short sweep (6 runs, compiled), then its status"
cat > "$OUT/gpu_sweep.toml" <<'EOF'
[sweep]
name = "gpu_check"
[settings]
depth = 12
prelude = 1
coda = 1
head_dim = 64
seq_len = 512
batch_size = 32
val_tokens = 262144
device = "cuda"
compile = true
progress = false
[[budgets]]
flops = 1e15
widths = [256, 384]
[[grids]]
name = "main"
r = [1, 2, 5]
EOF
"$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --dry-run --estimate measure
"$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --plot
"$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --status

step "6. benchmarks/train_speed.py: throughput and MFU"
"$PY" benchmarks/train_speed.py --device cuda --width 768 --r 4 --depth 12 --head-dim 64 --seq-len 1024 \
    --batch-size 16 --steps 30 --rounds 3 --compile --json "$OUT/train_speed.json"

step "summary"
"$PY" - "$OUT" <<'EOF'
import csv, sys
out = sys.argv[1]
for name in ("eager", "compiled", "ddp1"):
    with open(f"{out}/{name}.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    print(f"{name:9s} loss {float(row['loss']):.4f}  {float(row['tokens_per_s']):>12,.0f} tok/s  "
          f"world {row['world_size']}  {row['device']}")
with open(f"{out}/sweep.csv", newline="") as f:
    print(f"sweep: {len(list(csv.DictReader(f)))} rows")
EOF
echo "gpu_check: all steps ran; log in $LOG"
