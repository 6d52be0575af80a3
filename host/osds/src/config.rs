//! Configuration comes from flags, then `OSDS_*` environment variables, then a TOML file (`--config FILE` or
//! `OSDS_CONFIG`), then built-in defaults. The file's keys are the long flag names (`database-url = "..."`);
//! each key becomes the default of every flag of that name in the command tree, so clap's own precedence
//! (flag, then environment, then default) covers all three sources and nothing mutates the environment.
//! Strict: a file key that names no flag of the command being run, and an `OSDS_*` variable that no command
//! reads, are errors that name the nearest valid one; the variables Kubernetes injects for a Service named
//! `osds…` are only named in a warning.

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

/// `command` with the settings of the config file named in `args` (if any) as its flags' defaults, and the
/// file's keys (for [`check_applicable`] once the command being run is known).
pub fn with_file(command: Command, args: &[OsString]) -> anyhow::Result<(Command, Vec<String>)> {
    match config_path(args) {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("read config file {}", path.display()))?;
            with_settings(command, &text, &path)
        }
        None => Ok((command, Vec::new())),
    }
}

/// `command` with each key of the TOML `text` (read from `path`) as the default of the flags it names, and
/// the keys.
fn with_settings(
    mut command: Command,
    text: &str,
    path: &Path,
) -> anyhow::Result<(Command, Vec<String>)> {
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("parse config file {}", path.display()))?;
    let keys: Vec<String> = table.keys().cloned().collect();
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
        if !found {
            anyhow::bail!(
                "config key `{key}` in {}: no command has a flag --{key}{}",
                path.display(),
                suggestion(&key, &long_names(&command))
            );
        }
    }
    Ok((command, keys))
}

/// Every file key must be a flag of the command being run (`path` is its chain of subcommand names from the
/// root, whose global flags apply everywhere).
pub fn check_applicable(root: &Command, path: &[String], keys: &[String]) -> anyhow::Result<()> {
    let mut command = root;
    let mut applicable: Vec<String> = long_names_of(root, true);
    for name in path {
        let Some(sub) = command.find_subcommand(name) else {
            break;
        };
        command = sub;
        applicable.extend(long_names_of(command, false));
    }
    let running = std::iter::once("osds")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    for key in keys {
        if !applicable.contains(key) {
            anyhow::bail!(
                "config key `{key}` does not apply to `{running}`{}",
                suggestion(key, &applicable)
            );
        }
    }
    Ok(())
}

/// Every `OSDS_*` variable in `vars` must be one a flag of some command reads, or one Kubernetes injects for a
/// Service whose name begins with `osds` (see [`is_service_link`]): those are returned, for a warning.
pub fn check_environment(
    root: &Command,
    vars: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<Vec<String>> {
    let known = env_names(root);
    let mut links = Vec::new();
    for name in vars {
        let name = name.to_string_lossy();
        if !name.starts_with("OSDS_") || known.iter().any(|k| *k == name) {
            continue;
        }
        if is_service_link(&name) {
            links.push(name.into_owned());
            continue;
        }
        anyhow::bail!(
            "environment variable {name} is not a setting of any command{}",
            suggestion(&name, &known)
        );
    }
    links.sort();
    Ok(links)
}

/// Whether `name` has the form of the variables Kubernetes injects into every pod of a namespace for each
/// Service (here one named `osds` or `osds-...`): `OSDS[_X]_SERVICE_HOST`, `OSDS[_X]_SERVICE_PORT[_NAME]`,
/// `OSDS[_X]_PORT` and `OSDS[_X]_PORT_<number>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]`. No setting has that form.
fn is_service_link(name: &str) -> bool {
    let words: Vec<&str> = name.split('_').collect();
    let word = |w: &&str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric());
    if words.first() != Some(&"OSDS") || !words.iter().all(word) {
        return false;
    }
    (1..words.len()).any(|i| match &words[i..] {
        ["SERVICE", "HOST"] | ["SERVICE", "PORT", ..] | ["PORT"] => true,
        ["PORT", number, protocol, rest @ ..] => {
            number.bytes().all(|b| b.is_ascii_digit())
                && ["TCP", "UDP", "SCTP"].contains(protocol)
                && matches!(rest, [] | ["PROTO" | "PORT" | "ADDR"])
        }
        _ => false,
    })
}

/// The long flag names of `command` (its global ones only, when `globals_only`).
fn long_names_of(command: &Command, globals_only: bool) -> Vec<String> {
    command
        .get_arguments()
        .filter(|arg| !globals_only || arg.is_global_set())
        .filter_map(|arg| arg.get_long().map(str::to_string))
        .collect()
}

/// The long flag names of every command in the tree.
fn long_names(command: &Command) -> Vec<String> {
    let mut names = long_names_of(command, false);
    for sub in command.get_subcommands() {
        names.extend(long_names(sub));
    }
    names.sort();
    names.dedup();
    names
}

/// The environment variables of every flag in the tree.
fn env_names(command: &Command) -> Vec<String> {
    let mut names: Vec<String> = command
        .get_arguments()
        .filter_map(|arg| arg.get_env().map(|e| e.to_string_lossy().into_owned()))
        .collect();
    for sub in command.get_subcommands() {
        names.extend(env_names(sub));
    }
    names.sort();
    names.dedup();
    names
}

/// `" (did you mean `x`?)"` for the candidate nearest to `name` by edit distance, if one is near.
fn suggestion(name: &str, candidates: &[String]) -> String {
    candidates
        .iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .min()
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
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

    /// The documentation's example of a configuration file (docs/operating.md) holds settings `osds serve` takes.
    #[test]
    fn the_documented_configuration_example_is_one_serve_takes() {
        let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operating.md");
        let page = std::fs::read_to_string(page).unwrap();
        let (_, block) = page.split_once("```toml\n").expect("a TOML example");
        let (block, _) = block.split_once("```").unwrap();
        let (command, keys) =
            with_settings(Cli::command(), block, Path::new("docs/operating.md")).unwrap();
        assert!(!keys.is_empty());
        check_applicable(&command, &["serve".to_owned()], &keys).unwrap();
        parse(block, &["osds", "serve"]).unwrap();
    }

    fn parse(file: &str, args: &[&str]) -> anyhow::Result<Cli> {
        let (command, _) = with_settings(Cli::command(), file, Path::new("test.toml"))?;
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
    fn a_key_no_command_knows_is_an_error_naming_the_nearest() {
        let error = parse("databse-url = \"x\"\n", &["osds", "backup"]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("config key `databse-url`"), "{message}");
        assert!(
            message.contains("did you mean `database-url`?"),
            "{message}"
        );
    }

    #[test]
    fn a_key_of_another_command_does_not_apply() {
        let root = Cli::command();
        let keys = vec!["database-url".to_string(), "listen".to_string()];
        let error = check_applicable(&root, &["backup".to_string()], &keys).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("config key `listen` does not apply to `osds backup`"),
            "{error:#}"
        );
        check_applicable(&root, &["serve".to_string()], &keys).unwrap();
        check_applicable(&root, &["backup".to_string()], &["log".to_string()]).unwrap();
    }

    #[test]
    fn an_osds_variable_no_command_reads_is_an_error() {
        let root = Cli::command();
        let error = check_environment(&root, [OsString::from("OSDS_DATABSE_URL")]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("OSDS_DATABSE_URL"), "{message}");
        assert!(
            message.contains("did you mean `OSDS_DATABASE_URL`?"),
            "{message}"
        );
        check_environment(
            &root,
            [OsString::from("OSDS_DATABASE_URL"), OsString::from("PATH")],
        )
        .unwrap();
    }

    /// What Kubernetes injects for a Service `osds` (ports `http` 8080 and `metrics` 9090) and one named
    /// `osds-replica`: ignored and named, never refused; a misspelt setting still is.
    #[test]
    fn kubernetes_service_links_are_named_not_refused() {
        let root = Cli::command();
        let injected = [
            "OSDS_SERVICE_HOST",
            "OSDS_SERVICE_PORT",
            "OSDS_SERVICE_PORT_HTTP",
            "OSDS_SERVICE_PORT_METRICS",
            "OSDS_PORT",
            "OSDS_PORT_8080_TCP",
            "OSDS_PORT_8080_TCP_PROTO",
            "OSDS_PORT_8080_TCP_PORT",
            "OSDS_PORT_8080_TCP_ADDR",
            "OSDS_PORT_9090_TCP",
            "OSDS_REPLICA_SERVICE_HOST",
            "OSDS_REPLICA_PORT_8080_TCP_ADDR",
        ];
        let vars = injected
            .iter()
            .chain(&["OSDS_DATABASE_URL", "PATH"])
            .map(OsString::from);
        let mut expected = injected.map(str::to_string).to_vec();
        expected.sort();
        assert_eq!(check_environment(&root, vars).unwrap(), expected);
        for refused in [
            "OSDS_PORT_HTTP",
            "OSDS_PORT_8080",
            "OSDS_PORT_8080_TCP_HOST",
            "OSDS_SERVICE",
            "OSDS__SERVICE_HOST",
        ] {
            assert!(
                check_environment(&root, [OsString::from(refused)]).is_err(),
                "{refused}"
            );
        }
    }
}

#[cfg(test)]
mod flag_tests {
    use crate::cli::Cli;
    use clap::CommandFactory;

    /// The flags of `cmd` (and its subcommands, `path` naming them) that have no environment variable.
    fn without_env(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long()
                && arg.get_env().is_none()
                && !matches!(long, "help" | "version")
            {
                out.push(format!("{path} --{long}"));
            }
        }
        for sub in command.get_subcommands() {
            without_env(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// What docs/operating.md promises: every setting of the service and every setting the commands share is also an
    /// environment variable; only per-invocation choices of the one-shot commands are flags alone.
    #[test]
    fn every_setting_of_the_service_is_an_environment_variable() {
        let root = Cli::command();
        let mut missing = Vec::new();
        without_env(&root, "osds", &mut missing);
        let serve: Vec<&String> = missing
            .iter()
            .filter(|f| f.starts_with("osds serve "))
            .collect();
        assert!(
            serve.is_empty(),
            "serve flags without a variable: {serve:?}"
        );
        for shared in [
            "--database-url",
            "--components-dir",
            "--log",
            "--config",
            "--admin-socket",
        ] {
            assert!(
                !missing.iter().any(|f| f.ends_with(&format!(" {shared}"))),
                "{shared} lacks a variable somewhere: {missing:?}"
            );
        }
    }
}
