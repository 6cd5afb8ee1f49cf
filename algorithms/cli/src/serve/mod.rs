//! `rlx serve`: a checkpoint's policy behind HTTP, with dynamic batching
//! and hot reload.
//!
//! One thread owns the policy ([`batcher`]); the HTTP handlers ([`api`],
//! on axum) check each request and hand it over, and the thread acts on
//! the requests that arrived together in one call. With `--follow`, a
//! newer checkpoint in the run directory is loaded beside the serving
//! policy and takes over between two batches.

pub mod api;
pub mod batcher;
pub mod metrics;
pub mod tls;

use crate::args::ServeArgs;
use crate::rollout::{restore, Restored};
use crate::CliError;
use batcher::{Batching, Message, Model};
use metrics::Metrics;
use rlx::checkpoint::Checkpoint;
use rlx::Space;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Requests waiting for the policy before new ones are refused (503).
const QUEUE: usize = 4096;

/// The checkpoint's policy as a [`Model`], with the checkpoint and the
/// env's observation and action spaces.
fn load(checkpoint: &Path, args: &ServeArgs) -> Result<(Model, Checkpoint, Space, Space), CliError> {
    let mut restored = restore(checkpoint, args.pick, args.seed)?;
    if restored.env.agent_ids().is_some() {
        return Err(CliError::Usage(format!(
            "{} is a multi-agent env; serving a multi-agent run's policies is not supported yet",
            restored.ckpt.metadata.env
        )));
    }
    let filter = restored.filter();
    restored.load_policy_state().map_err(|e| CliError::Usage(format!("the checkpoint's policy state: {e}")))?;
    let Restored { ckpt, env, policy, .. } = restored;
    let version = ckpt.metadata.training_iteration;
    Ok((Model { policy, filter, version }, ckpt, env.observation_space().clone(), env.action_space().clone()))
}

/// Runs `rlx serve` until Ctrl-C.
///
/// # Errors
/// A bad checkpoint or flag, or an address that cannot be bound.
pub async fn serve(args: &ServeArgs) -> Result<(), CliError> {
    if args.max_batch == 0 || args.max_request_rows == 0 {
        return Err(CliError::Usage("--max-batch and --max-request-rows must be at least 1".into()));
    }
    if args.follow && args.pick == crate::args::Pick::Best {
        return Err(CliError::Usage(
            "--follow serves each newer checkpoint as it appears; --pick best chooses once among those there: \
             drop one"
                .into(),
        ));
    }
    if args.follow && args.checkpoint.join("metadata.json").is_file() {
        return Err(CliError::Usage(format!(
            "--follow watches a run directory for newer checkpoints; {} is a checkpoint",
            args.checkpoint.display()
        )));
    }
    // TLS files are read before the policy loads: a bad file is named at once.
    let acceptor = match args.tls.settings() {
        Some(tls) => {
            Some(tls.acceptor().map_err(|e| CliError::Usage(format!("--tls-cert/--tls-key/--tls-client-ca: {e}")))?)
        }
        None => None,
    };
    let (model, ckpt, obs_space, act_space) = load(&args.checkpoint, args)?;
    let meta = &ckpt.metadata;
    let served = (obs_space.clone(), act_space.clone(), model.policy.recurrent_state_size());
    let metrics = Arc::new(Metrics::new(model.version));
    let (inbox, jobs) = std::sync::mpsc::sync_channel(QUEUE);
    let app = Arc::new(api::App {
        inbox: inbox.clone(),
        metrics: metrics.clone(),
        obs_width: obs_space.flat_dim(),
        state_width: model.policy.recurrent_state_size(),
        mask_width: act_space.mask_width(),
        max_rows: args.max_request_rows,
        token: args.token.clone(),
        obs_bytes: matches!(obs_space, Space::Box { dtype: rlx::space::Dtype::U8, .. }),
        alive: Arc::new(std::sync::atomic::AtomicBool::new(true)),
    });
    let batching = Batching { max_rows: args.max_batch, wait: Duration::from_micros(args.batch_wait_us) };
    let on_batch = {
        let metrics = metrics.clone();
        move |rows, version| metrics.batch(rows, version)
    };
    let alive = app.alive.clone();
    std::thread::Builder::new().name("rlx-serve-policy".into()).spawn(move || {
        // Marks the thread gone however it ends (a panicking policy too).
        struct Gone(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Gone {
            fn drop(&mut self) {
                self.0.store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let _gone = Gone(alive);
        batcher::run(model, jobs, batching, on_batch)
    })?;
    let router = axum::Router::new()
        .route("/v1/actions", axum::routing::post(api::actions))
        .route("/healthz", axum::routing::get(api::healthz))
        .route("/metrics", axum::routing::get(api::metrics))
        .layer(axum::extract::DefaultBodyLimit::max(args.max_body_bytes))
        .with_state(app);
    {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .map_err(|e| CliError::Usage(format!("--listen {}: {e}", args.listen)))?;
        let addr = listener.local_addr()?;
        outln!(
            "serving {} on {} from {} (iteration {}) at {}://{addr}/v1/actions{}",
            meta.algorithm,
            meta.env,
            ckpt.dir.display(),
            meta.training_iteration,
            if acceptor.is_some() { "https" } else { "http" },
            if args.follow { "; following newer checkpoints" } else { "" }
        );
        if args.follow {
            tokio::spawn(follow(args.checkpoint.clone(), ckpt.dir.clone(), served, args.clone(), inbox));
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match acceptor {
            None => axum::serve(listener, router).with_graceful_shutdown(shutdown).await?,
            Some(acceptor) => {
                let listener = tls::TlsListener::new(listener, acceptor)?;
                axum::serve(listener, router).with_graceful_shutdown(shutdown).await?;
            }
        }
        Ok(())
    }
}

/// Watches `run_dir` for a checkpoint newer than `current`, loads it
/// beside the serving policy and hands it to the batcher; a checkpoint
/// whose spaces or recurrent state differ from the served one is refused
/// (the requests' shapes were checked against those).
async fn follow(
    run_dir: PathBuf,
    mut current: PathBuf,
    served: (Space, Space, usize),
    args: ServeArgs,
    inbox: std::sync::mpsc::SyncSender<Message>,
) {
    let mut refused: Option<PathBuf> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(args.follow_interval_ms)).await;
        let Some(newest) = rlx::checkpoint::latest(&run_dir) else { continue };
        if newest == current || refused.as_ref() == Some(&newest) || !newer(&newest, &current) {
            continue;
        }
        let (path, given, inbox, served) = (newest.clone(), args.clone(), inbox.clone(), served.clone());
        // Loading and handing over block (a full inbox waits for room):
        // off the async workers.
        let handed = tokio::task::spawn_blocking(move || -> Result<Option<u64>, String> {
            let (model, _, obs, act) = load(&path, &given).map_err(|e| e.to_string())?;
            let shape = (obs, act, model.policy.recurrent_state_size());
            if shape != served {
                return Err(format!(
                    "its spaces or recurrent state ({} → {}, state {}) differ from the served policy's ({} → {}, \
                     state {})",
                    shape.0, shape.1, shape.2, served.0, served.1, served.2
                ));
            }
            let version = model.version;
            Ok(inbox.send(Message::Swap(Box::new(model))).is_ok().then_some(version))
        })
        .await;
        match handed {
            Ok(Ok(Some(version))) => {
                errln!("serving {} (iteration {version})", newest.display());
                current = newest;
            }
            Ok(Err(e)) => {
                errln!("warning: not serving {}: {e}", newest.display());
                refused = Some(newest);
            }
            Ok(Ok(None)) | Err(_) => return,
        }
    }
}

/// Whether checkpoint `a` is of a later iteration than `b`.
fn newer(a: &Path, b: &Path) -> bool {
    let iteration = |p: &Path| p.file_name().and_then(|n| n.to_str()).and_then(rlx::checkpoint::iteration_of);
    iteration(a) > iteration(b)
}
