#!/bin/bash
# Update cost of continuous DreamerV3 before (7141e61) and after freezing the
# world model's and critic's weights in imagination; alternating pairs.
# (The example's ratio was 256 then; since 2026-12-07 it is 512, so the
# ratio is now given here.)
for round in 1 2; do
  for side in old new; do
    bin=/work/bin-7141e61/rlx; [ $side = new ] && bin=/work/ab-frozen/rlx-new
    $bin train -f /work/main/tuned_examples/dreamerv3-pendulum.yaml --seed 1 \
      --stop '{"timesteps_total": 1500}' --config '{"timesteps_per_iteration": 100, "evaluation_interval": 100, "training_ratio": 256, "model_size": "micro", "learning_starts": 1024}' \
      --results-dir /work/ab-frozen/$side-$round > /work/ab-frozen/$side-$round.log 2>&1
  done
done
