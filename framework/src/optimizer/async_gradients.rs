//! [`AsyncGradientsOptimizer`]: asynchronous gradient optimization (A3C,
//! Mnih et al. 2016).
//!
//! Each worker samples with the weights it last received and computes a
//! gradient on its own samples. The driver applies gradients in the order
//! they arrive and sends fresh weights back to that worker only, which then
//! starts on its next gradient. Requests stay in flight across `step()`
//! calls, so no worker ever waits for another. A gradient computed with
//! weights `k` updates older than the learner's is reported as a policy lag
//! of `k` (`policy_lag_mean`, `policy_lag_max` among the learner metrics).

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator::GradientRollout;
use crate::evaluator_set::Evaluators;
use crate::operators::{Completed, InFlight};
use crate::policy::{FlatWeights, LearnerStats};
use async_trait::async_trait;
use std::sync::Arc;

/// Settings of [`AsyncGradientsOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct AsyncGradientsConfig {
    /// Gradients applied per `step()` (one training iteration).
    pub grads_per_step: usize,
}

/// Apply gradients as they arrive; refresh only the worker that sent one.
pub struct AsyncGradientsOptimizer {
    config: AsyncGradientsConfig,
    in_flight: InFlight<GradientRollout>,
    /// Number of gradients applied so far: the learner's weights version.
    version: u64,
}

impl AsyncGradientsOptimizer {
    /// Drives the evaluators asynchronously.
    pub fn new(config: AsyncGradientsConfig) -> Self {
        Self { config, in_flight: InFlight::default(), version: 0 }
    }

    /// Applies one gradient to the learner and counts it.
    fn apply(
        &mut self,
        evaluators: &mut Evaluators,
        g: GradientRollout,
        out: &mut StepStats,
        stats: &mut Vec<LearnerStats>,
    ) -> Result<(), OptimizerError> {
        evaluators.local_mut().policy_mut().apply_gradients(&g.grads).map_err(rlx_err)?;
        self.version += 1;
        out.steps_sampled += g.steps as u64;
        out.steps_trained += g.steps as u64;
        out.episodes.extend(g.episodes);
        stats.push(g.stats);
        Ok(())
    }
}

#[async_trait]
impl PolicyOptimizer for AsyncGradientsOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let (mut out, mut stats, mut lags) = (StepStats::default(), Vec::new(), Vec::new());
        if self.in_flight.is_empty() {
            let weights = weights(evaluators);
            for w in evaluators.samplers() {
                self.in_flight
                    .send(w, Some((weights.clone(), self.version)), self.version, |w| w.sample_and_compute_gradients());
            }
        }
        for _ in 0..self.config.grads_per_step {
            let Completed { worker, version, result } =
                self.in_flight.next().await.expect("every sampler has a request in flight");
            let g = result?;
            lags.push(self.version - version);
            self.apply(evaluators, g, &mut out, &mut stats)?;
            // Fresh weights to this worker only, then its next gradient.
            let weights = Some((weights(evaluators), self.version));
            self.in_flight.send(worker, weights, self.version, |w| w.sample_and_compute_gradients());
        }
        out.learner = LearnerStats::mean(&stats);
        out.learner.set("policy_lag_mean", lags.iter().sum::<u64>() as f64 / lags.len().max(1) as f64);
        out.learner.set("policy_lag_max", lags.iter().copied().max().unwrap_or(0) as f64);
        Ok(out)
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec![super::IN_FLIGHT_GAP.into()]
    }
}

/// The learner's weights now.
fn weights(evaluators: &Evaluators) -> Arc<FlatWeights> {
    Arc::new(evaluators.local().policy().get_weights())
}

fn rlx_err(e: crate::policy::PolicyError) -> OptimizerError {
    OptimizerError::Learner(e.into())
}
