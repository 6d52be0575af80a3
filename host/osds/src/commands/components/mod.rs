//! `osds components list | check FILE | install CHANNEL FILE | rollback CHANNEL | export DIR`: operator
//! commands sent to a running server over its admin socket; `check FILE --fixtures DIR` also works without one,
//! and `new NAME` writes a decoder project.

mod new;

use anyhow::Context;
use osds_runtime::Runtime;
use osds_runtime::decoder_set::DecoderSet;
use osds_server::admin::{self, Request};
use osds_server::hot_swap::{self, ExportedComponent};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct ComponentsArgs {
    /// The running server's admin socket (before or after the action).
    #[arg(
        long,
        global = true,
        env = "OSDS_ADMIN_SOCKET",
        default_value = osds_server::admin::DEFAULT_SOCKET,
        value_name = "PATH"
    )]
    pub admin_socket: PathBuf,
    /// Print the server's whole answer as one JSON object (`ok`, `message`, `details`) on stdout, and nothing
    /// else there.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// The loaded decoders, when each was installed, and what a rollback would restore.
    List,
    /// Validate a component and run the canary against the current decoder of its channel, without installing.
    /// With --fixtures, no server is asked: the canary decodes the channel's fixture files with the built-in
    /// decoder (or --components-dir's) and with the new one, as a running server's canary would.
    Check {
        /// The component's `.wasm`.
        file: PathBuf,
        /// Check offline against this folder of fixtures, one frame per file in a folder per channel
        /// (`DIR/<source>/*`), like `serve --canary-fixtures`.
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// With --fixtures: the decoders in service are this directory's components (`*.wasm`) instead of the
        /// built-in ones.
        #[arg(
            long,
            env = "OSDS_COMPONENTS_DIR",
            value_name = "DIR",
            requires = "fixtures"
        )]
        components_dir: Option<PathBuf>,
        #[command(flatten)]
        limits: super::limits_args::LimitsArgs,
    },
    /// Validate, canary and swap in a component as the decoder of CHANNEL (a `source`, e.g. `sc`). A channel
    /// the service does not archive yet is added.
    Install {
        channel: String,
        file: PathBuf,
        /// Install even when the canary finds payloads the new decoder cannot decode.
        #[arg(long)]
        force: bool,
    },
    /// Put back the decoder CHANNEL had before its last install.
    Rollback { channel: String },
    /// Write every component in service to DIR (created when missing): `decoder_<source>.wasm` each, usable as
    /// a --components-dir, and `hyp_shaper.wasm`.
    Export { dir: PathBuf },
    /// Write a new decoder project NAME (a folder of that name) for the channel SOURCE: manifest, decoder,
    /// fixture and tests, ready for `cargo test` and `cargo build --release --target wasm32-wasip2`. No server
    /// is asked.
    New {
        name: String,
        /// The channel's `source`: its frames are of type `SOURCE_eew` from `/SOURCE_eew`.
        #[arg(long)]
        source: String,
        /// Write it in DIR instead of the current folder.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// The decoder SDK to depend on (components/decoder-sdk of a clone); the clone this binary was built
        /// from by default.
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

/// The file's bytes as the admin socket takes them (hex); the server says whether they are a component.
fn read_wasm(file: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(file).with_context(|| format!("read {}", file.display()))?;
    Ok(hex::encode(bytes))
}

pub fn run(args: ComponentsArgs) -> anyhow::Result<ExitCode> {
    if let Action::New {
        name,
        source,
        dir,
        sdk,
    } = &args.action
    {
        let written = new::create(name, source, dir, sdk.as_deref())?;
        println!(
            "wrote {}: `cargo test` there, then `cargo build --release --target wasm32-wasip2`",
            written.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Action::Check {
        file,
        fixtures: Some(fixtures),
        components_dir,
        limits,
    } = &args.action
    {
        return check_offline(file, fixtures, components_dir.as_deref(), limits, args.json);
    }
    let request = match &args.action {
        Action::List => Request::List,
        Action::Check { file, .. } => Request::Check {
            wasm_hex: read_wasm(file)?,
        },
        Action::Install {
            channel,
            file,
            force,
        } => Request::Install {
            channel: channel.clone(),
            wasm_hex: read_wasm(file)?,
            force: *force,
        },
        Action::Rollback { channel } => Request::Rollback {
            channel: channel.clone(),
        },
        Action::Export { .. } => Request::Export,
        Action::New { .. } => unreachable!("answered above, without a server"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let response = runtime.block_on(admin::call(&args.admin_socket, &request))?;
    if let (Action::Export { dir }, true) = (&args.action, response.ok) {
        return export(dir, response, args.json);
    }
    if args.json {
        println!("{}", serde_json::to_string(&response)?);
    } else {
        if response.ok {
            println!("{}", response.message);
        } else {
            eprintln!("osds: {}", response.message);
        }
        // The list is the answer; a canary's payload by payload differences back up a refusal. Other details
        // (what was installed, what was checked) are in --json.
        let canary_refusal = !response.ok && response.details.get("canary").is_some();
        if !response.details.is_null() && (matches!(args.action, Action::List) || canary_refusal) {
            println!("{}", serde_json::to_string_pretty(&response.details)?);
        }
    }
    Ok(if response.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `check --fixtures`: the verdict a running server's `check` would give, with the fixtures as the canary's only
/// payloads and no server asked.
fn check_offline(
    file: &Path,
    fixtures: &Path,
    components_dir: Option<&Path>,
    limits: &super::limits_args::LimitsArgs,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let wasm = std::fs::read(file).with_context(|| format!("read {}", file.display()))?;
    let runtime = Arc::new(Runtime::new(limits.limits())?);
    let set = DecoderSet::load(&runtime, components_dir)?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let checked = tokio.block_on(hot_swap::check_offline(&runtime, &set, wasm, fixtures));
    let (ok, message, details) = match checked {
        Ok(verdict) => {
            let (ok, message) = verdict.summary();
            (ok, message, serde_json::to_value(&verdict)?)
        }
        Err(e) => (false, format!("{e:#}"), serde_json::Value::Null),
    };
    if json {
        let answer = serde_json::json!({"ok": ok, "message": message, "details": details});
        println!("{answer}");
    } else if ok {
        println!("{message}");
    } else {
        eprintln!("osds: {message}");
        if !details.is_null() {
            println!("{}", serde_json::to_string_pretty(&details["canary"])?);
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes the exported components into `dir` (each file whole, then renamed into place).
fn export(dir: &Path, response: admin::Response, json: bool) -> anyhow::Result<ExitCode> {
    let files: Vec<ExportedComponent> =
        serde_json::from_value(response.details).context("unreadable export from the server")?;
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut written = Vec::new();
    for file in &files {
        anyhow::ensure!(
            !file.file.contains(['/', '\\']) && file.file.ends_with(".wasm"),
            "the server named an unexpected file `{}`",
            file.file
        );
        let wasm = hex::decode(&file.wasm_hex).context("the component bytes are not hex")?;
        let path = dir.join(&file.file);
        let temporary = dir.join(format!(".{}.tmp", file.file));
        std::fs::write(&temporary, &wasm)
            .with_context(|| format!("write {}", temporary.display()))?;
        std::fs::rename(&temporary, &path).with_context(|| format!("write {}", path.display()))?;
        written.push(serde_json::json!({ "path": path, "name": file.name, "sha256": file.sha256 }));
        if !json {
            println!("{}: `{}` ({})", path.display(), file.name, file.sha256);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "ok": true, "message": format!("{} components written to {}", files.len(), dir.display()), "details": written })
        );
    }
    Ok(ExitCode::SUCCESS)
}
