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
# overrides to every verl command, after the batch sizes the export's verl.json gives for the round's
# size: on one GPU, for a check, VERL_ARGS="trainer.n_gpus_per_node=1". Every wait is bounded and says
# what it waits for: PORT_CHECK_S (default 10) for an answer on PORT before the round, SERVE_WAIT_S
# (default 1800) for vllm serve to serve the solver.
set -euo pipefail
: "${RUN:?name the run}" "${SOLVER:?name the solver model}" "${CHALLENGER:?name the challenger model}"
: "${ROUND:?name the round directory}"
DB=${DB:-sqlite:///diagevo.db}
PORT=${PORT:-8001}
PORT_CHECK_S=${PORT_CHECK_S:-10}
SERVE_WAIT_S=${SERVE_WAIT_S:-1800}
# the frozen solver is served on $PORT under a name of this round alone: a server already answering
# there (another round's, another user's) would be taken for it, and reward the challenger with it; a
# process that takes the connection and never answers holds the port as well
CHECK=0
curl -s -o /dev/null --max-time "$PORT_CHECK_S" "http://127.0.0.1:$PORT/v1/models" || CHECK=$?
if [[ $CHECK == 0 ]]; then
  echo "port $PORT answers already: stop what serves it, or give the round another PORT" >&2
  exit 1
elif [[ $CHECK != 7 ]]; then  # 7: nothing listens there, the port is free
  echo "port $PORT is taken: a process there took the connection and did not answer within $PORT_CHECK_S s" \
    "(PORT_CHECK_S; curl exit $CHECK): stop it, or give the round another PORT" >&2
  exit 1
fi
SERVED="solver-$RUN-$$"
CONFIGS=$(dirname "$(diagevo docs --path configs/verl/solver.yaml)")  # the verl configs diagevo ships
read -r -a EXTRA <<< "${VERL_ARGS:-}"
mkdir -p "$ROUND"

merged() {  # a verl checkpoint's last actor as a Hugging Face model directory
  local step
  step=$(cat "$1/latest_checkpointed_iteration.txt")
  python -m verl.model_merger merge --backend fsdp --local_dir "$1/global_step_$step/actor" --target_dir "$2"
}
manifest() {  # the export's manifest (verl.json): its round, or the verl overrides of the file named
  python -c 'import json, sys; m = json.load(open(sys.argv[1])); print(*m["overrides"][sys.argv[2]] if sys.argv[2:] else [m["round"]])' \
    "$ROUND/verl.json" "$@"
}

# 1. open the round; its challenger prompts (Q^chal) and the requests Q^cur is generated from
diagevo round start --run "$RUN" --db "$DB"
diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND"
T=$(manifest)
read -r -a CHALLENGER_SIZE <<< "$(manifest challenger.parquet)"
read -r -a CURRICULUM_SIZE <<< "$(manifest curriculum.parquet)"

# 2. the challenger's GRPO, rewarded by the frozen solver's answers (served) and the repetition penalty
vllm serve "$SOLVER" --served-model-name "$SERVED" --port "$PORT" --gpu-memory-utilization 0.2 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
STARTED=$SECONDS
until curl -sf --max-time 10 "http://127.0.0.1:$PORT/v1/models" | grep -q "\"$SERVED\""; do  # this round's, no other
  kill -0 "$SERVER" 2>/dev/null || { echo "vllm serve exited before serving $SOLVER" >&2; exit 1; }
  WAITED=$((SECONDS - STARTED))
  if ((WAITED >= SERVE_WAIT_S)); then
    echo "vllm serve did not serve $SOLVER on port $PORT within $SERVE_WAIT_S s (SERVE_WAIT_S): stopped" >&2
    exit 1
  fi
  if ((WAITED % 60 < 5)); then  # about once a minute
    echo "waiting for vllm serve to serve $SOLVER on port $PORT: $WAITED s of at most $SERVE_WAIT_S" >&2
  fi
  sleep 5
done
python -m verl.trainer.main_ppo --config-path "$CONFIGS" --config-name challenger \
  data.train_files="$ROUND/challenger.parquet" actor_rollout_ref.model.path="$CHALLENGER" \
  reward.custom_reward_function.reward_kwargs.solver_url="http://127.0.0.1:$PORT/v1" \
  reward.custom_reward_function.reward_kwargs.solver_model="$SERVED" \
  trainer.default_local_dir="$ROUND/challenger-checkpoints" "${CHALLENGER_SIZE[@]}" "${EXTRA[@]}"
kill $SERVER
merged "$ROUND/challenger-checkpoints" "$ROUND/challenger"

# 3. Q^cur: the updated challenger writes a question for each request, the solver answers each N times
# (construct.parquet: the questions as solver prompts); the round votes on them and keeps what the
# filter keeps (Eq. 3), then decides its promotions
python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name challenger \
  data.train_files="$ROUND/curriculum.parquet" +data.output_path="$ROUND/questions.parquet" \
  actor_rollout_ref.model.path="$ROUND/challenger" "${CURRICULUM_SIZE[@]}" "${EXTRA[@]}"
diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND" --questions "$ROUND/questions.parquet"
read -r -a CONSTRUCT_SIZE <<< "$(manifest construct.parquet)"
python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name solver \
  data.train_files="$ROUND/construct.parquet" +data.output_path="$ROUND/constructed.parquet" \
  actor_rollout_ref.model.path="$SOLVER" "${CONSTRUCT_SIZE[@]}" "${EXTRA[@]}"
diagevo round record --from-verl "$ROUND/constructed.parquet" --run "$RUN" --db "$DB"
diagevo round promote --run "$RUN" --db "$DB"

# 4. the solver's GRPO on the retained questions (solver.parquet), its rollouts dumped beside the export
diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND"
if [[ -f "$ROUND/solver.parquet" ]]; then
  read -r -a SOLVER_SIZE <<< "$(manifest solver.parquet)"
  python -m verl.trainer.main_ppo --config-path "$CONFIGS" --config-name solver \
    data.train_files="$ROUND/solver.parquet" actor_rollout_ref.model.path="$SOLVER" \
    trainer.rollout_data_dir="$ROUND/rollouts" trainer.default_local_dir="$ROUND/solver-checkpoints" \
    "${SOLVER_SIZE[@]}" "${EXTRA[@]}"
  merged "$ROUND/solver-checkpoints" "$ROUND/solver"

  # 5. the failed responses back, diagnosed into the memory
  if [[ -n "${LLM_URL:-}" ]]; then
    diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --llm-url "$LLM_URL" --model "$LLM_MODEL"
  else
    diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --diagnostician heuristic
  fi
fi
# the commit (M_t); a round that retained no question trained no solver and commits as it is
diagevo round commit --run "$RUN" --db "$DB"
