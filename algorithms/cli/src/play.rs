//! `rlx play`: a person plays a board game against a checkpoint in the
//! terminal. The checkpoint moves with its search (the run's
//! `num_simulations`, without noise, the most visited move) or, with
//! `--no-search`, its network's most probable legal move.

use crate::{CliError, PlayArgs};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::checkpoint::Checkpoint;
use rlx::config::merge_json;
use rlx_algorithms::alpha_zero::{self, AlphaZeroConfig};
use rlx_algorithms::search::mcts::{search, NetworkPrior, SearchSettings, Tree};
use rlx_algorithms::{make_policy_for_env, BuildError};
use serde_json::Value;
use std::io::BufRead;
use std::path::Path;

/// How a game of `rlx play` ended, for the person's seat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayOutcome {
    /// The person won.
    Won,
    /// A draw.
    Draw,
    /// The checkpoint won.
    Lost,
    /// The input ended before the game did.
    Abandoned,
}

/// An AlphaZero checkpoint ready to move: its network, its game from the
/// start, and its search settings without root noise.
pub(crate) struct BoardPlayer {
    pub checkpoint: Checkpoint,
    pub policy: Box<dyn rlx::PolicyGraph>,
    pub game: Box<dyn rlx::game::Game>,
    pub settings: SearchSettings,
}

impl BoardPlayer {
    /// Loads the checkpoint at `path` (or a run directory's newest), with
    /// `simulations` a move instead of the run's `num_simulations`.
    /// `command` begins the error for a checkpoint of another algorithm.
    pub(crate) fn load(path: &Path, simulations: Option<usize>, command: &str) -> Result<Self, CliError> {
        let checkpoint = Checkpoint::load(path)?;
        checkpoint.warnings.iter().for_each(|w| errln!("warning: {w}"));
        let meta = &checkpoint.metadata;
        if meta.algorithm != AlphaZeroConfig::NAME {
            return Err(CliError::Usage(format!(
                "{} holds a {} checkpoint; {command} AlphaZero's on board games",
                checkpoint.dir.display(),
                meta.algorithm
            )));
        }
        let kwargs = meta.config.get("env_config").cloned().unwrap_or(Value::Null);
        let env = rlx_envs::make_with(&meta.env, &kwargs).map_err(BuildError::from)?;
        let mut policy = make_policy_for_env(&meta.algorithm, &meta.config, env.as_ref(), 0)?;
        checkpoint.load_weights(policy.as_mut())?;
        let make_env: rlx::EnvMaker = {
            let (name, kwargs) = (meta.env.clone(), kwargs.clone());
            std::sync::Arc::new(move || rlx_envs::make_with(&name, &kwargs))
        };
        let game = alpha_zero::game_of(&make_env)?;
        let cfg: AlphaZeroConfig = merge_json(&AlphaZeroConfig::default(), &meta.config).map_err(BuildError::from)?;
        let mut settings = cfg.search().without_noise();
        if let Some(n) = simulations {
            if n == 0 || n > alpha_zero::MAX_SIMULATIONS {
                return Err(CliError::Usage(format!("--simulations must be in [1, {}]", alpha_zero::MAX_SIMULATIONS)));
            }
            settings.num_simulations = n;
        }
        Ok(Self { checkpoint, policy, game, settings })
    }
}

/// Runs `rlx play`, reading the person's moves from `input`.
///
/// # Errors
/// A checkpoint that is not a board-game player's, or the network's error.
pub fn play(args: &PlayArgs, input: &mut dyn BufRead) -> Result<PlayOutcome, CliError> {
    let BoardPlayer { checkpoint: ckpt, mut policy, mut game, settings } =
        BoardPlayer::load(&args.checkpoint, args.moves.simulations, "rlx play plays")?;
    let meta = &ckpt.metadata;
    let mut rng = ChaCha8Rng::seed_from_u64(args.moves.seed);
    let person = args.seat;
    if person >= game.num_players() {
        return Err(CliError::Usage(format!("--seat must be 0 (move first) or 1, not {person}")));
    }
    let how = if args.moves.no_search {
        "its network alone".to_string()
    } else {
        format!("{} simulations a move", settings.num_simulations)
    };
    outln!(
        "{} from {} (iteration {}) plays {} with {how}; you are player_{person}. Type a move and Enter.",
        meta.algorithm,
        ckpt.dir.display(),
        meta.training_iteration,
        game.name()
    );
    loop {
        outln!("\n{}", game.render());
        if let Some(value) = game.terminal_value(person) {
            let outcome = match value {
                v if v > 0.0 => PlayOutcome::Won,
                v if v < 0.0 => PlayOutcome::Lost,
                _ => PlayOutcome::Draw,
            };
            outln!(
                "{}",
                match outcome {
                    PlayOutcome::Won => "You win.",
                    PlayOutcome::Lost => "You lose.",
                    _ => "A draw.",
                }
            );
            return Ok(outcome);
        }
        let legal = game.legal_actions();
        let names: Vec<String> = legal.iter().map(|&a| game.action_name(a)).collect();
        if game.to_move() == person {
            out!("your move ({}): ", names.join(" "));
            let mut line = String::new();
            if input.read_line(&mut line)? == 0 {
                outln!("\n(input ended; the game is left unfinished)");
                return Ok(PlayOutcome::Abandoned);
            }
            let Some(action) = game.parse_action(&line) else {
                outln!("`{}` is not a move here: type one of {}", line.trim(), names.join(" "));
                continue;
            };
            if let Err(e) = game.play(action) {
                outln!("{e}: type one of {}", names.join(" "));
            }
            continue;
        }
        let action = if args.moves.no_search {
            let values = rlx_algorithms::search::mcts::LeafEvaluator::evaluate(
                &mut NetworkPrior::new(policy.as_mut()),
                &[game.as_ref()],
            )
            .map_err(|e| CliError::Play(e.to_string()))?;
            *legal.iter().max_by(|&&a, &&b| values[0].priors[a].total_cmp(&values[0].priors[b])).expect("a legal move")
        } else {
            let mut tree = Tree::new(game.boxed_clone(), settings);
            search(&mut [&mut tree], &mut NetworkPrior::new(policy.as_mut()), &mut rng)
                .map_err(|e| CliError::Play(e.to_string()))?;
            tree.choose(0.0, &mut rng)
        };
        outln!("{} plays {}", meta.algorithm, game.action_name(action));
        game.play(action).map_err(|e| CliError::Play(e.to_string()))?;
    }
}
