//! # MARWIL and BC: imitation of logged behaviour, weighted by advantage
//!
//! Wang et al., "Exponentially Weighted Imitation Learning for Batched
//! Historical Data", NeurIPS 2018 (MARWIL). Behaviour cloning (BC) is the
//! case `β = 0`: every logged action is imitated alike.
//!
//! The evaluators read episodes from `input` (files written by any run's
//! `output`). Each episode's discounted returns `G_t` are computed as it is
//! read (bootstrapping from `V(s_T)` where an episode was cut, never at
//! termination). Each training step takes one gradient step on
//!
//! ```text
//! Â_t = G_t − V(s_t)                      (no gradient through Â)
//! c²  ← c² + ρ·(E[Â²] − c²)               (a moving average, ρ small)
//! L   = −E[exp(β·Â/c)·log π(a_t|s_t)]  +  c_v·½E[(V(s_t) − G_t)²]  −  c_e·H[π]
//! ```
//!
//! The keys follow RLlib's MARWIL (`beta`, `moving_average_sqd_adv_norm_*`;
//! RLlib's `vf_coeff` is `vf_loss_coeff` here). The squared-advantage norm
//! `c²` lives in the learner and is not saved in checkpoints: with RLlib's
//! rate of 1e-8 it stays at its start. Execution: the framework's
//! `SyncSamplesOptimizer` over batches read from the files, without
//! standardizing anything. The env gives the spaces and plays the
//! evaluation episodes (`evaluation_interval`), which is where the return
//! is measured: reading files plays no episode.
//!
//! Learner metrics: `policy_loss`, `vf_loss` (not BC's), `entropy`, `grad_norm`,
//! `total_loss`, `mean_advantage_weight`, `sqd_adv_norm`.

use crate::common::build_context::BuildContext;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::ModelSupport;
use crate::policy_gradient::actor_critic::{
    self, column, weighted_sum, ActorCriticLoss, Forward, LearnerSettings, LossOutput,
};
use dfdx::prelude::*;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::experience::{InputSpec, SAMPLER};
use rlx::filter::ObservationFilter;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space, Trainer};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// MARWIL's configuration: the sampling section (with `input`), the batch,
/// actor-critic and learning sections, and the advantage weighting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct MarwilConfig {
    /// Evaluators, their envs and `input`, the files to learn from.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// The batch per gradient step.
    #[serde(flatten)]
    pub batch: SyncBatch,
    /// Learning rate and loss weights (`vf_loss_coeff`, RLlib's `vf_coeff`).
    #[serde(flatten)]
    pub actor_critic: ActorCriticLearner,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
    /// β, the advantage weighting's temperature: 0 imitates every action
    /// alike (behaviour cloning).
    pub beta: f64,
    /// Where the moving average of the squared advantage starts.
    pub moving_average_sqd_adv_norm_start: f64,
    /// How far each batch moves that average.
    pub moving_average_sqd_adv_norm_update_rate: f64,
    /// Rows a forward and backward pass takes at a time (0: the whole
    /// `train_batch_size` at once). A batch larger than this is learned in
    /// chunks whose gradients are summed before its one step: the same
    /// step up to rounding, with the memory of one chunk (the Nature
    /// CNN's pass holds about 1.7 MB a row). With `beta` > 0 the moving
    /// average of the squared advantage moves once a chunk.
    pub learner_chunk_rows: usize,
}

impl Default for MarwilConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            batch: SyncBatch { train_batch_size: 2000, ..SyncBatch::default() },
            actor_critic: ActorCriticLearner { lr: 1e-3, vf_loss_coeff: 1.0, ..ActorCriticLearner::default() },
            learning: Learning::default(),
            beta: 1.0,
            moving_average_sqd_adv_norm_start: 100.0,
            moving_average_sqd_adv_norm_update_rate: 1e-8,
            learner_chunk_rows: 0,
        }
    }
}

impl Validate for MarwilConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        // Rows read from files are shuffled one by one: no sequences for an LSTM.
        self.learning.validate(ModelSupport { lstm: false, ..ModelSupport::all(Self::NAME) })?;
        self.sampling.validate()?;
        self.batch.validate()?;
        self.actor_critic.validate()?;
        check("beta", self.beta, self.beta >= 0.0 && self.beta.is_finite(), "must be >= 0")?;
        let start = self.moving_average_sqd_adv_norm_start;
        check("moving_average_sqd_adv_norm_start", start, start > 0.0 && start.is_finite(), "must be > 0")?;
        let rate = self.moving_average_sqd_adv_norm_update_rate;
        check("moving_average_sqd_adv_norm_update_rate", rate, (0.0..=1.0).contains(&rate), "must be in [0, 1]")?;
        // Rows read from files never pass through the evaluators' filter.
        let filtered = self.batch.observation_filter != ObservationFilter::NoFilter;
        check(
            "observation_filter",
            "MeanStdFilter",
            !filtered,
            "must be NoFilter: rows read from input are not filtered",
        )
    }
}

/// MARWIL's loss, with the learner's moving average of the squared
/// advantage (shared by the clones of one policy; `f64` bits).
#[derive(Clone, Debug)]
pub struct Marwil {
    cfg: MarwilConfig,
    sqd_adv_norm: Arc<AtomicU64>,
}

impl Marwil {
    /// The loss of `cfg`, its average at its start.
    pub fn new(cfg: MarwilConfig) -> Self {
        let start = cfg.moving_average_sqd_adv_norm_start;
        Self { cfg, sqd_adv_norm: Arc::new(AtomicU64::new(start.to_bits())) }
    }

    /// Moves the average towards `mean_sq` and returns its new value.
    fn update_norm(&self, mean_sq: f64) -> f64 {
        let rate = self.cfg.moving_average_sqd_adv_norm_update_rate;
        let c2 = f64::from_bits(self.sqd_adv_norm.load(Ordering::Relaxed));
        let c2 = c2 + rate * (mean_sq - c2);
        self.sqd_adv_norm.store(c2.to_bits(), Ordering::Relaxed);
        c2
    }
}

impl ActorCriticLoss for Marwil {
    const STANDARDIZES_ADVANTAGES: bool = false;

    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.cfg.actor_critic, &self.cfg.learning, &self.cfg.sampling)
    }

    /// One gradient step per batch, `learner_chunk_rows` rows at a time.
    fn learner(&self) -> LearnerSettings {
        let (actor_critic, learning, sampling) = self.sections();
        let chunk = self.cfg.learner_chunk_rows;
        LearnerSettings {
            chunk_rows: (chunk > 0).then_some(chunk),
            ..LearnerSettings::new(actor_critic, learning, sampling.seed)
        }
    }

    /// BC (`beta` 0 and `vf_loss_coeff` 0) reads no value: its pass leaves
    /// the value network out.
    fn uses_values(&self) -> bool {
        self.cfg.beta != 0.0 || self.cfg.actor_critic.vf_loss_coeff != 0.0
    }

    /// With `beta` 0 (BC) every row's loss is its own; MARWIL's weights
    /// read the batch's moving average of squared advantages.
    fn rows_independent(&self) -> bool {
        self.cfg.beta == 0.0
    }

    /// Discounted returns `G_t`, as `value_targets`.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        let returns = AdvantageEstimator::DiscountedReturns { gamma: self.cfg.learning.gamma as f32 };
        compute_advantages(traj, bootstrap, returns)?;
        traj.remove(fields::ADVANTAGES);
        Ok(())
    }

    /// The advantage-weighted log-likelihood plus the value loss.
    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let Forward { logp, entropy, values, rows, .. } = fwd;
        let mut stats = LearnerStats::default();
        let beta = self.cfg.beta as f32;
        let weights = if beta == 0.0 {
            vec![1.0; mb.len()]
        } else {
            let g = mb.f32(fields::VALUE_TARGETS)?;
            let v = values.retaped::<NoneTape>().as_vec();
            let adv: Vec<f32> = g.iter().zip(&v).map(|(g, v)| g - v).collect();
            let mean_sq = adv.iter().map(|a| f64::from(a * a)).sum::<f64>() / adv.len().max(1) as f64;
            let c2 = self.update_norm(mean_sq);
            stats.set("sqd_adv_norm", c2);
            let c = (c2.sqrt() + 1e-8) as f32;
            adv.iter().map(|a| (beta * a / c).exp()).collect()
        };
        stats.set("mean_advantage_weight", weights.iter().map(|&w| f64::from(w)).sum::<f64>() / weights.len() as f64);
        let weights = dev.tensor_from_vec(weights, (mb.len(),));
        let policy_loss = rows.mean(logp * weights).negate();
        let uses_values = self.uses_values();
        // Without values (BC) the value loss is 0, and not reported.
        let vf_loss = if uses_values {
            rows.mean((values - column(dev, mb, fields::VALUE_TARGETS)?).square()) * 0.5
        } else {
            rows.mean(values)
        };
        let total = weighted_sum(&self.cfg.actor_critic, policy_loss, vf_loss, rows.mean(entropy), &mut stats);
        if !uses_values {
            stats.0.remove("vf_loss");
        }
        Ok((total, stats))
    }
}

/// A MARWIL policy for the given spaces: the actor-critic network.
///
/// # Errors
/// A model that does not fit the spaces.
pub fn make_policy(
    cfg: &MarwilConfig,
    obs: &Space,
    act: &Space,
    seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    actor_critic::make_policy(MarwilConfig::NAME, &Marwil::new(cfg.clone()), obs, act, seed)
}

algorithm_name!(MarwilConfig, "MARWIL");

/// The execution plan: evaluators reading `input`, one gradient step per
/// batch of `train_batch_size` rows.
///
/// # Errors
/// No `input`; an unreadable dataset or one of other spaces; an env that
/// cannot be built.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: MarwilConfig) -> Result<Trainer, BuildError> {
    learn_from_input(ctx, MarwilConfig::NAME, make_env, cfg).await
}

/// Refuses a run of an offline algorithm without `input`.
///
/// # Errors
/// [`ConfigError::Invalid`] naming `input`.
pub(crate) fn require_input(name: &str, sampling: &Sampling) -> Result<(), BuildError> {
    match &sampling.input {
        Some(InputSpec::Weighted(w)) if w.get(SAMPLER).is_some_and(|&p| p > 0.0) => Err(ConfigError::Invalid {
            key: "input".into(),
            message: format!("{name} learns from files only: a weighted input without `{SAMPLER}`"),
        }
        .into()),
        Some(_) => Ok(()),
        None => Err(ConfigError::Invalid {
            key: "input".into(),
            message: format!("{name} learns from files: give a dataset directory written with `output`"),
        }
        .into()),
    }
}

/// MARWIL's plan under `name` (MARWIL or BC).
pub(crate) async fn learn_from_input(
    ctx: BuildContext,
    name: &'static str,
    make_env: EnvMaker,
    cfg: MarwilConfig,
) -> Result<Trainer, BuildError> {
    require_input(name, &cfg.sampling)?;
    let batch = cfg.batch.clone();
    actor_critic::sync_trainer(&ctx, name, make_env, Marwil::new(cfg), &batch, 1).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` rows of CartPole-like observations, actions and returns.
    fn batch_of(rows: usize) -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_f32(fields::OBS, (0..4 * rows).map(|i| ((i as f32) * 0.37).sin()).collect(), 4).unwrap();
        b.insert_i64(fields::ACTIONS, (0..rows as i64).map(|i| (i * 7 / 3) % 2).collect(), 1).unwrap();
        b.insert_f32(fields::VALUE_TARGETS, (0..rows).map(|i| (i % 10) as f32 * 0.5).collect(), 1).unwrap();
        b
    }

    fn batch() -> SampleBatch {
        batch_of(10)
    }

    /// BC's minibatch of 300 rows is taken as two halves side by side on
    /// the CPU: its gradient is the halves' gradients weighted by their
    /// rows, to the bit (and so the whole batch's up to rounding, as the
    /// chunks' test shows for one thread).
    #[test]
    fn halves_side_by_side_give_the_halves_weighted_gradient() {
        use crate::policy_gradient::actor_critic::SIDE_BY_SIDE_ROWS;
        let (obs, act) = (Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), Space::discrete(2));
        let rows = 300;
        assert!(rows >= SIDE_BY_SIDE_ROWS && rows / 2 < SIDE_BY_SIDE_ROWS);
        let cfg = crate::offline::bc::BcConfig::default().0;
        let mut policy = make_policy(&cfg, &obs, &act, 7).unwrap();
        let batch = batch_of(rows);
        let (whole, stats) = policy.compute_gradients(&batch).unwrap();
        let (first, first_stats) = policy.compute_gradients(&batch.slice(0..150)).unwrap();
        let (second, second_stats) = policy.compute_gradients(&batch.slice(150..300)).unwrap();
        let halves: Vec<f32> = first.iter().zip(&second).map(|(a, b)| a * 0.5 + b * 0.5).collect();
        assert!(whole.iter().any(|g| g.abs() > 1e-3), "a gradient to compare");
        assert_eq!(whole, halves);
        let loss = |s: &LearnerStats| s.get("policy_loss").unwrap();
        assert_eq!(loss(&stats), 0.5 * loss(&first_stats) + 0.5 * loss(&second_stats));
    }

    /// Learning a batch in chunks of 3, 3, 3 and 1 rows takes the
    /// gradient of the whole batch, up to rounding, for BC and MARWIL.
    #[test]
    fn chunks_give_the_whole_batchs_gradient() {
        let (obs, act) = (Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), Space::discrete(2));
        for beta in [0.0, 1.0] {
            let gradient = |chunk: usize| {
                let cfg = MarwilConfig { beta, learner_chunk_rows: chunk, ..MarwilConfig::default() };
                let mut policy = make_policy(&cfg, &obs, &act, 7).unwrap();
                policy.compute_gradients(&batch()).unwrap()
            };
            let ((whole, whole_stats), (chunked, chunked_stats)) = (gradient(0), gradient(3));
            assert_eq!(whole.len(), chunked.len());
            let scale = whole.iter().fold(0.0f32, |m, g| m.max(g.abs()));
            assert!(scale > 1e-3, "a gradient to compare: {scale}");
            for (a, b) in whole.iter().zip(&chunked) {
                assert!((a - b).abs() <= 1e-5 * scale, "beta {beta}: {a} vs {b}");
            }
            let loss = |s: &LearnerStats| s.get("policy_loss").unwrap();
            assert!((loss(&whole_stats) - loss(&chunked_stats)).abs() < 1e-5, "{whole_stats:?} {chunked_stats:?}");
        }
    }
}
