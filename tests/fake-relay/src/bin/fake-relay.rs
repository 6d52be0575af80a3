//! `fake-relay --listen ADDR [--heartbeat-secs N] [--replay FILE]`: a fake Wolfx relay for local runs.

use clap::Parser;
use fake_relay::{FakeRelay, RelayConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    about = "A fake Wolfx EEW relay: the five WebSocket paths, heartbeats, ping/pong, query replies"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Seconds between heartbeats; 0: never.
    #[arg(long, default_value_t = 60)]
    heartbeat_secs: u64,
    /// A JSONL file of frames to push, one a second, each routed by its `type`.
    #[arg(long)]
    replay: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let heartbeat_every =
        (args.heartbeat_secs > 0).then(|| Duration::from_secs(args.heartbeat_secs));
    let relay = FakeRelay::start_on(
        args.listen,
        RelayConfig {
            heartbeat_every,
            ..RelayConfig::default()
        },
    )
    .await?;
    println!("listening on {}", relay.url());
    if let Some(path) = args.replay {
        for line in std::fs::read_to_string(&path)?
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let type_tag = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                .unwrap_or_default();
            if let Some(query) = fake_relay::query_command(&type_tag) {
                relay.set_latest(query, line.as_bytes()).await;
            }
            let sent = relay.push(&type_tag, line.as_bytes()).await;
            println!("pushed {type_tag} to {sent} sockets");
        }
    }
    tokio::signal::ctrl_c().await?;
    relay.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod documentation_tests {
    use super::Args;
    use clap::Parser;
    use std::path::Path;

    /// The documentation's `cargo run -p fake-relay -- ARGS` lines parse, and the frames they replay each go to a
    /// channel the relay serves.
    #[test]
    fn the_documented_fake_relay_lines_parse_and_replay_routable_frames() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let lines = osds_testkit::readme::invocations(
            &osds_testkit::readme::documentation(),
            &["cargo", "run", "-p", "fake-relay", "--"],
        );
        assert!(!lines.is_empty());
        for line in lines {
            let args = std::iter::once("fake-relay".to_owned()).chain(line.iter().cloned());
            let args = Args::try_parse_from(args)
                .unwrap_or_else(|e| panic!("`fake-relay {}`: {e}", line.join(" ")));
            let Some(replay) = args.replay else { continue };
            let frames = std::fs::read_to_string(root.join(&replay)).unwrap();
            assert!(frames.lines().count() > 3);
            for frame in frames.lines().filter(|l| !l.trim().is_empty()) {
                let value: serde_json::Value = serde_json::from_str(frame).unwrap();
                let type_tag = value["type"].as_str().unwrap_or_default();
                assert!(
                    fake_relay::channel_path(type_tag).is_some(),
                    "{} has a frame no channel carries: {frame}",
                    replay.display()
                );
            }
        }
    }
}
