//! `rlx-compare`: the rlx side of the side-by-side benchmark, and the table.
//!
//! ```text
//! cargo run --release -p rlx-benches --bin rlx-compare -- measure --out benches/reference/results/rlx.json
//! bash benches/reference/run.sh --out benches/reference/results/reference.json
//! cargo run --release -p rlx-benches --bin rlx-compare -- table \
//!     --rlx benches/reference/results/rlx.json --reference benches/reference/results/reference.json
//! ```
//!
//! `measure` runs the same workloads as `benches/reference/harness.py` does
//! for RLlib and Stable-Baselines3 (raw CartPole stepping, PPO-policy sampling
//! with 0/1/2 evaluators and 8 envs each, PPO and DQN until the 100-episode
//! mean return and a greedy evaluation of 10 episodes both reach 475) and
//! writes one JSON file. Each solve runs in a
//! child process of this tool, so its peak memory (`VmHWM`, the kernel's
//! high-water mark of resident memory) is that run's alone. `table` turns
//! the two files into one Markdown table of ratios.

use clap::{Parser, Subcommand};
use rlx::operators::parallel_rollouts;
use rlx::{Action, Env};
use rlx_algorithms::build_trainer;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STEPS_PER_SAMPLE: usize = 4096;
const SOLVE_RETURN: f64 = 475.0;

#[derive(Parser)]
#[command(about = "Measure rlx on the reference workloads, and tabulate rlx against RLlib and SB3")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure every workload and write the rlx side as JSON.
    Measure {
        /// Where to write the JSON (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seed of the solve runs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Measuring time per throughput workload, in seconds.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Env-step budget per solve run.
        #[arg(long, default_value_t = 1_000_000)]
        budget_steps: u64,
        /// The tuned PPO experiment file (RLlib's and the SB3 zoo's tuned
        /// CartPole configs run on the reference side); PPO also runs with
        /// its defaults.
        #[arg(long, default_value = "tuned_examples/ppo-cartpole.yaml")]
        ppo_tuned: PathBuf,
    },
    /// Train one algorithm on CartPole-v1 until the 100-episode mean return
    /// and a greedy evaluation both reach 475 (or the budget ends); print
    /// one JSON line with each criterion's time and steps and this
    /// process's peak memory. `measure` runs this as a child process.
    Solve {
        /// The algorithm (e.g. PPO, DQN).
        #[arg(long)]
        run: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 1_000_000)]
        budget_steps: u64,
        /// Config overrides (JSON); `seed` is set from `--seed`.
        #[arg(long, default_value = "{}")]
        config: String,
    },
    /// Print the Markdown table of rlx against the reference side. Each side
    /// may be several runs: each figure is then the median over the runs
    /// that measured it.
    Table {
        /// JSON written by `rlx-compare measure` (repeat for several runs).
        #[arg(long, required = true, num_args = 1..)]
        rlx: Vec<PathBuf>,
        /// JSON written by `benches/reference/harness.py` (repeat for several runs).
        #[arg(long, required = true, num_args = 1..)]
        reference: Vec<PathBuf>,
    },
}

fn main() {
    let result = match Cli::parse().command {
        Cmd::Measure { out, seed, seconds, budget_steps, ppo_tuned } => {
            measure(out, seed, seconds, budget_steps, &ppo_tuned)
        }
        Cmd::Solve { run, seed, budget_steps, config } => {
            solve(&run, seed, budget_steps, &config).map(|v| println!("{v}"))
        }
        Cmd::Table { rlx, reference } => table(&rlx, &reference).map(|t| print!("{t}")),
    };
    if let Err(e) = result {
        eprintln!("rlx-compare: {e}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, String>;

fn measure(out: Option<PathBuf>, seed: u64, seconds: f64, budget_steps: u64, ppo_tuned: &Path) -> Result<()> {
    let tuned = tuned_config(ppo_tuned)?.to_string();
    let seconds = Duration::from_secs_f64(seconds);
    let mut workloads = serde_json::Map::new();
    eprintln!("[rlx-compare] raw_cartpole");
    workloads.insert("raw_cartpole".into(), json!({"steps_per_s": raw_cartpole(seconds)}));
    let rt = rlx_benches::runtime();
    for workers in [0usize, 1, 2] {
        eprintln!("[rlx-compare] sampling with {workers} evaluators");
        let rate = rt.block_on(sampling(workers, seconds))?;
        workloads.insert(
            format!("sampling_{workers}"),
            json!({"runners": workers, "envs_per_runner": 8, "steps_per_s": rate}),
        );
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    // Both criteria: a greedy evaluation of 10 episodes every 10 iterations
    // (about 10k env steps for PPO and DQN) besides the training mean.
    let evaluated = |config: &str| -> Result<String> {
        let mut v: Value = serde_json::from_str(config).map_err(|e| format!("bad solve config: {e}"))?;
        v["evaluation_interval"] = json!(10);
        v["evaluation_duration"] = json!(10);
        Ok(v.to_string())
    };
    let (defaults, tuned_evaluated) = (evaluated("{}")?, evaluated(&tuned)?);
    for (run, key, config) in [
        ("PPO", "ppo_solve", defaults.as_str()),
        ("PPO", "ppo_tuned_solve", tuned_evaluated.as_str()),
        ("DQN", "dqn_solve", defaults.as_str()),
    ] {
        eprintln!("[rlx-compare] {run} to {SOLVE_RETURN}, config {config}");
        let output = Command::new(&me)
            .args(["solve", "--run", run, "--seed", &seed.to_string(), "--budget-steps", &budget_steps.to_string()])
            .args(["--config", config])
            .output()
            .map_err(|e| format!("cannot start the {run} solve run: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout.lines().rev().find(|l| l.starts_with('{'));
        let value = match (output.status.success(), line) {
            (true, Some(line)) => {
                serde_json::from_str(line).map_err(|e| format!("{run} solve printed bad JSON: {e}"))?
            }
            _ => {
                json!({"error": format!("{}; stderr: {}", output.status, String::from_utf8_lossy(&output.stderr).trim())})
            }
        };
        eprintln!("[rlx-compare]   -> {value}");
        workloads.insert(key.into(), value);
    }
    let report = json!({
        "side": "rlx",
        "date": today(),
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)},
        "versions": {"rlx": env!("CARGO_PKG_VERSION")},
        "settings": {"seed": seed, "seconds": seconds.as_secs_f64(), "budget_steps": budget_steps, "ppo_tuned": {"file": ppo_tuned, "config": serde_json::from_str::<Value>(&tuned).expect("serialized above")}},
        "workloads": workloads,
    });
    let text = serde_json::to_string_pretty(&report).expect("JSON values serialize");
    match out {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            std::fs::write(&path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

/// The `config` of the one PPO CartPole-v1 experiment in a tuned-example
/// file (`rlx train -f` reads the same files).
fn tuned_config(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let file: Value =
        serde_yaml_ng::from_str(&text).map_err(|e| format!("{} is not a YAML experiment file: {e}", path.display()))?;
    let experiment = file.as_object().and_then(|m| m.values().next()).cloned().unwrap_or(Value::Null);
    if experiment["run"] != "PPO" || experiment["env"] != "CartPole-v1" {
        return Err(format!("{}: expected one PPO experiment on CartPole-v1", path.display()));
    }
    Ok(experiment.get("config").cloned().unwrap_or_else(|| json!({})))
}

/// CartPole-v1 stepped as its concrete type on one core, random actions
/// drawn ahead of time (as Gymnasium's side does with `gym.make`).
fn raw_cartpole(seconds: Duration) -> f64 {
    let mut env = rlx_envs::cartpole_v1();
    let mut obs = [0.0f32; 4];
    env.reset(Some(0), &mut obs).expect("reset");
    let actions: Vec<i64> =
        (0..10_000u64).map(|i| ((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63) & 1) as i64).collect();
    let (mut steps, t0) = (0u64, Instant::now());
    while t0.elapsed() < seconds {
        for &a in &actions {
            if env.step(Action::Discrete(a), &mut obs).expect("valid action").done() {
                env.reset(None, &mut obs).expect("reset");
            }
        }
        steps += actions.len() as u64;
    }
    steps as f64 / t0.elapsed().as_secs_f64()
}

/// Median env steps/s of `parallel_rollouts` of 4096 steps with PPO's default
/// 2×64 tanh policy, `workers` evaluator actors (0: the driver samples) and 8
/// envs each.
async fn sampling(workers: usize, seconds: Duration) -> Result<f64> {
    let config = json!({"num_workers": workers, "num_envs_per_worker": 8, "train_batch_size": STEPS_PER_SAMPLE});
    let (mut trainer, _) = build_trainer("PPO", "CartPole-v1", &config).await.map_err(|e| e.to_string())?;
    let evaluators = trainer.evaluators_mut();
    let mut rates = Vec::new();
    let start = Instant::now();
    for round in 0.. {
        let t0 = Instant::now();
        let rollouts = parallel_rollouts(evaluators).await.map_err(|e| e.to_string())?;
        let steps: usize = rollouts.iter().map(|r| r.batch.len()).sum();
        if round >= 3 {
            rates.push(steps as f64 / t0.elapsed().as_secs_f64());
        }
        if rates.len() >= 5 && start.elapsed() >= seconds {
            break;
        }
    }
    Ok(median(&mut rates))
}

/// The middle value, or the mean of the two middle ones.
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Trains `run` on CartPole-v1 until the 100-episode training mean reaches
/// 475, and, when the config evaluates (`evaluation_interval` > 0; `measure`
/// sets 10, about 10k env steps for PPO and DQN), until a greedy
/// evaluation reaches 475 too, or until `budget_steps` run out. The
/// harness's reference runs measure the same two, inside the clock as here.
fn solve(run: &str, seed: u64, budget_steps: u64, config: &str) -> Result<Value> {
    let mut config: Value = serde_json::from_str(config).map_err(|e| format!("--config is not JSON: {e}"))?;
    let Some(object) = config.as_object_mut() else {
        return Err(format!("--config must be a JSON object, not {config}"));
    };
    object.insert("seed".into(), json!(seed));
    let evaluates = object.get("evaluation_interval").and_then(Value::as_u64).unwrap_or(0) > 0;
    let rt = rlx_benches::runtime();
    let (train_at, eval_at, end, best, best_eval) = rt.block_on(async {
        let (mut trainer, _) = build_trainer(run, "CartPole-v1", &config).await.map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let (mut train_at, mut eval_at) = (None, None);
        let (mut best, mut best_eval) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        loop {
            let r = trainer.train().await.map_err(|e| e.to_string())?;
            let now = (r.timesteps_total, t0.elapsed().as_secs_f64());
            let mean = r.episode_reward_mean.unwrap_or(f64::NEG_INFINITY);
            best = best.max(mean);
            if mean >= SOLVE_RETURN {
                train_at.get_or_insert(now);
            }
            if let Some(e) = &r.evaluation {
                best_eval = best_eval.max(e.episode_reward_mean);
                if e.episode_reward_mean >= SOLVE_RETURN {
                    eval_at.get_or_insert(now);
                }
            }
            if (train_at.is_some() && (eval_at.is_some() || !evaluates)) || r.timesteps_total >= budget_steps {
                return Ok::<_, String>((train_at, eval_at, now, best, best_eval));
            }
        }
    })?;
    let train = train_at.unwrap_or(end);
    let mut out = json!({
        "solved": train_at.is_some(),
        "wall_s": train.1,
        "env_steps": train.0,
        "best_mean_return": best,
        "peak_rss_bytes": peak_rss_bytes(),
    });
    if evaluates {
        let evaluation = eval_at.unwrap_or(end);
        out["eval_solved"] = json!(eval_at.is_some());
        out["eval_wall_s"] = json!(evaluation.1);
        out["eval_env_steps"] = json!(evaluation.0);
        out["best_eval_return"] = json!(best_eval);
    }
    Ok(out)
}

/// This process's peak resident set size (`VmHWM` in /proc/self/status).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn today() -> String {
    Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

// ------------------------------------------------------------------ table

fn read_json(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not valid JSON: {e}", path.display()))
}

/// Reads the runs of one side and merges them: every numeric field of a
/// workload becomes its median over the runs that measured that workload,
/// `solved` holds only if every run solved, and `runs` counts them.
fn read_side(paths: &[PathBuf], side: &str) -> Result<Value> {
    let mut runs = Vec::new();
    for path in paths {
        let v = read_json(path)?;
        if v["side"] != side {
            return Err(format!("{} is not the {side} side (its \"side\" is {})", path.display(), v["side"]));
        }
        runs.push(v);
    }
    let mut merged = runs[0].clone();
    let mut workloads = serde_json::Map::new();
    let names: std::collections::BTreeSet<String> =
        runs.iter().filter_map(|r| r["workloads"].as_object()).flat_map(|w| w.keys().cloned()).collect();
    for name in names {
        let measured: Vec<&Value> = runs.iter().map(|r| &r["workloads"][&name]).filter(|w| w.is_object()).collect();
        let mut out = measured[0].clone();
        for (key, value) in measured[0].as_object().expect("filtered to objects") {
            if value.is_number() {
                let mut xs: Vec<f64> = measured.iter().filter_map(|w| w[key].as_f64()).collect();
                out[key] = json!(median(&mut xs));
            } else if value.is_boolean() {
                out[key] = json!(measured.iter().all(|w| w[key].as_bool() == Some(true)));
            }
        }
        out["runs"] = json!(measured.len());
        out["samples"] = json!(measured);
        workloads.insert(name, out);
    }
    merged["workloads"] = Value::Object(workloads);
    merged["runs"] = json!(runs.len());
    merged["seeds"] = json!(runs.iter().map(|r| r["settings"]["seed"].clone()).collect::<Vec<_>>());
    Ok(merged)
}

fn table(rlx_paths: &[PathBuf], reference_paths: &[PathBuf]) -> Result<String> {
    let rlx = read_side(rlx_paths, "rlx")?;
    let reference = read_side(reference_paths, "reference")?;
    let (r, x) = (&rlx["workloads"], &reference["workloads"]);
    let mut out = String::new();
    out += &format!(
        "rlx {} ({} runs), reference {} ({} runs; ray {}, stable-baselines3 {}, gymnasium {}, torch {}); \
         each figure is the median over the runs that measured it (the `n` column: rlx/reference)\n\n",
        rlx["date"].as_str().unwrap_or("?"),
        rlx["runs"],
        reference["date"].as_str().unwrap_or("?"),
        reference["runs"],
        reference["versions"]["ray"].as_str().unwrap_or("?"),
        reference["versions"]["stable_baselines3"].as_str().unwrap_or("?"),
        reference["versions"]["gymnasium"].as_str().unwrap_or("?"),
        reference["versions"]["torch"].as_str().unwrap_or("?"),
    );
    let tuned = &rlx["settings"]["ppo_tuned"];
    out += &format!(
        "Solve runs use seeds {} (rlx) and {} (reference); a solve cell is the median [range] over the runs that \
         solved, and says how many did when not all. \"rlx tuned\" is {} (`{}`); RLlib runs its own tuned \
         example, SB3 the rl-baselines3-zoo hyperparameters. Training mean: the last 100 training episodes; \
         greedy: 10 evaluation episodes with the most likely actions, about every 10k env steps.\n\n",
        seeds(&rlx),
        seeds(&reference),
        tuned["file"].as_str().unwrap_or("?"),
        tuned["config"]
    );
    out += "| workload | rlx | reference | reference is | rlx vs reference | n |\n|---|---|---|---|---|---|\n";
    let rate = |w: &Value| w["steps_per_s"].as_f64();
    out += &row(
        More,
        "CartPole-v1 raw stepping, one core (env steps/s)",
        &r["raw_cartpole"],
        &x["raw_cartpole"],
        "Gymnasium, `gym.make`",
        rate,
        fmt_rate,
    );
    for n in 0..=2 {
        let key = format!("sampling_{n}");
        let what = format!("sampling, 2×64 tanh policy, {n} evaluators × 8 envs (env steps/s)");
        out += &row(More, &what, &r[&key], &x[&key], &format!("RLlib PPO, {n} env runners × 8 envs"), rate, fmt_rate);
    }
    let best = |side: &Value| {
        (0..=2)
            .map(|n| &side[format!("sampling_{n}")])
            .max_by(|a, b| rate(a).unwrap_or(0.0).total_cmp(&rate(b).unwrap_or(0.0)))
            .cloned()
            .unwrap_or(Value::Null)
    };
    out += &row(More, "sampling, the best of the three (env steps/s)", &best(r), &best(x), "RLlib PPO", rate, fmt_rate);
    for (rk, alg, xk, who) in [
        ("ppo_solve", "PPO (rlx defaults)", "rllib_ppo_solve", "RLlib PPO, 2 env runners × 8 envs (its best here)"),
        ("ppo_solve", "PPO (rlx defaults)", "rllib_ppo_shipped_solve", "RLlib PPO, as shipped (2 env runners × 1 env)"),
        ("ppo_solve", "PPO (rlx defaults)", "sb3_ppo_solve", "SB3 PPO"),
        ("ppo_tuned_solve", "PPO (rlx tuned)", "rllib_ppo_solve", "RLlib PPO, 2 env runners × 8 envs (its best here)"),
        ("ppo_tuned_solve", "PPO (rlx tuned)", "sb3_ppo_solve", "SB3 PPO"),
        ("dqn_solve", "DQN (rlx defaults)", "sb3_dqn_solve", "SB3 DQN"),
    ] {
        let (rw, xw) = (&r[rk], &x[xk]);
        for (criterion, flag, prefix) in
            [("training mean", "solved", ""), ("greedy evaluation", "eval_solved", "eval_")]
        {
            let to_475: [(&str, String, fn(f64) -> String); 2] = [
                ("wall time", format!("{prefix}wall_s"), |s| format!("{s:.1} s")),
                ("env steps", format!("{prefix}env_steps"), fmt_steps),
            ];
            for (figure, key, fmt) in to_475 {
                let what = format!("{alg} to a {criterion} of 475, {figure}");
                out += &solve_row(&what, rw, xw, who, flag, &key, fmt);
            }
        }
        out += &row(Less, &format!("{alg} run, peak memory"), rw, xw, who, |w| w["peak_rss_bytes"].as_f64(), fmt_bytes);
    }
    Ok(out)
}

fn fmt_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn fmt_bytes(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} GB", x / 1e9)
    } else {
        format!("{:.0} MB", x / 1e6)
    }
}

/// Whether more of a figure is better (throughput) or less (time, steps,
/// memory); the ratio is written so that > 1 favours rlx either way.
#[derive(Clone, Copy)]
enum Better {
    More,
    Less,
}
use Better::{Less, More};

/// One table row from the two sides' merged workloads.
fn row(
    better: Better,
    what: &str,
    rlx: &Value,
    reference: &Value,
    who: &str,
    figure: impl Fn(&Value) -> Option<f64>,
    fmt: impl Fn(f64) -> String,
) -> String {
    let (a, b) = (figure(rlx), figure(reference));
    let cell = |x: Option<f64>, w: &Value| x.map_or_else(|| missing(w), &fmt);
    let ratio = ratio(better, a, b);
    format!("| {what} | {} | {} | {who} | {ratio} | {} |\n", cell(a, rlx), cell(b, reference), runs(rlx, reference))
}

/// rlx's figure `a` against the reference's `b`, written so that > 1
/// favours rlx; a dash where either is missing.
fn ratio(better: Better, a: Option<f64>, b: Option<f64>) -> String {
    match (better, a, b) {
        (More, Some(a), Some(b)) if a >= b && b > 0.0 => format!("**{:.1}×** faster", a / b),
        (More, Some(a), Some(b)) if a > 0.0 => format!("{:.1}× slower", b / a),
        (Less, Some(a), Some(b)) if a <= b && a > 0.0 => format!("**{:.1}×** less", b / a),
        (Less, Some(a), Some(b)) if b > 0.0 => format!("{:.1}× more", a / b),
        _ => "—".into(),
    }
}

/// The `n` column: the runs of each side that measured the workload.
fn runs(rlx: &Value, reference: &Value) -> String {
    let n = |w: &Value| w["runs"].as_u64().unwrap_or(0);
    format!("{}/{}", n(rlx), n(reference))
}

/// The seeds of a side's runs, e.g. `1, 2, 3`.
fn seeds(side: &Value) -> String {
    let runs = side["seeds"].as_array().cloned().unwrap_or_default();
    runs.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
}

fn fmt_steps(x: f64) -> String {
    if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// One row of a solve criterion: each side's median [range] of `key` over
/// its runs whose `flag` is true. The ratio compares the medians, and only
/// when every run of both sides solved.
fn solve_row(
    what: &str,
    rlx: &Value,
    reference: &Value,
    who: &str,
    flag: &str,
    key: &str,
    fmt: fn(f64) -> String,
) -> String {
    let stat = |w: &Value| -> (Option<f64>, String, bool) {
        let samples = w["samples"].as_array().cloned().unwrap_or_default();
        let mut xs: Vec<f64> =
            samples.iter().filter(|s| s[flag].as_bool() == Some(true)).filter_map(|s| s[key].as_f64()).collect();
        if xs.is_empty() {
            let best = samples
                .iter()
                .filter_map(|s| s[if flag == "solved" { "best_mean_return" } else { "best_eval_return" }].as_f64())
                .fold(f64::NEG_INFINITY, f64::max);
            let text = match (samples.len(), w["error"].as_str()) {
                (0, _) => "not measured".to_string(),
                (_, Some(e)) => format!("failed ({e})"),
                (n, None) if best.is_finite() => format!("0/{n} solved (best {best:.0})"),
                (n, None) => format!("0/{n} solved"),
            };
            return (None, text, false);
        }
        let all = xs.len() == samples.len();
        let m = median(&mut xs);
        let (lo, hi) = (xs[0], xs[xs.len() - 1]);
        let prefix = if all { String::new() } else { format!("{}/{} solved: ", xs.len(), samples.len()) };
        let bare = |x: f64| fmt(x).trim_end_matches(" s").to_string();
        (Some(m), format!("{prefix}{} [{}–{}]", fmt(m), bare(lo), bare(hi)), all)
    };
    let ((a, a_text, a_all), (b, b_text, b_all)) = (stat(rlx), stat(reference));
    let both_all = a_all && b_all;
    let ratio = ratio(Less, a.filter(|_| both_all), b.filter(|_| both_all));
    format!("| {what} | {a_text} | {b_text} | {who} | {ratio} | {} |\n", runs(rlx, reference))
}

/// What a cell says when its figure is absent: the error, or how far an
/// unsolved run got.
fn missing(w: &Value) -> String {
    if let Some(e) = w["error"].as_str() {
        return format!("failed ({e})");
    }
    match (w["best_mean_return"].as_f64(), w["env_steps"].as_f64(), w["wall_s"].as_f64()) {
        (Some(best), Some(steps), Some(wall)) => format!("not solved: best {best:.0} in {steps:.0} steps, {wall:.0} s"),
        _ => "not measured".into(),
    }
}
