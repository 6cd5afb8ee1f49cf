//! A TensorBoard event file beside `result.json`: every numeric metric of
//! every iteration as a scalar, stepped by env steps (`timesteps_total`),
//! so `tensorboard --logdir rlx_results` overlays runs without a plugin.
//!
//! No maintained Rust crate writes event files (the ones on crates.io pull
//! in an old protobuf runtime and image libraries), and the format is small
//! enough to write here, as TensorFlow documents it (`tensorflow/core/lib/
//! io/record_writer.cc`, `core/util/event.proto`, `summary.proto`):
//!
//! - a file is a sequence of records: the data's length (`u64`, little
//!   endian), the masked CRC-32C of those 8 bytes, the data, and the masked
//!   CRC-32C of the data;
//! - each record's data is an `Event` protobuf: `wall_time` (field 1,
//!   double), `step` (2, int64), and either `file_version` (3, string; the
//!   first event, `"brain.Event:2"`) or a `Summary` (5) of `Value`s, each
//!   a `tag` (1, string) and a `simple_value` (2, float).
//!
//! The file is flushed after every iteration, like `result.json`, so a
//! TensorBoard watching the directory follows the run.

use serde_json::Value;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Appends events to one event file.
pub struct EventWriter {
    path: PathBuf,
    file: BufWriter<File>,
}

impl EventWriter {
    /// Creates `dir/events.out.tfevents.<unix seconds>.<host>` (the name
    /// TensorBoard looks for) and writes the version event.
    ///
    /// # Errors
    /// The file cannot be created or written; the error names it.
    pub fn create(dir: &Path) -> io::Result<Self> {
        let now = wall_time();
        let host = hostname();
        let path = dir.join(format!("events.out.tfevents.{}.{host}", now as u64));
        let file = File::create(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut writer = Self { path, file: BufWriter::new(file) };
        let mut event = Vec::new();
        put_double(&mut event, 1, now);
        put_bytes(&mut event, 3, b"brain.Event:2");
        writer.record(&event)?;
        writer.flush()?;
        Ok(writer)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event with every number in `result` (a line of
    /// `result.json`) as a scalar at `step`: nested objects give
    /// `/`-separated tags (`evaluation/episode_reward_mean`,
    /// `learner/policy_loss`); nulls, strings and lists are left out.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn scalars(&mut self, step: u64, result: &Value) -> io::Result<()> {
        let mut values = Vec::new();
        numbers(String::new(), result, &mut values);
        let mut summary = Vec::new();
        for (tag, value) in values {
            let mut v = Vec::new();
            put_bytes(&mut v, 1, tag.as_bytes());
            put_key(&mut v, 2, 5);
            v.extend_from_slice(&(value as f32).to_le_bytes());
            put_bytes(&mut summary, 1, &v);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_key(&mut event, 2, 0);
        put_varint(&mut event, step);
        put_bytes(&mut event, 5, &summary);
        self.record(&event)?;
        self.flush()
    }

    fn record(&mut self, data: &[u8]) -> io::Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", self.path.display()));
        let mut bytes = Vec::with_capacity(data.len() + 16);
        bytes.extend_from_slice(&len);
        bytes.extend_from_slice(&masked_crc(&len).to_le_bytes());
        bytes.extend_from_slice(data);
        bytes.extend_from_slice(&masked_crc(data).to_le_bytes());
        self.file.write_all(&bytes).map_err(at)
    }

    fn flush(&mut self) -> io::Result<()> {
        let path = self.path.clone();
        self.file.flush().map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }
}

/// The numbers in `value`, with their `/`-separated paths.
fn numbers(prefix: String, value: &Value, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.push((prefix, x));
            }
        }
        Value::Object(map) => {
            for (key, v) in map {
                let tag = if prefix.is_empty() { key.clone() } else { format!("{prefix}/{key}") };
                numbers(tag, v, out);
            }
        }
        _ => {}
    }
}

/// TensorFlow's masked CRC-32C: a checksum of data that holds checksums
/// would otherwise often be trivially related to them.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn put_key(buf: &mut Vec<u8>, field: u64, wire_type: u64) {
    put_varint(buf, (field << 3) | wire_type);
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_double(buf: &mut Vec<u8>, field: u64, v: f64) {
    put_key(buf, field, 1);
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(buf: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(buf, field, 2);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

fn wall_time() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The host's name for the file name (TensorBoard only needs the prefix).
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = name.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')).collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tensorflow() {
        // CRC-32C of "123456789" is 0xE3069283 (the standard check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc(b"123456789"), 0xe306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
    }

    #[test]
    fn varints_and_records_have_the_documented_layout() {
        let mut v = Vec::new();
        put_varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let dir = std::env::temp_dir().join(format!("rlx-tb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = EventWriter::create(&dir).unwrap();
        w.scalars(10, &serde_json::json!({"a": 1.5, "b": {"c": 2}, "s": "x", "n": null})).unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        // Walk the records: lengths and both checksums hold, and two records.
        let (mut at, mut records) = (0, 0);
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            assert_eq!(masked_crc(&bytes[at..at + 8]).to_le_bytes(), bytes[at + 8..at + 12]);
            let data = &bytes[at + 12..at + 12 + len];
            assert_eq!(masked_crc(data).to_le_bytes(), bytes[at + 12 + len..at + 16 + len]);
            at += 16 + len;
            records += 1;
        }
        assert_eq!(records, 2);
        // The second record's Event: wall_time (1, double), step (2,
        // varint) = 10, and a Summary (5) of Values, each a tag (1) and a
        // simple_value (2, fixed32).
        let first_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let at = 16 + first_len;
        let event = &bytes[at + 12..bytes.len() - 4];
        assert_eq!(event[0], 0x09, "field 1, wire type 1");
        assert_eq!(&event[9..11], [0x10, 10], "field 2, varint 10");
        assert_eq!(event[11], 0x2a, "field 5, length-delimited");
        let summary = &event[13..];
        assert_eq!(usize::from(event[12]), summary.len());
        // The first Value: tag "a", simple_value 1.5.
        assert_eq!(&summary[..2], [0x0a, 8]);
        assert_eq!(&summary[2..10], [0x0a, 1, b'a', 0x15, 0, 0, 0xc0, 0x3f]);
        let mut tags = Vec::new();
        numbers(String::new(), &serde_json::json!({"a": 1.5, "b": {"c": 2}, "s": "x"}), &mut tags);
        assert_eq!(tags, vec![("a".to_string(), 1.5), ("b/c".to_string(), 2.0)]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
