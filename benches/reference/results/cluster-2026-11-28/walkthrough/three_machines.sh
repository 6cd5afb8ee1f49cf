#!/usr/bin/env bash
# Three "machines" in network namespaces on one bridge: driver 10.77.0.1,
# node1 10.77.0.2, node2 10.77.0.3. Runs the book's walkthrough lines.
set -u
RLX=/work/main/target/debug/rlx
W=/tmp/walk; rm -rf $W; mkdir -p $W
cleanup() { for p in $(cat $W/pids 2>/dev/null); do kill -9 $p 2>/dev/null; done; for m in driver node1 node2; do ip netns del rlxw-$m 2>/dev/null; done; ip link del rlxwbr 2>/dev/null; }
trap cleanup EXIT
ip link add rlxwbr type bridge && ip link set rlxwbr up
i=1
for m in driver node1 node2; do
  ip netns add rlxw-$m
  ip link add rlxw-$m type veth peer name eth0 netns rlxw-$m
  ip link set rlxw-$m master rlxwbr up
  ip -n rlxw-$m addr add 10.77.0.$i/24 dev eth0
  ip -n rlxw-$m link set eth0 up; ip -n rlxw-$m link set lo up
  i=$((i+1))
done
cd $W
umask 077; head -c 32 /dev/urandom | base64 > $W/rlx-cookie
# node1, node2: start before the driver, in any order; they keep dialling.
ip netns exec rlxw-node1 $RLX node --listen 0.0.0.0:7000 --cookie-file $W/rlx-cookie --join 10.77.0.1:7100 --name node1 > $W/node1.log 2>&1 & echo $! >> $W/pids
ip netns exec rlxw-node2 $RLX node --listen 0.0.0.0:7000 --cookie-file $W/rlx-cookie --join 10.77.0.1:7100 --name node2 > $W/node2.log 2>&1 & echo $! >> $W/pids
sleep 1
# the driver
ip netns exec rlxw-driver $RLX train --run PPO --env CartPole-v1 --config '{"num_workers": 4}' \
  --node-listen 0.0.0.0:7100 --cookie-file $W/rlx-cookie --stop '{"training_iteration": 150}' --results-dir $W/results > $W/driver.log 2>&1
echo "driver exit $?"
sleep 1
