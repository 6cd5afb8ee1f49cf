//! CartPole with the velocities hidden: the standard test that a policy
//! has memory.
//!
//! The observation is the cart's position and the pole's angle only (the
//! first and third of CartPole's four values). One frame cannot tell
//! which way the pole is falling, so a feed-forward policy balances it
//! poorly; a recurrent one can infer the velocities from consecutive
//! frames. RLlib's `StatelessCartPole` example env is the same idea. The
//! dynamics, rewards and time limit are `CartPole-v1`'s, step for step.

use crate::CartPole;
use rlx::env::invalid_action;
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};

/// CartPole-v1 observed through `(x, θ)` only.
pub struct StatelessCartPole {
    inner: CartPole,
    full: [f32; 4],
    signature: EnvSignature,
}

impl Default for StatelessCartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl StatelessCartPole {
    /// A stateless cart-pole; call `reset` before stepping.
    pub fn new() -> Self {
        let inner = CartPole::new();
        let Space::Box { low, high, .. } = inner.observation_space() else { unreachable!("CartPole observes a Box") };
        let observation_space = Space::bounded(vec![low[0], low[2]], vec![high[0], high[2]], vec![2])
            .expect("CartPole's bounds are consistent");
        let signature = EnvSignature::new("StatelessCartPole-v1", observation_space, inner.action_space().clone());
        Self { inner, full: [0.0; 4], signature }
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.full[0];
        obs[1] = self.full[2];
    }
}

impl Env for StatelessCartPole {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.inner.reset(seed, &mut self.full)?;
        self.observe(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        if !self.action_space().contains(action) {
            return Err(invalid_action(self, action));
        }
        let step = self.inner.step(action, &mut self.full).map_err(|e| match e {
            EnvError::NeedsReset { .. } => EnvError::NeedsReset { env: self.name().to_string() },
            other => other,
        })?;
        self.observe(obs);
        Ok(step)
    }

    /// CartPole's snapshot, tagged so that neither env loads the other's.
    fn save_state(&self) -> Option<rlx::env::EnvState> {
        let inner = serde_bytes::ByteBuf::from(self.inner.save_state()?);
        Some(rlx::env::encode_state(&(self.name(), inner)))
    }

    fn load_state(&mut self, state: &rlx::env::EnvState) -> Result<(), EnvError> {
        let (tag, inner): (String, serde_bytes::ByteBuf) = rlx::env::decode_state(self.name(), state)?;
        if tag != self.name() {
            return Err(EnvError::Other {
                env: self.name().into(),
                message: format!("a snapshot of {tag}, not of this env"),
            });
        }
        self.inner
            .load_state(&inner.into_vec())
            .map_err(|e| EnvError::Other { env: self.name().into(), message: e.to_string() })?;
        let s = self.inner.state();
        self.full = [s[0] as f32, s[1] as f32, s[2] as f32, s[3] as f32];
        Ok(())
    }

    fn render(&self) -> Option<String> {
        self.inner.render()
    }

    fn render_rgb(&mut self) -> Result<Option<rlx::video::Frame>, EnvError> {
        self.inner.render_rgb()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observes_position_and_angle_of_the_same_trajectory() {
        let (mut full, mut stateless) = (CartPole::new(), StatelessCartPole::new());
        let (mut a, mut b) = ([0.0f32; 4], [0.0f32; 2]);
        full.reset(Some(7), &mut a).unwrap();
        stateless.reset(Some(7), &mut b).unwrap();
        for t in 0..200 {
            assert_eq!(b, [a[0], a[2]], "step {t}");
            let action = Action::Discrete((t / 3) % 2);
            let (x, y) = (full.step(action, &mut a).unwrap(), stateless.step(action, &mut b).unwrap());
            assert_eq!(x, y);
            if x.done() {
                break;
            }
        }
        assert_eq!(stateless.observation_space().flat_dim(), 2);
        let err = stateless.step(Action::Discrete(2), &mut b).unwrap_err().to_string();
        assert!(err.contains("StatelessCartPole-v1"), "{err}");
    }
}
