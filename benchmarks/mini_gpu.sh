#!/usr/bin/env bash
# The mini ablation on a machine with a GPU, in one command: the pair is built there (no model
# travels), then every (arm, seed) cell trains, JOBS at a time, each in its own process on the GPU,
# and the tables and plot are read from the log into $OUT (default build/mini-gpu).
#
#   bash benchmarks/mini_gpu.sh                       # on the GPU machine: cuda, 8 seeds, 8 cells at a time
#   DEVICE=cpu SEEDS=1 JOBS=2 DRY=1 bash benchmarks/mini_gpu.sh   # the CPU dry run: tiny sizes, minutes
#   STEPS=2400 ARMS="full;pure free;pure free, absolute only;absolute only;oracle;frozen challenger;shared-error check" \
#     OUT=build/mini-regime bash benchmarks/mini_gpu.sh    # the paper's label regime (docs/how-to/mini-world.md)
#
# DEVICE (cuda), SEEDS (8), JOBS (8), ROUNDS (5), ARMS (the four), OUT (build/mini-gpu), STEPS (the pair's
# warm-up steps: unset, the pinned 1,600; 2400, the paper's label regime), DRY (unset: the
# config's sizes; 1: a 100-step pair and rounds of a few steps, to check the command end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
SEEDS=${SEEDS:-8}
JOBS=${JOBS:-8}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-build/mini-gpu}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$OUT"
small=()
steps=()
[ -n "${STEPS:-}" ] && steps=(--steps "$STEPS")
if [ -n "${DRY:-}" ]; then
  steps=(--steps 100)
  small=(--set train.curriculum_questions=64 --set train.challenger_questions=8 --set challenger.batch_size=8
         --set challenger.max_steps=1 --set solver.batch_size=8 --set solver.max_steps=2)
fi
[ -f "$OUT/pair/mini.json" ] || "$PY" -m diagevo.cli.app models mini --out "$OUT/pair" --device "$DEVICE" "${steps[@]}"
arms=()
IFS=';' read -r -a names <<< "${ARMS:-full;pure free;frozen challenger;oracle}"
for arm in "${names[@]}"; do arms+=(--variant "$arm"); done
"$PY" -m diagevo.cli.app ablate --config configs/mini-cpu.toml --seeds "$SEEDS" --rounds "$ROUNDS" --jobs "$JOBS" \
  --out "$OUT/mini.db" "${arms[@]}" --set hf.device="$DEVICE" --set hf.torch_threads=1 \
  --set challenger.model="$OUT/pair/challenger" --set solver.model="$OUT/pair/solver" "${small[@]}" --json \
  > "$OUT/ablate.json"
"$PY" benchmarks/ablation_table.py --log "sqlite:///$OUT/mini.db" --pair "$OUT/pair" --svg "$OUT/mini-ablation.svg" \
  | tee "$OUT/table.md"
"$PY" -c "import torch; print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')" \
  | tee -a "$OUT/table.md"
