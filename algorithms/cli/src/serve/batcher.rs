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

/// Runs until every sender is dropped. `on_batch(rows, version)` is told
/// of each batch before its answers go out (and of each new model, with 0
/// rows), so that whoever reads the counters after an answer sees its
/// batch.
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
        let (greedy, exploring): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| !j.explore);
        let mut answers = answer(&mut model, greedy, false);
        answers.extend(answer(&mut model, exploring, true));
        on_batch(rows, model.version);
        for (reply, result) in answers {
            let _ = reply.send(result);
        }
        if let Some(next) = pending.take() {
            model = *next;
            on_batch(0, model.version);
        }
    }
}

type Reply = oneshot::Sender<Result<Answer, String>>;

/// The answers to `jobs`: acted on in one call; if that call fails, each
/// job on its own, so that one request's bad rows (a mask leaving no legal
/// action, a discrete value outside its space) fail that request alone.
fn answer(model: &mut Model, jobs: Vec<Job>, explore: bool) -> Vec<(Reply, Result<Answer, String>)> {
    if jobs.is_empty() {
        return Vec::new();
    }
    match act(model, &jobs, explore) {
        Ok(answers) => jobs.into_iter().map(|j| j.reply).zip(answers.into_iter().map(Ok)).collect(),
        Err(_) if jobs.len() > 1 => jobs
            .into_iter()
            .map(|job| {
                let result = act(model, std::slice::from_ref(&job), explore).map(|mut a| a.remove(0));
                (job.reply, result)
            })
            .collect(),
        Err(e) => jobs.into_iter().map(|j| (j.reply, Err(e.clone()))).collect(),
    }
}

/// Acts on `jobs` in one call: each job's answer, in order.
fn act(model: &mut Model, jobs: &[Job], explore: bool) -> Result<Vec<Answer>, String> {
    let state_width = model.policy.recurrent_state_size();
    let mask_width = model.policy.action_space().mask_width().unwrap_or(0);
    let any_mask = jobs.iter().any(|j| j.mask.is_some());
    let (mut obs, mut state, mut mask) = (Vec::new(), Vec::new(), Vec::new());
    for job in jobs {
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
    model.policy.compute_actions_from_input(&input, &mut out).map_err(|e| e.to_string())?;
    let actions = out.get(fields::ACTIONS).cloned().ok_or("the policy wrote no actions")?;
    let next =
        if state_width > 0 { Some(out.f32(fields::STATE_OUT).map_err(|e| e.to_string())?.to_vec()) } else { None };
    let space = model.policy.action_space().clone();
    let mut at = 0;
    let mut answers = Vec::with_capacity(jobs.len());
    for job in jobs {
        let rows = at..at + job.rows;
        at += job.rows;
        answers.push(Answer {
            actions: rows_of(&actions, rows.clone(), &space),
            state: next.as_ref().map(|s| s[rows.start * state_width..rows.end * state_width].to_vec()),
            state_width,
            version: model.version,
        });
    }
    Ok(answers)
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
