# Sourced by side_by_side.sh and open_spiel_reference.sh.
#
# both_seats PYTHON SCRIPT PREFIX ARGS...: plays SCRIPT ARGS with the
# player under test in each seat (`--seat 0`, `--seat 1`) side by side,
# each writing PREFIX_seatS.json and its log PREFIX_seatS.log, then joins
# the two into PREFIX.json (`SCRIPT x --merge`). SCRIPT is
# vs_open_spiel.py or open_spiel_reference.py, which share these flags.
both_seats() {
    local py=$1 script=$2 prefix=$3
    shift 3
    for seat in 0 1; do
        "$py" "$script" "$@" --seat "$seat" --out "${prefix}_seat$seat.json" > "${prefix}_seat$seat.log" 2>&1 &
    done
    wait
    "$py" "$script" x --merge "${prefix}_seat0.json" "${prefix}_seat1.json" --out "$prefix.json"
}
