//! `rlx-load`: a load generator for `rlx serve` (and any server speaking
//! its `POST /v1/actions` JSON): `--clients` keep-alive connections send
//! `--requests` requests in all, each as soon as the last was answered,
//! and the throughput and latency percentiles are printed and written as
//! a JSON line.
//!
//! ```text
//! rlx-load --addr 127.0.0.1:8000 --requests 100000 --clients 32 --width 4 --out load.jsonl --label batched
//! ```

use clap::Parser;
use std::io::Write;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Parser, Debug)]
#[command(about = "Load test a policy server's POST /v1/actions")]
struct Args {
    /// The server's address.
    #[arg(long)]
    addr: String,
    /// Requests in all.
    #[arg(long, default_value_t = 100_000)]
    requests: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Values per observation row.
    #[arg(long)]
    width: usize,
    /// Rows per request.
    #[arg(long, default_value_t = 1)]
    rows: usize,
    /// A name for this run in the output.
    #[arg(long, default_value = "run")]
    label: String,
    /// Append the result as a JSON line to this file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// One request on `stream` and its answer's status; the answer is read
/// whole (by its Content-Length) so the connection can be reused.
async fn ask(stream: &mut BufReader<TcpStream>, head: &[u8], body: &[u8]) -> std::io::Result<u16> {
    stream.get_mut().write_all(head).await?;
    stream.get_mut().write_all(body).await?;
    let mut status = 0;
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if status == 0 {
            status = l.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        } else if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut answer = vec![0u8; length];
    stream.read_exact(&mut answer).await?;
    Ok(status)
}

/// The `q` quantile of sorted `xs`.
fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let per_client = args.requests.div_ceil(args.clients.max(1));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.clients)
        .map(|c| {
            let (addr, width, rows) = (args.addr.clone(), args.width, args.rows);
            tokio::spawn(async move {
                let mut stream = BufReader::new(TcpStream::connect(&addr).await.expect("connect"));
                stream.get_ref().set_nodelay(true).expect("nodelay");
                let mut latencies = Vec::with_capacity(per_client);
                let mut failed = 0usize;
                for i in 0..per_client {
                    let obs: Vec<Vec<f32>> = (0..rows)
                        .map(|r| (0..width).map(|k| (((c * 31 + i * 7 + r * 5 + k) % 19) as f32 / 19.0 - 0.5) * 0.2).collect())
                        .collect();
                    let body = serde_json::json!({ "observations": obs }).to_string();
                    let head = format!(
                        "POST /v1/actions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    let t = Instant::now();
                    match ask(&mut stream, head.as_bytes(), body.as_bytes()).await {
                        Ok(200) => latencies.push(t.elapsed().as_secs_f64()),
                        Ok(_) => failed += 1,
                        Err(e) => panic!("client {c}: {e}"),
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (l, f) = t.await.expect("a client");
        latencies.extend(l);
        failed += f;
    }
    let wall = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let ok = latencies.len();
    let result = serde_json::json!({
        "label": args.label,
        "requests": ok + failed,
        "failed": failed,
        "clients": args.clients,
        "rows_per_request": args.rows,
        "seconds": wall,
        "requests_per_s": ok as f64 / wall,
        "p50_ms": quantile(&latencies, 0.5) * 1e3,
        "p99_ms": quantile(&latencies, 0.99) * 1e3,
        "max_ms": latencies.last().copied().unwrap_or(0.0) * 1e3,
    });
    println!(
        "{}: {ok} requests ({failed} failed) from {} clients in {wall:.1} s: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms",
        args.label,
        args.clients,
        ok as f64 / wall,
        quantile(&latencies, 0.5) * 1e3,
        quantile(&latencies, 0.99) * 1e3
    );
    if let Some(path) = args.out {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("open --out");
        writeln!(f, "{result}").expect("write --out");
    }
}
