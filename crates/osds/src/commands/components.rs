//! `osds components list | check FILE | install CHANNEL FILE | rollback CHANNEL`: operator commands sent to a
//! running server over its admin socket.

use anyhow::Context;
use osds_server::admin::{self, Request};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ComponentsArgs {
    /// The running server's admin socket.
    #[arg(
        long,
        env = "OSDS_ADMIN_SOCKET",
        default_value = osds_server::admin::DEFAULT_SOCKET,
        value_name = "PATH"
    )]
    pub admin_socket: PathBuf,
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
}

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
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let response = runtime.block_on(admin::call(&args.admin_socket, &request))?;
    if response.ok {
        println!("{}", response.message);
    } else {
        eprintln!("osds: {}", response.message);
    }
    if !response.details.is_null() {
        println!("{}", serde_json::to_string_pretty(&response.details)?);
    }
    Ok(if response.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
