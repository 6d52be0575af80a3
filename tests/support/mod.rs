//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The real `osds` binary built for this test run.
pub fn osds() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_osds"));
    command.env_remove("OSDS_CONFIG").env("OSDS_LOG", "warn");
    command
}

/// The workspace's `tests/` folder.
pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

/// Upstream `type` tag of a fixture folder's channel.
pub fn type_tag_of_channel(channel: &str) -> &'static str {
    match channel {
        "cea" => "cenc_eew",
        "sc" => "sc_eew",
        "fj" => "fj_eew",
        "cq" => "cq_eew",
        other => panic!("no channel folder `{other}`"),
    }
}

/// Parses each stdout line of `osds decode` as JSON.
pub fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
        })
        .collect()
}

/// Builds a guest crate under `tests/` for wasm32-wasip2 (once per test binary) and returns a fresh directory
/// holding only its `.wasm`, ready for `--components-dir`.
pub fn guest_component_dir(crate_dir: &str, wasm_name: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let wasm = match built.iter().find(|(name, _)| name == crate_dir) {
        Some((_, wasm)) => wasm.clone(),
        None => {
            let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-build");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args([
                    "build",
                    "--release",
                    "--locked",
                    "--target",
                    "wasm32-wasip2",
                    "--manifest-path",
                ])
                .arg(tests_dir().join(crate_dir).join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target_dir)
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("RUSTFLAGS")
                .status()
                .expect("run cargo");
            assert!(
                status.success(),
                "building tests/{crate_dir} for wasm32-wasip2 failed"
            );
            let wasm = target_dir.join("wasm32-wasip2/release").join(wasm_name);
            built.push((crate_dir.to_string(), wasm.clone()));
            wasm
        }
    };
    let dir = tempdir(crate_dir);
    std::fs::copy(&wasm, dir.join(wasm_name)).expect("copy component");
    dir
}

/// A new empty directory under the test run's temporary area.
pub fn tempdir(label: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}
