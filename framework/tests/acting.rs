//! What an evaluator passes a policy besides observations: the env's
//! action masks, and each env copy's recurrent state, carried from step to
//! step, zeroed where an episode starts, and kept across samples and
//! checkpoints.

use rlx::env::{invalid_action, EnvMaker};
use rlx::{
    fields, Action, Env, EnvError, EnvShards, EnvSignature, LearnerStats, PolicyError, PolicyEvaluator, PolicyGraph,
    PolicyInput, SampleBatch, Space, Step, VectorEnv,
};
use std::sync::Arc;

/// Observes its step count; at step `t` only action `t % 3` is legal (and
/// any other action is an error). With `dead_end`, the mask at that step
/// allows nothing. Episodes last `len` steps.
struct Lanes {
    t: u64,
    len: u64,
    dead_end: Option<u64>,
    legal: [bool; 3],
    signature: EnvSignature,
}

impl Lanes {
    fn new(len: u64, dead_end: Option<u64>) -> Self {
        Self {
            t: 0,
            len,
            dead_end,
            legal: [false; 3],
            signature: EnvSignature::new(
                "Lanes",
                Space::uniform_box(0.0, 1000.0, vec![1]).unwrap(),
                Space::discrete(3),
            ),
        }
    }

    fn update(&mut self, obs: &mut [f32]) {
        obs[0] = self.t as f32;
        self.legal = [0, 1, 2].map(|a| a == self.t % 3 && Some(self.t) != self.dead_end);
    }
}

impl Env for Lanes {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }
    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.t = 0;
        self.update(obs);
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        match action {
            Action::Discrete(a) if self.legal.get(a as usize) == Some(&true) => {}
            _ => return Err(invalid_action(self, action)),
        }
        self.t += 1;
        self.update(obs);
        Ok(Step { reward: 1.0, terminated: self.t == self.len, truncated: false })
    }
    fn save_state(&self) -> Option<rlx::env::EnvState> {
        Some(rlx::env::encode_state(&self.t))
    }
    fn load_state(&mut self, state: &rlx::env::EnvState) -> Result<(), EnvError> {
        self.t = rlx::env::decode_state(self.name(), state)?;
        let mut obs = [0.0];
        self.update(&mut obs);
        Ok(())
    }
    fn action_mask(&self) -> Option<&[bool]> {
        Some(&self.legal)
    }
}

/// Takes the first legal action; its recurrent state counts the steps of
/// the episode so far (`state_out = state_in + 1`).
struct Counting {
    obs: Space,
    act: Space,
}

impl PolicyGraph for Counting {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.obs, &self.act)
    }
    fn compute_actions_from_input(
        &mut self,
        input: &PolicyInput<'_>,
        out: &mut SampleBatch,
    ) -> Result<(), PolicyError> {
        let mask = input.action_mask.ok_or_else(|| PolicyError::Other("no mask".into()))?;
        let state = input.state.ok_or_else(|| PolicyError::Other("no state".into()))?;
        let actions = mask.chunks_exact(3).map(|m| m.iter().position(|&l| l != 0.0).unwrap_or(0) as i64).collect();
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        out.insert_f32(fields::STATE_OUT, state.iter().map(|s| s + 1.0).collect(), 1)?;
        Ok(())
    }
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        self.compute_actions_from_input(&PolicyInput::obs(obs, explore), out)
    }
    fn recurrent_state_size(&self) -> usize {
        1
    }
    fn postprocess_trajectory(&mut self, _traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(())
    }
    fn learn_on_batch(&mut self, _batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        Ok(LearnerStats::default())
    }
    fn compute_gradients(&mut self, _: &SampleBatch) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        Ok((Vec::new(), LearnerStats::default()))
    }
    fn apply_gradients(&mut self, _grads: &[f32]) -> Result<(), PolicyError> {
        Ok(())
    }
    fn get_weights(&self) -> Vec<f32> {
        Vec::new()
    }
    fn set_weights(&mut self, _weights: &[f32]) -> Result<(), PolicyError> {
        Ok(())
    }
    fn save_state(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }
    fn load_state(&mut self, _state: &[u8]) -> Result<(), PolicyError> {
        Ok(())
    }
}

fn evaluator(env: VectorEnv, sample_size: usize) -> PolicyEvaluator {
    let policy = Counting { obs: env.observation_space().clone(), act: env.action_space().clone() };
    PolicyEvaluator::new(Box::new(policy), env, sample_size, 0).unwrap()
}

fn lanes(n: usize, len: u64) -> VectorEnv {
    VectorEnv::new((0..n).map(|_| Box::new(Lanes::new(len, None)) as Box<dyn Env>).collect()).unwrap()
}

/// Rows of copy `i` in time order, from a time-major fragment of `n` copies
/// (`sample` puts each copy's trajectories one after another).
fn column(batch: &SampleBatch, field: &str) -> Vec<f32> {
    batch.f32(field).unwrap().to_vec()
}

#[test]
fn masks_reach_the_policy_and_the_batch_and_state_flows_within_episodes() {
    // Two copies, episodes of 5 steps, fragments of 7 steps: episodes and
    // fragments cross.
    let mut ev = evaluator(lanes(2, 5), 14);
    let mut carried = Vec::new();
    for round in 0..3 {
        let batch = ev.sample().unwrap().batch;
        let (obs, mask, new_mask) =
            (column(&batch, fields::OBS), column(&batch, fields::ACTION_MASK), column(&batch, fields::NEW_ACTION_MASK));
        let (state_in, state_out) = (column(&batch, fields::STATE_IN), column(&batch, fields::STATE_OUT));
        let actions = batch.i64(fields::ACTIONS).unwrap();
        for r in 0..batch.len() {
            let t = obs[r] as usize;
            let expect: Vec<f32> = (0..3).map(|a| if a == t % 3 { 1.0 } else { 0.0 }).collect();
            assert_eq!(&mask[r * 3..r * 3 + 3], &expect[..], "round {round} row {r}: the mask of obs t = {t}");
            assert_eq!(actions[r], (t % 3) as i64, "the legal action was taken");
            let next: Vec<f32> = (0..3).map(|a| if a == (t + 1) % 3 { 1.0 } else { 0.0 }).collect();
            assert_eq!(&new_mask[r * 3..r * 3 + 3], &next[..], "new_action_mask is the mask of new_obs");
            // The state counts the steps since the episode started, across
            // fragment boundaries.
            assert_eq!(state_in[r], t as f32, "round {round} row {r}: state_in");
            assert_eq!(state_out[r], t as f32 + 1.0);
        }
        carried.push(ev.save_state(0).recurrent_state);
    }
    assert!(carried.iter().any(|s| s.iter().any(|&x| x > 0.0)), "some episode is in progress at a boundary");
}

#[test]
fn a_restored_evaluator_continues_the_recurrent_state() {
    let mut a = evaluator(lanes(3, 5), 6);
    a.sample().unwrap();
    let saved = a.save_state(0);
    assert_eq!(saved.recurrent_state.len(), 3);
    let mut b = evaluator(lanes(3, 5), 6);
    b.load_state(&saved).unwrap();
    assert_eq!(a.sample().unwrap().batch, b.sample().unwrap().batch);
}

#[test]
fn a_mask_without_a_legal_action_is_an_error_naming_the_env_and_step() {
    let env = VectorEnv::new(vec![Box::new(Lanes::new(10, Some(4))) as Box<dyn Env>]).unwrap();
    let err = evaluator(env, 10).sample().unwrap_err().to_string();
    assert!(err.contains("Lanes") && err.contains("step 4") && err.contains("no legal action"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masks_and_states_are_the_same_with_env_shards() {
    let make: EnvMaker = Arc::new(|| Ok(Box::new(Lanes::new(5, None)) as Box<dyn Env>));
    let shards = EnvShards { num_shards: 2, ..EnvShards::default() };
    let mut sharded = evaluator(VectorEnv::sharded(make, 4, &shards).unwrap(), 28);
    let mut plain = evaluator(lanes(4, 5), 28);
    for _ in 0..3 {
        assert_eq!(sharded.sample().unwrap().batch, plain.sample().unwrap().batch);
    }
}
