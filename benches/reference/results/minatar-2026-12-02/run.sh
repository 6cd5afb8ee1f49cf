#!/usr/bin/env bash
# The run, as benches/minatar/run.sh runs it: Breakout, seed 1, two hours.
# It ran at `nice -n 10` with a copy of the release binary (RLX=...), so
# that rebuilding target/release during the run did not touch it.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/minatar && cp target/release/rlx /tmp/minatar/rlx
GAMES=Breakout TIME_LIMIT_S=7200 RLX=/tmp/minatar/rlx exec nice -n 10 benches/minatar/run.sh /tmp/minatar 5000000 1
