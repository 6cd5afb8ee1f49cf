//! [`GameEnv`]: any [`Game`] as a [`MultiAgentEnv`], so a board game
//! written once serves the multi-agent algorithms (PPO's self-play) and a
//! tree search (AlphaZero, through [`MultiAgentEnv::game`]) alike.

use crate::env::{EnvError, EnvState};
use crate::game::{Game, GameError};
use crate::multi_agent::MultiAgentEnv;
use crate::space::{Action, Space};
use crate::Step;

impl From<GameError> for EnvError {
    fn from(e: GameError) -> Self {
        match e {
            GameError::Illegal { game, action, player, why } => EnvError::InvalidAction {
                env: game,
                action: format!("{action} by player_{player} ({why})"),
                space: "the legal moves".into(),
            },
            GameError::Over { game } => EnvError::NeedsReset { env: game },
            GameError::BadState { game, why } => {
                EnvError::Other { env: game, message: format!("not a saved position: {why}") }
            }
        }
    }
}

/// A [`Game`] as a [`MultiAgentEnv`]: agents `player_0` … take turns (only
/// the player to move acts), the legal moves are the action mask, and
/// every player gets its [`Game::terminal_value`] as the reward of the
/// move that ends the game (0 before). Each player observes the position
/// from its own side after every move.
pub struct GameEnv<G> {
    game: G,
    agents: Vec<String>,
    act_space: Space,
    /// The mover's legal moves.
    mask: Vec<bool>,
}

impl<G: Game> GameEnv<G> {
    /// `game`, played from its opening position.
    pub fn new(mut game: G) -> Self {
        game.reset();
        let agents = (0..game.num_players()).map(|p| format!("player_{p}")).collect();
        let act_space = Space::discrete(game.num_actions() as i64);
        let mut env = Self { mask: vec![false; game.num_actions()], game, agents, act_space };
        env.refresh_mask();
        env
    }

    /// The game in its current position.
    pub fn state(&self) -> &G {
        &self.game
    }

    fn refresh_mask(&mut self) {
        let game = &self.game;
        for (a, legal) in self.mask.iter_mut().enumerate() {
            *legal = game.is_legal(a);
        }
    }

    fn observe_all(&self, obs: &mut [Vec<f32>]) {
        for (p, o) in obs.iter_mut().enumerate() {
            self.game.observe(p, o);
        }
    }
}

impl<G: Game> MultiAgentEnv for GameEnv<G> {
    fn name(&self) -> &str {
        self.game.name()
    }

    fn agent_ids(&self) -> &[String] {
        &self.agents
    }

    fn observation_space(&self, _: usize) -> &Space {
        self.game.observation_space()
    }

    fn action_space(&self, _: usize) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, _: Option<u64>, obs: &mut [Vec<f32>]) -> Result<(), EnvError> {
        self.game.reset();
        self.refresh_mask();
        self.observe_all(obs);
        Ok(())
    }

    fn step(
        &mut self,
        actions: &[Option<Action<'_>>],
        obs: &mut [Vec<f32>],
        steps: &mut [Step],
    ) -> Result<bool, EnvError> {
        if self.game.is_terminal() {
            return Err(EnvError::NeedsReset { env: self.name().into() });
        }
        let mover = self.game.to_move();
        match actions.get(mover).copied().flatten() {
            Some(Action::Discrete(a)) if a >= 0 => self.game.play(a as usize)?,
            Some(a) => {
                return Err(EnvError::InvalidAction {
                    env: self.name().into(),
                    action: format!("{a} by {}", self.agents[mover]),
                    space: self.act_space.to_string(),
                })
            }
            None => {
                return Err(EnvError::BadArgument {
                    env: self.name().into(),
                    message: format!("{} is to move but got no action", self.agents[mover]),
                })
            }
        }
        let over = self.game.is_terminal();
        for (p, step) in steps.iter_mut().enumerate() {
            let reward = self.game.terminal_value(p).unwrap_or(0.0);
            *step = Step { reward: reward.into(), terminated: over, truncated: false };
        }
        self.refresh_mask();
        self.observe_all(obs);
        Ok(over)
    }

    fn acting(&self, agent: usize) -> bool {
        agent == self.game.to_move() && !self.game.is_terminal()
    }

    fn action_mask(&self, _: usize) -> Option<&[bool]> {
        Some(&self.mask)
    }

    fn save_state(&self) -> Option<EnvState> {
        self.game.save_state()
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        self.game.load_state(state)?;
        self.refresh_mask();
        Ok(())
    }

    fn game(&self) -> Option<Box<dyn Game>> {
        Some(self.game.boxed_clone())
    }

    fn render_rgb(&mut self) -> Result<Option<crate::video::Frame>, EnvError> {
        Ok(self.game.render_rgb())
    }
}
