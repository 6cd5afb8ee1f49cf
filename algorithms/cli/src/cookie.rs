//! The cluster cookie: from a file, the environment, or (discouraged) the
//! command line, where every local user can read it in the process list.

use crate::CliError;
use std::path::Path;

/// The environment variable a cookie can come from.
pub const COOKIE_ENV: &str = "RLX_COOKIE";

/// The cookie given by `--cookie` (`flag`), `--cookie-file` (`file`) or
/// `RLX_COOKIE`, in that order; `None` if none is given. A cookie on the
/// command line gets a warning: `/proc/PID/cmdline` shows it to every
/// local user. So does a cookie file that others may read.
///
/// # Errors
/// An unreadable or empty cookie file, or an empty cookie.
pub fn resolve(flag: Option<&str>, file: Option<&Path>) -> Result<Option<String>, CliError> {
    let cookie = if let Some(cookie) = flag {
        errln!(
            "warning: --cookie is visible to every user of this machine in the process list; \
             use --cookie-file or {COOKIE_ENV}"
        );
        Some(cookie.to_string())
    } else if let Some(path) = file {
        Some(read_file(path)?)
    } else {
        std::env::var(COOKIE_ENV).ok()
    };
    match cookie {
        Some(c) if c.is_empty() => Err(CliError::Usage("the cookie is empty".into())),
        other => Ok(other),
    }
}

/// Reads a cookie file: its content without the trailing newline.
fn read_file(path: &Path) -> Result<String, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("--cookie-file {}: {e}", path.display())))?;
    let cookie = text.trim_end_matches(['\n', '\r']).to_string();
    if cookie.is_empty() {
        return Err(CliError::Usage(format!("--cookie-file {}: the file is empty", path.display())));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            errln!("warning: --cookie-file {} can be read by other users (chmod 600 it)", path.display());
        }
    }
    Ok(cookie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_file_is_read_without_its_newline_and_an_empty_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("rlx-cookie-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cookie");
        std::fs::write(&file, "s3cret\n").unwrap();
        assert_eq!(resolve(None, Some(&file)).unwrap().as_deref(), Some("s3cret"));
        assert_eq!(resolve(Some("flag"), Some(&file)).unwrap().as_deref(), Some("flag"));
        std::fs::write(&file, "\n").unwrap();
        let err = resolve(None, Some(&file)).unwrap_err().to_string();
        assert!(err.contains("empty") && err.contains("cookie"), "{err}");
        let err = resolve(None, Some(&dir.join("missing"))).unwrap_err().to_string();
        assert!(err.contains("--cookie-file") && err.contains("missing"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
