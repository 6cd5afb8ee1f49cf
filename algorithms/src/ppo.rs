//! # Proximal Policy Optimization (PPO)
//!
//! Schulman, Wolski, Dhariwal, Radford & Klimov, "Proximal Policy
//! Optimization Algorithms", 2017 (arXiv:1707.06347): the clipped surrogate
//! objective, optimized for several epochs of minibatch SGD on each batch of
//! on-policy samples.
//!
//! The implementation details that matter (see Huang et al., "The 37
//! Implementation Details of PPO", ICLR blog track 2022):
//! - GAE(γ, λ) advantages, bootstrapping from `V(s_T)` when an episode is cut
//!   by the time limit or the rollout ends mid-episode (never at termination);
//! - advantages standardized over the whole train batch;
//! - `num_sgd_iter` epochs of shuffled minibatches, Adam with ε = 1e-5;
//! - global gradient-norm clipping (`grad_clip`);
//! - separate 2×64 tanh networks for the policy and the value function;
//! - an optionally clipped value loss (`vf_clip_param`).
//!
//! Execution: bulk-synchronous ([`SyncSamplesOptimizer`]): all evaluators
//! sample with the current weights, the driver learns, weights are broadcast.
//!
//! Learner metrics (`learner.*` in `result.json`): `policy_loss`, `vf_loss`,
//! `entropy`, `kl` (the approximate KL `E[(r − 1) − log r]` between the
//! behaviour policy and the policy just before each minibatch step, averaged
//! over the iteration's minibatches), `clip_frac` (share of samples whose
//! ratio was clipped), `grad_norm` (before clipping), `total_loss`,
//! `vf_explained_var` (of the behaviour policy's value predictions).

use crate::nn::{self, Mlp};
use crate::{dispatch_dims, BuildError, EnvMaker};
use dfdx::optim::{Adam, AdamConfig};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, ConfigError, Validate};
use rlx::evaluator::evaluator_seed;
use rlx::filter::ObservationFilter;
use rlx::optimizer::SyncSamplesConfig;
use rlx::policy::bootstrap_needed;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{
    fields, Evaluators, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyEvaluator, PolicyGraph,
    RestartPolicy, SampleBatch, Space, SyncSamplesOptimizer, Trainer, VectorEnv,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

/// PPO's configuration. Every key is optional in `--config`; unknown keys are
/// errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Env steps per training iteration, split evenly across evaluators.
    pub train_batch_size: usize,
    /// Rows per SGD minibatch.
    pub sgd_minibatch_size: usize,
    /// Epochs over each train batch.
    pub num_sgd_iter: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// GAE λ.
    pub lambda: f64,
    /// Clip range ε of the probability ratio.
    pub clip_param: f64,
    /// Clip range of the value update around the old prediction; `null`
    /// disables value clipping.
    pub vf_clip_param: Option<f64>,
    /// Weight of the value loss.
    pub vf_loss_coeff: f64,
    /// Weight of the entropy bonus.
    pub entropy_coeff: f64,
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// `"NoFilter"` or `"MeanStdFilter"` (running observation normalization,
    /// synchronized across evaluators each iteration).
    pub observation_filter: ObservationFilter,
    /// Keyword arguments for the env, e.g. `{"max_episode_steps": 1000}`
    /// (see `rlx list` for each env's).
    pub env_config: serde_json::Value,
    /// Seed for network initialization, exploration and env resets.
    pub seed: u64,
    /// How evaluator actors are restarted after a failure.
    pub restart: RestartPolicy,
}

impl Default for PpoConfig {
    fn default() -> Self {
        Self {
            num_workers: 1,
            num_envs_per_worker: 8,
            train_batch_size: 1024,
            sgd_minibatch_size: 256,
            num_sgd_iter: 10,
            lr: 1e-3,
            gamma: 0.99,
            lambda: 0.95,
            clip_param: 0.2,
            vf_clip_param: None,
            vf_loss_coeff: 0.5,
            entropy_coeff: 0.0,
            grad_clip: Some(0.5),
            observation_filter: ObservationFilter::NoFilter,
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

impl Validate for PpoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        check("num_envs_per_worker", self.num_envs_per_worker, self.num_envs_per_worker >= 1, "must be >= 1")?;
        check("train_batch_size", self.train_batch_size, self.train_batch_size >= 1, "must be >= 1")?;
        check(
            "sgd_minibatch_size",
            self.sgd_minibatch_size,
            (1..=self.train_batch_size).contains(&self.sgd_minibatch_size),
            "must be in [1, train_batch_size]",
        )?;
        check("num_sgd_iter", self.num_sgd_iter, self.num_sgd_iter >= 1, "must be >= 1")?;
        check("lr", self.lr, self.lr > 0.0 && self.lr.is_finite(), "must be > 0")?;
        check("gamma", self.gamma, (0.0..=1.0).contains(&self.gamma), "must be in [0, 1]")?;
        check("lambda", self.lambda, (0.0..=1.0).contains(&self.lambda), "must be in [0, 1]")?;
        check("clip_param", self.clip_param, self.clip_param > 0.0, "must be > 0")?;
        if let Some(c) = self.vf_clip_param {
            check("vf_clip_param", c, c > 0.0, "must be > 0 or null")?;
        }
        check("vf_loss_coeff", self.vf_loss_coeff, self.vf_loss_coeff >= 0.0, "must be >= 0")?;
        check("entropy_coeff", self.entropy_coeff, self.entropy_coeff >= 0.0, "must be >= 0")?;
        if let Some(c) = self.grad_clip {
            check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
        }
        check("restart.window_s", self.restart.window_s, self.restart.window_s > 0.0, "must be > 0")
    }
}

// ---------------------------------------------------------------------------
// Network: separate policy and value MLPs over the same observation
// ---------------------------------------------------------------------------

/// Policy head (logits over `A` actions) and value head, each a 2×64 tanh MLP.
pub type ActorCritic<const O: usize, const A: usize> = SplitInto<(Mlp<O, A>, Mlp<O, 1>)>;
type Model<const O: usize, const A: usize> = <ActorCritic<O, A> as BuildOnDevice<Cpu, f32>>::Built;

// ---------------------------------------------------------------------------
// Policy graph
// ---------------------------------------------------------------------------

/// PPO's policy graph for `O`-dimensional observations and `A` discrete actions.
pub struct PpoPolicy<const O: usize, const A: usize> {
    cfg: PpoConfig,
    dev: Cpu,
    model: Model<O, A>,
    adam: nn::SendAdam<Model<O, A>>,
    grads: Option<Gradients<f32, Cpu>>,
    rng: ChaCha8Rng,
    observation_space: Space,
    action_space: Space,
}

impl<const O: usize, const A: usize> PpoPolicy<O, A> {
    /// A policy whose initial weights depend only on `cfg.seed` (so every
    /// evaluator starts identical) and whose action sampling uses `rng_seed`.
    pub fn new(cfg: PpoConfig, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        let dev = Cpu::seed_from_u64(cfg.seed);
        let model = dev.build_module::<ActorCritic<O, A>, f32>();
        let adam = nn::SendAdam(Adam::new(
            &model,
            AdamConfig { lr: cfg.lr, betas: [0.9, 0.999], eps: 1e-5, weight_decay: None },
        ));
        Self {
            cfg,
            dev,
            model,
            adam,
            grads: None,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            observation_space,
            action_space,
        }
    }

    fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor<(usize, Const<O>), f32, Cpu>, PolicyError> {
        if obs.len() % O != 0 {
            return Err(PolicyError::Other(format!(
                "{} observation values is not a whole number of rows of {O}",
                obs.len()
            )));
        }
        Ok(self.dev.tensor_from_vec(obs.to_vec(), (obs.len() / O, Const::<O>)))
    }

    /// The clipped PPO loss on one minibatch, with the tape running.
    fn loss(
        &mut self,
        mb: &SampleBatch,
    ) -> Result<(Tensor<Rank0, f32, Cpu, OwnedTape<f32, Cpu>>, LearnerStats), PolicyError> {
        let n = mb.len();
        let dev = self.dev.clone();
        let col = |f: &str| -> Result<Tensor<(usize,), f32, Cpu>, PolicyError> {
            Ok(dev.tensor_from_vec(mb.f32(f)?.to_vec(), (n,)))
        };
        let obs = self.obs_tensor(mb.f32(fields::OBS)?)?;
        let actions: Vec<usize> = mb.i64(fields::ACTIONS)?.iter().map(|&a| a as usize).collect();
        let actions = dev.tensor_from_vec(actions, (n,));
        let (old_logp, advantages) = (col(fields::ACTION_LOGP)?, col(fields::ADVANTAGES)?);
        let (old_values, value_targets) = (col(fields::VF_PREDS)?, col(fields::VALUE_TARGETS)?);

        let grads = self.grads.take().unwrap_or_else(|| self.model.alloc_grads());
        let (logits, values) = self.model.forward(obs.traced(grads));
        let values = values.reshape_like(&(n,));

        // log π(·|s); the entropy H = −Σ_a π(a|s) log π(a|s), averaged over the batch.
        let log_probs = logits.log_softmax::<Axis<1>>();
        let entropy =
            (log_probs.with_empty_tape().exp() * log_probs.with_empty_tape()).sum::<_, Axis<1>>().mean().negate();
        let logp = log_probs.select(actions);

        // ratio r = π(a|s) / π_old(a|s), computed in log space.
        let logratio = logp - old_logp;
        let logratio_values = logratio.as_vec();
        let ratio = logratio.exp();

        // Clipped surrogate: L = −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)].
        let eps = self.cfg.clip_param as f32;
        let surr1 = ratio.with_empty_tape() * advantages.clone();
        let surr2 = ratio.clamp(1.0 - eps, 1.0 + eps) * advantages;
        let policy_loss = surr1.minimum(surr2).mean().negate();

        // Value loss ½·E[(V(s) − V_target)²], or with the update clipped around
        // the old prediction: ½·E[max((V − V_t)², (V_old + clip(V − V_old, −c, c) − V_t)²)].
        let vf_loss = match self.cfg.vf_clip_param {
            None => (values - value_targets).square().mean() * 0.5,
            Some(c) => {
                let c = c as f32;
                let vf_loss_unclipped = (values.with_empty_tape() - value_targets.clone()).square();
                let vf_clipped = (values - old_values.clone()).clamp(-c, c) + old_values;
                let vf_loss_clipped = (vf_clipped - value_targets).square();
                vf_loss_unclipped.maximum(vf_loss_clipped).mean() * 0.5
            }
        };

        let (pl, vl, ent) = (policy_loss.array(), vf_loss.array(), entropy.array());
        let total = policy_loss + vf_loss * self.cfg.vf_loss_coeff as f32 - entropy * self.cfg.entropy_coeff as f32;

        let mut stats = LearnerStats::default();
        let kl = logratio_values.iter().map(|&lr| (lr.exp() - 1.0 - lr) as f64).sum::<f64>() / n as f64;
        let clipped = logratio_values.iter().filter(|&&lr| (lr.exp() - 1.0).abs() > eps).count();
        stats.set("policy_loss", pl as f64);
        stats.set("vf_loss", vl as f64);
        stats.set("entropy", ent as f64);
        stats.set("kl", kl);
        stats.set("clip_frac", clipped as f64 / n as f64);
        stats.set("total_loss", total.array() as f64);
        Ok((total, stats))
    }

    /// Backpropagates one minibatch and clips the gradient; the gradient is
    /// left in `self.grads`.
    fn backward(&mut self, mb: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (total, mut stats) = self.loss(mb)?;
        if !total.array().is_finite() {
            return Err(PolicyError::NonFinite("PPO loss".into()));
        }
        let mut grads = total.backward();
        let norm = nn::clip_grad_norm(&self.model, &mut grads, self.cfg.grad_clip.map(|c| c as f32))?;
        stats.set("grad_norm", norm as f64);
        self.grads = Some(grads);
        Ok(stats)
    }

    /// One Adam step with the gradient in `self.grads`, then zeroes it.
    fn step_adam(&mut self) -> Result<(), PolicyError> {
        let mut grads = self.grads.take().expect("backward() fills the gradient first");
        self.adam.0.update(&mut self.model, &grads).map_err(|e| PolicyError::Other(format!("Adam update: {e:?}")))?;
        self.model.zero_grads(&mut grads);
        self.grads = Some(grads);
        Ok(())
    }

    fn value(&self, obs: &[f32]) -> Result<f32, PolicyError> {
        let v = self.model.0 .1.forward(self.obs_tensor(obs)?);
        Ok(v.as_vec()[0])
    }
}

impl<const O: usize, const A: usize> PolicyGraph for PpoPolicy<O, A> {
    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let x = self.obs_tensor(obs)?;
        let (logits, values) = self.model.forward(x);
        let logits = logits.as_vec();
        let n = logits.len() / A;
        let (mut actions, mut logp) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for row in logits.chunks_exact(A) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum_exp: f32 = row.iter().map(|&l| (l - max).exp()).sum();
            let log_z = max + sum_exp.ln();
            let a = if explore {
                // Inverse-CDF sampling from softmax(row).
                let u: f32 = self.rng.gen::<f32>() * sum_exp;
                let mut acc = 0.0;
                row.iter()
                    .position(|&l| {
                        acc += (l - max).exp();
                        u < acc
                    })
                    .unwrap_or(A - 1)
            } else {
                (0..A).fold(0, |best, i| if row[i] > row[best] { i } else { best })
            };
            actions.push(a as i64);
            logp.push(row[a] - log_z);
        }
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        out.insert_f32(fields::ACTION_LOGP, logp, 1)?;
        out.insert_f32(fields::VF_PREDS, values.as_vec(), 1)?;
        Ok(())
    }

    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let bootstrap = if bootstrap_needed(traj)? {
            let new_obs = traj.f32(fields::NEW_OBS)?;
            self.value(&new_obs[new_obs.len() - O..])?
        } else {
            0.0
        };
        let estimator = AdvantageEstimator::Gae { gamma: self.cfg.gamma as f32, lambda: self.cfg.lambda as f32 };
        Ok(compute_advantages(traj, bootstrap, estimator)?)
    }

    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let mut all = Vec::new();
        for _epoch in 0..self.cfg.num_sgd_iter {
            let shuffle_seed = self.rng.gen();
            for mb in batch.minibatches(self.cfg.sgd_minibatch_size, shuffle_seed) {
                all.push(self.backward(&mb)?);
                self.step_adam()?;
            }
        }
        let mut stats = LearnerStats::mean(&all);
        stats.set(
            "vf_explained_var",
            explained_variance(batch.f32(fields::VF_PREDS)?, batch.f32(fields::VALUE_TARGETS)?),
        );
        Ok(stats)
    }

    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let stats = self.backward(batch)?;
        let mut grads = self.grads.take().expect("backward() fills the gradient");
        let flat = nn::flat_grads(&self.model, &mut grads);
        self.model.zero_grads(&mut grads);
        self.grads = Some(grads);
        Ok((flat, stats))
    }

    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        let mut g = self.grads.take().unwrap_or_else(|| self.model.alloc_grads());
        let loaded = nn::load_grads(&self.model, &mut g, grads);
        self.grads = Some(g);
        loaded?;
        self.step_adam()
    }

    fn get_weights(&self) -> FlatWeights {
        nn::flat_params(&self.model)
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        nn::load_params(&mut self.model, weights)
    }
}

/// `1 − Var(target − pred) / Var(target)`: 1 is a perfect value function, 0
/// no better than a constant.
fn explained_variance(pred: &[f32], target: &[f32]) -> f64 {
    let var = |v: &mut dyn Iterator<Item = f64>| {
        let xs: Vec<f64> = v.collect();
        let m = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len().max(1) as f64
    };
    let var_t = var(&mut target.iter().map(|&t| t as f64));
    let var_d = var(&mut pred.iter().zip(target).map(|(&p, &t)| (t - p) as f64));
    if var_t == 0.0 {
        0.0
    } else {
        1.0 - var_d / var_t
    }
}

// ---------------------------------------------------------------------------
// Execution plan
// ---------------------------------------------------------------------------

/// Builds a PPO policy for `env`'s spaces.
///
/// # Errors
/// [`BuildError::Unsupported`] if the spaces are not a flat `Box`
/// observation with discrete actions of a compiled size.
pub fn make_policy(
    cfg: &PpoConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (obs_dim, n_actions) = match (observation_space, action_space) {
        (Space::Box { shape, .. }, Space::Discrete { n }) if shape.len() == 1 => (shape[0], *n as usize),
        _ => {
            return Err(BuildError::Unsupported(format!(
                "PPO supports a flat Box observation space with Discrete actions; got {observation_space} and {action_space}"
            )))
        }
    };
    let (o, a) = (observation_space.clone(), action_space.clone());
    dispatch_dims!(
        obs_dim,
        n_actions,
        |OBS, ACT| Ok(Box::new(PpoPolicy::<OBS, ACT>::new(cfg.clone(), o, a, rng_seed)) as Box<dyn PolicyGraph>),
        Err(BuildError::Unsupported(format!(
            "no compiled PPO network for {obs_dim} observations and {n_actions} actions; supported (obs, actions): {:?}",
            nn::SUPPORTED_DIMS
        )))
    )
}

/// PPO's trainer: evaluators built from `make_env`, driven by
/// [`SyncSamplesOptimizer`] with advantages standardized over each batch.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(make_env: EnvMaker, cfg: PpoConfig) -> Result<Trainer, BuildError> {
    let probe = make_env()?;
    make_policy(&cfg, probe.observation_space(), probe.action_space(), 0)?;
    drop(probe);
    let samplers = cfg.num_workers.max(1);
    let sample_size = cfg.train_batch_size.div_ceil(samplers);
    let factory_cfg = cfg.clone();
    let factory: rlx::EvaluatorFactory = Arc::new(move |index, generation| {
        let cfg = &factory_cfg;
        let seed = evaluator_seed(cfg.seed, index, generation);
        let envs = (0..cfg.num_envs_per_worker).map(|_| make_env()).collect::<Result<Vec<_>, _>>()?;
        let env = VectorEnv::new(envs)?;
        let policy = make_policy(cfg, env.observation_space(), env.action_space(), seed)
            .map_err(|e| rlx::EvaluatorError::Config(e.to_string()))?;
        let dim = env.obs_dim();
        let evaluator = PolicyEvaluator::new(policy, env, sample_size, seed)?;
        Ok(match cfg.observation_filter.build(dim) {
            Some(filter) => evaluator.with_observation_filter(filter),
            None => evaluator,
        })
    });
    let evaluators = Evaluators::spawn(factory, cfg.num_workers, cfg.restart).await?;
    let plan = SyncSamplesConfig { standardize_fields: vec![fields::ADVANTAGES.to_string()] };
    Ok(Trainer::new(Box::new(SyncSamplesOptimizer::new(evaluators, plan))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> PpoPolicy<4, 2> {
        let obs = Space::uniform_box(-1.0, 1.0, vec![4]).unwrap();
        PpoPolicy::new(PpoConfig::default(), obs, Space::discrete(2), 0)
    }

    #[test]
    fn same_seed_same_initial_weights() {
        assert_eq!(policy().get_weights(), policy().get_weights());
    }

    #[test]
    fn logp_of_sampled_actions_matches_a_recomputation() {
        let mut p = policy();
        let obs: Vec<f32> = (0..40).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut out = SampleBatch::new();
        p.compute_actions(&obs, true, &mut out).unwrap();
        assert_eq!(out.len(), 10);
        // With old_logp from the same weights the ratio is exactly 1: no clipping, KL 0.
        let mut mb = out.clone();
        mb.insert_f32(fields::OBS, obs, 4).unwrap();
        mb.insert_f32(fields::ADVANTAGES, vec![1.0; 10], 1).unwrap();
        mb.insert_f32(fields::VALUE_TARGETS, vec![0.0; 10], 1).unwrap();
        let (_, stats) = p.loss(&mb).unwrap();
        assert!(stats.get("kl").unwrap().abs() < 1e-6, "{stats:?}");
        assert_eq!(stats.get("clip_frac"), Some(0.0));
        // The entropy of two actions lies in [0, ln 2].
        let h = stats.get("entropy").unwrap();
        assert!(h > 0.0 && h <= std::f64::consts::LN_2 + 1e-6, "{h}");
    }

    #[test]
    fn gradient_split_equals_learn_step() {
        // compute_gradients + apply_gradients on one minibatch == one SGD step.
        let mut a = policy();
        let mut b = policy();
        let obs: Vec<f32> = (0..32).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut mb = SampleBatch::new();
        a.compute_actions(&obs, true, &mut mb).unwrap();
        mb.insert_f32(fields::OBS, obs, 4).unwrap();
        mb.insert_f32(fields::ADVANTAGES, (0..8).map(|i| i as f32 - 3.5).collect(), 1).unwrap();
        mb.insert_f32(fields::VALUE_TARGETS, vec![1.0; 8], 1).unwrap();
        let (g, _) = a.compute_gradients(&mb).unwrap();
        b.apply_gradients(&g).unwrap();
        a.backward(&mb).unwrap();
        a.step_adam().unwrap();
        let (wa, wb) = (a.get_weights(), b.get_weights());
        assert!(wa.iter().zip(&wb).all(|(x, y)| (x - y).abs() < 1e-6));
        assert_ne!(wa, policy().get_weights());
        assert!(b.apply_gradients(&g[1..]).is_err());
    }

    #[test]
    fn config_rejects_out_of_range() {
        let err = rlx::config::merge_json(&PpoConfig::default(), &serde_json::json!({"gamma": 1.5})).unwrap_err();
        assert!(err.to_string().contains("gamma"), "{err}");
        let err = rlx::config::merge_json(&PpoConfig::default(), &serde_json::json!({"sgd_minibatch_size": 99999}))
            .unwrap_err();
        assert!(err.to_string().contains("sgd_minibatch_size"), "{err}");
    }
}
