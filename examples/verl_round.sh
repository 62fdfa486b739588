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
#
# Run again after a kill (or a failed step), the same command goes on where the round stopped: the
# steps of the round protocol it reads from `diagevo round status` (opened, questions recorded,
# promotions decided, failures recorded, diagnosed), the others from their outputs in $ROUND, each
# written under a temporary name and moved into place once whole (the merged models $ROUND/challenger
# and $ROUND/solver, questions.parquet, constructed.parquet, the rollout dump $ROUND/rollouts), and
# verl's checkpoints once they reach the last step (latest_checkpointed_iteration.txt).
set -euo pipefail
: "${RUN:?name the run}" "${SOLVER:?name the solver model}" "${CHALLENGER:?name the challenger model}"
: "${ROUND:?name the round directory}"
DB=${DB:-sqlite:///diagevo.db}
PORT=${PORT:-8001}
PORT_CHECK_S=${PORT_CHECK_S:-10}
SERVE_WAIT_S=${SERVE_WAIT_S:-1800}
read -r -a EXTRA <<< "${VERL_ARGS:-}"

manifest() {  # the export's manifest (verl.json): its round, or the verl overrides of the file named
  python -c 'import json, sys; m = json.load(open(sys.argv[1])); print(*m["overrides"][sys.argv[2]] if sys.argv[2:] else [m["round"]])' \
    "$ROUND/verl.json" "$@"
}
trained() {  # whether verl's checkpoints in $1 reached the last step of its training on the file $2:
  # trainer.total_training_steps of verl.json's overrides for it, or of VERL_ARGS (verl writes
  # latest_checkpointed_iteration.txt once a checkpoint is whole)
  python - "$1/latest_checkpointed_iteration.txt" "$ROUND/verl.json" "$2" "${EXTRA[@]}" <<'PY'
import json, sys
latest, manifest, name, *extra = sys.argv[1:]
try:
    done = int(open(latest, encoding="utf-8").read().strip())
    given = [*json.load(open(manifest, encoding="utf-8"))["overrides"][name], *extra]
except (OSError, ValueError, KeyError, TypeError, RecursionError):
    sys.exit(1)
steps = [v for k, _, v in (str(o).partition("=") for o in given) if k.lstrip("+") == "trainer.total_training_steps"]
sys.exit(0 if steps and steps[-1].isascii() and steps[-1].isdigit() and done >= int(steps[-1]) else 1)
PY
}
merged() {  # a verl checkpoint's last actor as a Hugging Face model directory, moved into place once whole
  local step
  step=$(cat "$1/latest_checkpointed_iteration.txt")
  rm -rf "$2.partial"
  python -m verl.model_merger merge --backend fsdp --local_dir "$1/global_step_$step/actor" --target_dir "$2.partial"
  mv "$2.partial" "$2"
}
done_already() {  # a step skipped: what says it is done
  echo "round $T of run $RUN: $1 (done already)" >&2
}

# 0. where the round stands: the run's open round (or its next one) and the step it takes next; a
# $ROUND exported for another round (this one committed, say) is refused before anything runs
if [[ $DB == sqlite:///* && ! -e ${DB#sqlite:///} ]]; then
  T=1 NEXT=open LAST=0  # no database yet: round start creates it, and the run
else
  STATUS=$(diagevo round status --run "$RUN" --db "$DB" --json)
  STATUS=$(python -c 'import json, sys; s = json.loads(sys.argv[1]); print(s["round"], s["next_step"], s["last_committed"])' \
    "$STATUS")
  read -r T NEXT LAST <<< "$STATUS"
fi
if [[ -e "$ROUND/verl.json" ]]; then
  python - "$ROUND/verl.json" "$ROUND" "$RUN" "$T" "$LAST" <<'PY'
import json, sys
path, folder, run, t, last = sys.argv[1:]
try:
    m = json.load(open(path, encoding="utf-8"))
    held = (m["run"], m["round"])
except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
    sys.exit(f"{path} is not the manifest diagevo export verl writes ({type(exc).__name__}): give the round a new ROUND")
if held != (run, int(t)):
    passed = held[0] == run and isinstance(held[1], int) and held[1] <= int(last)
    said = f"committed; run {run!r} stands at round {t}" if passed else f"not round {t} of run {run!r}"
    sys.exit(f"{folder} holds round {held[1]} of run {held[0]!r} (its verl.json), {said}: give round {t} its own ROUND")
PY
fi
echo "round $T of run $RUN: next, $NEXT" >&2
# the challenger's GRPO is to run while no question is recorded and neither its outputs nor its
# whole checkpoint are there; it alone serves the frozen solver
TRAIN_CHALLENGER=0
if [[ $NEXT == open || $NEXT == record ]] && [[ ! -f "$ROUND/questions.parquet" && ! -d "$ROUND/challenger" ]] &&
  ! trained "$ROUND/challenger-checkpoints" challenger.parquet; then
  TRAIN_CHALLENGER=1
fi

# the frozen solver is served on $PORT under a name of this round alone: a server already answering
# there (another round's, another user's) would be taken for it, and reward the challenger with it; a
# process that takes the connection and never answers holds the port as well
if ((TRAIN_CHALLENGER)); then
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
fi
SERVED="solver-$RUN-$$"
CONFIGS=$(dirname "$(diagevo docs --path configs/verl/solver.yaml)")  # the verl configs diagevo ships
mkdir -p "$ROUND"

# 1. open the round; its challenger prompts (Q^chal) and the requests Q^cur is generated from
if [[ $NEXT == open ]]; then
  diagevo round start --run "$RUN" --db "$DB"
  NEXT=record
fi
if [[ $NEXT == record ]]; then
  diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND"

  # 2. the challenger's GRPO, rewarded by the frozen solver's answers (served) and the repetition penalty
  if [[ -f "$ROUND/questions.parquet" || -d "$ROUND/challenger" ]]; then
    done_already "the challenger's GRPO and its merge ($ROUND/challenger)"
  else
    if ((TRAIN_CHALLENGER)); then
      read -r -a CHALLENGER_SIZE <<< "$(manifest challenger.parquet)"
      vllm serve "$SOLVER" --served-model-name "$SERVED" --port "$PORT" --gpu-memory-utilization 0.2 &
      SERVER=$!
      trap 'kill "$SERVER" 2>/dev/null || true' EXIT
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
      kill "$SERVER"
    else
      done_already "the challenger's GRPO ($ROUND/challenger-checkpoints)"
    fi
    merged "$ROUND/challenger-checkpoints" "$ROUND/challenger"
  fi

  # 3. Q^cur: the updated challenger writes a question for each request, the solver answers each N times
  # (construct.parquet: the questions as solver prompts); the round votes on them and keeps what the
  # filter keeps (Eq. 3), then decides its promotions
  if [[ -f "$ROUND/questions.parquet" ]]; then
    done_already "Q^cur generated ($ROUND/questions.parquet)"
  else
    read -r -a CURRICULUM_SIZE <<< "$(manifest curriculum.parquet)"
    python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name challenger \
      data.train_files="$ROUND/curriculum.parquet" +data.output_path="$ROUND/questions.parquet.partial" \
      actor_rollout_ref.model.path="$ROUND/challenger" "${CURRICULUM_SIZE[@]}" "${EXTRA[@]}"
    mv "$ROUND/questions.parquet.partial" "$ROUND/questions.parquet"
  fi
  diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND" --questions "$ROUND/questions.parquet"
  if [[ -f "$ROUND/constructed.parquet" ]]; then
    done_already "the construction responses ($ROUND/constructed.parquet)"
  else
    read -r -a CONSTRUCT_SIZE <<< "$(manifest construct.parquet)"
    python -m verl.trainer.main_generation_server --config-path "$CONFIGS" --config-name solver \
      data.train_files="$ROUND/construct.parquet" +data.output_path="$ROUND/constructed.parquet.partial" \
      actor_rollout_ref.model.path="$SOLVER" "${CONSTRUCT_SIZE[@]}" "${EXTRA[@]}"
    mv "$ROUND/constructed.parquet.partial" "$ROUND/constructed.parquet"
  fi
  diagevo round record --from-verl "$ROUND/constructed.parquet" --run "$RUN" --db "$DB"
  NEXT=promote
fi
if [[ $NEXT == promote ]]; then
  diagevo round promote --run "$RUN" --db "$DB"
  NEXT=record_failures
fi

# 4. the solver's GRPO on the retained questions (solver.parquet), its rollouts dumped beside the export
if [[ $NEXT == record_failures ]]; then
  diagevo export verl --run "$RUN" --db "$DB" -o "$ROUND"
fi
if [[ -f "$ROUND/solver.parquet" ]] && [[ $NEXT == record_failures || $NEXT == diagnose ]]; then
  if [[ -d "$ROUND/rollouts" ]]; then
    done_already "the solver's GRPO ($ROUND/rollouts)"
  else
    if trained "$ROUND/solver-checkpoints" solver.parquet; then
      done_already "the solver's GRPO ($ROUND/solver-checkpoints)"
    else
      read -r -a SOLVER_SIZE <<< "$(manifest solver.parquet)"
      python -m verl.trainer.main_ppo --config-path "$CONFIGS" --config-name solver \
        data.train_files="$ROUND/solver.parquet" actor_rollout_ref.model.path="$SOLVER" \
        trainer.rollout_data_dir="$ROUND/rollouts.partial" trainer.default_local_dir="$ROUND/solver-checkpoints" \
        "${SOLVER_SIZE[@]}" "${EXTRA[@]}"
    fi
    mv "$ROUND/rollouts.partial" "$ROUND/rollouts"
  fi
  if [[ -d "$ROUND/solver" ]]; then
    done_already "the solver merged ($ROUND/solver)"
  else
    merged "$ROUND/solver-checkpoints" "$ROUND/solver"
  fi

  # 5. the failed responses back, diagnosed into the memory (again after a kill: what is recorded is kept)
  if [[ -n "${LLM_URL:-}" ]]; then
    diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --llm-url "$LLM_URL" --model "$LLM_MODEL"
  else
    diagevo diagnose --from-verl "$ROUND/rollouts" --run "$RUN" --round "$T" --db "$DB" --diagnostician heuristic
  fi
fi
# the commit (M_t); a round that retained no question trained no solver and commits as it is
diagevo round commit --run "$RUN" --db "$DB"
