//! The evaluator protocol: every operation on an evaluator as one request,
//! answered by [`PolicyEvaluator::serve`].
//!
//! Wherever an evaluator lives — in the driver ([`LocalEvaluator`]), in a
//! ractor actor ([`crate::actor`]), in an actix actor or on a remote node
//! (`rlx-cluster`) — its home passes the [`EvalRequest`] it is given to
//! `serve` and returns the [`EvalReply`]. Remote nodes receive the same
//! request enum over the wire. The typed methods callers use
//! ([`EvaluatorHandle::sample`], `set_weights`, …) are written once, on
//! the handle trait, in terms of [`EvaluatorHandle::call`].
//!
//! A new operation therefore touches two files: a variant and its arm in
//! `serve` here, and its typed method in `handle.rs`.
//!
//! [`LocalEvaluator`]: crate::handle::LocalEvaluator
//! [`EvaluatorHandle::sample`]: crate::handle::EvaluatorHandle::sample
//! [`EvaluatorHandle::call`]: crate::handle::EvaluatorHandle::call

use crate::evaluator::{EvaluatorError, EvaluatorState, GradientRollout, PolicyEvaluator, Rollout};
use crate::filter::RunningStat;
use crate::policy::FlatWeights;
use crate::sample_batch::{fields, Column};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One operation on an evaluator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EvalRequest {
    /// [`PolicyEvaluator::sample`].
    Sample,
    /// [`PolicyEvaluator::set_weights`].
    SetWeights(Arc<FlatWeights>),
    /// [`PolicyEvaluator::set_weights`], sent without waiting for the answer
    /// (applied before the evaluator's next request).
    PushWeights(Arc<FlatWeights>),
    /// [`PolicyEvaluator::sample_and_compute_gradients`].
    SampleAndComputeGradients,
    /// [`PolicyEvaluator::set_filter_statistics`].
    SetFilterStatistics(Arc<RunningStat>),
    /// [`PolicyEvaluator::save_state`].
    SaveState,
    /// [`PolicyEvaluator::load_state`].
    LoadState(Arc<EvaluatorState>),
    /// [`PolicyEvaluator::evaluate`].
    Evaluate {
        /// Whole episodes to play.
        episodes: usize,
        /// Seed of the first copy's reset.
        seed: u64,
        /// Sample actions instead of taking the most likely.
        explore: bool,
    },
    /// [`PolicyEvaluator::finish_output`].
    FinishOutput,
}

/// An evaluator's answer to an [`EvalRequest`].
#[derive(Clone, Debug, PartialEq)]
pub enum EvalReply {
    /// To `Sample`.
    Rollout(Rollout),
    /// To `SampleAndComputeGradients`.
    Gradients(GradientRollout),
    /// To `SaveState`.
    State(EvaluatorState),
    /// To `Evaluate`: the episodes played.
    Episodes(Vec<crate::EpisodeSummary>),
    /// To everything else.
    Done,
}

/// What the rows of an evaluator's batches look like: the widths of the
/// observation and action columns, from the env's spaces.
#[derive(Clone, Debug, PartialEq)]
pub struct RowShape {
    /// Values per observation (`obs`, `new_obs`).
    pub obs: usize,
    /// Values per action (`actions`).
    pub actions: usize,
    /// The observation space when its rows may travel packed into bytes
    /// (a `Dict` with a `uint8` entry, [`Space::packed_width`](crate::Space::packed_width)).
    pub packed: Option<crate::Space>,
}

impl RowShape {
    /// The shape of rows sampled on these spaces.
    pub fn of(observation_space: &crate::Space, action_space: &crate::Space) -> Self {
        let packed = observation_space.packed_width().map(|_| observation_space.clone());
        Self { obs: observation_space.flat_dim(), actions: action_space.flat_dim(), packed }
    }

    /// Checks a packed observation column (`bytes`, rows of `width`): as
    /// wide as the space packs, its `f32` values finite.
    fn check_packed(&self, name: &str, bytes: &[u8], width: usize) -> Result<(), String> {
        let Some(space) = &self.packed else {
            return Err(format!("column `{name}` holds bytes, but the env's observations are not bytes"));
        };
        let packed = space.packed_width().unwrap_or(0);
        if width != packed {
            return Err(format!("column `{name}` is {width} bytes wide, the env's packed rows {packed}"));
        }
        let mut values = Vec::new();
        space.unpack_rows(bytes, &mut values).map_err(|e| format!("column `{name}`: {e}"))?;
        match values.iter().position(|x| !x.is_finite()) {
            Some(i) => Err(format!("column `{name}` holds {} at row {}", values[i], i / self.obs.max(1))),
            None => Ok(()),
        }
    }
}

impl EvalReply {
    /// Checks a reply from an evaluator this process does not run itself
    /// (a remote node's) before anything uses it: every number finite, a
    /// gradient exactly as long as the weights (`num_params`, when known),
    /// and a batch's observation and action columns as wide as `shape`
    /// says (when known). That every column holds whole rows, and the same
    /// number of them, is checked when the batch is decoded.
    ///
    /// # Errors
    /// What is wrong, naming the column or field.
    pub fn check(&self, num_params: Option<usize>, shape: Option<RowShape>) -> Result<(), String> {
        let episodes = match self {
            Self::Rollout(r) => {
                if let Some(shape) = &shape {
                    let expected =
                        [(fields::OBS, shape.obs), (fields::NEW_OBS, shape.obs), (fields::ACTIONS, shape.actions)];
                    for (name, width) in expected {
                        match r.batch.get(name) {
                            Some(Column::U8 { data, width: w })
                                if shape.packed.is_some() && name != fields::ACTIONS =>
                            {
                                shape.check_packed(name, data, *w)?;
                            }
                            Some(c) if c.width() != width => {
                                return Err(format!("column `{name}` is {} wide, the env's space {width}", c.width()))
                            }
                            _ => {}
                        }
                    }
                }
                if r.repeated_rows > r.batch.len() {
                    return Err(format!("{} repeated rows in a batch of {}", r.repeated_rows, r.batch.len()));
                }
                for (name, column) in r.batch.columns() {
                    if let Column::F32 { data, width } = column {
                        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
                            return Err(format!("column `{name}` holds {} at row {}", data[i], i / width.max(&1)));
                        }
                    }
                }
                &r.episodes
            }
            Self::Gradients(g) => {
                if let Some(n) = num_params.filter(|&n| n != g.grads.len()) {
                    return Err(format!("a gradient of {} values for {n} weights", g.grads.len()));
                }
                if let Some(i) = g.grads.iter().position(|x| !x.is_finite()) {
                    return Err(format!("gradient value {i} is {}", g.grads[i]));
                }
                &g.episodes
            }
            Self::Episodes(episodes) => episodes,
            Self::State(_) | Self::Done => return Ok(()),
        };
        match episodes.iter().find(|e| !e.episode_return.is_finite()) {
            Some(e) => Err(format!("an episode return of {}", e.episode_return)),
            None => Ok(()),
        }
    }
}

impl PolicyEvaluator {
    /// Serves one request: the one function every home of an evaluator
    /// calls. `index` is the evaluator's, recorded in a saved state.
    ///
    /// # Errors
    /// The operation's own error.
    pub fn serve(&mut self, request: &EvalRequest, index: usize) -> Result<EvalReply, EvaluatorError> {
        Ok(match request {
            EvalRequest::Sample => EvalReply::Rollout(self.sample()?),
            EvalRequest::SetWeights(w) | EvalRequest::PushWeights(w) => {
                self.set_weights(w)?;
                EvalReply::Done
            }
            EvalRequest::SampleAndComputeGradients => EvalReply::Gradients(self.sample_and_compute_gradients()?),
            EvalRequest::SetFilterStatistics(s) => {
                self.set_filter_statistics(s)?;
                EvalReply::Done
            }
            EvalRequest::SaveState => EvalReply::State(self.save_state(index)),
            EvalRequest::LoadState(s) => {
                self.load_state(s)?;
                EvalReply::Done
            }
            &EvalRequest::Evaluate { episodes, seed, explore } => {
                EvalReply::Episodes(self.evaluate(episodes, seed, explore)?)
            }
            EvalRequest::FinishOutput => {
                self.finish_output()?;
                EvalReply::Done
            }
        })
    }
}

/// The requests that bring a replacement evaluator up to date: the latest
/// weights and filter statistics a handle sent. Every handle whose
/// evaluator can be restarted keeps one.
#[derive(Clone, Debug, Default)]
pub struct LatestState {
    weights: Option<Arc<FlatWeights>>,
    filter: Option<Arc<RunningStat>>,
}

impl LatestState {
    /// How many weights the evaluator has, if a handle sent it any.
    pub fn num_params(&self) -> Option<usize> {
        self.weights.as_ref().map(|w| w.len())
    }

    /// Remembers `request` if it brings an evaluator up to date: new
    /// weights (`SetWeights`, `PushWeights`) or filter statistics.
    pub fn note(&mut self, request: &EvalRequest) {
        match request {
            EvalRequest::SetWeights(w) | EvalRequest::PushWeights(w) => self.weights = Some(w.clone()),
            EvalRequest::SetFilterStatistics(s) => self.filter = Some(s.clone()),
            _ => {}
        }
    }

    /// The requests to send a replacement, weights first.
    pub fn replay(&self) -> Vec<EvalRequest> {
        let weights = self.weights.clone().map(EvalRequest::SetWeights);
        let filter = self.filter.clone().map(EvalRequest::SetFilterStatistics);
        weights.into_iter().chain(filter).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample_batch::SampleBatch;
    use crate::EpisodeSummary;

    fn rollout(obs_width: usize, value: f32) -> EvalReply {
        let mut batch = SampleBatch::new();
        batch.insert_f32(fields::OBS, vec![value; 2 * obs_width], obs_width).unwrap();
        batch.insert_i64(fields::ACTIONS, vec![0, 1], 1).unwrap();
        let episodes = vec![EpisodeSummary { episode_return: 1.0, length: 2, truncated: false, agent: None }];
        EvalReply::Rollout(Rollout { batch, episodes, ..Rollout::default() })
    }

    /// What a remote node's reply is checked for before the driver uses it.
    #[test]
    fn a_reply_with_wrong_widths_lengths_or_non_finite_numbers_is_refused() {
        let shape = RowShape { obs: 4, actions: 1, packed: None };
        assert_eq!(rollout(4, 0.5).check(None, Some(shape.clone())), Ok(()));
        let EvalReply::Rollout(mut repeats) = rollout(4, 0.5) else { unreachable!() };
        repeats.repeated_rows = 3;
        let err = EvalReply::Rollout(repeats).check(None, Some(shape.clone())).unwrap_err();
        assert!(err.contains("3 repeated rows in a batch of 2"), "{err}");
        let err = rollout(3, 0.5).check(None, Some(shape.clone())).unwrap_err();
        assert!(err.contains("`obs` is 3 wide") && err.contains('4'), "{err}");
        assert!(rollout(4, f32::NAN).check(None, Some(shape)).unwrap_err().contains("`obs` holds NaN"));
        // Packed rows of a Dict with an image: their width in bytes, their floats finite.
        let space = crate::Space::dict(vec![
            ("image".into(), crate::Space::bytes(vec![1, 2, 1])),
            ("speed".into(), crate::Space::uniform_box(-1.0, 1.0, vec![1]).unwrap()),
        ])
        .unwrap();
        let packed = |speed: f32| {
            let mut bytes = Vec::new();
            space.pack_rows(&[0.0, 1.0, speed, 1.0, 0.0, speed], &mut bytes).unwrap();
            let mut batch = SampleBatch::new();
            batch.insert(fields::OBS, Column::U8 { data: bytes, width: 6 }).unwrap();
            batch.insert_i64(fields::ACTIONS, vec![0, 1], 1).unwrap();
            EvalReply::Rollout(Rollout { batch, ..Rollout::default() })
        };
        let shape = RowShape::of(&space, &crate::Space::discrete(2));
        assert_eq!((shape.obs, shape.packed.is_some()), (3, true));
        assert_eq!(packed(0.5).check(None, Some(shape.clone())), Ok(()));
        let err = packed(f32::NAN).check(None, Some(shape.clone())).unwrap_err();
        assert!(err.contains("`obs` holds NaN at row 0"), "{err}");
        let err = rollout(4, 0.5).check(None, Some(shape)).unwrap_err();
        assert!(err.contains("`obs` is 4 wide, the env's space 3"), "{err}");
        let gradients = |grads: Vec<f32>| EvalReply::Gradients(GradientRollout { grads, ..Default::default() });
        assert_eq!(gradients(vec![0.1; 8]).check(Some(8), None), Ok(()));
        assert!(gradients(vec![0.1; 7]).check(Some(8), None).unwrap_err().contains("7 values for 8 weights"));
        assert!(gradients(vec![f32::INFINITY; 8]).check(Some(8), None).unwrap_err().contains("inf"));
    }

    #[test]
    fn a_replacement_gets_the_latest_weights_then_the_latest_filter() {
        let mut latest = LatestState::default();
        assert!(latest.replay().is_empty());
        let filter = Arc::new(RunningStat::new(1));
        latest.note(&EvalRequest::SetFilterStatistics(filter.clone()));
        latest.note(&EvalRequest::SetWeights(Arc::new(vec![1.0])));
        latest.note(&EvalRequest::Sample);
        latest.note(&EvalRequest::PushWeights(Arc::new(vec![2.0])));
        let replay = latest.replay();
        assert_eq!(
            replay,
            vec![EvalRequest::SetWeights(Arc::new(vec![2.0])), EvalRequest::SetFilterStatistics(filter)]
        );
        latest.note(&EvalRequest::SaveState);
        assert_eq!(latest.replay().len(), 2, "a snapshot request brings nothing up to date");
    }
}
