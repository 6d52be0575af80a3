//! Configuration comes from flags, then `OSDS_*` environment variables, then a TOML file (`--config FILE` or
//! `OSDS_CONFIG`), then built-in defaults. The file's keys are the long flag names (`database-url = "..."`);
//! each key becomes the default of every flag of that name in the command tree, so clap's own precedence
//! (flag, then environment, then default) covers all three sources and nothing mutates the environment. A key
//! that names no flag of any command is an error.

use anyhow::Context;
use clap::Command;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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

/// `command` with the settings of the config file named in `args` (if any) as its flags' defaults.
pub fn with_file(command: Command, args: &[OsString]) -> anyhow::Result<Command> {
    match config_path(args) {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("read config file {}", path.display()))?;
            with_settings(command, &text, &path)
        }
        None => Ok(command),
    }
}

/// `command` with each key of the TOML `text` (read from `path`) as the default of the flags it names.
fn with_settings(mut command: Command, text: &str, path: &Path) -> anyhow::Result<Command> {
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("parse config file {}", path.display()))?;
    for (key, value) in table {
        let values: Vec<String> = match value {
            toml::Value::String(s) => vec![s],
            toml::Value::Integer(i) => vec![i.to_string()],
            toml::Value::Float(f) => vec![f.to_string()],
            toml::Value::Boolean(b) => vec![b.to_string()],
            toml::Value::Array(items) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| item.to_string())
                })
                .collect(),
            other => anyhow::bail!(
                "config key `{key}` in {}: unsupported value {other}",
                path.display()
            ),
        };
        let mut found = false;
        command = set_default(command, &key, &values, &mut found);
        anyhow::ensure!(
            found,
            "config key `{key}` in {}: no command has a flag --{key} (see `osds help <command>`)",
            path.display()
        );
    }
    Ok(command)
}

/// Sets `values` as the default of every flag `--key` in `command` and its subcommands.
fn set_default(mut command: Command, key: &str, values: &[String], found: &mut bool) -> Command {
    let ids: Vec<String> = command
        .get_arguments()
        .filter(|arg| arg.get_long() == Some(key))
        .map(|arg| arg.get_id().to_string())
        .collect();
    for id in ids {
        *found = true;
        let values = values.to_vec();
        command = command.mut_arg(id, |arg| arg.default_values(values));
    }
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in subcommands {
        command = command.mut_subcommand(name, |sub| set_default(sub, key, values, found));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command as Sub};
    use clap::{CommandFactory, FromArgMatches};

    fn parse(file: &str, args: &[&str]) -> anyhow::Result<Cli> {
        let command = with_settings(Cli::command(), file, Path::new("test.toml"))?;
        let matches = command.try_get_matches_from(args)?;
        Ok(Cli::from_arg_matches(&matches)?)
    }

    #[test]
    fn a_file_key_is_the_default_and_a_flag_beats_it() {
        let file = "database-url = \"sqlite://from-file.db\"\nlog = \"debug\"\n";
        let cli = parse(file, &["osds", "backup"]).unwrap();
        let Sub::Backup(backup) = &cli.command else {
            panic!("{cli:?}")
        };
        assert_eq!(backup.database_url, "sqlite://from-file.db");
        assert_eq!(cli.log, "debug");
        let cli = parse(
            file,
            &["osds", "backup", "--database-url", "sqlite://flag.db"],
        )
        .unwrap();
        let Sub::Backup(backup) = &cli.command else {
            panic!("{cli:?}")
        };
        assert_eq!(backup.database_url, "sqlite://flag.db");
    }

    #[test]
    fn a_key_no_command_knows_is_an_error() {
        let error = parse("databse-url = \"x\"\n", &["osds", "backup"]).unwrap_err();
        assert!(
            error.to_string().contains("config key `databse-url`"),
            "{error:#}"
        );
    }
}
