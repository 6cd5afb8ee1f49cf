//! What crosses the wire between a driver and its nodes.
//!
//! Every rlx message to a remote actor is a [`Wire`]: one opaque payload of
//! MessagePack + LZ4 bytes ([`rlx::codec::encode_value`]) and, for a call, a
//! reply port for the reply's bytes. ractor_cluster carries it as one
//! "variant" string plus those bytes. Decoding happens in rlx, never in
//! ractor's serialization traits (several of which panic on bad bytes), so a
//! malformed payload becomes an error reply, not a crash.
//!
//! Two protocols share the envelope: [`EvalProtocol`] (a driver's handle to
//! a remote evaluator) and [`SpawnProtocol`] (a driver to a node's spawner).
//! Their variant strings differ, so a message sent to the wrong kind of actor
//! fails to decode instead of being misread.

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::RpcReplyPort;
use rlx::codec::{self, CodecError};
use rlx::evaluator::{EvaluatorError, EvaluatorState, GradientRollout, Rollout};
use rlx::filter::RunningStat;
use rlx::protocol::EvalReply;
use rlx::restart::RestartPolicy;
use rlx::{EpisodeSummary, HandleError, LearnerStats};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;

/// A protocol carried in a [`Wire`] envelope.
pub trait Protocol: Send + 'static {
    /// The variant string ractor_cluster sends; includes a version.
    const VARIANT: &'static str;
    /// Requests of this protocol.
    type Request: Serialize + DeserializeOwned;
    /// Replies of this protocol (already `Result`s where they can fail).
    type Reply: Serialize + DeserializeOwned;
}

/// Driver ↔ remote evaluator.
pub struct EvalProtocol;
impl Protocol for EvalProtocol {
    const VARIANT: &'static str = "rlx.eval.v2";
    type Request = EvalRequest;
    /// The reply and the evaluator's node-side restarts so far.
    type Reply = Result<(WireReply, u64), WireError>;
}

/// Driver ↔ node spawner.
pub struct SpawnProtocol;
impl Protocol for SpawnProtocol {
    /// v3: a spawn request carries the driver's session epoch, a driver
    /// may stop one evaluator (`Stop`), and a node describes its
    /// resources (`Describe`).
    const VARIANT: &'static str = "rlx.spawn.v3";
    type Request = SpawnerRequest;
    type Reply = Result<SpawnerReply, String>;
}

/// The envelope: encoded request bytes, plus a reply port for calls.
pub struct Wire<P> {
    /// [`codec::encode_value`] of a `P::Request`.
    pub payload: Vec<u8>,
    /// Where the encoded `P::Reply` goes (`None` for a cast).
    pub reply: Option<RpcReplyPort<Vec<u8>>>,
    protocol: PhantomData<fn() -> P>,
}

impl<P: Protocol> Wire<P> {
    /// A one-way message.
    pub fn cast(payload: Vec<u8>) -> Self {
        Self { payload, reply: None, protocol: PhantomData }
    }

    /// A request whose reply goes to `reply`.
    pub fn call(payload: Vec<u8>, reply: RpcReplyPort<Vec<u8>>) -> Self {
        Self { payload, reply: Some(reply), protocol: PhantomData }
    }
}

impl<P: Protocol> ractor::Message for Wire<P> {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        let variant = P::VARIANT.to_string();
        Ok(match self.reply {
            None => SerializedMessage::Cast { variant, args: self.payload, metadata: None },
            Some(reply) => SerializedMessage::Call { variant, args: self.payload, reply, metadata: None },
        })
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match message {
            SerializedMessage::Cast { variant, args, .. } if variant == P::VARIANT => Ok(Self::cast(args)),
            SerializedMessage::Call { variant, args, reply, .. } if variant == P::VARIANT => {
                Ok(Self::call(args, reply))
            }
            _ => Err(BoxedDowncastErr),
        }
    }
}

/// A request to a remote evaluator: the framework's evaluator protocol,
/// unchanged ([`rlx::protocol`]).
pub use rlx::protocol::EvalRequest;

/// A remote evaluator's answer: [`EvalReply`] with the batch of a rollout
/// in [`codec::encode`]'s columnar form.
#[derive(Debug, Serialize, Deserialize)]
pub enum WireReply {
    /// For `Sample`.
    Rollout {
        /// The encoded batch.
        batch: serde_bytes::ByteBuf,
        /// Episodes that ended.
        episodes: Vec<EpisodeSummary>,
        /// The filter's delta.
        filter_delta: Option<RunningStat>,
        /// Env shard restarts during the call.
        env_shard_restarts: u64,
        /// The batch's last rows a dataset gave in an earlier pass.
        #[serde(default)]
        repeated_rows: usize,
    },
    /// For `SampleAndComputeGradients`.
    Gradients {
        /// The flat gradient.
        grads: Vec<f32>,
        /// Learner statistics.
        stats: LearnerStats,
        /// Env steps the gradient was computed on.
        steps: usize,
        /// Episodes that ended.
        episodes: Vec<EpisodeSummary>,
        /// Env shard restarts during the call.
        env_shard_restarts: u64,
    },
    /// For `SaveState`.
    State(EvaluatorState),
    /// For `Evaluate`.
    Episodes(Vec<EpisodeSummary>),
    /// For everything else.
    Done,
}

impl WireReply {
    /// The wire form of `reply`.
    ///
    /// # Errors
    /// A batch too large for the codec.
    pub fn new(reply: EvalReply) -> Result<Self, CodecError> {
        Ok(match reply {
            EvalReply::Rollout(Rollout { batch, episodes, filter_delta, env_shard_restarts, repeated_rows }) => {
                let batch = serde_bytes::ByteBuf::from(codec::encode(&batch)?);
                Self::Rollout { batch, episodes, filter_delta, env_shard_restarts, repeated_rows }
            }
            EvalReply::Gradients(GradientRollout { grads, stats, steps, episodes, env_shard_restarts }) => {
                Self::Gradients { grads, stats, steps, episodes, env_shard_restarts }
            }
            EvalReply::State(state) => Self::State(state),
            EvalReply::Episodes(episodes) => Self::Episodes(episodes),
            EvalReply::Done => Self::Done,
        })
    }

    /// The reply it carries, with a batch of at most `limit` bytes
    /// uncompressed.
    ///
    /// # Errors
    /// An undecodable batch, or one over the limit.
    pub fn into_reply(self, limit: usize) -> Result<EvalReply, CodecError> {
        Ok(match self {
            Self::Rollout { batch, episodes, filter_delta, env_shard_restarts, repeated_rows } => {
                let batch = codec::decode_within(&batch, limit)?;
                EvalReply::Rollout(Rollout { batch, episodes, filter_delta, env_shard_restarts, repeated_rows })
            }
            Self::Gradients { grads, stats, steps, episodes, env_shard_restarts } => {
                EvalReply::Gradients(GradientRollout { grads, stats, steps, episodes, env_shard_restarts })
            }
            Self::State(state) => EvalReply::State(state),
            Self::Episodes(episodes) => EvalReply::Episodes(episodes),
            Self::Done => EvalReply::Done,
        })
    }
}

/// A [`HandleError`] on the wire. Evaluator errors keep their kind where
/// the driver acts on it (a panic stays a panic) and their message always.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireError {
    /// [`HandleError::Failed`]; `panicked` marks [`EvaluatorError::Panicked`].
    Failed {
        /// Whether the evaluator panicked.
        panicked: bool,
        /// The error's message.
        message: String,
    },
    /// [`HandleError::RestartBudgetExceeded`] on the node.
    RestartBudgetExceeded {
        /// Failures inside the window.
        failures: usize,
        /// The node's `max_restarts`.
        max_restarts: usize,
        /// The node's window in seconds.
        window_s: f64,
        /// The last failure's reason.
        last_failure: String,
    },
    /// The evaluator could not start or is unreachable on its node.
    Unavailable(String),
    /// The request could not be decoded (a version mismatch or corruption).
    BadRequest(String),
}

impl WireError {
    /// The wire form of a handle error.
    pub fn from_handle(e: HandleError) -> Self {
        match e {
            HandleError::Failed { source: EvaluatorError::Panicked(message), .. } => {
                Self::Failed { panicked: true, message }
            }
            HandleError::Failed { source: EvaluatorError::Config(message), .. } => {
                Self::Failed { panicked: false, message }
            }
            HandleError::Failed { source, .. } => Self::Failed { panicked: false, message: source.to_string() },
            HandleError::RestartBudgetExceeded { failures, max_restarts, window_s, last_failure, .. } => {
                Self::RestartBudgetExceeded { failures, max_restarts, window_s, last_failure }
            }
            HandleError::Spawn { reason, .. } | HandleError::Unreachable { reason, .. } => Self::Unavailable(reason),
        }
    }

    /// Back to a handle error for evaluator `index` on `node`.
    pub fn into_handle(self, index: usize, node: &str) -> HandleError {
        match self {
            Self::Failed { panicked: true, message } => {
                HandleError::Failed { index, source: EvaluatorError::Panicked(message) }
            }
            Self::Failed { panicked: false, message } => {
                HandleError::Failed { index, source: EvaluatorError::Config(message) }
            }
            Self::RestartBudgetExceeded { failures, max_restarts, window_s, last_failure } => {
                HandleError::RestartBudgetExceeded {
                    index,
                    failures,
                    max_restarts,
                    window_s,
                    last_failure: format!("{last_failure} (on node {node})"),
                }
            }
            Self::Unavailable(reason) => {
                HandleError::Unreachable { index, reason: format!("on node {node}: {reason}") }
            }
            Self::BadRequest(reason) => {
                HandleError::Unreachable { index, reason: format!("node {node} could not decode a request: {reason}") }
            }
        }
    }
}

/// What a node needs to build an evaluator exactly as the driver would:
/// the algorithm's build is re-run on the node from these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpawnSpec {
    /// Algorithm name (e.g. `"PPO"`).
    pub algorithm: String,
    /// Registered env name.
    pub env: String,
    /// The run's config overrides, as JSON text.
    pub config_json: String,
}

/// Start evaluator `index` on the node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// What to build.
    pub spec: SpawnSpec,
    /// The evaluator's index (workers count from 1).
    pub index: usize,
    /// Its first generation: past those it used on nodes lost before.
    pub generation: u64,
    /// Restart policy of the node-local supervisor.
    pub restart: RestartPolicy,
    /// A unique id; the evaluator joins process group `rlx.eval.<spawn_id>`.
    pub spawn_id: String,
    /// The driver's node name (the node stops the evaluator when that driver leaves).
    pub driver: String,
    /// The driver's inbound frame limit: the node refuses to send a larger reply.
    pub driver_max_frame_bytes: u64,
    /// The driver's session with this node, counted from 1 per admission:
    /// a spawn of a later session stops the evaluators the driver started
    /// in earlier ones (it re-placed them when it lost the node), and a
    /// spawn of an earlier session than the node has seen is refused.
    pub epoch: u64,
}

/// What a driver asks of a node's spawner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SpawnerRequest {
    /// Start an evaluator.
    Spawn(SpawnRequest),
    /// The driver's heartbeat: is the node alive and responsive?
    Ping,
    /// What the node offers: asked once when a driver admits it, in the
    /// driver's new session (the node then stops the evaluators of that
    /// driver's earlier sessions, and refuses an earlier epoch).
    Describe {
        /// The driver's node name.
        driver: String,
        /// The session's epoch (see [`SpawnRequest::epoch`]).
        epoch: u64,
    },
    /// Stop the evaluator of this spawn id (it moved to another home).
    /// An unknown id is no error: the evaluator is already gone.
    Stop {
        /// The `spawn_id` it was started with.
        spawn_id: String,
    },
}

/// A spawner's answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SpawnerReply {
    /// For `Spawn`.
    Spawned(SpawnReply),
    /// For `Ping`.
    Pong,
    /// For `Stop`.
    Stopped,
    /// For `Describe`.
    Described(crate::resources::NodeResources),
}

/// A started evaluator.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpawnReply {
    /// The process group the evaluator joined.
    pub group: String,
    /// The node's inbound frame limit in bytes.
    pub max_frame_bytes: u64,
}

/// The process group every node's spawner joins.
pub const SPAWNER_GROUP: &str = "rlx.spawner";

/// The process group of one spawned evaluator.
pub fn eval_group(spawn_id: &str) -> String {
    format!("rlx.eval.{spawn_id}")
}

/// Encodes a request or reply.
///
/// # Errors
/// A value too large for the codec.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    codec::encode_value(value)
}

/// Decodes a request or reply; never panics on bad bytes.
///
/// # Errors
/// What is wrong with the bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    codec::decode_value(bytes)
}

/// [`decode`] for a message whose kind holds at most `limit` bytes
/// uncompressed ([`codec::decode_value_within`]).
///
/// # Errors
/// What is wrong with the bytes, or a claimed size over `limit`.
pub fn decode_within<T: DeserializeOwned>(bytes: &[u8], limit: usize) -> Result<T, CodecError> {
    codec::decode_value_within(bytes, limit)
}

/// What a reply to `request` can hold, uncompressed: a batch or a saved
/// state up to `max_frame_bytes` (the configured maximum message), a
/// gradient of `num_params` values (when known) with its episodes and
/// statistics, and an acknowledgement or an error a few KiB.
pub fn reply_limit(request: &EvalRequest, num_params: Option<usize>, max_frame_bytes: u64) -> usize {
    let frame = usize::try_from(max_frame_bytes).unwrap_or(usize::MAX);
    match request {
        EvalRequest::Sample | EvalRequest::SaveState => frame,
        // 17 bytes or so per episode summary.
        EvalRequest::Evaluate { episodes, .. } => episodes.saturating_mul(64).saturating_add(64 << 10).min(frame),
        // MessagePack spends 5 bytes on an f32; 16 MiB for the episodes
        // and statistics of one sampling call.
        EvalRequest::SampleAndComputeGradients => num_params.map_or(frame, |n| (5 * n + (16 << 20)).min(frame)),
        _ => 64 << 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies may decode to what their kind can hold: a batch or a state
    /// up to the frame limit, a gradient of the weights' size, an
    /// acknowledgement a few KiB.
    #[test]
    fn reply_limits_follow_the_request() {
        let frame = 256 << 20;
        assert_eq!(reply_limit(&EvalRequest::Sample, Some(10), frame), 256 << 20);
        assert_eq!(reply_limit(&EvalRequest::SaveState, None, frame), 256 << 20);
        assert_eq!(reply_limit(&EvalRequest::SampleAndComputeGradients, Some(1000), frame), 5000 + (16 << 20));
        assert_eq!(reply_limit(&EvalRequest::SampleAndComputeGradients, None, frame), 256 << 20);
        let weights = EvalRequest::SetWeights(std::sync::Arc::new(vec![0.0; 10]));
        assert_eq!(reply_limit(&weights, Some(10), frame), 64 << 10);
        // A gradient reply of the right size decodes within its limit.
        let reply: <EvalProtocol as Protocol>::Reply = Ok((
            WireReply::new(EvalReply::Gradients(GradientRollout { grads: vec![0.5; 1000], ..Default::default() }))
                .unwrap(),
            0,
        ));
        let bytes = encode(&reply).unwrap();
        let limit = reply_limit(&EvalRequest::SampleAndComputeGradients, Some(1000), frame);
        assert!(decode_within::<<EvalProtocol as Protocol>::Reply>(&bytes, limit).is_ok());
        assert!(decode_within::<<EvalProtocol as Protocol>::Reply>(&bytes, 64 << 10).is_ok());
        assert!(decode_within::<<EvalProtocol as Protocol>::Reply>(&bytes, 1000).is_err());
    }
    use ractor::Message;

    #[test]
    fn envelope_round_trips_and_rejects_other_protocols() {
        let payload = encode(&EvalRequest::SetWeights(std::sync::Arc::new(vec![1.0, 2.0]))).unwrap();
        let serialized = Wire::<EvalProtocol>::cast(payload.clone()).serialize().unwrap();
        let SerializedMessage::Cast { variant, args, .. } = serialized else { panic!("a cast") };
        assert_eq!(variant, "rlx.eval.v2");
        assert_eq!(SpawnProtocol::VARIANT, "rlx.spawn.v3");
        let back = Wire::<EvalProtocol>::deserialize(SerializedMessage::Cast {
            variant: variant.clone(),
            args,
            metadata: None,
        })
        .unwrap();
        assert_eq!(back.payload, payload);
        // A spawner refuses an evaluator's message.
        let wrong = SerializedMessage::Cast { variant, args: payload, metadata: None };
        assert!(Wire::<SpawnProtocol>::deserialize(wrong).is_err());
    }

    /// The framework's request enum encodes exactly as the wire's own enum
    /// did before it was folded in, so `rlx.eval.v2` nodes and drivers
    /// still understand each other.
    #[test]
    fn requests_keep_their_wire_bytes() {
        // The wire's request enum as it was, variant for variant.
        #[derive(Serialize)]
        #[allow(dead_code)]
        enum Before {
            Sample,
            SetWeights(Vec<f32>),
            PushWeights(Vec<f32>),
            SampleAndComputeGradients,
            SetFilterStatistics(RunningStat),
            SaveState,
            LoadState(EvaluatorState),
        }
        let w = vec![0.25f32, -1.0, 3.5];
        let now = encode(&EvalRequest::SetWeights(std::sync::Arc::new(w.clone()))).unwrap();
        assert_eq!(now, encode(&Before::SetWeights(w)).unwrap());
        let mut stat = RunningStat::new(2);
        stat.push(&[1.0, 2.0]);
        let now = encode(&EvalRequest::SetFilterStatistics(std::sync::Arc::new(stat.clone()))).unwrap();
        assert_eq!(now, encode(&Before::SetFilterStatistics(stat)).unwrap());
    }

    #[test]
    fn garbage_payloads_are_errors_not_panics() {
        for bytes in [&b""[..], b"\x00", b"garbage that is not lz4", &[0xff; 64]] {
            assert!(decode::<EvalRequest>(bytes).is_err());
        }
        let mut truncated = encode(&EvalRequest::SetWeights(std::sync::Arc::new(vec![0.5; 1000]))).unwrap();
        truncated.truncate(truncated.len() / 2);
        assert!(decode::<EvalRequest>(&truncated).is_err());
    }

    /// Every message a node or a driver decodes, each input decoded as
    /// each of them (a reply's rollout batch too, as the driver does), as
    /// the `cargo fuzz` target `wire_messages` does: every file of its
    /// committed corpus (`fuzz/corpus/wire_messages`) as-is, then
    /// [`FUZZ_CASES`](rlx::fuzz::FUZZ_CASES) altered messages for each
    /// group here (a request of every kind, replies of every kind, spawner
    /// messages), half made from the group, half from those files.
    #[test]
    fn fuzzed_messages_never_panic() {
        use rlx::fuzz::{mutate_framed, replay_corpus, run, with_committed, write_seeds};
        use std::sync::Arc;
        type Reply = <EvalProtocol as Protocol>::Reply;
        fn decode_any(bytes: &[u8]) {
            let _ = decode::<EvalRequest>(bytes);
            if let Ok(Ok((reply, _))) = decode::<Reply>(bytes) {
                let _ = reply.into_reply(rlx::codec::MAX_DECODED_BYTES);
            }
            let _ = decode::<SpawnerRequest>(bytes);
            let _ = decode::<<SpawnProtocol as Protocol>::Reply>(bytes);
        }
        let mut stat = RunningStat::new(3);
        stat.push(&[1.0, 2.0, 3.0]);
        let requests = vec![
            encode(&EvalRequest::Sample).unwrap(),
            encode(&EvalRequest::SetWeights(Arc::new((0..64).map(|i| i as f32 * 0.1).collect()))).unwrap(),
            encode(&EvalRequest::SetFilterStatistics(Arc::new(stat.clone()))).unwrap(),
            encode(&EvalRequest::SaveState).unwrap(),
        ];
        let mut batch = rlx::SampleBatch::new();
        batch.insert_f32("obs", (0..40).map(|i| i as f32).collect(), 4).unwrap();
        batch.insert_i64("actions", (0..10).collect(), 1).unwrap();
        let episode = EpisodeSummary { episode_return: 12.5, length: 13, truncated: false, agent: None };
        let rollout = Rollout {
            batch,
            episodes: vec![episode],
            filter_delta: Some(stat),
            env_shard_restarts: 1,
            repeated_rows: 4,
        };
        let gradients = GradientRollout {
            grads: vec![0.5; 32],
            stats: LearnerStats::default(),
            steps: 10,
            episodes: vec![episode],
            env_shard_restarts: 0,
        };
        let reply = |r: EvalReply| encode::<Reply>(&Ok((WireReply::new(r).unwrap(), 2))).unwrap();
        let error = WireError::Failed { panicked: true, message: "boom".into() };
        let replies = vec![
            reply(EvalReply::Rollout(rollout)),
            reply(EvalReply::Gradients(gradients)),
            reply(EvalReply::Done),
            encode::<Reply>(&Err(error)).unwrap(),
        ];
        let spawn = SpawnRequest {
            spec: SpawnSpec {
                algorithm: "PPO".into(),
                env: "CartPole-v1".into(),
                config_json: "{\"lr\": 0.001}".into(),
            },
            index: 2,
            generation: 0,
            restart: RestartPolicy::default(),
            spawn_id: "a1".into(),
            driver: "driver".into(),
            driver_max_frame_bytes: 1 << 28,
            epoch: 1,
        };
        let spawner = vec![
            encode(&SpawnerRequest::Ping).unwrap(),
            encode(&SpawnerRequest::Spawn(spawn)).unwrap(),
            encode(&SpawnerRequest::Stop { spawn_id: "a1".into() }).unwrap(),
            encode(&SpawnerRequest::Describe { driver: "driver".into(), epoch: 2 }).unwrap(),
            encode(&Ok::<_, String>(SpawnerReply::Described(crate::resources::NodeResources {
                num_cpus: 2.0,
                custom: [("sim".to_string(), 1.0)].into(),
                ..Default::default()
            })))
            .unwrap(),
            encode(&Ok::<_, String>(SpawnerReply::Pong)).unwrap(),
            encode(&Ok::<_, String>(SpawnerReply::Stopped)).unwrap(),
        ];
        let groups = [requests, replies, spawner];
        write_seeds("wire_messages", &groups.concat());
        let committed = replay_corpus("wire_messages", decode_any);
        for group in groups {
            run(&with_committed(&group, &committed), mutate_framed, decode_any);
        }
    }

    #[test]
    fn handle_errors_keep_their_kind_across_the_wire() {
        let panicked = HandleError::Failed { index: 3, source: EvaluatorError::Panicked("boom".into()) };
        let back: WireError = decode(&encode(&WireError::from_handle(panicked.clone())).unwrap()).unwrap();
        assert_eq!(back.into_handle(3, "n1"), panicked);
        let budget = HandleError::RestartBudgetExceeded {
            index: 2,
            failures: 4,
            max_restarts: 3,
            window_s: 60.0,
            last_failure: "boom".into(),
        };
        match WireError::from_handle(budget).into_handle(2, "n1") {
            HandleError::RestartBudgetExceeded { failures: 4, max_restarts: 3, last_failure, .. } => {
                assert!(last_failure.contains("n1"), "{last_failure}")
            }
            other => panic!("{other:?}"),
        }
    }
}
