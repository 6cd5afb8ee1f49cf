//! [`Plan`]: an optimizer whose step the algorithm writes in its own file.
//!
//! RLlib Flow (Liang et al., NeurIPS 2021) showed that an algorithm's
//! distributed execution reads best as a few lines over shared operators
//! (sample, concatenate, learn, broadcast) next to the algorithm's math.
//! An algorithm implements [`TrainingStep`] beside its loss, and [`Plan`]
//! runs it as a [`PolicyOptimizer`]; the reusable optimizers of this module
//! remain for the strategies several algorithms share.

use super::{set_weights_everywhere, OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator_set::Evaluators;
use crate::policy::FlatWeights;
use async_trait::async_trait;
use std::sync::Arc;

/// One training iteration of an algorithm over its evaluators.
#[async_trait]
pub trait TrainingStep: Send + 'static {
    /// Samples, learns and syncs weights once; returns what happened.
    ///
    /// # Errors
    /// An evaluator that failed for good, or a learner error.
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError>;

    /// Called once a checkpoint's weights are on every evaluator, for a
    /// step that keeps copies of them elsewhere (e.g. learner replicas).
    fn weights_restored(&mut self) {}

    /// What a checkpoint of this step cannot restore exactly.
    fn checkpoint_gaps(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Runs a [`TrainingStep`] over `evaluators` as a [`PolicyOptimizer`].
pub struct Plan<S> {
    evaluators: Evaluators,
    step: S,
}

impl<S: TrainingStep> Plan<S> {
    /// `step` over `evaluators`.
    pub fn new(evaluators: Evaluators, step: S) -> Self {
        Self { evaluators, step }
    }
}

#[async_trait]
impl<S: TrainingStep> PolicyOptimizer for Plan<S> {
    async fn step(&mut self) -> Result<StepStats, OptimizerError> {
        self.step.step(&mut self.evaluators).await
    }

    fn evaluators(&self) -> &Evaluators {
        &self.evaluators
    }

    fn evaluators_mut(&mut self) -> &mut Evaluators {
        &mut self.evaluators
    }

    async fn restore_weights(&mut self, weights: Arc<FlatWeights>) -> Result<(), OptimizerError> {
        set_weights_everywhere(&mut self.evaluators, &weights).await?;
        self.step.weights_restored();
        Ok(())
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        self.step.checkpoint_gaps()
    }
}
