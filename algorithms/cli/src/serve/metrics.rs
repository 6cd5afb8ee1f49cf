//! What `/metrics` reports, in Prometheus' text format: requests by
//! status, rows acted on, the request latency and batch size histograms,
//! the model's version and the reloads.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Counts of values at or below each bound, Prometheus style.
#[derive(Clone, Debug)]
struct Histogram {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &[f64]) -> Self {
        Self { bounds: bounds.to_vec(), counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    fn observe(&mut self, x: f64) {
        for (b, c) in self.bounds.iter().zip(&mut self.counts) {
            if x <= *b {
                *c += 1;
            }
        }
        self.sum += x;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}",
            self.count, self.sum, self.count
        );
    }
}

#[derive(Debug)]
struct Counts {
    requests: BTreeMap<u16, u64>,
    rows: u64,
    latency: Histogram,
    batch_rows: Histogram,
    version: u64,
    reloads: u64,
}

/// The server's counters, shared by the handlers and the batcher.
#[derive(Debug)]
pub struct Metrics(Mutex<Counts>);

impl Metrics {
    /// Counters at zero, serving model `version`.
    pub fn new(version: u64) -> Self {
        let latency = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0];
        let batch = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];
        Self(Mutex::new(Counts {
            requests: BTreeMap::new(),
            rows: 0,
            latency: Histogram::new(&latency),
            batch_rows: Histogram::new(&batch),
            version,
            reloads: 0,
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Counts) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// A request answered with `status` after `seconds`, for `rows` rows.
    pub fn request(&self, status: u16, seconds: f64, rows: usize) {
        self.with(|c| {
            *c.requests.entry(status).or_default() += 1;
            c.latency.observe(seconds);
            c.rows += rows as u64;
        });
    }

    /// A batch of `rows` acted on (0: a new model took over) by `version`.
    pub fn batch(&self, rows: usize, version: u64) {
        self.with(|c| {
            if rows > 0 {
                c.batch_rows.observe(rows as f64);
            }
            if version != c.version {
                c.reloads += 1;
                c.version = version;
            }
        });
    }

    /// The model's version now.
    pub fn version(&self) -> u64 {
        self.with(|c| c.version)
    }

    /// The text `/metrics` answers.
    pub fn render(&self) -> String {
        self.with(|c| {
            let mut out = String::new();
            let _ = writeln!(out, "# HELP rlx_serve_requests_total Requests answered, by HTTP status.");
            let _ = writeln!(out, "# TYPE rlx_serve_requests_total counter");
            for (status, n) in &c.requests {
                let _ = writeln!(out, "rlx_serve_requests_total{{code=\"{status}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "# HELP rlx_serve_rows_total Observation rows answered.\n# TYPE rlx_serve_rows_total counter"
            );
            let _ = writeln!(out, "rlx_serve_rows_total {}", c.rows);
            c.latency.write(
                &mut out,
                "rlx_serve_request_duration_seconds",
                "Time from a request's arrival to its answer.",
            );
            c.batch_rows.write(&mut out, "rlx_serve_batch_rows", "Rows of each batch the policy acted on.");
            let _ = writeln!(out, "# HELP rlx_serve_model_version The served checkpoint's training iteration.");
            let _ = writeln!(out, "# TYPE rlx_serve_model_version gauge\nrlx_serve_model_version {}", c.version);
            let _ = writeln!(out, "# HELP rlx_serve_reloads_total Newer checkpoints taken over (--follow).");
            let _ = writeln!(out, "# TYPE rlx_serve_reloads_total counter\nrlx_serve_reloads_total {}", c.reloads);
            out
        })
    }
}
