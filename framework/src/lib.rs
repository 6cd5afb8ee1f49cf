//! # rlx: abstractions for distributed reinforcement learning
//!
//! rlx splits an RL algorithm the way RLlib (Liang et al., ICML 2018) does:
//! the **policy graph** ([`PolicyGraph`]) holds the math — acting,
//! trajectory postprocessing, the loss — and the **policy optimizer**
//! ([`PolicyOptimizer`]) decides how sampling, learning and weight
//! synchronization are distributed over evaluators. Environments implement
//! [`Env`]. Evaluators ([`PolicyEvaluator`]) pair a policy with a vector env
//! and live in the driver or in supervised ractor actors, behind one async
//! [`EvaluatorHandle`] interface.
//!
//! This crate holds the abstractions and the runtime only; built-in
//! algorithms live in `rlx-algorithms`, environments in `rlx-envs`, the
//! `rlx` command line (results files, plots, worker nodes) in `rlx-cli`.
//!
//! ```
//! use rlx::{SampleBatch, postprocessing::gae};
//!
//! // Advantages for a 3-step trajectory cut by a time limit, bootstrapping
//! // from the value of the last observation.
//! let (adv, targets) = gae(&[1.0, 1.0, 1.0], &[0.5, 0.4, 0.3], 0.2, 0.99, 0.95);
//! assert_eq!(adv.len(), 3);
//! assert!((targets[2] - (1.0 + 0.99 * 0.2)).abs() < 1e-6);
//! ```
#![warn(missing_docs)]

pub mod acting;
pub mod actor;
pub mod checkpoint;
pub mod codec;
pub mod config;
pub mod env;
pub mod env_shards;
pub mod evaluation;
pub mod evaluator;
pub mod evaluator_set;
pub mod experience;
pub mod export;
pub mod filter;
pub mod fuzz;
pub mod game;
pub mod game_env;
pub mod gaussian_actions;
pub mod handle;
pub mod interrupt;
pub mod metrics;
pub mod multi_agent;
pub mod multi_policy;
pub mod off_policy_estimation;
pub mod operators;
pub mod optimizer;
pub mod placement;
pub mod policy;
pub mod pool;
pub mod postprocessing;
pub mod protocol;
pub mod replay;
pub mod restart;
pub mod sample_batch;
pub mod space;
pub mod trainer;
pub mod vector_env;
pub mod video;
pub mod weights_file;
pub mod wrappers;

/// The attribute [`PolicyOptimizer`] (and [`EvaluatorHandle`]) impls need,
/// re-exported so a crate implementing them needs no `async-trait`
/// dependency of its own: write `#[rlx::async_trait]`.
pub use async_trait::async_trait;
pub use env::{Env, EnvError, EnvMaker, EnvSignature, Step};
pub use env_shards::EnvShards;
pub use evaluator::{EvaluatorError, EvaluatorFactory, PolicyEvaluator, Rollout};
pub use evaluator_set::Evaluators;
pub use game::Game;
pub use game_env::GameEnv;
pub use handle::{EvaluatorHandle, HandleError, LocalEvaluator, SharedHandle};
pub use metrics::TrainResult;
pub use multi_agent::{AgentSlots, MultiAgentEnv, MultiAgentMaker, PolicyMapping};
pub use multi_policy::MultiPolicy;
pub use optimizer::{OptimizerError, PolicyOptimizer, StepStats, SyncReplayOptimizer, SyncSamplesOptimizer};
pub use policy::{FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, PolicyInput};
pub use pool::{ActorPool, PoolError};
pub use restart::{RestartPolicy, RestartStrategy};
pub use sample_batch::{fields, Column, SampleBatch, Values};
pub use space::{Action, Dtype, Space};
pub use trainer::{RunState, StopCriteria, Trainer};
pub use vector_env::{BatchedEnv, EpisodeSummary, VectorEnv};
pub use wrappers::{ActionRepeat, ClipReward, FrameStack, TimeLimit, Wrapped, Wrapper};
