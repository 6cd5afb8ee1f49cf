//! For rlx's own tests: a Python interpreter with Gymnasium, prepared on
//! first use, so that the README's one test command runs the Python tests
//! too.
//!
//! [`python`] creates a virtual environment under `target/python` with the
//! packages of `envs/python/requirements.txt` (once: a stamp file records
//! what was installed), points `RLX_PYTHON` at it and returns it. If
//! `RLX_PYTHON` is already set, that interpreter is used as it is. Without
//! Python, or without network for pip, it prints why and returns `None`,
//! and the test skips, unless `RLX_REQUIRE_PYTHON=1` (CI sets it), which
//! turns the skip into a failure.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const REQUIREMENTS: &str = include_str!("../../python/requirements.txt");

/// The interpreter the Python tests use, or `None` (with the reason
/// printed) where there is none and `RLX_REQUIRE_PYTHON` is not `1`.
///
/// # Panics
/// With `RLX_REQUIRE_PYTHON=1`, if no interpreter can be prepared.
pub fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(prepare) {
        Ok(path) => Some(path.clone()),
        Err(why) if std::env::var("RLX_REQUIRE_PYTHON").is_ok_and(|v| v == "1") => {
            panic!("RLX_REQUIRE_PYTHON=1, but no Python for the Gymnasium tests: {why}")
        }
        Err(why) => {
            println!(
                "skipped: no Python for the Gymnasium tests ({why}); set RLX_REQUIRE_PYTHON=1 to make this an error"
            );
            None
        }
    }
}

fn prepare() -> Result<PathBuf, String> {
    if let Some(given) = std::env::var_os("RLX_PYTHON") {
        let given = PathBuf::from(given);
        check(&given)?;
        add_test_envs();
        return Ok(given);
    }
    let venv = target_dir().join("python");
    // One test binary at a time prepares it; the others wait here.
    std::fs::create_dir_all(target_dir()).map_err(|e| e.to_string())?;
    let lock = File::create(target_dir().join("python.lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| format!("locking target/python.lock: {e}"))?;
    let python = venv.join("bin").join("python");
    let stamp = venv.join("rlx-requirements.txt");
    let ready = std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS) && check(&python).is_ok();
    if !ready {
        install(&venv, &python)?;
        check(&python)?;
        std::fs::write(&stamp, REQUIREMENTS).map_err(|e| e.to_string())?;
    }
    // Safe here: set once, before any test makes a Gymnasium env.
    std::env::set_var("RLX_PYTHON", &python);
    add_test_envs();
    Ok(python)
}

/// Puts `envs/tests/python` (the test-only envs of `rlx_test_envs`) on
/// the worker processes' `PYTHONPATH`.
fn add_test_envs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");
    let path = match std::env::var("PYTHONPATH") {
        Ok(p) if !p.is_empty() => format!("{dir}:{p}"),
        _ => dir.to_string(),
    };
    std::env::set_var("PYTHONPATH", path);
}

fn install(venv: &Path, python: &Path) -> Result<(), String> {
    println!("preparing {} for the Gymnasium tests (once)", venv.display());
    run(Command::new("python3").args(["-m", "venv"]).arg(venv), "python3 -m venv")?;
    let requirements = venv.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS).map_err(|e| e.to_string())?;
    run(Command::new(python).args(["-m", "pip", "install", "--quiet", "-r"]).arg(&requirements), "pip install")
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let out = command.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String =
            stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        Err(format!("{what} failed ({}): {tail}", out.status))
    }
}

fn check(python: &Path) -> Result<(), String> {
    run(Command::new(python).args(["-c", "import gymnasium, numpy"]), &format!("{} with gymnasium", python.display()))
}

/// The workspace's `target/`: test binaries live in `target/<profile>/deps`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "deps"))
        .and_then(|deps| deps.parent()?.parent())
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
}
