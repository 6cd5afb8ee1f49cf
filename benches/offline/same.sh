# Sourced by the A/B scripts under results/: `same <name> <rlx train
# arguments...>` trains with the binaries $OLD and $NEW into $W/<name>-OLD
# and $W/<name>-NEW, then prints whether their result lines hold the same
# numbers, times left out (compare_runs.py).
same() {
  local name=$1; shift
  for side in OLD NEW; do
    "${!side}" train "$@" --results-dir "$W/$name-$side" > /dev/null 2>&1
  done
  python3 "$(dirname "${BASH_SOURCE[0]}")/compare_runs.py" "$W/$name-OLD" "$W/$name-NEW" "$name"
}
