//! Step 3: our own policy optimizer, which decides *how* the evaluators
//! sample and learn. The policy graph (the math) does not know or care.
//!
//! This one is bulk-synchronous, the simplest strategy that suits an
//! on-policy algorithm like REINFORCE: every step, all workers sample with
//! the same weights, the driver learns once on everything they sampled, and
//! the new weights go back to every worker before the next step, so each
//! batch is sampled by the weights that learn from it.
//!
//! ```text
//!  worker 1 ─ sample ─┐                              ┌─> worker 1
//!                     ├─ concat ─ learn (driver) ─ broadcast
//!  worker 2 ─ sample ─┘                              └─> worker 2
//! ```
//!
//! Each stage is one of rlx's dataflow operators (`rlx::operators`), plain
//! async functions over [`Evaluators`]. (rlx ships a fuller version of this
//! as `rlx::SyncSamplesOptimizer`, with observation-filter synchronization
//! and straggler mitigation; writing it out shows how little is needed.)

use rlx::{async_trait, operators, Evaluators, OptimizerError, PolicyOptimizer, StepStats};

/// Gather from every worker, concatenate, learn on the driver, broadcast.
/// It keeps no state of its own: the [`rlx::Trainer`] owns the evaluators
/// and hands them to every step.
pub struct GatherLearnBroadcast;

// `PolicyOptimizer` is declared with `#[async_trait]`, so implementations
// use the same attribute (re-exported by rlx as `rlx::async_trait`).
#[async_trait]
impl PolicyOptimizer for GatherLearnBroadcast {
    /// The workers sample, the local evaluator's policy learns. (With no
    /// workers, the local evaluator samples too.)
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        // 1. Every worker samples once, concurrently. The batches come back
        //    postprocessed (the `returns` column is already there) and in
        //    worker order, so a fixed seed gives a reproducible run.
        let rollouts = operators::parallel_rollouts(evaluators).await?;
        // 2. One train batch, plus the episodes that finished meanwhile.
        let (batch, episodes) = operators::concat_rollouts(rollouts)?;
        // 3. The driver's (local) policy learns on it.
        let learner = evaluators.learn_on_batch(&batch)?;
        // 4. The new weights go to every worker; wait until all have them.
        operators::broadcast_weights(evaluators).await?;

        let rows = batch.len() as u64;
        Ok(StepStats { steps_sampled: rows, steps_trained: rows, episodes, learner })
    }
}
