//! `rlx serve` through the binary: it answers what rlx's policy answers,
//! in JSON and MessagePack, batches concurrent requests, refuses bad ones
//! with a 4xx naming the problem, and takes over a newer checkpoint
//! (`--follow`) without dropping a request.

mod common;
use rlx::{fields, Column, SampleBatch};
use serde_json::{json, Value};
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

/// A short PPO run on CartPole with `config`; its run directory.
fn train(name: &str, config: &str, iterations: u64, freq: u64) -> PathBuf {
    let results = common::tmp("serve", name);
    let stop = format!(r#"{{"training_iteration": {iterations}}}"#);
    let out = Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", config, "--stop", &stop])
        .args(["--checkpoint-freq", &freq.to_string(), "--results-dir", results.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path()
}

/// `rlx serve` on a free port, killed when dropped.
struct Server {
    child: Child,
    addr: String,
    /// `http` or `https`, as the server printed it.
    scheme: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(RLX)
            .args(["serve", dir.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let said = common::read_until(&mut out, "/v1/actions", Duration::from_secs(30));
        let Some(at) = said.find("://") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rlx serve did not start: {said}");
        };
        let scheme = said[..at].rsplit(' ').next().unwrap().to_string();
        let addr = said[at + 3..].split('/').next().unwrap().to_string();
        // Keep reading stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Self { child, addr, scheme }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request; the status and the body.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    answer(&raw)
}

/// The status and the body of a raw HTTP/1.1 answer.
fn answer(raw: &[u8]) -> (u16, Vec<u8>) {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let status_line = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if status_line.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = unchunk(&body);
    }
    (status, body)
}

fn unchunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..end]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[end + 2..end + 2 + n]);
        b = &b[end + 2 + n + 2..];
    }
}

fn post_json(addr: &str, body: &Value, token: Option<&str>) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let (status, body) = http(addr, "POST", "/v1/actions", &headers, body.to_string().as_bytes());
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// `rows` CartPole-like observations.
fn observations(rows: usize, seed: u64) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|r| (0..4).map(|c| (((r as u64 * 7 + c * 13 + seed * 31) % 97) as f32 / 97.0 - 0.5) * 0.4).collect())
        .collect()
}

/// What rlx's own policy (the newest checkpoint of `dir`) does greedily,
/// from the recurrent states `state` if given; its actions and states out.
fn rlx_acts(dir: &Path, obs: &[Vec<f32>], state: Option<&[f32]>) -> (Vec<i64>, Option<Vec<f32>>) {
    let mut restored = rlx_cli::rollout::restore(dir, rlx_cli::args::Pick::Latest, 0).unwrap();
    let filter = restored.filter();
    restored.load_policy_state().unwrap();
    let mut flat: Vec<f32> = obs.concat();
    if let Some(f) = &filter {
        f.normalize(&mut flat);
    }
    let zeros = vec![0.0; obs.len() * restored.policy.recurrent_state_size()];
    let state = state.or((!zeros.is_empty()).then_some(&zeros[..]));
    let input = rlx::PolicyInput { obs: &flat, action_mask: None, state, explore: false };
    let mut out = SampleBatch::new();
    restored.policy.compute_actions_from_input(&input, &mut out).unwrap();
    let next = out.f32(fields::STATE_OUT).ok().map(<[f32]>::to_vec);
    match out.get(fields::ACTIONS).unwrap() {
        Column::I64 { data, .. } => (data.clone(), next),
        other => panic!("{other:?}"),
    }
}

fn rlx_actions(dir: &Path, obs: &[Vec<f32>]) -> Vec<i64> {
    rlx_acts(dir, obs, None).0
}

fn actions_of(reply: &Value) -> Vec<i64> {
    reply["actions"].as_array().unwrap().iter().map(|a| a.as_i64().unwrap()).collect()
}

#[test]
fn serve_answers_as_rlx_batches_and_refuses_bad_requests() {
    let dir = train("answers", r#"{"seed": 1}"#, 2, 1);
    let server = Server::start(&dir, &["--token", "s3cret", "--max-request-rows", "16", "--batch-wait-us", "3000"]);
    let addr = server.addr.as_str();
    let (status, body) = http(addr, "GET", "/healthz", &[], b"");
    assert_eq!((status, String::from_utf8_lossy(&body).trim()), (200, "ok: model version 2"));

    // JSON: the greedy actions of rlx's own policy on the same rows.
    let obs = observations(16, 1);
    let (status, reply) = post_json(addr, &json!({ "observations": obs }), Some("s3cret"));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(actions_of(&reply), rlx_actions(&dir, &obs));
    assert_eq!(reply["model_version"], 2);

    // MessagePack in, MessagePack out.
    #[derive(serde::Serialize)]
    struct Request {
        observations: Vec<Vec<f32>>,
    }
    #[derive(serde::Deserialize)]
    struct Reply {
        actions: Vec<i64>,
        model_version: u64,
    }
    let body = rmp_serde::to_vec_named(&Request { observations: obs.clone() }).unwrap();
    let headers = [("Content-Type", "application/msgpack"), ("Authorization", "Bearer s3cret")];
    let (status, answer) = http(addr, "POST", "/v1/actions", &headers, &body);
    assert_eq!(status, 200);
    let reply: Reply = rmp_serde::from_slice(&answer).unwrap();
    assert_eq!((reply.actions, reply.model_version), (rlx_actions(&dir, &obs), 2));

    // Bad requests: a 4xx naming the problem.
    let refused = |status: u16, body: &Value, token: Option<&str>, needle: &str| {
        let (got, reply) = post_json(addr, body, token);
        assert_eq!(got, status, "{body}: {reply}");
        assert!(reply["error"].as_str().unwrap().contains(needle), "{body}: {reply}");
    };
    let t = Some("s3cret");
    refused(401, &json!({ "observations": obs }), None, "bearer token");
    refused(401, &json!({ "observations": obs }), Some("wrong"), "bearer token");
    refused(
        400,
        &json!({ "observations": [[0.0, 0.1, 0.2, 0.3], [0.0, 0.1, 0.2]] }),
        t,
        "observations[1] has 3 values; the policy takes 4",
    );
    refused(400, &json!({ "observations": [["a", 0.1, 0.2, 0.3]] }), t, "JSON body");
    refused(400, &json!({ "observations": [] }), t, "empty");
    refused(400, &json!({ "observations": obs, "state": [[0.0]] }), t, "not recurrent");
    refused(400, &json!({ "observations": obs, "action_mask": [[1.0, 1.0]] }), t, "action_mask has 1 rows");
    refused(400, &json!({ "obs": obs }), t, "unknown field");
    refused(413, &json!({ "observations": observations(17, 2) }), t, "at most 16");
    let nan = rmp_serde::to_vec_named(&Request { observations: vec![vec![0.0, f32::NAN, 0.0, 0.0]] }).unwrap();
    let (status, answer) = http(addr, "POST", "/v1/actions", &headers, &nan);
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&answer).contains("observations[0][1] is NaN"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let (status, answer) = http(addr, "POST", "/v1/actions", &[("Content-Type", "text/csv"), headers[1]], b"1,2,3,4");
    assert_eq!(status, 415, "{}", String::from_utf8_lossy(&answer));

    // Concurrent clients: every request answered, in fewer batches.
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| {
                        post_json(&addr, &json!({ "observations": observations(1, c * 100 + i) }), Some("s3cret")).0
                    })
                    .filter(|&s| s == 200)
                    .count()
            })
        })
        .collect();
    let ok: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(ok, 160);
    let (_, text) = http(addr, "GET", "/metrics", &[], b"");
    let text = String::from_utf8(text).unwrap();
    let metric = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in\n{text}"))
    };
    // 162 good requests (2 of 16 rows above, 160 of one now): 192 rows.
    assert_eq!(metric("rlx_serve_requests_total{code=\"200\"}"), 162.0);
    assert_eq!(metric("rlx_serve_rows_total"), 192.0);
    assert_eq!(metric("rlx_serve_batch_rows_sum"), 192.0);
    let batches = metric("rlx_serve_batch_rows_count");
    assert!(batches < 150.0, "162 requests ran in {batches} batches: no batching");
    assert_eq!(metric("rlx_serve_model_version"), 2.0);
    assert!(text.contains("rlx_serve_request_duration_seconds_bucket{le=\"0.01\"}"), "{text}");
}

#[test]
fn a_newer_checkpoint_takes_over_without_dropping_a_request() {
    let old = train("follow_old", r#"{"seed": 1}"#, 1, 1);
    let new = train("follow_new", r#"{"seed": 2}"#, 3, 3);
    // The served run directory holds the old run's checkpoint; the new
    // run's arrives in it while clients are asking.
    let served = common::tmp("serve", "follow_served");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    };
    copy(&old.join("checkpoint_000001"), &served.join("checkpoint_000001"));
    let server = Server::start(&served, &["--follow", "--follow-interval-ms", "100"]);
    let obs = observations(200, 3);
    let (before, after) = (rlx_actions(&old, &obs), rlx_actions(&new, &obs));
    assert_ne!(before, after, "the two checkpoints act alike on these rows; the test could not see a reload");

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (addr, obs, stop) = (server.addr.clone(), obs.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                    let (status, reply) = post_json(&addr, &json!({ "observations": obs }), None);
                    seen.push((status, reply["model_version"].as_u64(), reply["actions"].clone()));
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Written beside, then renamed in: a checkpoint appears whole.
    copy(&new.join("checkpoint_000003"), &served.join("incoming"));
    std::fs::rename(served.join("incoming"), served.join("checkpoint_000003")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (_, body) = http(&server.addr, "GET", "/healthz", &[], b"");
        if String::from_utf8_lossy(&body).contains("version 3") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut versions = std::collections::BTreeSet::new();
    for client in clients {
        let seen = client.join().unwrap();
        assert!(!seen.is_empty());
        let mut last = 0;
        for (status, version, actions) in seen {
            assert_eq!(status, 200, "a request failed during the reload");
            let version = version.unwrap();
            assert!(version >= last, "version {version} after {last}");
            last = version;
            let actions: Vec<i64> = actions.as_array().unwrap().iter().map(|a| a.as_i64().unwrap()).collect();
            assert_eq!(actions, if version == 1 { before.clone() } else { after.clone() }, "version {version}");
            versions.insert(version);
        }
    }
    assert_eq!(versions.into_iter().collect::<Vec<_>>(), vec![1, 3]);
}

/// A recurrent policy's state travels in the request and the answer and
/// gives what rlx gives from it; sampling answers; and a request whose
/// mask leaves no legal action fails alone, while requests batched with it
/// are answered.
#[test]
fn recurrent_state_round_trips_and_a_bad_request_fails_alone() {
    let dir = train("recurrent", r#"{"seed": 4, "model": {"use_lstm": true, "lstm_cell_size": 16}}"#, 2, 2);
    let server = Server::start(&dir, &["--batch-wait-us", "5000"]);
    let addr = server.addr.as_str();
    let obs = observations(3, 5);
    let (status, first) = post_json(addr, &json!({ "observations": obs }), None);
    assert_eq!(status, 200, "{first}");
    let state: Vec<Vec<f32>> = serde_json::from_value(first["state"].clone()).unwrap();
    assert_eq!((state.len(), state[0].len()), (3, 32));
    let (actions, ours) = rlx_acts(&dir, &obs, None);
    assert_eq!(actions_of(&first), actions);
    let ours = ours.unwrap();
    for (a, b) in state.concat().iter().zip(&ours) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "state {a} vs rlx's {b}");
    }
    // The next step from that state.
    let next = observations(3, 6);
    let (status, second) = post_json(addr, &json!({ "observations": next, "state": state }), None);
    assert_eq!(status, 200, "{second}");
    assert_eq!(actions_of(&second), rlx_acts(&dir, &next, Some(&ours)).0);
    let (status, sampled) = post_json(addr, &json!({ "observations": next, "explore": true }), None);
    assert_eq!(status, 200, "{sampled}");
    assert!(actions_of(&sampled).iter().all(|a| (0..2).contains(a)));
    let (status, wrong) = post_json(addr, &json!({ "observations": next, "state": vec![vec![0.0; 31]; 3] }), None);
    assert_eq!(status, 400, "{wrong}");
    assert!(wrong["error"].as_str().unwrap().contains("state[0] has 31 values; the policy takes 32"), "{wrong}");

    // Good and bad requests at once, batched together by the 5 ms wait.
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mask = if c % 2 == 0 { vec![1.0, 1.0] } else { vec![0.0, 0.0] };
                (0..15)
                    .map(|i| {
                        post_json(
                            &addr,
                            &json!({ "observations": observations(1, c * 50 + i), "action_mask": [mask] }),
                            None,
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (c, client) in clients.into_iter().enumerate() {
        for (status, reply) in client.join().unwrap() {
            if c % 2 == 0 {
                assert_eq!(status, 200, "a good request failed beside a bad one: {reply}");
            } else {
                assert_eq!(status, 422, "{reply}");
                assert!(reply["error"].as_str().unwrap().contains("no legal action"), "{reply}");
            }
        }
    }
}

/// One JSON request over HTTPS through rustls with `tls` (the CA to trust,
/// and a client certificate for mutual TLS): the status and the body, or
/// why there was no answer.
fn https(addr: &str, tls: &rlx_cluster::DriverTls, body: &Value) -> Result<(u16, Value), String> {
    use rlx_cluster::tokio_rustls::rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let connector = tls.connector()?;
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").unwrap().to_owned();
        let handshake = tokio::time::timeout(Duration::from_secs(20), connector.connect(name, tcp));
        let mut s = handshake.await.map_err(|_| "handshake timed out".to_string())?.map_err(|e| e.to_string())?;
        let body = body.to_string();
        let head = format!(
            "POST /v1/actions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(format!("{head}{body}").as_bytes()).await.map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw));
        // TLS 1.3 clients learn that their certificate was refused here.
        read.await.map_err(|_| "no answer within 20 s".to_string())?.map_err(|e| e.to_string())?;
        if raw.is_empty() {
            return Err("the server closed the connection without an answer".into());
        }
        let (status, body) = answer(&raw);
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    })
}

/// HTTPS with `rlx node`'s certificate flags: a client that trusts the CA
/// gets rlx's own actions; a plaintext client and one that trusts another
/// CA get none, and the server goes on answering; with --tls-client-ca
/// only a client with a certificate that CA signed is answered; a
/// certificate file that is not there is named.
#[test]
fn serves_https_with_the_nodes_certificates() {
    let dir = train("tls", r#"{"seed": 1}"#, 1, 1);
    let [ca, cert, key, client_cert, client_key] = common::test_pki(&common::tmp("serve", "tls-pki"));
    let obs = observations(8, 3);
    let request = json!({ "observations": obs });
    let trusting = rlx_cluster::DriverTls { ca: ca.clone().into(), server_name: None, identity: None };

    let server = Server::start(&dir, &["--tls-cert", &cert, "--tls-key", &key]);
    assert_eq!(server.scheme, "https");
    // A client that connects and says nothing holds up no one: the others
    // are answered long before its handshake times out (10 s).
    let _silent = TcpStream::connect(&server.addr).unwrap();
    let asked = Instant::now();
    let (status, reply) = https(&server.addr, &trusting, &request).unwrap();
    assert_eq!((status, actions_of(&reply)), (200, rlx_actions(&dir, &obs)), "{reply}");
    assert!(asked.elapsed() < Duration::from_secs(5), "answered after {:?}", asked.elapsed());
    // Plaintext HTTP gets no HTTP answer: the server closes the connection.
    let mut plain = TcpStream::connect(&server.addr).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let read = plain.read_to_end(&mut raw);
    let timed_out =
        read.as_ref().is_err_and(|e| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    assert!(!timed_out, "the server held a plaintext connection open");
    assert!(!raw.starts_with(b"HTTP/"), "plaintext answered: {}", String::from_utf8_lossy(&raw));
    // A client that trusts another CA refuses the server's certificate.
    let [other_ca, ..] = common::test_pki(&common::tmp("serve", "tls-other-pki"));
    let wary = rlx_cluster::DriverTls { ca: other_ca.into(), ..trusting.clone() };
    let refused = https(&server.addr, &wary, &request).unwrap_err();
    assert!(refused.contains("certificate") || refused.contains("Issuer"), "{refused}");
    assert_eq!(https(&server.addr, &trusting, &request).unwrap().0, 200);
    drop(server);

    // Mutual TLS.
    let server = Server::start(&dir, &["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca]);
    let anonymous = https(&server.addr, &trusting, &request);
    assert!(anonymous.is_err(), "a client without a certificate was answered: {anonymous:?}");
    let identified = rlx_cluster::DriverTls { identity: Some((client_cert.into(), client_key.into())), ..trusting };
    let (status, reply) = https(&server.addr, &identified, &request).unwrap();
    assert_eq!((status, actions_of(&reply)), (200, rlx_actions(&dir, &obs)), "{reply}");
    drop(server);

    let missing = dir.join("missing.pem");
    let out = Command::new(RLX)
        .args(["serve", dir.to_str().unwrap(), "--listen", "127.0.0.1:0", "--tls-key", &key])
        .args(["--tls-cert", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.pem"), "{}", String::from_utf8_lossy(&out.stderr));
}
