//! Standard output that a closed pipe cannot kill.
//!
//! `rlx` keeps Rust's default of ignoring SIGPIPE: it writes to its Python
//! workers' pipes and to sockets (nodes, external clients), and with the
//! signal's default action the first write to a process that had exited
//! killed `rlx` (exit 141) before the error that process sent could be
//! read. A closed standard output then shows up as an error on write,
//! which [`line`] handles: a command whose whole job is printing (`list`,
//! `config`, `rollout`, piped into `head`) exits quietly with status 0;
//! one that does other work (`train`, `tune`, `node`) stops printing and
//! goes on, its results going to disk as always. Standard error is
//! written through [`write_err`], which ignores a closed pipe.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static EXIT_WHEN_CLOSED: AtomicBool = AtomicBool::new(false);
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Makes a closed standard output end the process quietly (status 0),
/// for commands whose output is their only work.
pub fn exit_when_closed() {
    EXIT_WHEN_CLOSED.store(true, Ordering::SeqCst);
}

/// Writes `args` to standard output. A closed pipe exits quietly or
/// silences later writes (see the module docs). Any other failure (a full
/// disk under `rlx config PPO --json > cfg.json`) is an error: a command
/// whose output is its work exits 1 with it, and one that does other work
/// says so once on stderr and goes on without printing.
pub fn write(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        let exit = EXIT_WHEN_CLOSED.load(Ordering::SeqCst);
        match (e.kind() == std::io::ErrorKind::BrokenPipe, exit) {
            (true, true) => std::process::exit(0),
            (true, false) => {}
            (false, true) => {
                write_err(format_args!("error: cannot write to standard output: {e}\n"));
                std::process::exit(1);
            }
            (false, false) => {
                write_err(format_args!("warning: cannot write to standard output ({e}); printing no more\n"))
            }
        }
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes `args` to standard error, ignoring a failure: with SIGPIPE
/// ignored, `eprintln!` would panic once `rlx train 2>&1 | head` closed
/// the pipe, and a message nobody can read is no reason to stop a run.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
}

/// `eprintln!` through [`write_err`].
macro_rules! errln {
    () => { $crate::output::write_err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*)) };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => { $crate::output::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write(format_args!("{}\n", format_args!($($arg)*))) };
}
