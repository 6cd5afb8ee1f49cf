//! The child processes of the benchmark runs that start `rlx` themselves
//! (`rlx-chaos`, `rlx-swarm`): each logs to its own file, is killed by its
//! own handle (never by a pid that might have been reused), and can be
//! asked its resident memory and CPU time. Plus the cookie file they share.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// SIGKILL and reap. A child already reaped is not signalled again (std
/// remembers its status), so a reused pid is never hit.
pub fn kill_child(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Sends `signal` (`STOP`, `CONT`) to a child that has not been reaped, so
/// its pid is still its own.
pub fn signal_child(c: &mut Child, signal: &str) -> Result<(), String> {
    if !matches!(c.try_wait(), Ok(None)) {
        return Err(format!("pid {} has exited", c.id()));
    }
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(c.id().to_string())
        .status()
        .map_err(|e| format!("kill -{signal} {}: {e}", c.id()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {} exited with {status}", c.id()))
    }
}

/// A 32-byte random cookie, hex, in a file only its owner may read.
pub fn write_cookie(path: &Path) -> Result<(), String> {
    let mut secret = [0u8; 32];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut secret)).map_err(|e| format!("/dev/urandom: {e}"))?;
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(hex.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// A process's resident memory (`VmRSS`), in KiB.
pub fn resident_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts `command` in its own process group, with no stdin and its
/// stdout and stderr appended to `log`. The error says what `what` is.
pub fn spawn_logged(command: &mut Command, log: &Path, what: &str) -> Result<Child, String> {
    let f = OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let g = f.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(f))
        .stderr(Stdio::from(g))
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting {what}: {e}"))
}

/// A process's CPU time so far (user and system), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may
    // hold spaces: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_second())
}

/// `getconf CLK_TCK` (100 on Linux as built for every common machine).
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().ok();
        out.and_then(|o| String::from_utf8(o.stdout).ok()).and_then(|s| s.trim().parse().ok()).unwrap_or(100.0)
    })
}

/// A flag that Ctrl-C or SIGTERM sets (from a thread of its own), for a
/// main loop to stop at, so that dropping what holds the children kills
/// them (they are in process groups of their own: the signal reaches
/// only this process).
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        });
        f.store(true, Ordering::SeqCst);
    });
    flag
}
