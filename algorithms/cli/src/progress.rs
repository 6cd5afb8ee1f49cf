//! What `rlx train` prints while it runs.

use indicatif::{ProgressBar, ProgressStyle};
use rlx::{StopCriteria, TrainResult};
use std::io::IsTerminal;
use std::time::Duration;

/// A progress bar on a terminal (a bar when a stop criterion counts
/// iterations or steps, a spinner otherwise), one line per iteration when
/// output goes to a file or pipe.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    /// What the bar counts: iterations (`true`) or env steps.
    by_iteration: bool,
}

impl Progress {
    pub(crate) fn new(stop: &StopCriteria, start: &TrainResult) -> Self {
        // A bar only when a person watches both streams: `rlx train | tee
        // log` gets one line per iteration.
        if !(std::io::stderr().is_terminal() && std::io::stdout().is_terminal()) {
            return Self { bar: None, by_iteration: false };
        }
        let (bar, by_iteration) = match (stop.training_iteration, stop.timesteps_total) {
            (Some(n), _) => (ProgressBar::new(n), true),
            (None, Some(n)) => (ProgressBar::new(n), false),
            (None, None) => (ProgressBar::new_spinner(), false),
        };
        let template = if bar.length().is_some() {
            "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}%\n{msg}"
        } else {
            "{spinner} [{elapsed_precise}] {msg}"
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        bar.set_position(if by_iteration { start.training_iteration } else { start.timesteps_total });
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar: Some(bar), by_iteration }
    }

    fn line(r: &TrainResult) -> String {
        // The evaluation's greedy mean, when this iteration ran one.
        let eval = r.evaluation.as_ref().map_or(String::new(), |e| format!("  eval {:.1}", e.episode_reward_mean));
        // A multi-agent run's return per policy.
        let policies: String = r
            .policy_reward_mean
            .iter()
            .map(|(id, mean)| format!("  {id} {}", mean.map_or("-".into(), |v| format!("{v:.1}"))))
            .collect();
        // A run with nodes: those alive of those it knows.
        let nodes = r.cluster.map_or(String::new(), |c| format!("  nodes {}/{}", c.nodes_alive, c.nodes_known));
        format!(
            "iter {:>4}  steps {:>9}  return {:>7}{policies}{eval}  len {:>6}  {:>8.0} steps/s  restarts {}{nodes}  t {:.1}s",
            r.training_iteration,
            r.timesteps_total,
            r.episode_reward_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.episode_len_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.env_steps_per_s,
            r.num_evaluator_restarts,
            r.time_total_s,
        )
    }

    pub(crate) fn report(&mut self, r: &TrainResult) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(if self.by_iteration { r.training_iteration } else { r.timesteps_total });
                bar.set_message(Self::line(r));
            }
            None => outln!("{}", Self::line(r)),
        }
    }

    pub(crate) fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => outln!("{text}"),
        }
    }

    pub(crate) fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }

    pub(crate) fn finish(&mut self, r: &TrainResult, interrupted: bool) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            outln!("{}", Self::line(r));
        }
        outln!(
            "{}: mean return {}{} after {} env steps in {:.1} s",
            if interrupted { "interrupted" } else { "done" },
            r.episode_reward_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.evaluation.as_ref().map_or(String::new(), |e| format!(
                ", evaluation {:.1} over {} episodes",
                e.episode_reward_mean, e.episodes
            )),
            r.timesteps_total,
            r.time_total_s
        );
    }
}
