//! The `osds` command line.

use crate::commands;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "osds", version, about = "Open Seismic Data Service: a public, read-only seismic data API", long_about = None)]
pub struct Cli {
    /// TOML file of settings: keys are the long flag names (e.g. `database-url = "sqlite://..."`).
    /// Flags beat environment variables (OSDS_*), which beat the file.
    #[arg(long, global = true, env = "OSDS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `osds=debug`; `osds_api=debug` logs every HTTP
    /// request with its route, status and latency.
    #[arg(long, global = true, env = "OSDS_LOG", default_value = "info")]
    pub log: String,

    /// Log lines as text (coloured only when stderr is a terminal) or as one JSON object each.
    #[arg(
        long,
        global = true,
        env = "OSDS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: ingest from the upstream relay, archive, and serve the API.
    Serve(Box<commands::serve::ServeArgs>),
    /// Decode upstream frames from files through the loaded decoder components and print them as JSON.
    Decode(commands::decode::DecodeArgs),
    /// Operate the components of a running server: list, check, install (hot swap), roll back or export them.
    Components(commands::components::ComponentsArgs),
    /// Re-decode archived payloads that are still unparsed with the current decoders (appends, never edits).
    Reparse(commands::reparse::ReparseArgs),
    /// The self-sensing archive: import detector solutions, hide or unhide an event, backfill recovered peaks.
    Hyp(commands::hyp::HypArgs),
    /// Run a synthetic earthquake end to end through the detector into the archive, printing each report.
    Simulate(commands::simulate::SimulateArgs),
    /// Take a consistent backup of the archive now (safe while `osds serve` runs) and rotate old backups.
    Backup(commands::backup::BackupArgs),
    /// Restore a backup as the archive (the service stopped): a new archiveId, report ids never reused.
    Restore(commands::restore::RestoreArgs),
    /// Print a shell's completion script for osds (e.g. `osds completions bash > /etc/bash_completion.d/osds`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual pages of osds and of each command, in roff: written to DIR as `osds.1`, `osds-serve.1`, ...
    /// (e.g. `osds man --dir /usr/local/share/man/man1`), or printed one after another.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `osds man`: the top-level page and one page per command (`osds-serve(1)`, ...), each a file in `dir`, or
/// all on stdout.
fn man_pages(dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let root = Cli::command();
    let mut pages = vec![("osds".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("osds-{}", sub.get_name());
        let page = sub.clone().name(name.clone()).bin_name(name.clone());
        pages.push((name, page.version(env!("CARGO_PKG_VERSION"))));
    }
    for (name, page) in pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff)?;
        match &dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("create {}", dir.display()))?;
                let path = dir.join(format!("{name}.1"));
                std::fs::write(&path, roff).with_context(|| format!("write {}", path.display()))?;
            }
            None => std::io::Write::write_all(&mut std::io::stdout().lock(), &roff)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    let command = Cli::command();
    let configured =
        crate::config::check_environment(&command, std::env::vars_os().map(|(name, _)| name))
            .and_then(|links| Ok((links, crate::config::with_file(command, &args)?)));
    let (service_links, (command, file_keys)) = match configured {
        Ok(configured) => configured,
        Err(e) => {
            eprintln!("osds: {e:#}");
            return ExitCode::from(2);
        }
    };
    let root = command.clone();
    let matches = command.get_matches_from(args.clone());
    let mut path = Vec::new();
    let mut current = &matches;
    while let Some((name, sub)) = current.subcommand() {
        path.push(name.to_string());
        current = sub;
    }
    if let Err(e) = crate::config::check_applicable(&root, &path, &file_keys) {
        eprintln!("osds: {e:#}");
        return ExitCode::from(2);
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Err(e) = init_logging(&cli.log, cli.log_format) {
        eprintln!("osds: {e:#}");
        return ExitCode::from(2);
    }
    if !service_links.is_empty() {
        tracing::warn!(
            variables = %service_links.join(", "),
            "ignoring environment variables of the form Kubernetes injects for a Service named osds…: they are not settings"
        );
    }
    let result = match cli.command {
        Command::Serve(args) => commands::serve::run(*args),
        Command::Decode(args) => commands::decode::run(args),
        Command::Components(args) => commands::components::run(args),
        Command::Reparse(args) => commands::reparse::run(args),
        Command::Hyp(args) => commands::hyp::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Backup(args) => commands::backup::run(args),
        Command::Restore(args) => commands::restore::run(args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "osds", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => man_pages(dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("osds: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("--log `{filter}` is not a log filter: {e}"))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    Ok(())
}

#[cfg(test)]
mod documentation_tests {
    use super::Cli;
    use clap::CommandFactory;
    use osds_testkit::readme::{documentation, invocations, shell_commands};
    use std::path::Path;

    fn root() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    /// Every `osds …` line of the documentation (the README and `docs/`), and what it runs through
    /// `cargo run -p osds --`, is one the command line takes (flags, values and subcommands as written).
    #[test]
    fn every_osds_command_of_the_documentation_parses() {
        let docs = documentation();
        let mut lines = invocations(&docs, &["osds"]);
        for cargo in invocations(&docs, &["cargo", "run"]) {
            if let Some(dash) = cargo.iter().position(|w| w == "--")
                && cargo.windows(2).any(|w| w == ["-p", "osds"])
            {
                lines.push(cargo[dash + 1..].to_vec());
            }
        }
        assert!(lines.len() > 15, "{lines:?}");
        for line in lines {
            let args = std::iter::once("osds".to_owned()).chain(line.iter().cloned());
            if let Err(e) = Cli::command().try_get_matches_from(args) {
                panic!("`osds {}` does not parse:\n{e}", line.join(" "));
            }
        }
    }

    /// Every `cargo` line names packages, binaries and benchmarks of the workspace; every script it runs is
    /// there and executable.
    #[test]
    fn every_cargo_line_and_script_of_the_documentation_names_what_exists() {
        let root = root();
        let manifest = |dir: &str| -> toml::Table {
            std::fs::read_to_string(root.join(dir).join("Cargo.toml"))
                .unwrap()
                .parse()
                .unwrap()
        };
        let workspace = manifest(".");
        let members: Vec<(String, toml::Table)> = workspace["workspace"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|dir| {
                let table = manifest(dir.as_str().unwrap());
                (table["package"]["name"].as_str().unwrap().to_owned(), table)
            })
            .collect();
        let targets = |table: &toml::Table, kind: &str| -> Vec<String> {
            table
                .get(kind)
                .and_then(|t| t.as_array())
                .into_iter()
                .flatten()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let mut checked = 0;
        for words in shell_commands(&documentation()) {
            if words[0].ends_with(".sh") {
                let script = root.join(&words[0]);
                let mode = std::os::unix::fs::PermissionsExt::mode(
                    &std::fs::metadata(&script)
                        .unwrap_or_else(|e| panic!("{}: {e}", script.display()))
                        .permissions(),
                );
                assert!(mode & 0o111 != 0, "{} is not executable", script.display());
                checked += 1;
            }
            if words[0] != "cargo" {
                continue;
            }
            let after = |flag: &str| {
                words
                    .iter()
                    .position(|w| w == flag)
                    .map(|i| words[i + 1].clone())
            };
            // Everything up to `--` is cargo's: files after it are the program's.
            let own = words.iter().position(|w| w == "--").unwrap_or(words.len());
            if let Some(package) = after("-p") {
                let (_, table) = members
                    .iter()
                    .find(|(name, _)| *name == package)
                    .unwrap_or_else(|| panic!("no workspace package `{package}`: {words:?}"));
                for (flag, kind) in [("--bin", "bin"), ("--bench", "bench")] {
                    if let Some(target) = after(flag) {
                        assert!(
                            targets(table, kind).contains(&target),
                            "`{package}` has no {kind} `{target}`: {words:?}"
                        );
                    }
                }
            }
            for word in &words[own..] {
                if word.contains('/') && word.ends_with(".jsonl") {
                    assert!(root.join(word).exists(), "{word} is missing: {words:?}");
                }
            }
            checked += 1;
        }
        assert!(checked >= 8, "{checked}");
    }

    const REFERENCE_BEGIN: &str = "<!-- flag reference: generated, do not edit by hand -->\n";
    const REFERENCE_END: &str = "<!-- end of flag reference -->";

    /// Every command's help, as `osds … --help` prints it (environment values hidden: the page must not
    /// depend on who generated it).
    fn flag_reference() -> String {
        fn hide_values(command: clap::Command) -> clap::Command {
            let command = command.mut_args(|arg| arg.hide_env_values(true));
            let names: Vec<String> = command
                .get_subcommands()
                .map(|sub| sub.get_name().to_owned())
                .collect();
            names.iter().fold(command, |command, name| {
                command.mut_subcommand(name, hide_values)
            })
        }
        fn walk(command: &mut clap::Command, path: &str, out: &mut String) {
            let help = command.render_long_help().to_string();
            out.push_str(&format!(
                "\n### `{path}`\n\n```text\n{}\n```\n",
                help.trim_end()
            ));
            for sub in command.get_subcommands_mut() {
                if sub.get_name() != "help" {
                    let path = format!("{path} {}", sub.get_name());
                    walk(sub, &path, out);
                }
            }
        }
        let mut command = hide_values(Cli::command());
        command.build();
        let mut out = String::new();
        walk(&mut command, "osds", &mut out);
        out.push('\n');
        out
    }

    /// docs/operating.md's flag reference is the commands' own help, every command and subcommand: a flag added,
    /// renamed or explained differently changes the page. `OSDS_BLESS=1` writes it again.
    #[test]
    fn flag_reference_is_the_commands_help() {
        let path = root().join("docs/operating.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (head, rest) = page
            .split_once(REFERENCE_BEGIN)
            .expect("the reference's start");
        let (current, tail) = rest.split_once(REFERENCE_END).expect("the reference's end");
        let generated = flag_reference();
        assert!(generated.contains("### `osds serve`") && generated.contains("--database-url"));
        if std::env::var_os("OSDS_BLESS").is_some() {
            let page = format!("{head}{REFERENCE_BEGIN}{generated}{REFERENCE_END}{tail}");
            std::fs::write(&path, page).unwrap();
            return;
        }
        assert!(
            current == generated,
            "docs/operating.md's flag reference is not the commands' help; write it again with \
             `OSDS_BLESS=1 cargo test -p osds flag_reference`"
        );
    }

    /// Every long flag some `osds` command takes (global ones included).
    fn every_flag(command: &clap::Command, out: &mut std::collections::BTreeSet<String>) {
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long() {
                out.insert(long.to_owned());
            }
        }
        for sub in command.get_subcommands() {
            every_flag(sub, out);
        }
    }

    /// The inline code spans of `markdown` outside its fenced blocks.
    fn code_spans(markdown: &str) -> Vec<String> {
        let mut prose = String::new();
        let mut fenced = false;
        for line in markdown.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            } else if !fenced {
                prose.push_str(line);
                prose.push('\n');
            }
        }
        prose
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    /// A flag the documentation names in prose (a code span that is a flag, or an `osds …` line) is one a command
    /// takes: a flag renamed or removed cannot stay in the pages (the shell blocks are parsed whole above).
    #[test]
    fn every_flag_the_documentation_names_exists() {
        let mut known = std::collections::BTreeSet::new();
        let mut command = Cli::command();
        command.build();
        every_flag(&command, &mut known);
        let docs = documentation();
        let prose = docs.split(REFERENCE_BEGIN).next().unwrap().to_owned()
            + docs.split(REFERENCE_END).nth(1).unwrap_or("");
        let mut named = 0;
        for span in code_spans(&prose) {
            if !(span.starts_with("--") || span.starts_with("osds ")) {
                continue;
            }
            for word in span.split_whitespace().filter(|w| w.starts_with("--")) {
                let flag = word
                    .trim_start_matches("--")
                    .split(['=', '[', ']', ')', ',', '.'])
                    .next()
                    .unwrap();
                if flag.is_empty() {
                    continue;
                }
                named += 1;
                assert!(
                    known.contains(flag),
                    "`{span}` names --{flag}, which no command takes"
                );
            }
        }
        assert!(named > 50, "{named}");
    }
}
