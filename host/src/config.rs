//! Configuration comes from flags, then `OSDS_*` environment variables, then a TOML file (`--config FILE` or
//! `OSDS_CONFIG`), then built-in defaults. The file's keys are the long flag names (`database-url = "..."`);
//! each key is applied as the matching environment variable unless that variable is already set, so one
//! precedence rule (clap's flag-over-env) covers all three sources.

use anyhow::Context;
use std::ffi::OsString;
use std::path::PathBuf;

/// The `--config` file named in `args` (either `--config FILE` or `--config=FILE`), else `OSDS_CONFIG`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let arg = arg.to_string_lossy();
        if arg == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("OSDS_CONFIG").map(PathBuf::from)
}

/// Environment variable for a file key: `database-url` → `OSDS_DATABASE_URL`.
pub fn env_name(key: &str) -> String {
    format!("OSDS_{}", key.replace('-', "_").to_ascii_uppercase())
}

/// Reads the config file, if any, and exports its keys as `OSDS_*` variables not already set.
/// Must run before any other thread starts (it sets process environment variables).
pub fn apply_file(args: &[OsString]) -> anyhow::Result<Option<PathBuf>> {
    let Some(path) = config_path(args) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("read config file {}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("parse config file {}", path.display()))?;
    for (key, value) in table {
        let rendered = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| item.to_string())
                })
                .collect::<Vec<_>>()
                .join(","),
            other => anyhow::bail!(
                "config key `{key}` in {}: unsupported value {other}",
                path.display()
            ),
        };
        let name = env_name(&key);
        if std::env::var_os(&name).is_none() {
            // SAFETY: called at start-up from main, before the runtime or any thread exists.
            unsafe { std::env::set_var(&name, rendered) };
        }
    }
    Ok(Some(path))
}
