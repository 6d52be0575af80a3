//! The local admin channel: a Unix domain socket (never the public port) on which the running server takes
//! operator commands, one JSON line in and one JSON line out per connection.

use crate::hot_swap::{ComponentManager, SHAPER_CHANNEL};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// The admin socket when none is configured (`osds serve` and `osds components` must agree on it).
pub const DEFAULT_SOCKET: &str = "data/osds-admin.sock";

/// A request larger than this (a component is sent inline) is refused.
const MAX_REQUEST_BYTES: u64 = 256 << 20;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Request {
    List,
    Check {
        wasm_hex: String,
    },
    Install {
        channel: String,
        wasm_hex: String,
        force: bool,
    },
    Rollback {
        channel: String,
    },
    /// The `.wasm` bytes of every component in service.
    Export,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    pub message: String,
    #[serde(default)]
    pub details: Value,
}

/// Listens on `path` (replacing a stale socket file) until the service stops. Only the owner may connect.
pub fn serve(
    path: PathBuf,
    manager: Arc<ComponentManager>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("create admin socket directory {}", parent.display()))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            anyhow::bail!(
                "another server is listening on the admin socket {}",
                path.display()
            );
        }
        std::fs::remove_file(&path)
            .with_context(|| format!("remove stale admin socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(&path)
        .with_context(|| format!("bind admin socket {}", path.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restrict admin socket {}", path.display()))?;
    }
    tracing::info!(socket = %path.display(), "admin socket ready");
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let manager = manager.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle(stream, manager).await {
                            tracing::warn!(error = %format!("{e:#}"), "admin connection failed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "admin socket accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }))
}

async fn handle(stream: UnixStream, manager: Arc<ComponentManager>) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read.take(MAX_REQUEST_BYTES))
        .read_line(&mut line)
        .await?;
    let response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => execute(request, &manager).await,
        Err(e) => Response {
            ok: false,
            message: format!("not an admin request: {e}"),
            details: Value::Null,
        },
    };
    let mut out = serde_json::to_vec(&response)?;
    out.push(b'\n');
    write.write_all(&out).await?;
    write.shutdown().await?;
    Ok(())
}

fn wasm_of(hex_text: &str) -> anyhow::Result<Vec<u8>> {
    let wasm = hex::decode(hex_text).context("the component bytes are not hex")?;
    // One sentence for the common mistakes, rather than the parser's byte dump.
    match wasm.get(..8) {
        // The component binary format: layer 1.
        Some([0, b'a', b's', b'm', _, _, 0x01, 0x00]) => Ok(wasm),
        Some([0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00]) => anyhow::bail!(
            "the file is a core WebAssembly module, not a component: build it for wasm32-wasip2"
        ),
        _ => anyhow::bail!("the file is not a WebAssembly component"),
    }
}

async fn execute(request: Request, manager: &ComponentManager) -> Response {
    let failed = |e: anyhow::Error, details: Value| Response {
        ok: false,
        message: format!("{e:#}"),
        details,
    };
    match request {
        Request::List => Response {
            ok: true,
            message: "loaded decoders".into(),
            details: manager.list().await,
        },
        Request::Export => {
            let files = manager.export();
            Response {
                ok: true,
                message: format!("{} components in service", files.len()),
                details: serde_json::to_value(files).unwrap_or_default(),
            }
        }
        Request::Check { wasm_hex } => {
            let wasm = match wasm_of(&wasm_hex) {
                Ok(wasm) => wasm,
                Err(e) => return failed(e, Value::Null),
            };
            // Not a decoder? It may be a shaper.
            if let Ok((_, verdict)) = manager.check_shaper(wasm.clone()).await {
                // What `install` would refuse (without --force), `check` fails.
                let refused = verdict.canary.new_errors > 0;
                return Response {
                    ok: !refused,
                    message: format!(
                        "`{}` ({}) is a valid hyp shaper{}; canary: {}",
                        verdict.shaper.name,
                        verdict.shaper.sha256,
                        if refused {
                            ", but an install would be refused: the canary found solutions it cannot shape"
                        } else {
                            ""
                        },
                        verdict.canary.counts()
                    ),
                    details: serde_json::to_value(&verdict).unwrap_or_default(),
                };
            }
            match manager.check(wasm).await {
                // What `install` would refuse (without --force), `check` fails.
                Ok((_, verdict)) => {
                    let (ok, message) = verdict.summary();
                    Response {
                        ok,
                        message,
                        details: serde_json::to_value(&verdict).unwrap_or_default(),
                    }
                }
                Err(e) => failed(e, Value::Null),
            }
        }
        Request::Install {
            channel,
            wasm_hex,
            force,
        } if channel == SHAPER_CHANNEL => {
            let installed = match wasm_of(&wasm_hex) {
                Ok(wasm) => manager.install_shaper(wasm, force).await,
                Err(e) => Err(e.into()),
            };
            match installed {
                Ok(verdict) => Response {
                    ok: true,
                    message: format!(
                        "installed the hyp shaper `{}` ({}); canary: {}",
                        verdict.shaper.name,
                        verdict.shaper.sha256,
                        verdict.canary.counts()
                    ),
                    details: serde_json::to_value(&verdict).unwrap_or_default(),
                },
                Err(refusal) => failed(anyhow::anyhow!(refusal.message), Value::Null),
            }
        }
        Request::Rollback { channel } if channel == SHAPER_CHANNEL => {
            match manager.rollback_shaper().await {
                Ok(info) => Response {
                    ok: true,
                    message: format!("the hyp shaper is `{}` ({}) again", info.name, info.sha256),
                    details: json!({ "shaper": info }),
                },
                Err(e) => failed(e, Value::Null),
            }
        }
        Request::Install {
            channel,
            wasm_hex,
            force,
        } => {
            let installed = match wasm_of(&wasm_hex) {
                Ok(wasm) => manager.install(&channel, wasm, force).await,
                Err(e) => Err(e.into()),
            };
            match installed {
                Ok(verdict) => Response {
                    ok: true,
                    message: format!(
                        "installed `{}` ({}) for `{channel}`; canary: {}",
                        verdict.decoder.name,
                        verdict.decoder.sha256,
                        verdict.canary.counts()
                    ),
                    details: serde_json::to_value(&verdict).unwrap_or_default(),
                },
                Err(refusal) => Response {
                    ok: false,
                    message: refusal.message,
                    details: serde_json::to_value(&refusal.verdict).unwrap_or_default(),
                },
            }
        }
        Request::Rollback { channel } => match manager.rollback(&channel).await {
            Ok(info) => Response {
                ok: true,
                message: format!(
                    "`{channel}` is decoded by `{}` ({}) again",
                    info.name, info.sha256
                ),
                details: json!({ "decoder": info }),
            },
            Err(e) => failed(e, Value::Null),
        },
    }
}

/// Sends one request to the server listening on `path` and waits for its answer.
pub async fn call(path: &Path, request: &Request) -> anyhow::Result<Response> {
    let stream = UnixStream::connect(path).await.with_context(|| {
        format!(
            "connect to the admin socket {} (is `osds serve` running with this --admin-socket?)",
            path.display()
        )
    })?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.shutdown().await?;
    let mut answer = String::new();
    BufReader::new(read).read_line(&mut answer).await?;
    serde_json::from_str(&answer)
        .with_context(|| format!("unreadable answer from the server: {answer}"))
}
