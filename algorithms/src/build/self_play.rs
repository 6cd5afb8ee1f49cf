//! Self-play's snapshots: after every `snapshot_every` iterations, the
//! learning policy `main`'s weights are copied over the oldest of its
//! frozen snapshots `main_v1` … `main_v{pool-1}`, which the env copies
//! play it against (see [`crate::build::multi_agent::SelfPlay`]). `main_v0` keeps
//! `main`'s initial weights for the whole run: the league always holds a
//! weak player, so `main` keeps exploiting mistakes rather than only
//! drawing against its recent selves, and its win rate against `main_v0`
//! measures the progress since the start. The snapshots
//! are policies of the run's [`rlx::MultiPolicy`], so they reach every
//! evaluator with the weights, and checkpoints keep the league.

use crate::build::multi_agent::{Plan, SelfPlay, MAIN};
use rlx::optimizer::{OptimizerError, PolicyOptimizer, StepStats};
use rlx::{async_trait, Evaluators, FlatWeights, PolicyError};
use std::sync::Arc;

/// The run's optimizer, followed by the snapshot schedule.
pub struct SelfPlayStep {
    inner: Box<dyn PolicyOptimizer>,
    schedule: SelfPlay,
    iterations: u64,
    /// Whether the snapshots hold what they should: copies of `main`'s
    /// initial weights before the first step, or a checkpoint's league.
    seeded: bool,
}

impl SelfPlayStep {
    /// `inner` with `schedule`'s snapshots.
    pub fn new(inner: Box<dyn PolicyOptimizer>, schedule: SelfPlay) -> Self {
        Self { inner, schedule, iterations: 0, seeded: false }
    }

    /// Copies `main`'s weights over the snapshots `targets` in the driver's
    /// policy and sends the result to every evaluator.
    async fn snapshot(&mut self, evaluators: &mut Evaluators, targets: &[usize]) -> Result<(), OptimizerError> {
        let weights = {
            let mut local = evaluators.local_mut();
            let layout = local.policy().weight_layout();
            let range = |id: &str| {
                layout.iter().find(|(p, _)| p == id).map(|(_, r)| r.clone()).ok_or_else(|| {
                    rlx::EvaluatorError::Policy(PolicyError::Other(format!("self-play has no policy `{id}`")))
                })
            };
            let mut weights = local.policy().get_weights();
            let main = range(MAIN)?;
            for &k in targets {
                let snapshot = range(&SelfPlay::snapshot(k))?;
                weights.copy_within(main.clone(), snapshot.start);
            }
            local.set_weights(&weights)?;
            Arc::new(weights)
        };
        rlx::operators::broadcast_weights(evaluators).await?;
        self.inner.weights_restored(&weights);
        Ok(())
    }
}

#[async_trait]
impl PolicyOptimizer for SelfPlayStep {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        if !self.seeded {
            let all: Vec<usize> = (0..self.schedule.pool).collect();
            self.snapshot(evaluators, &all).await?;
            self.seeded = true;
        }
        let mut stats = self.inner.step(evaluators).await?;
        self.iterations += 1;
        // `main_v0` keeps the initial weights; the others take turns.
        let renewed = self.schedule.pool as u64 - 1;
        if self.iterations.is_multiple_of(self.schedule.snapshot_every) && renewed > 0 {
            let k = 1 + ((self.iterations / self.schedule.snapshot_every - 1) % renewed) as usize;
            self.snapshot(evaluators, &[k]).await?;
            stats.learner.set("self_play_snapshot", k as f64);
        }
        Ok(stats)
    }

    /// Restored weights hold the checkpoint's snapshots: kept as they are.
    fn weights_restored(&mut self, weights: &Arc<FlatWeights>) {
        self.seeded = true;
        self.inner.weights_restored(weights);
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        let mut gaps = self.inner.checkpoint_gaps();
        gaps.push("self-play: the snapshot schedule counts iterations again from the restore".into());
        gaps
    }
}

/// Reports the plan's agents and policies in the trainer's results and,
/// for self-play, takes its snapshots after the optimizer's steps.
pub fn attach(trainer: rlx::Trainer, plan: &Plan) -> rlx::Trainer {
    let learner = plan.self_play.map(|_| MAIN.to_string());
    let trainer = trainer.with_agents(plan.agent_ids.clone(), plan.row_policy.clone(), learner);
    match plan.self_play {
        Some(schedule) => trainer.wrap_optimizer(|inner| Box::new(SelfPlayStep::new(inner, schedule))),
        None => trainer,
    }
}
