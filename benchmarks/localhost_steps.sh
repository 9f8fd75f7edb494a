#!/bin/bash
# The localhost deployment steps of examples/flower/README.md (section 3), as a user types
# them, each service in the background: prepare 3 sites, `cotrain superlink`, 3 × `cotrain
# site node`, `flwr run`, then `cotrain stop` for all four; prints the rounds, the seconds
# per round and the processes before and after the stop (defunct entries not counted).
#
#   bash benchmarks/localhost_steps.sh [OUT] [ROUNDS] [PORT]
#   START_LIMIT=30 NODE_FLAGS=--no-worker bash benchmarks/localhost_steps.sh /tmp/x 5
#
# Load the machine first to measure what a busy machine does (e.g. a background
# `python -m pytest -m "not slow"`).
set -u
OUT=${1:-/tmp/cotrain-localhost}; ROUNDS=${2:-5}; PORT=${3:-9300}
APP="$(cd "$(dirname "$0")/../examples/flower" && pwd)"
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$APP"
python prepare_sites.py --out "$OUT/sites" --rounds "$ROUNDS" > "$OUT/prepare.log" 2>&1
export FLWR_HOME="$OUT/flwr"; mkdir -p "$FLWR_HOME"
printf '[superlink.local-deploy]\naddress = "127.0.0.1:%s"\ninsecure = true\n' "$PORT" > "$FLWR_HOME/config.toml"
ours() {  # live processes of the deployment (not this script, not zombies)
  ps -eo stat=,args= | grep -v '^ *Z' | grep -v localhost_steps.sh |
    grep -E "$OUT|flower-superexec|flwr-(clientapp|serverapp)" | grep -vc grep
}
cotrain superlink --start-limit "${START_LIMIT:-300}" --pid-file "$OUT/superlink.pid" --insecure \
  --disable-runtime-dependency-installation --port "$PORT" > "$OUT/superlink.log" 2>&1 &
for i in 0 1 2; do
  cotrain site node ${NODE_FLAGS:-} --start-limit "${START_LIMIT:-300}" "$OUT/sites/site-$i" \
    --superlink "127.0.0.1:$PORT" --insecure --port "$((PORT + 100 + i))" > "$OUT/node-$i.log" 2>&1 &
done
sleep 5
started=$(date +%s.%N)
timeout 900 flwr run . local-deploy --stream --run-config \
  "public-pool=\"$OUT/sites/public.npy\" output-dir=\"$OUT/out\" rounds=$ROUNDS" > "$OUT/run.log" 2>&1
echo "flwr run exit $? after $(python -c "import time; print(round(time.time() - $started, 1))") s"
grep "^round\|stopped" "$OUT/run.log"
echo "processes before cotrain stop: $(ours)"
cotrain stop "$OUT/sites/site-0" "$OUT/sites/site-1" "$OUT/sites/site-2" "$OUT/superlink.pid"
sleep 0.5
echo "processes after cotrain stop: $(ours)"
