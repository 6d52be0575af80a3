//! `osds components list | check FILE | install CHANNEL FILE | rollback CHANNEL`: operator commands sent to a
//! running server over its admin socket.

use anyhow::Context;
use osds_server::admin::{self, Request};
use osds_server::hot_swap::ExportedComponent;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    Check {
        /// The component's `.wasm`.
        file: PathBuf,
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
}

/// The file's bytes as the admin socket takes them (hex); the server says whether they are a component.
fn read_wasm(file: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(file).with_context(|| format!("read {}", file.display()))?;
    Ok(hex::encode(bytes))
}

pub fn run(args: ComponentsArgs) -> anyhow::Result<ExitCode> {
    let request = match &args.action {
        Action::List => Request::List,
        Action::Check { file } => Request::Check {
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
