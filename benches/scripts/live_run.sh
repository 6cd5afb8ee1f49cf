# Sourced by the benchmark scripts that start `rlx train` runs into
# directories of their own (benches/dreamer_v3/env_steps.sh,
# benches/offline/halfcheetah.sh). Such a script clears or moves a run's
# directory before starting it; a second copy of it on the same output
# directory must not do that to a run that is still going.

# live_run DIR: true while an `rlx train ... --results-dir DIR` process
# runs (DIR the last argument, as these scripts pass it).
live_run() {
    pgrep -f -- "--results-dir $1\$" > /dev/null
}
