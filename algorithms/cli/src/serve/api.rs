//! The HTTP endpoints: `POST /v1/actions` (JSON or MessagePack),
//! `GET /healthz`, `GET /metrics`. A request that cannot be served gets a
//! 4xx status and `{"error": "..."}` naming the problem.

use super::batcher::{Answer, Job, Message};
use super::metrics::Metrics;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rlx::Column;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// What the handlers share.
pub struct App {
    /// The batcher's inbox.
    pub inbox: SyncSender<Message>,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Values per observation row.
    pub obs_width: usize,
    /// Width of a recurrent state row (0: feed-forward).
    pub state_width: usize,
    /// Width of an action mask row (`None`: continuous actions).
    pub mask_width: Option<usize>,
    /// The most rows one request may hold.
    pub max_rows: usize,
    /// The bearer token requests must carry, if any.
    pub token: Option<String>,
    /// The observations are bytes, which rlx holds as `b / 255`.
    pub obs_bytes: bool,
    /// Whether the policy's thread still runs.
    pub alive: Arc<AtomicBool>,
}

/// The body of `POST /v1/actions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionRequest {
    /// Observation rows, each flattened row-major.
    observations: Vec<Vec<f32>>,
    /// Sample instead of acting greedily.
    #[serde(default)]
    explore: bool,
    /// Each row's recurrent state (a recurrent policy); absent: new episodes.
    #[serde(default)]
    state: Option<Vec<Vec<f32>>>,
    /// Each row's action mask (discrete actions; 0 = illegal).
    #[serde(default)]
    action_mask: Option<Vec<Vec<f32>>>,
}

/// The answer's actions: one whole number per row (`Discrete`), a row of
/// them (`MultiDiscrete`), or a row of floats (`Box`).
#[derive(Serialize)]
#[serde(untagged)]
enum Actions {
    Discrete(Vec<i64>),
    MultiDiscrete(Vec<Vec<i64>>),
    Continuous(Vec<Vec<f32>>),
}

#[derive(Serialize)]
struct ActionReply {
    actions: Actions,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<Vec<Vec<f32>>>,
    model_version: u64,
}

/// How a body is encoded.
#[derive(Clone, Copy, PartialEq)]
enum Encoding {
    Json,
    MessagePack,
}

/// A request that cannot be served: a status and what is wrong.
struct Refusal(StatusCode, String);

fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal(status, message.into())
}

/// `POST /v1/actions`.
pub async fn actions(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let start = Instant::now();
    let encoding = match headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?")) {
        None => Ok(Encoding::Json),
        // curl's `-d` sends its default form type: the body is read as JSON.
        Some(t) if t.starts_with("application/json") || t.starts_with("application/x-www-form-urlencoded") => {
            Ok(Encoding::Json)
        }
        Some(t) if t.starts_with("application/msgpack") || t.starts_with("application/x-msgpack") => {
            Ok(Encoding::MessagePack)
        }
        Some(t) => Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type {t}: send application/json or application/msgpack"),
        )),
    };
    let answered = match encoding {
        Ok(encoding) => serve(&app, &headers, &body, encoding).await.map(|(reply, rows)| (reply, rows, encoding)),
        Err(refusal) => Err(refusal),
    };
    let (status, response, rows) = match answered {
        Ok((reply, rows, encoding)) => (StatusCode::OK, encode(&reply, encoding), rows),
        Err(Refusal(status, message)) => {
            let body = serde_json::json!({ "error": message }).to_string();
            (status, ([(header::CONTENT_TYPE, "application/json")], body).into_response(), 0)
        }
    };
    app.metrics.request(status.as_u16(), start.elapsed().as_secs_f64(), rows);
    (status, response).into_response()
}

/// The reply to a well-formed request, and its rows.
async fn serve(
    app: &App,
    headers: &HeaderMap,
    body: &[u8],
    encoding: Encoding,
) -> Result<(ActionReply, usize), Refusal> {
    if let Some(token) = &app.token {
        let given =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            return Err(refuse(StatusCode::UNAUTHORIZED, "missing or wrong bearer token (Authorization: Bearer ...)"));
        }
    }
    let request: ActionRequest = match encoding {
        Encoding::Json => {
            serde_json::from_slice(body).map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("JSON body: {e}")))?
        }
        Encoding::MessagePack => rmp_serde::from_slice(body)
            .map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("MessagePack body: {e}")))?,
    };
    let rows = request.observations.len();
    if rows == 0 {
        return Err(refuse(StatusCode::BAD_REQUEST, "observations is empty: send at least one row"));
    }
    if rows > app.max_rows {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{rows} observation rows; one request may hold at most {} (--max-request-rows)", app.max_rows),
        ));
    }
    let obs = flatten("observations", &request.observations, app.obs_width)?;
    if app.obs_bytes {
        if let Some(i) = obs.iter().position(|x| !(0.0..=1.0).contains(x)) {
            let (r, c) = (i / app.obs_width, i % app.obs_width);
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "observations[{r}][{c}] is {}; this env's observations are bytes, sent as b / 255 in [0, 1]",
                    obs[i]
                ),
            ));
        }
    }
    let state = match (&request.state, app.state_width) {
        (None, _) => None,
        (Some(_), 0) => return Err(refuse(StatusCode::BAD_REQUEST, "state: this policy is not recurrent")),
        (Some(s), width) => Some(same_rows("state", s, rows).and_then(|()| flatten("state", s, width))?),
    };
    let mask = match (&request.action_mask, app.mask_width) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(refuse(StatusCode::BAD_REQUEST, "action_mask: this policy's actions are continuous"))
        }
        (Some(m), Some(width)) => {
            Some(same_rows("action_mask", m, rows).and_then(|()| flatten("action_mask", m, width))?)
        }
    };
    let (reply, answer) = oneshot::channel();
    let job = Job { obs, rows, state, mask, explore: request.explore, reply };
    app.inbox.try_send(Message::Job(job)).map_err(|e| match e {
        std::sync::mpsc::TrySendError::Full(_) => {
            refuse(StatusCode::SERVICE_UNAVAILABLE, "the server is at capacity; retry")
        }
        std::sync::mpsc::TrySendError::Disconnected(_) => refuse(StatusCode::SERVICE_UNAVAILABLE, "the policy stopped"),
    })?;
    let answer = answer
        .await
        .map_err(|_| refuse(StatusCode::SERVICE_UNAVAILABLE, "the policy stopped"))?
        .map_err(|e| refuse(StatusCode::UNPROCESSABLE_ENTITY, format!("the policy refused the rows: {e}")))?;
    Ok((reply_of(answer), rows))
}

/// Rows of `width` values into one vector; a row of another width or a
/// value that is not finite is refused, naming the row.
fn flatten(what: &str, rows: &[Vec<f32>], width: usize) -> Result<Vec<f32>, Refusal> {
    let mut flat = Vec::with_capacity(rows.len() * width);
    for (r, row) in rows.iter().enumerate() {
        if row.len() != width {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!("{what}[{r}] has {} values; the policy takes {width} (flattened row-major)", row.len()),
            ));
        }
        if let Some(c) = row.iter().position(|x| !x.is_finite()) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!("{what}[{r}][{c}] is {}; values must be finite", row[c]),
            ));
        }
        flat.extend_from_slice(row);
    }
    Ok(flat)
}

fn same_rows(what: &str, rows: &[Vec<f32>], expected: usize) -> Result<(), Refusal> {
    if rows.len() == expected {
        Ok(())
    } else {
        Err(refuse(StatusCode::BAD_REQUEST, format!("{what} has {} rows; observations has {expected}", rows.len())))
    }
}

/// Constant-time comparison of a token.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn reply_of(answer: Answer) -> ActionReply {
    let actions = match answer.actions {
        Column::I64 { data, width: 1 } => Actions::Discrete(data),
        Column::I64 { data, width } => Actions::MultiDiscrete(data.chunks(width).map(<[i64]>::to_vec).collect()),
        Column::F32 { data, width } => Actions::Continuous(data.chunks(width).map(<[f32]>::to_vec).collect()),
        Column::U8 { data, width } => {
            Actions::MultiDiscrete(data.chunks(width).map(|r| r.iter().map(|&b| i64::from(b)).collect()).collect())
        }
    };
    let state = answer.state.map(|s| s.chunks(answer.state_width.max(1)).map(<[f32]>::to_vec).collect());
    ActionReply { actions, state, model_version: answer.version }
}

fn encode(reply: &ActionReply, encoding: Encoding) -> Response {
    match encoding {
        Encoding::Json => {
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_string(reply).unwrap_or_default())
                .into_response()
        }
        Encoding::MessagePack => {
            ([(header::CONTENT_TYPE, "application/msgpack")], rmp_serde::to_vec_named(reply).unwrap_or_default())
                .into_response()
        }
    }
}

/// `GET /healthz`: 200 while the policy's thread runs, 503 after.
pub async fn healthz(State(app): State<Arc<App>>) -> (StatusCode, String) {
    if app.alive.load(Ordering::SeqCst) {
        (StatusCode::OK, format!("ok: model version {}\n", app.metrics.version()))
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "the policy's thread stopped\n".into())
    }
}

/// `GET /metrics`.
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.metrics.render()).into_response()
}
