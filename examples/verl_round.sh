#!/usr/bin/env bash
# One DiagEvo round with verl training both roles (`diagevo docs how-to/verl` shows this script), on a
# machine with GPUs, verl with its vllm extra, and diagevo[verl]. diagevo ships it and the verl configs
# it reads (configs/verl/): run it from anywhere, or copy it to edit,
#
#   cp "$(diagevo docs --path examples/verl_round.sh)" .
#   RUN=mine SOLVER=models/solver-0 CHALLENGER=models/challenger-0 ROUND=rounds/1 bash verl_round.sh
#
# SOLVER and CHALLENGER are the models the round starts from (Hugging Face directories), ROUND the
# directory it writes (the Parquet files, checkpoints, the rollout dump, and the round's models in
# $ROUND/solver and $ROUND/challenger). DB (default sqlite:///diagevo.db) holds the memory; LLM_URL and
# LLM_MODEL name the diagnostician (unset: the offline heuristic, not the paper's). VERL_ARGS adds verl
# overrides to every verl command: on one GPU, for a check,
#   VERL_ARGS="trainer.n_gpus_per_node=1 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
#              reward.custom_reward_function.reward_kwargs.batch_size=64"
set -euo pipefail
: "${RUN:?name the run}" "${SOLVER:?name the solver model}" "${CHALLENGER:?name the challenger model}"
: "${ROUND:?name the round directory}"
DB=${DB:-sqlite:///diagevo.db}
PORT=${PORT:-8001}
CONFIGS=$(dirname "$(diagevo docs --path configs/verl/solver.yaml)")  # the verl configs diagevo ships
read -r -a EXTRA <<< "${VERL_ARGS:-}"
mkdir -p "$ROUND"

merged() {  # a verl checkpoint's last actor as a Hugging Face model directory
  local step
  step=$(cat "$1/latest_checkpointed_iteration.txt")
  python -m verl.model_merger merge --backend fsdp --local_dir "$1/global_step_$step/actor" --target_dir "$2"
}

# 1. open the round; its challenger prompts (Q^chal) and the requests Q^cur is generated from
diagevo round start --run "$RUN" --db "$DB"
T=$(diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND" --json | python -c 'import json,sys; print(json.load(sys.stdin)["round"])')

# 2. the challenger's GRPO, rewarded by the frozen solver's answers (served) and the repetition penalty
vllm serve "$SOLVER" --served-model-name solver --port "$PORT" --gpu-memory-utilization 0.2 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; do sleep 5; done
python -m verl.trainer.main_ppo --config-path "$CONFIGS" --config-name challenger \
  data.train_files="$ROUND/challenger.parquet" actor_rollout_ref.model.path="$CHALLENGER" \
  reward.custom_reward_function.reward_kwargs.solver_url="http://127.0.0.1:$PORT/v1" \
  trainer.default_local_dir="$ROUND/challenger-checkpoints" "${EXTRA[@]}"
kill $SERVER
merged "$ROUND/challenger-checkpoints" "$ROUND/challenger"

# 3. Q^cur: the updated challenger writes a question for each request, the solver answers each N times;
# the round votes on them and keeps what the filter keeps (Eq. 3), then decides its promotions
python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name challenger \
  data.train_files="$ROUND/curriculum.parquet" +data.output_path="$ROUND/questions.parquet" \
  actor_rollout_ref.model.path="$ROUND/challenger" actor_rollout_ref.rollout.n=1 "${EXTRA[@]}"
python - "$ROUND" <<'EOF'
import sys

import pandas as pd

import diagevo

round_dir = sys.argv[1]
asked = pd.read_parquet(f"{round_dir}/questions.parquet")
asked["question"] = [diagevo.parse_question(r[0]) for r in asked["responses"]]
asked = asked[asked["question"].notna()].drop(columns=["responses"])
asked["prompt"] = [diagevo.solver_messages(q) for q in asked["question"]]
asked.to_parquet(f"{round_dir}/construct.parquet")
EOF
VOTES=$(python -c 'import pandas as pd, sys; print(pd.read_parquet(sys.argv[1])["extra_info"][0]["votes"])' "$ROUND/curriculum.parquet")
python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name solver \
  data.train_files="$ROUND/construct.parquet" +data.output_path="$ROUND/constructed.parquet" \
  actor_rollout_ref.model.path="$SOLVER" actor_rollout_ref.rollout.n="$VOTES" "${EXTRA[@]}"
python - "$ROUND" <<'EOF'
import json
import sys

import pandas as pd

round_dir = sys.argv[1]
with open(f"{round_dir}/questions.jsonl", "w", encoding="utf-8") as out:
    for row in pd.read_parquet(f"{round_dir}/constructed.parquet").itertuples():
        info = row.extra_info
        fields = {k: info[k] for k in ("question_id", "mode", "active_cause", "mastered_cause", "node")}
        out.write(json.dumps({**fields, "text": row.question, "responses": list(row.responses)}) + "\n")
EOF
diagevo round record "$ROUND/questions.jsonl" --run "$RUN" --db "$DB"
diagevo round promote --run "$RUN" --db "$DB"

# 4. the solver's GRPO on the retained questions (solver.parquet), its rollouts dumped
diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND"
python -m verl.trainer.main_ppo --config-path "$CONFIGS" --config-name solver \
  data.train_files="$ROUND/solver.parquet" actor_rollout_ref.model.path="$SOLVER" \
  trainer.rollout_data_dir="$ROUND/rollouts" trainer.default_local_dir="$ROUND/solver-checkpoints" "${EXTRA[@]}"
merged "$ROUND/solver-checkpoints" "$ROUND/solver"

# 5. the failed responses back, diagnosed into the memory; the commit (M_t)
if [[ -n "${LLM_URL:-}" ]]; then
  diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --llm-url "$LLM_URL" --model "$LLM_MODEL"
else
  diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --diagnostician heuristic
fi
diagevo round commit --run "$RUN" --db "$DB"
