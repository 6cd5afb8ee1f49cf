//! DreamerV3's world model (Hafner et al. 2023, section 2): a recurrent
//! state-space model whose state is a deterministic GRU state `h` and a
//! stochastic latent `z` of `C` categoricals with `K` classes each.
//!
//! ```text
//! sequence model    h_t = f(h_{t−1}, z_{t−1}, a_{t−1})
//! encoder           z_t ~ q(z | h_t, x_t)          (posterior, from the observation)
//! dynamics          ẑ_t ~ p(z | h_t)               (prior, without it)
//! decoder           x̂_t = d(h_t, z_t)              symlog(x) regressed with squared error
//! reward            r̂_t ~ R(h_t, z_t)              two-hot over symlog bins
//! continue          ĉ_t ~ C(h_t, z_t)              Bernoulli of 1 − terminal
//! ```
//!
//! The loss over `B` sequences of `T` steps is
//!
//! ```text
//! L = L_pred + 0.5 · max(1, KL[sg(q) ‖ p]) + 0.1 · max(1, KL[q ‖ sg(p)])
//! ```
//!
//! with `L_pred` the decoder's, reward's and continue's negative log
//! likelihoods, the two KL terms the same divergence with the gradient
//! stopped on either side ("KL balancing": the prior learns to predict
//! the posterior faster than the posterior is pulled towards the prior),
//! and the clip at 1 nat the free bits ([`free_bits`]). Every categorical
//! mixes in 1 % uniform ([`unimix`]); `z` is sampled with straight-through
//! gradients ([`straight_through`]).

use super::image::{ImageDecoder, ImageEncoder};
use super::math::{free_bits, mode_one_hot, sample_one_hot, straight_through, unimix, PerTrajectory, TwoHot};
use super::networks::{DenseStack, NormDense, NormGru};
use crate::common::deep_policy::Loss;
use crate::model::device::NetDevice;
use crate::model::{Matrix, Params, Taped};
use dfdx::prelude::*;
use rand::Rng;
use rlx::export::{LatentStep, Layer};
use rlx::{LearnerStats, PolicyError};

/// The share of uniform mixed into every categorical.
pub const UNIMIX: f32 = 0.01;
/// Free nats of each KL term per step.
pub const FREE_NATS: f32 = 1.0;
/// Weight of `KL[sg(q) ‖ p]`, which trains the prior.
pub const BETA_DYN: f32 = 0.5;
/// Weight of `KL[q ‖ sg(p)]`, which trains the posterior.
pub const BETA_REP: f32 = 0.1;

/// Widths of the world model's parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Units of every hidden layer.
    pub units: usize,
    /// Hidden layers of each network (encoder, decoder, heads, actor, critic).
    pub layers: usize,
    /// Units of the GRU state `h`.
    pub gru_units: usize,
    /// Categoricals `C` of `z`.
    pub categoricals: usize,
    /// Classes `K` of each.
    pub classes: usize,
    /// Channels of the image encoder's first stage, doubling at every
    /// stage after it ([`super::image`]).
    pub cnn_depth: usize,
}

impl Sizes {
    /// Values of `z` (one-hot per categorical).
    pub fn latent(&self) -> usize {
        self.categoricals * self.classes
    }

    /// The model state's features `[h, z]`, which the heads, actor and
    /// critic read.
    pub fn features(&self) -> usize {
        self.gru_units + self.latent()
    }
}

/// `B` sequences of `T` steps, time-major (row `t · B + b`), as the
/// networks read them.
pub struct Sequences {
    /// Observation features (symlog applied where it is on), `rows × F`.
    pub x: Vec<f32>,
    /// The previous action as the model reads it, `rows × A`.
    pub prev_actions: Vec<f32>,
    /// Rewards on arriving at each row.
    pub rewards: Vec<f32>,
    /// 1.0 where the row's observation is terminal.
    pub terminals: Vec<f32>,
    /// 1.0 where the model starts from its initial state.
    pub first: Vec<f32>,
    /// Sequences `B`.
    pub batch: usize,
}

/// The posterior states of every row of a batch (time-major): where
/// imagination starts.
pub struct Starts {
    /// `h`, `rows × gru_units`.
    pub h: Vec<f32>,
    /// `z` (the one-hot draws), `rows × latent`.
    pub z: Vec<f32>,
    /// 1.0 where the row's observation is terminal.
    pub terminals: Vec<f32>,
}

/// What the world model observes: rows of features, or channels-last
/// images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Rows of this many features.
    Vectors(usize),
    /// `(height, width, channels)` images.
    Images((usize, usize, usize)),
}

impl Observed {
    /// Features of one observation.
    pub fn features(self) -> usize {
        match self {
            Observed::Vectors(width) => width,
            Observed::Images((h, w, c)) => h * w * c,
        }
    }
}

/// The encoder of observations: a dense stack for vectors, convolutions
/// for images ([`super::image`]).
#[derive(Clone, Debug, PartialEq)]
enum Encoder {
    Dense(DenseStack),
    Conv(ImageEncoder),
}

impl Encoder {
    /// Features of an encoded observation.
    fn outputs(&self) -> usize {
        match self {
            Encoder::Dense(stack) => stack.outputs(),
            Encoder::Conv(conv) => conv.features(),
        }
    }

    fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        match self {
            Encoder::Dense(stack) => stack.forward(p, x),
            Encoder::Conv(conv) => conv.forward(p, x),
        }
    }
}

/// The decoder from the model state back to the observation.
#[derive(Clone, Debug, PartialEq)]
enum Decoder {
    Dense(DenseStack),
    Conv(ImageDecoder),
}

impl Decoder {
    fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, feats: Matrix<D, T>) -> Matrix<D, T> {
        match self {
            Decoder::Dense(stack) => stack.forward(p, feats),
            Decoder::Conv(conv) => conv.forward(p, feats),
        }
    }
}

/// The world model's networks (see the module docs).
pub struct WorldModel {
    sizes: Sizes,
    encoder: Encoder,
    input: NormDense,
    gru: NormGru,
    posterior: DenseStack,
    prior: DenseStack,
    decoder: Decoder,
    reward: DenseStack,
    cont: DenseStack,
    two_hot: TwoHot,
}

impl WorldModel {
    /// The networks for `observed` rows and actions of `action_inputs`
    /// model inputs, named `wm.…`.
    ///
    /// # Errors
    /// Images too small for the encoder ([`super::image::stage_sides`]).
    pub fn new<D: NetDevice>(
        p: &mut Params<D>,
        sizes: Sizes,
        observed: Observed,
        action_inputs: usize,
    ) -> Result<Self, String> {
        let (stack, u, g, f) = ((sizes.layers, sizes.units), sizes.units, sizes.gru_units, sizes.features());
        let encoder = match observed {
            Observed::Vectors(width) => Encoder::Dense(DenseStack::new(p, "wm.encoder", width, stack, u, false)),
            Observed::Images(image) => Encoder::Conv(ImageEncoder::new(p, "wm.encoder", image, sizes.cnn_depth)?),
        };
        let input = NormDense::new(p, "wm.gru_input", sizes.latent() + action_inputs, u);
        let gru = NormGru::new(p, "wm.gru", u, g);
        let posterior = DenseStack::new(p, "wm.posterior", g + encoder.outputs(), (1, u), sizes.latent(), false);
        let prior = DenseStack::new(p, "wm.prior", g, (1, u), sizes.latent(), false);
        let decoder = match &encoder {
            Encoder::Conv(conv) => Decoder::Conv(ImageDecoder::new(p, "wm.decoder", f, conv)),
            Encoder::Dense(_) => Decoder::Dense(DenseStack::new(p, "wm.decoder", f, stack, observed.features(), false)),
        };
        Ok(Self {
            sizes,
            encoder,
            input,
            gru,
            posterior,
            prior,
            decoder,
            reward: DenseStack::new(p, "wm.reward", f, stack, TwoHot::BINS, true),
            cont: DenseStack::new(p, "wm.continue", f, stack, 1, false),
            two_hot: TwoHot::new(),
        })
    }

    /// The widths.
    pub fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// `h_t = f(h_{t−1}, z_{t−1}, a_{t−1})` for every row; the weights
    /// get a gradient only if `weights_grad`.
    fn sequence<D: NetDevice, T: Tape<f32, D> + Merge<R>, R: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        (h, z, a): (Matrix<D, T>, Matrix<D, T>, Matrix<D, R>),
        weights_grad: bool,
    ) -> Matrix<D, T> {
        let x = self.input.forward(p, (z, a).concat_along(Axis::<1>), weights_grad);
        self.gru.step(p, x, h, weights_grad)
    }

    /// A categorical of every row of `logits` (`rows × latent`), mixed,
    /// as `(rows · C) × K` probabilities.
    fn latent_probs<D: NetDevice, T: Tape<f32, D>>(&self, logits: Matrix<D, T>) -> Matrix<D, T> {
        let rows = logits.shape().0;
        unimix(logits.reshape_like(&(rows * self.sizes.categoricals, self.sizes.classes)), UNIMIX)
    }

    /// One step of filtering while acting: the next `h`, and `z` from the
    /// posterior given the observation features `x`: a draw when
    /// `explore`, else each categorical's most likely class, so that
    /// greedy acting is deterministic (and what an exported model
    /// computes).
    pub fn observe_step<D: NetDevice>(
        &self,
        p: &Params<D>,
        (h, z, a): (Matrix<D>, Matrix<D>, Matrix<D>),
        x: Matrix<D>,
        (explore, rng): (bool, &mut impl Rng),
    ) -> (Matrix<D>, Vec<f32>) {
        let h = self.sequence(p, (h, z, a), true);
        let e = self.encoder.forward(p, x);
        let logits = self.posterior.forward(p, (h.clone(), e).concat_along(Axis::<1>));
        // The mixed probabilities rise with the logits: the mode is the
        // logits' arg max, taken on the logits so that no two of them
        // round to one probability.
        let z = if explore {
            sample_one_hot(&self.latent_probs(logits).as_vec(), self.sizes.classes, rng)
        } else {
            mode_one_hot(&logits.as_vec(), self.sizes.classes)
        };
        (h, z)
    }

    /// The encoder's layers, for export.
    pub fn exported_encoder<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        match &self.encoder {
            Encoder::Dense(stack) => stack.exported(p),
            Encoder::Conv(conv) => conv.exported(p),
        }
    }

    /// [`observe_step`](Self::observe_step) without exploring, for export,
    /// with actions of `action_inputs` model inputs.
    pub fn exported_step<D: NetDevice>(&self, p: &Params<D>, action_inputs: usize) -> LatentStep {
        LatentStep {
            gru_input: self.input.exported(p),
            gates: self.gru.exported_gates(p),
            units: self.sizes.gru_units,
            posterior: self.posterior.exported(p),
            categoricals: self.sizes.categoricals,
            classes: self.sizes.classes,
            action_inputs,
        }
    }

    /// One step of imagination: the next `h`, and a draw of `z` from the
    /// prior as a straight-through sample. On a tape, the step records
    /// how both depend on the last state and action (the actor of
    /// continuous actions learns through it); the weights are constants
    /// of the step, which trains nothing of the world model.
    pub fn imagine_step<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        (h, z, a): (Matrix<D, T>, Matrix<D, T>, Matrix<D, T>),
        rng: &mut impl Rng,
    ) -> (Matrix<D, T>, Matrix<D, T>) {
        let h = self.sequence(p, (h, z, a), false);
        let probs = self.latent_probs(self.prior.forward_with(p, h.with_empty_tape(), false));
        let draw = sample_one_hot(&probs.as_vec(), self.sizes.classes, rng);
        let rows = h.shape().0;
        (h, straight_through(probs, &draw).reshape_like(&(rows, self.sizes.latent())))
    }

    /// The predicted reward (raw units) of every row of features `[h, z]`,
    /// on the tape `T` if it is one, the head's weights constants of the
    /// pass (imagination's, which trains nothing of the world model); and
    /// the probability that each row goes on, a constant: on the tape it
    /// would let the actor raise its returns by steering to where the
    /// head is unsure whether the episode ends. (The paper's first code
    /// and RLlib take the head's most likely flag, 1 or 0; on CartPole
    /// that needed more env steps on two seeds of three, see the book.)
    pub fn reward_and_continue<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        feats: Matrix<D, T>,
    ) -> (PerTrajectory<D, T>, Vec<f32>) {
        let goes_on = self.cont.forward_with(p, feats.retaped::<NoneTape>(), false).sigmoid().as_vec();
        (self.two_hot.predict(self.reward.forward_with(p, feats, false)), goes_on)
    }

    /// The world model's loss on `seqs` (see the module docs), the
    /// posterior states as imagination's starts, and the loss's parts.
    ///
    /// # Errors
    /// Sequences whose columns do not fit the model.
    pub fn loss<D: NetDevice>(
        &self,
        p: &Params<D>,
        seqs: &Sequences,
        rng: &mut impl Rng,
    ) -> Result<(Loss<D>, Starts, LearnerStats), PolicyError> {
        let (b, rows) = (seqs.batch, seqs.rewards.len());
        let (g, latent, obs_features) = (self.sizes.gru_units, self.sizes.latent(), seqs.x.len() / rows.max(1));
        let actions = seqs.prev_actions.len() / rows.max(1);
        if rows == 0 || !rows.is_multiple_of(b) || seqs.first.len() != rows || seqs.terminals.len() != rows {
            return Err(PolicyError::Other(format!("{rows} rows are not whole sequences of {b} side by side")));
        }
        let dev = p.device().clone();
        let x = dev.tensor_from_vec(seqs.x.clone(), (rows, obs_features));
        // The encoder runs on all rows at once; each step slices its rows,
        // and the encoder's own tape joins the loss at the end.
        let (embed, encoder_tape) = self.encoder.forward(p, x.retaped::<Taped<D>>()).split_tape();
        let mut h = dev.zeros_like(&(b, g)).retaped::<Taped<D>>();
        let mut z = dev.zeros_like(&(b, latent)).retaped::<Taped<D>>();
        let (mut hs, mut zs, mut posts) = (Vec::new(), Vec::new(), Vec::new());
        let mut draws = Vec::with_capacity(rows * latent);
        for (t, at) in (0..rows).step_by(b).enumerate() {
            // Sequences that start here start from the initial state.
            let keep = dev.tensor_from_vec(seqs.first[at..at + b].iter().map(|f| 1.0 - f).collect(), (b,));
            let h_prev = h * keep.clone().broadcast_like::<(usize, usize), Axis<1>>(&(b, g));
            let z_prev = z * keep.broadcast_like::<(usize, usize), Axis<1>>(&(b, latent));
            let a = dev.tensor_from_vec(seqs.prev_actions[at * actions..(at + b) * actions].to_vec(), (b, actions));
            h = self.sequence(p, (h_prev, z_prev, a), true);
            let e = embed.clone().retaped::<Taped<D>>().slice((t * b..(t + 1) * b, ..));
            let post = self.posterior.forward(p, (h.with_empty_tape(), e).concat_along(Axis::<1>));
            let probs = self.latent_probs(post.with_empty_tape());
            let draw = sample_one_hot(&probs.as_vec(), self.sizes.classes, rng);
            z = straight_through(probs, &draw).reshape_like(&(b, latent));
            draws.extend(draw);
            hs.push(h.with_empty_tape());
            zs.push(z.with_empty_tape());
            posts.push(post);
        }
        // The last h and z hold every step's operations on their tapes.
        let chain_tape = encoder_tape.merge(h.split_tape().1).merge(z.split_tape().1);
        let h_all = hs.stack().reshape_like(&(rows, g));
        let z_all = zs.stack().reshape_like(&(rows, latent));
        let posterior = posts.stack().reshape_like(&(rows, latent));
        let starts = Starts { h: h_all.as_vec(), z: draws, terminals: seqs.terminals.clone() };
        let prior = self.prior.forward(p, h_all.with_empty_tape());
        let feats = (h_all, z_all).concat_along(Axis::<1>);

        let (dynamics, representation) = self.kl_terms(posterior, prior);
        let kl = dynamics.as_vec();
        let mask = dev.tensor_from_vec(free_bits(&kl, FREE_NATS), (rows,));
        let l_dyn = (dynamics * mask.clone()).mean();
        let l_rep = (representation * mask).mean();
        let target = dev.tensor_from_vec(seqs.x.clone(), (rows, obs_features));
        let decoded = self.decoder.forward(p, feats.with_empty_tape());
        let l_dec = (decoded - target).square().sum::<(usize,), Axis<1>>().mean();
        let bins = dev.tensor_from_vec(self.two_hot.encode_all(&seqs.rewards), (rows, TwoHot::BINS));
        let reward_logp = D::log_softmax_rows(self.reward.forward(p, feats.with_empty_tape()));
        let l_rew = (reward_logp * bins).sum::<(usize,), Axis<1>>().mean().negate();
        let logit = self.cont.forward(p, feats).reshape_like(&(rows,));
        let continues = dev.tensor_from_vec(seqs.terminals.iter().map(|d| 1.0 - d).collect(), (rows,));
        let l_cont = (softplus(logit.with_empty_tape()) - logit * continues).mean();

        let mut stats = LearnerStats::default();
        let value = |l: &Tensor<Rank0, f32, D, Taped<D>>| f64::from(l.as_vec()[0]);
        stats.set("decoder_loss", value(&l_dec));
        stats.set("reward_loss", value(&l_rew));
        stats.set("continue_loss", value(&l_cont));
        stats.set("kl", kl.iter().map(|&k| f64::from(k)).sum::<f64>() / rows as f64);
        let clipped = kl.iter().map(|&k| f64::from(k.max(FREE_NATS))).sum::<f64>() / rows as f64;
        stats.set("dynamics_loss", clipped);
        let loss = l_dec + l_rew + l_cont + l_dyn * BETA_DYN + l_rep * BETA_REP;
        let (loss, tape) = loss.split_tape();
        let loss = loss.put_tape(tape.merge(chain_tape));
        stats.set("world_model_loss", value(&loss) + f64::from(BETA_DYN + BETA_REP) * (clipped - kl_masked(&kl)));
        Ok((loss, starts, stats))
    }

    /// `KL[sg(q) ‖ p]` and `KL[q ‖ sg(p)]` of every row, summed over its
    /// categoricals: the same values, with the gradient on `p` (the
    /// dynamics term) or on `q` (the representation term) alone.
    fn kl_terms<D: NetDevice>(
        &self,
        posterior: Matrix<D, Taped<D>>,
        prior: Matrix<D, Taped<D>>,
    ) -> (Tensor<(usize,), f32, D, Taped<D>>, Tensor<(usize,), f32, D, Taped<D>>) {
        let rows = posterior.shape().0;
        let (q, p) = (self.latent_probs(posterior), self.latent_probs(prior));
        let dev = q.device().clone();
        let shape = *q.shape();
        let q_fixed = dev.tensor_from_vec(q.as_vec(), shape);
        let p_fixed = dev.tensor_from_vec(p.as_vec(), shape);
        let per_row = |t: Matrix<D, Taped<D>>| t.reshape_like(&(rows, self.sizes.latent())).sum::<(usize,), Axis<1>>();
        let dynamics = per_row((p.ln().negate() + q_fixed.clone().ln()) * q_fixed);
        let representation = per_row((q.with_empty_tape().ln() - p_fixed.ln()) * q);
        (dynamics, representation)
    }
}

/// `ln(1 + eˣ)`, computed as `max(x, 0) + ln(1 + e^{−|x|})` so that it
/// never overflows.
pub fn softplus<D: NetDevice, S: Shape, T: Tape<f32, D>>(x: Tensor<S, f32, D, T>) -> Tensor<S, f32, D, T> {
    x.with_empty_tape().relu() + (x.abs().negate().exp() + 1.0).ln()
}

/// The mean of the KL values above the free nats, 0 below (what the
/// masked terms add up to, for the reported loss).
fn kl_masked(kl: &[f32]) -> f64 {
    kl.iter().map(|&k| if k > FREE_NATS { f64::from(k) } else { 0.0 }).sum::<f64>() / kl.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn tiny() -> (Params<Cpu>, WorldModel) {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let sizes = Sizes { units: 8, layers: 1, gru_units: 6, categoricals: 2, classes: 3, cnn_depth: 2 };
        let wm = WorldModel::new(&mut p, sizes, Observed::Vectors(3), 2).unwrap();
        (p, wm)
    }

    /// The softmax of `logits` mixed with 1 % uniform, by hand.
    fn mixed(logits: &[f32]) -> Vec<f32> {
        let total: f32 = logits.iter().map(|x| x.exp()).sum();
        logits.iter().map(|x| 0.99 * x.exp() / total + 0.01 / logits.len() as f32).collect()
    }

    #[test]
    fn kl_balancing_puts_each_terms_gradient_on_one_side_and_free_bits_cut_it() {
        let (p, wm) = tiny();
        let dev = p.device().clone();
        // Two rows of 2 categoricals × 3 classes: the first far apart, the
        // second close (its KL below one nat).
        let q = vec![4.0f32, 0.0, -4.0, 0.0, 3.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.2];
        let pr = vec![-4.0f32, 0.0, 4.0, 2.0, -2.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.1, 0.0];
        let by_hand: Vec<f32> = (0..2)
            .map(|r| {
                let kl = |at: usize| {
                    let (a, b) = (mixed(&q[at..at + 3]), mixed(&pr[at..at + 3]));
                    a.iter().zip(&b).map(|(x, y)| x * (x / y).ln()).sum::<f32>()
                };
                kl(r * 6) + kl(r * 6 + 3)
            })
            .collect();
        assert!(by_hand[0] > FREE_NATS && by_hand[1] < FREE_NATS, "{by_hand:?}");
        // The gradient of one term, masked by the free bits, with respect
        // to the posterior's and the prior's logits.
        let gradient = |dynamics_term: bool| {
            let q_leaf = dev.tensor_from_vec(q.clone(), (2usize, 6usize));
            let p_leaf = dev.tensor_from_vec(pr.clone(), (2usize, 6usize));
            let (dynamics, representation) = wm.kl_terms(q_leaf.clone().leaky_traced(), p_leaf.clone().leaky_traced());
            for (values, name) in [(dynamics.as_vec(), "dynamics"), (representation.as_vec(), "representation")] {
                for r in 0..2 {
                    assert!((values[r] - by_hand[r]).abs() < 1e-4, "{name} row {r}: {values:?} vs {by_hand:?}");
                }
            }
            let mask = dev.tensor_from_vec(free_bits(&dynamics.as_vec(), FREE_NATS), (2usize,));
            let term = if dynamics_term { dynamics } else { representation };
            // Zero terms on both leaves, so that each has a gradient to read.
            let zero = |leaf: &Tensor<(usize, usize), f32, Cpu>| (leaf.clone().leaky_traced() * 0.0).sum::<Rank0, _>();
            let loss = (term * mask).sum::<Rank0, _>() + zero(&q_leaf) + zero(&p_leaf);
            let grads = loss.backward();
            (grads.get(&q_leaf).as_vec(), grads.get(&p_leaf).as_vec())
        };
        let (dq, dp) = gradient(true);
        assert!(dq.iter().all(|g| *g == 0.0), "the dynamics term leaves the posterior alone: {dq:?}");
        assert!(dp[..6].iter().any(|g| g.abs() > 1e-3) && dp[6..].iter().all(|g| *g == 0.0), "{dp:?}");
        let (dq, dp) = gradient(false);
        assert!(dp.iter().all(|g| *g == 0.0), "the representation term leaves the prior alone: {dp:?}");
        assert!(dq[..6].iter().any(|g| g.abs() > 1e-3) && dq[6..].iter().all(|g| *g == 0.0), "{dq:?}");
    }

    #[test]
    fn the_loss_reaches_every_network_of_the_world_model() {
        let (p, wm) = tiny();
        let rows = 8;
        let seqs = Sequences {
            x: (0..rows * 3).map(|i| (i as f32 * 0.3).sin()).collect(),
            prev_actions: (0..rows * 2).map(|i| (i % 2) as f32).collect(),
            rewards: (0..rows).map(|i| i as f32 * 0.5).collect(),
            terminals: (0..rows).map(|i| if i == 7 { 1.0 } else { 0.0 }).collect(),
            first: (0..rows).map(|i| if i < 2 { 1.0 } else { 0.0 }).collect(),
            batch: 2,
        };
        let (loss, starts, stats) = wm.loss(&p, &seqs, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
        assert_eq!((starts.h.len(), starts.z.len()), (rows * 6, rows * 6));
        assert!(stats.get("world_model_loss").unwrap().is_finite() && stats.get("kl").is_some(), "{stats:?}");
        let grad = p.grads(&mut loss.backward(), 0..p.len());
        // Every tensor gets a gradient, but the reward head's hidden layer
        // (its output layer starts at zero weights) and the prior, which
        // learns only from the KL terms: below the free nats at the start.
        let mut at = 0;
        let mut silent = Vec::new();
        for (name, _, values) in p.named() {
            let span = at..at + values.len();
            at = span.end;
            let exempt = name.starts_with("wm.reward.0") || name.starts_with("wm.prior");
            if !exempt && grad[span].iter().all(|g| *g == 0.0) {
                silent.push(name);
            }
        }
        assert!(silent.is_empty(), "tensors without a gradient: {silent:?}");
        let bad = Sequences { batch: 3, ..seqs };
        assert!(wm.loss(&p, &bad, &mut ChaCha8Rng::seed_from_u64(0)).is_err());
    }
}
