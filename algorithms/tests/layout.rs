//! Every training step reads on one screen: no optimizer `step()` and no
//! algorithm's `TrainingStep::step` runs past 30 lines, in the framework or
//! in the algorithms (RLlib Flow's point: an execution plan is short code
//! over shared operators).

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 30;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// (file:line, lines) of every `async fn step(&mut self, ...)` with a body.
fn steps() -> Vec<(String, usize)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("../framework/src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains("async fn step(&mut self") || line.trim_end().ends_with(';') {
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let closing = format!("{}}}", " ".repeat(indent));
            let end = (i + 1..lines.len()).find(|&j| lines[j] == closing).expect("the step's closing brace");
            found.push((format!("{}:{}", file.display(), i + 1), end - i + 1));
        }
    }
    found
}

#[test]
fn no_training_step_runs_past_30_lines() {
    let steps = steps();
    // The framework's six optimizers (which every built-in but ES, ARS and
    // PBT runs on), ES's and ARS's, PBT's, and self-play's wrapper.
    assert!(steps.len() >= 9, "the scan finds the optimizers' steps: {steps:?}");
    let long: Vec<_> = steps.iter().filter(|(_, n)| *n > MAX_LINES).collect();
    assert!(long.is_empty(), "steps over {MAX_LINES} lines: {long:?}");
}
