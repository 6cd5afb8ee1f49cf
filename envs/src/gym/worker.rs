//! One Python worker process hosting `copies` copies of a Gymnasium env,
//! and the framed binary protocol to it (described at the top of
//! `envs/python/rlx_gym.py`, the module the process runs).
//!
//! Requests are written to the process's stdin. Replies are read from its
//! stdout in the caller's thread, after `poll(2)` says there is something
//! to read, so that waiting for one has a timeout (a process that hangs is
//! detected and killed, not waited on forever) without a thread hand-off
//! on every step. The last 16 KiB of its stderr are kept for the error
//! message when it dies.

use super::Spaces;
use rlx::sample_batch::Column;
use std::collections::VecDeque;
use std::io::{BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The module the worker processes run, shipped inside rlx.
pub const MODULE_SOURCE: &str = include_str!("../../python/rlx_gym.py");

/// How long a new process may take to import Gymnasium and build its
/// copies (Atari and MuJoCo load native libraries and ROMs).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// The largest reply frame accepted: far above any real one (8 copies of
/// 84×84×4 bytes is 226 KB), small enough that a corrupt length cannot
/// make rlx allocate gigabytes.
const MAX_FRAME: usize = 1 << 30;

const STDERR_TAIL: usize = 16 * 1024;

/// How long a dead process's stderr may take to be read to its end.
const STDERR_DRAIN: Duration = Duration::from_secs(2);

/// How long a reply is polled for before the caller sleeps (see
/// `Frames::fill`).
const SPIN: Duration = Duration::from_micros(200);

/// Why a worker failed: its Python traceback, or what rlx saw.
#[derive(Debug, Clone)]
pub(crate) struct WorkerError(pub String);

/// A running worker process.
pub(crate) struct Worker {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    replies: Frames,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Set when the stderr thread has read the pipe to its end.
    stderr_done: Arc<AtomicBool>,
    timeout: Duration,
    /// The spaces and metadata the process reported in its hello.
    pub spaces: Spaces,
}

/// The frame in an `F` reply (height and width as little-endian `u32`s,
/// then the RGB bytes), or the reason the env gave for drawing none
/// (height and width 0, then the reason as text).
pub(crate) fn decode_frame(reply: &[u8]) -> Result<rlx::video::Frame, String> {
    if reply.len() < 8 {
        return Err(format!("a frame reply of {} bytes has no header", reply.len()));
    }
    let height = u32::from_le_bytes(reply[0..4].try_into().expect("4 bytes"));
    let width = u32::from_le_bytes(reply[4..8].try_into().expect("4 bytes"));
    if height == 0 || width == 0 {
        return Err(String::from_utf8_lossy(&reply[8..]).into_owned());
    }
    rlx::video::Frame::new(width, height, reply[8..].to_vec()).map_err(|e| e.to_string())
}

/// The interpreter: `$RLX_PYTHON` if set, else `python3` on the `PATH`.
pub(crate) fn interpreter() -> PathBuf {
    rlx::experience::python_interpreter()
}

/// The module written once per rlx version and content to a file in the
/// temporary directory, so tracebacks name a real file.
fn module_path() -> Result<PathBuf, WorkerError> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        let hash = MODULE_SOURCE
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        let dir = std::env::temp_dir().join(format!("rlx-gym-{}-{hash:016x}", env!("CARGO_PKG_VERSION")));
        let path = dir.join("rlx_gym.py");
        if std::fs::read_to_string(&path).is_ok_and(|s| s == MODULE_SOURCE) {
            return Ok(path);
        }
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!("rlx_gym.py.{}", std::process::id()));
            std::fs::write(&tmp, MODULE_SOURCE)?;
            std::fs::rename(&tmp, &path)
        };
        write().map(|()| path.clone()).map_err(|e| format!("could not write {}: {e}", path.display()))
    })
    .clone()
    .map_err(WorkerError)
}

impl Worker {
    /// Starts a process and sends it `hello` (what to host, see
    /// [`super::GymSpec::hello`]); [`wait_ready`](Self::wait_ready) reads
    /// the answer, so that several processes start at once.
    pub fn start(hello: &serde_json::Value, timeout: Duration) -> Result<Self, WorkerError> {
        let python = interpreter();
        let mut command = Command::new(&python);
        // A process group of its own: a Ctrl-C at the terminal reaches
        // rlx alone, which stops after its iteration; the workers it
        // still needs must not die of the same keystroke. rlx kills them
        // when it is done, and a worker whose rlx is gone reads the end
        // of its stdin and exits.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .arg("-u")
            .arg(module_path()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                WorkerError(format!(
                    "could not start Python (`{}`): {e}; install Python 3 with `pip install gymnasium numpy`, or set RLX_PYTHON to an interpreter that has them",
                    python.display()
                ))
            })?;
        let stdin = BufWriter::new(child.stdin.take().expect("piped"));
        let stdout = child.stdout.take().expect("piped");
        let stderr_pipe = child.stderr.take().expect("piped");
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        let stderr_done = Arc::new(AtomicBool::new(false));
        let done = stderr_done.clone();
        std::thread::spawn(move || {
            keep_tail(stderr_pipe, &tail);
            done.store(true, Ordering::SeqCst);
        });
        // Non-blocking, so that `Frames` can poll it without sleeping.
        // SAFETY: fcntl on a pipe descriptor this worker owns.
        unsafe {
            let fd = stdout.as_raw_fd();
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
        }
        let replies = Frames { stdout, buf: Vec::with_capacity(1 << 16), start: 0 };
        let mut worker = Self { child, stdin, replies, stderr, stderr_done, timeout, spaces: Spaces::default() };
        worker.send(b'H', hello.to_string().as_bytes())?;
        Ok(worker)
    }

    /// [`start`](Self::start), then [`wait_ready`](Self::wait_ready).
    pub fn ready(hello: &serde_json::Value, timeout: Duration) -> Result<Self, WorkerError> {
        let mut worker = Self::start(hello, timeout)?;
        worker.wait_ready()?;
        Ok(worker)
    }

    /// Reads the process's hello: the spaces, checked.
    pub fn wait_ready(&mut self) -> Result<(), WorkerError> {
        let reply = self.receive(b'H', STARTUP_TIMEOUT)?;
        self.spaces =
            serde_json::from_slice(&reply).map_err(|e| self.died(&format!("sent a malformed hello ({e})")))?;
        Ok(())
    }

    /// Sends a reset of every copy, copy `i` with `seeds[i]` (`None`:
    /// unseeded, the env's generator continues).
    pub fn send_reset(&mut self, seeds: &[Option<u64>]) -> Result<(), WorkerError> {
        let mut bytes: Vec<u8> = seeds.iter().flat_map(|s| s.unwrap_or(0).to_le_bytes()).collect();
        bytes.extend(seeds.iter().map(|s| u8::from(s.is_some())));
        self.send(b'R', &bytes)
    }

    /// Sends a step of every copy with rows `rows` of `actions`.
    pub fn send_step(&mut self, actions: &Column, rows: std::ops::Range<usize>) -> Result<(), WorkerError> {
        self.send(b'S', &actions.le_bytes(rows))
    }

    /// Asks for copy `copy`'s current frame; the reply is an `F`, read
    /// with [`decode_frame`].
    pub fn send_render(&mut self, copy: usize) -> Result<(), WorkerError> {
        let copy = u32::try_from(copy).map_err(|_| WorkerError(format!("no copy {copy}")))?;
        self.send(b'V', &copy.to_le_bytes())
    }

    /// The reply to a reset (`O`) or a step (`T`), without its tag.
    pub fn receive_reply(&mut self, tag: u8) -> Result<Vec<u8>, WorkerError> {
        self.receive(tag, self.timeout)
    }

    /// Sends a frame of kind `tag`.
    pub fn send(&mut self, tag: u8, body: &[u8]) -> Result<(), WorkerError> {
        let length = u32::try_from(body.len() + 1).map_err(|_| WorkerError("request too large".into()))?;
        let sent = self
            .stdin
            .write_all(&length.to_le_bytes())
            .and_then(|()| self.stdin.write_all(&[tag]))
            .and_then(|()| self.stdin.write_all(body))
            .and_then(|()| self.stdin.flush());
        sent.map_err(|e| self.died(&format!("could not be written to ({e})")))
    }

    fn receive(&mut self, tag: u8, timeout: Duration) -> Result<Vec<u8>, WorkerError> {
        let frame = match self.replies.next(Instant::now() + timeout) {
            Ok(frame) => frame,
            Err(Failure::TimedOut) => {
                let _ = self.child.kill();
                return Err(self.died_with(
                    &format!(
                        "did not answer within {:.1} s (env_shards.step_timeout_s) and was killed",
                        timeout.as_secs_f64()
                    ),
                    false,
                ));
            }
            Err(Failure::Broken(e)) => return Err(self.died(&e)),
        };
        let (kind, body) = frame;
        match kind {
            t if t == tag => Ok(body),
            b'E' => {
                let _ = self.child.wait();
                Err(WorkerError(explain(&String::from_utf8_lossy(&body))))
            }
            _ => Err(self.died(&format!("sent a frame of kind {:?} where {:?} was due", kind as char, tag as char))),
        }
    }

    /// The error for a process that stopped answering: what rlx saw, its
    /// exit status, and the end of its stderr (a traceback, if Python wrote
    /// one). Kills the process if it still runs.
    fn died(&mut self, what: &str) -> WorkerError {
        self.died_with(what, true)
    }

    /// [`died`](Self::died); `summarize`: whether the end of its stderr
    /// may explain the failure (not when rlx killed it for a timeout:
    /// whatever Python wrote before was not why).
    fn died_with(&mut self, what: &str, summarize: bool) -> WorkerError {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                std::thread::sleep(Duration::from_millis(50));
                let _ = self.child.kill();
                self.child.wait().ok()
            }
        };
        // The process is gone: wait (boundedly: a grandchild may hold the
        // pipe) until its stderr is read to the end, so that its last
        // words are in the tail however loaded the machine is.
        let deadline = Instant::now() + STDERR_DRAIN;
        while !self.stderr_done.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tail = self
            .stderr
            .lock()
            .map(|t| String::from_utf8_lossy(&t.iter().copied().collect::<Vec<_>>()).into_owned())
            .unwrap_or_default();
        let status = status.map(|s| format!(" ({s})")).unwrap_or_default();
        let tail = tail.trim_end();
        if summarize && last_exception(tail).is_some() {
            // Python's own last words say more than what rlx saw.
            return WorkerError(format!("{}; the Python worker process {what}{status}", explain(tail)));
        }
        let mut message = format!("Python worker process {what}{status}");
        if !tail.is_empty() {
            message.push_str(&format!("; its stderr ends:\n{tail}"));
        }
        WorkerError(message)
    }
}

/// What a worker's error text (a Python traceback, or the worker's own
/// one-line refusal of a space) tells a user, first line first: the
/// cause, with the fix where one is known. A missing module names the
/// interpreter and the `pip install` that fixes it; a `LookupError` (an
/// unknown id or module, raised by `rlx_gym.py` with the close ids) is
/// its message alone; any other exception's last line comes first, the
/// whole traceback after it.
pub(crate) fn explain(text: &str) -> String {
    let text = text.trim_end();
    let Some(last) = last_exception(text) else {
        // Not a traceback: the worker's own one-line refusal, or text
        // that is not Python's, shown as it is.
        return text.to_string();
    };
    if let Some(module) = last.strip_prefix("ModuleNotFoundError: No module named ") {
        let module = module.trim_matches('\'');
        let python = interpreter();
        let top = module.split('.').next().unwrap_or(module);
        let package = match top {
            "gymnasium" => "gymnasium numpy",
            "ale_py" => "ale-py",
            "cv2" => "opencv-python-headless",
            "mujoco" => "\"gymnasium[mujoco]\"",
            other => other,
        };
        return format!(
            "Python module `{module}` is not installed in `{0}`: run `{0} -m pip install {package}`, or set RLX_PYTHON to an interpreter that has it",
            python.display()
        );
    }
    if let Some(cause) = last.strip_prefix("LookupError: ") {
        return cause.to_string();
    }
    let traceback: Vec<String> = text.lines().map(|l| format!("    {l}")).collect();
    format!("the Python env raised {last}\n  Python traceback:\n{}", traceback.join("\n"))
}

/// The exception line of the last Python traceback in `text`: the last
/// unindented, non-empty line after the last `Traceback (most recent call
/// last):` (indented lines are the frames, and 3.11's `^^^` markers).
/// `None` if `text` holds no traceback, or one with no exception line yet.
fn last_exception(text: &str) -> Option<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().rposition(|l| l.starts_with("Traceback (most recent call last)"))?;
    lines[start + 1..].iter().rev().find(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t'])).map(|l| l.trim())
}

impl Drop for Worker {
    /// Asks the process to quit, and kills it if it is still there: no
    /// worker outlives its owner.
    fn drop(&mut self) {
        let _ = self.send_quiet();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    fn send_quiet(&mut self) -> std::io::Result<()> {
        self.stdin.write_all(&1u32.to_le_bytes())?;
        self.stdin.write_all(b"Q")?;
        self.stdin.flush()
    }
}

/// Why no frame came.
enum Failure {
    /// The deadline passed.
    TimedOut,
    /// The pipe closed, failed, or carried a bad length.
    Broken(String),
}

/// Length-prefixed frames read from a worker's stdout.
struct Frames {
    stdout: ChildStdout,
    buf: Vec<u8>,
    /// Where the unread bytes of `buf` start.
    start: usize,
}

impl Frames {
    /// The next frame's tag and body, waiting at most until `deadline`.
    fn next(&mut self, deadline: Instant) -> Result<(u8, Vec<u8>), Failure> {
        loop {
            let pending = &self.buf[self.start..];
            if pending.len() >= 4 {
                let length = u32::from_le_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
                if length == 0 || length > MAX_FRAME {
                    return Err(Failure::Broken(format!("sent a frame of {length} bytes")));
                }
                if pending.len() >= 4 + length {
                    // The tag apart, so that the body is copied once.
                    let frame = (pending[4], pending[5..4 + length].to_vec());
                    self.start += 4 + length;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return Ok(frame);
                }
            }
            self.fill(deadline)?;
        }
    }

    /// Reads what the pipe holds into `buf`: first by polling it for
    /// [`SPIN`], then by sleeping in `poll(2)` until the deadline.
    /// Waking a sleeping thread from another core costs tens of
    /// microseconds on some machines (a virtual machine's inter-processor
    /// interrupt), as long as the worker takes to step several CartPole
    /// copies; the short spin keeps the step loop awake (the worker spins
    /// the same way for requests).
    fn fill(&mut self, deadline: Instant) -> Result<(), Failure> {
        let spin_until = Instant::now() + SPIN;
        let mut chunk = [0u8; 1 << 16];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => return Err(Failure::Broken("closed its output".into())),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() < spin_until {
                        // To a thread or worker with work, if one shares the core.
                        std::thread::yield_now();
                    } else {
                        self.wait(deadline)?;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::Broken(format!("could not be read from ({e})"))),
            }
        }
    }

    /// Waits until stdout is readable (or closed), or the deadline passes.
    fn wait(&self, deadline: Instant) -> Result<(), Failure> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::TimedOut);
            }
            let mut fd = libc::pollfd { fd: self.stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut fd, 1, ms) };
            if ready > 0 {
                return Ok(());
            }
            if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return Err(Failure::Broken(format!("could not be polled ({})", std::io::Error::last_os_error())));
            }
        }
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of the process's stderr.
fn keep_tail(mut stderr: std::process::ChildStderr, tail: &Mutex<VecDeque<u8>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut buf) {
        let Ok(mut t) = tail.lock() else { return };
        t.extend(&buf[..n]);
        let excess = t.len().saturating_sub(STDERR_TAIL);
        t.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACEBACK: &str = "note: loading the env\nTraceback (most recent call last):\n  File \"env.py\", line 3, in step\n    x = 1 / 0\n        ~~^~~\nZeroDivisionError: division by zero\n";

    #[test]
    fn the_exception_line_of_the_last_traceback_comes_first() {
        assert_eq!(last_exception(TRACEBACK), Some("ZeroDivisionError: division by zero"));
        let e = explain(TRACEBACK);
        assert!(e.starts_with("the Python env raised ZeroDivisionError: division by zero\n"), "{e}");
        assert!(e.contains("    Traceback (most recent call last):"), "the traceback follows: {e}");
        // Chained: the last traceback's exception.
        let chained = format!(
            "{TRACEBACK}\nDuring handling of the above exception, another exception occurred:\n\n{}",
            TRACEBACK.replace("ZeroDivisionError: division by zero", "KeyError: 'x'")
        );
        assert_eq!(last_exception(&chained), Some("KeyError: 'x'"));
    }

    #[test]
    fn known_causes_are_one_line_with_the_fix() {
        let missing = "Traceback (most recent call last):\n  File \"rlx_gym.py\", line 60, in <module>\nModuleNotFoundError: No module named 'gymnasium'";
        let e = explain(missing);
        assert!(
            e.starts_with("Python module `gymnasium` is not installed in `")
                && e.contains("-m pip install gymnasium numpy"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let lookup = "Traceback (most recent call last):\n  File \"x\", line 1\nLookupError: Gymnasium has no env `X-v0`; close ids: Y-v0";
        assert_eq!(explain(lookup), "Gymnasium has no env `X-v0`; close ids: Y-v0");
    }

    #[test]
    fn text_without_a_traceback_is_shown_as_it_is() {
        assert_eq!(last_exception("some warning\nanother line"), None);
        assert_eq!(
            explain("unsupported space: observation['mission']: Text(...)"),
            "unsupported space: observation['mission']: Text(...)"
        );
        // A traceback cut before its exception line explains nothing.
        assert_eq!(last_exception("Traceback (most recent call last):\n  File \"x\", line 1"), None);
    }
}
