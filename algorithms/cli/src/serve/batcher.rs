//! The thread that owns the policy: it gathers concurrent requests into one
//! batch (up to a number of rows, or until a wait runs out), acts on the
//! batch in one call, and answers each request with its rows. A newer
//! model replaces the policy between two batches, so no request is
//! dropped and each is answered by one model.

use rlx::filter::MeanStdFilter;
use rlx::{fields, Column, PolicyGraph, PolicyInput, SampleBatch, Space};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A policy ready to serve.
pub struct Model {
    /// The policy, its weights and state loaded.
    pub policy: Box<dyn PolicyGraph>,
    /// The run's observation filter.
    pub filter: Option<MeanStdFilter>,
    /// The checkpoint's training iteration: the model's version.
    pub version: u64,
}

/// Rows to act on, and where to send the answer.
pub struct Job {
    /// Observation rows, `rows × width`.
    pub obs: Vec<f32>,
    /// Rows.
    pub rows: usize,
    /// Recurrent state rows (`rows × state width`); `None` starts episodes.
    pub state: Option<Vec<f32>>,
    /// Action mask rows; `None`: every action legal.
    pub mask: Option<Vec<f32>>,
    /// Sample instead of acting greedily.
    pub explore: bool,
    /// The answer.
    pub reply: oneshot::Sender<Result<Answer, String>>,
}

/// The answer to one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The job's actions: whole numbers (`width` per row) or floats.
    pub actions: Column,
    /// Each row's next recurrent state, for a recurrent policy.
    pub state: Option<Vec<f32>>,
    /// Width of a state row.
    pub state_width: usize,
    /// The version of the model that answered.
    pub version: u64,
    /// Rows of the batch the job was part of.
    pub batch_rows: usize,
}

/// What the thread receives.
pub enum Message {
    /// A request.
    Job(Job),
    /// A newer model, to take over after the current batch.
    Swap(Box<Model>),
}

/// How batches form.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    /// Rows at which a batch runs at once.
    pub max_rows: usize,
    /// How long the first request of a batch waits for others.
    pub wait: Duration,
}

/// Runs until every sender is dropped.
pub fn run(mut model: Model, inbox: Receiver<Message>, batching: Batching, on_batch: impl Fn(usize, u64)) {
    let mut pending: Option<Box<Model>> = None;
    while let Ok(first) = inbox.recv() {
        let mut jobs = match first {
            Message::Swap(next) => {
                model = *next;
                on_batch(0, model.version);
                continue;
            }
            Message::Job(job) => vec![job],
        };
        let deadline = Instant::now() + batching.wait;
        let mut rows = jobs[0].rows;
        while rows < batching.max_rows {
            let left = deadline.saturating_duration_since(Instant::now());
            match inbox.recv_timeout(left) {
                Ok(Message::Job(job)) => {
                    rows += job.rows;
                    jobs.push(job);
                }
                // Taken over after this batch, which the current model answers.
                Ok(Message::Swap(next)) => pending = Some(next),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        // Greedy and exploring requests act in separate calls.
        for explore in [false, true] {
            let (these, rest): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.explore == explore);
            jobs = rest;
            if !these.is_empty() {
                act(&mut model, these, explore, rows);
            }
        }
        on_batch(rows, model.version);
        if let Some(next) = pending.take() {
            model = *next;
            on_batch(0, model.version);
        }
    }
}

/// Acts on `jobs` in one call and answers each.
fn act(model: &mut Model, jobs: Vec<Job>, explore: bool, batch_rows: usize) {
    let state_width = model.policy.recurrent_state_size();
    let mask_width = model.policy.action_space().mask_width().unwrap_or(0);
    let any_mask = jobs.iter().any(|j| j.mask.is_some());
    let (mut obs, mut state, mut mask) = (Vec::new(), Vec::new(), Vec::new());
    for job in &jobs {
        obs.extend_from_slice(&job.obs);
        match &job.state {
            Some(s) => state.extend_from_slice(s),
            None => state.extend(std::iter::repeat_n(0.0, job.rows * state_width)),
        }
        if any_mask {
            match &job.mask {
                Some(m) => mask.extend_from_slice(m),
                None => mask.extend(std::iter::repeat_n(1.0, job.rows * mask_width)),
            }
        }
    }
    if let Some(f) = &model.filter {
        f.normalize(&mut obs);
    }
    let input = PolicyInput {
        obs: &obs,
        action_mask: any_mask.then_some(&mask[..]),
        state: (state_width > 0).then_some(&state[..]),
        explore,
    };
    let mut out = SampleBatch::new();
    let acted = model.policy.compute_actions_from_input(&input, &mut out).map_err(|e| e.to_string());
    let result = acted.and_then(|()| {
        let actions = out.get(fields::ACTIONS).cloned().ok_or("the policy wrote no actions")?;
        let next =
            if state_width > 0 { Some(out.f32(fields::STATE_OUT).map_err(|e| e.to_string())?.to_vec()) } else { None };
        Ok((actions, next))
    });
    let (actions, next) = match result {
        Ok(r) => r,
        Err(e) => {
            jobs.into_iter().for_each(|j| drop(j.reply.send(Err(e.clone()))));
            return;
        }
    };
    let space = model.policy.action_space().clone();
    let mut at = 0;
    for job in jobs {
        let rows = at..at + job.rows;
        at += job.rows;
        let answer = Answer {
            actions: rows_of(&actions, rows.clone(), &space),
            state: next.as_ref().map(|s| s[rows.start * state_width..rows.end * state_width].to_vec()),
            state_width,
            version: model.version,
            batch_rows,
        };
        let _ = job.reply.send(Ok(answer));
    }
}

/// Rows `rows` of an actions column; continuous actions clipped to the
/// space's bounds, as evaluators clip before stepping an env.
fn rows_of(actions: &Column, rows: std::ops::Range<usize>, space: &Space) -> Column {
    match actions {
        Column::I64 { data, width } => {
            Column::I64 { data: data[rows.start * width..rows.end * width].to_vec(), width: *width }
        }
        Column::F32 { data, width } => {
            let mut part = data[rows.start * width..rows.end * width].to_vec();
            space.clip(&mut part);
            Column::F32 { data: part, width: *width }
        }
        Column::U8 { data, width } => {
            Column::U8 { data: data[rows.start * width..rows.end * width].to_vec(), width: *width }
        }
    }
}
