# Sourced by the A/B scripts under results/ (an old build against a new
# one on the HalfCheetah files). It sets what they share: the binaries
# $OLD and $NEW (defaults /tmp/rlx-old and target/release/rlx), $PY (a
# Python with d3rlpy), $DATA (the HalfCheetah files), $NET (two 256-wide
# ReLU layers) and a scratch directory $W; and two steps:
#
# - `same <name> <rlx train arguments...>` trains with $OLD and $NEW into
#   $W/<name>-OLD and $W/<name>-NEW, then prints whether their result lines
#   hold the same numbers, times left out (compare_runs.py);
# - `same_ppo_sac_dqn`: `same` for PPO on CartPole (40,000 steps), SAC on
#   Pendulum (3,000) and DQN on CartPole (10,000), seed 1;
# - `same_bc <name> <rows>`: `same` for BC on $DATA, 2,000 updates of
#   <rows> rows, one greedy evaluation of 2 episodes at the end;
# - `same_iql_cql`: `same` for IQL and for CQL (SAC with `min_q_weight`)
#   on $DATA, 3,000 and 300 updates from the first row read;
# - `speed_ab <out file>` runs speed.sh on $DATA: BC, IQL and CQL, $OLD,
#   $NEW and d3rlpy (D3RLPY_THREADS, default "1 0"), three rounds.
OLD=${OLD:-/tmp/rlx-old}
NEW=${NEW:-target/release/rlx}
PY=${PY:-python3}
OFFLINE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA=$OFFLINE/results/halfcheetah-2026-12-06/data
NET='"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}'
W=$(mktemp -d)

same() {
  local name=$1; shift
  for side in OLD NEW; do
    "${!side}" train "$@" --results-dir "$W/$name-$side" > /dev/null 2>&1
  done
  python3 "$OFFLINE/compare_runs.py" "$W/$name-OLD" "$W/$name-NEW" "$name"
}

same_ppo_sac_dqn() {
  same PPO-CartPole --run PPO --env CartPole-v1 --seed 1 --stop '{"timesteps_total": 40000}'
  same SAC-Pendulum --run SAC --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 3000}'
  same DQN-CartPole --run DQN --env CartPole-v1 --seed 1 --stop '{"timesteps_total": 10000}'
}

same_bc() {
  same "$1" --run BC --env gym:HalfCheetah-v5 --seed 1 --stop '{"training_iteration": 2000}' \
    --config "{\"input\": \"$DATA\", \"train_batch_size\": $2, \"lr\": 0.001, $NET, \"evaluation_interval\": 2000, \"evaluation_duration\": 2}"
}

same_iql_cql() {
  same IQL-HalfCheetah --run IQL --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 3000}' \
    --config "{\"input\": \"$DATA\", \"learning_starts\": 0, \"timesteps_per_iteration\": 1000, $NET}"
  same SAC-CQL-HalfCheetah --run SAC --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 300}' \
    --config "{\"input\": \"$DATA\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, \"learning_starts\": 0, \"timesteps_per_iteration\": 100, $NET}"
}

speed_ab() {
  OLD=$OLD ENV=HalfCheetah-v5 ALGORITHMS="BC IQL CQL" D3RLPY_THREADS="${D3RLPY_THREADS:-1 0}" \
    bash "$OFFLINE/speed.sh" "$DATA" "$NEW" "$PY" 2>&1 | tee "$1"
}
