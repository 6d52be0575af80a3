//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

pub mod contract;
pub mod database;
pub mod geojson;
pub mod in_process;
pub mod live;

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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// Upstream `type` tag of a fixture folder's channel.
pub fn type_tag_of_channel(channel: &str) -> &'static str {
    wolfx_core::CHANNELS
        .iter()
        .find(|c| c.source == channel)
        .map(|c| c.type_tag)
        .unwrap_or_else(|| panic!("no channel folder `{channel}`"))
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

/// Builds a guest crate (or workspace of guest crates) under `tests/` for wasm32-wasip2, once per test binary,
/// and returns a fresh directory holding only the named `.wasm`, ready for `--components-dir`.
pub fn guest_component_dir(crate_dir: &str, wasm_name: &str) -> PathBuf {
    let dir = tempdir(crate_dir);
    std::fs::copy(guest_component(crate_dir, wasm_name), dir.join(wasm_name))
        .expect("copy component");
    dir
}

/// Builds a guest crate (or workspace of guest crates) under `tests/` for wasm32-wasip2, once per test
/// binary, and returns the path of the named `.wasm`.
pub fn guest_component(crate_dir: &str, wasm_name: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-build");
    if !built.iter().any(|name| name == crate_dir) {
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
        built.push(crate_dir.to_string());
    }
    let wasm = target_dir.join("wasm32-wasip2/release").join(wasm_name);
    assert!(wasm.exists(), "{} was not built", wasm.display());
    wasm
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

/// Tests other than the gateway's make many requests from one address: they run with the per-client limits
/// raised, unless they set those limits themselves.
fn relaxed_limits(extra: &[&str]) -> Vec<&'static str> {
    let mut args = Vec::new();
    if !extra.contains(&"--rate-limit-burst") {
        args.extend([
            "--rate-limit-burst",
            "1000000",
            "--rate-limit-per-sec",
            "100000",
        ]);
    }
    if !extra.contains(&"--max-connections-per-client") {
        args.extend(["--max-connections-per-client", "10000"]);
    }
    if !extra.contains(&"--max-open-connections-per-client") {
        args.extend(["--max-open-connections-per-client", "20000"]);
    }
    args
}

pub use osds_testkit::server::Server;

/// `osds serve` against `upstream` with fast timings (checks every 0.2 s, silence after 1.5 s, back-off capped
/// at 0.5 s), on a fresh database in a new directory (removed with the server unless the test fails).
pub fn start_server(upstream: &str, extra: &[&str]) -> Server {
    start_server_in(tempdir("server"), upstream, extra).removing_dir()
}

/// Like [`start_server`], on the database already in `dir` (for restarts); the directory stays.
pub fn start_server_in(dir: PathBuf, upstream: &str, extra: &[&str]) -> Server {
    launch(dir, upstream, extra)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// How [`start_server_in`] starts the server, for a test that adds to it.
pub fn launch(dir: PathBuf, upstream: &str, extra: &[&str]) -> osds_testkit::server::Launch {
    let mut launch = osds_testkit::server::Launch::new(env!("CARGO_BIN_EXE_osds"), &dir);
    if database::on_postgres() {
        launch = launch.database_url(database::url_for(&dir));
    }
    launch
        .args(["--upstream-url", upstream])
        .args([
            "--upstream-check-secs",
            "0.2",
            "--upstream-silence-secs",
            "1.5",
            "--upstream-backoff-cap-secs",
            "0.5",
        ])
        .args(relaxed_limits(extra))
        .args(extra.iter().copied())
}

/// Runs `.ci/<script> <target tmp>/<folder>` once per test binary (the script itself installs once across
/// binaries, under a lock) and returns `<target tmp>/<folder>/<binary>`.
fn installed_once(
    once: &'static std::sync::OnceLock<PathBuf>,
    script: &str,
    folder: &str,
    binary: &str,
) -> PathBuf {
    once.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
        let status = std::process::Command::new("bash")
            .arg(tests_dir().join("../.ci").join(script))
            .arg(&dir)
            .status()
            .unwrap_or_else(|e| panic!("run .ci/{script}: {e}"));
        assert!(status.success(), ".ci/{script} failed");
        dir.join(binary)
    })
    .clone()
}

/// schemathesis's `st`, installed by `.ci/install-schemathesis` (pinned, from PyPI) into a virtual environment
/// under the target directory the first time a test needs it.
pub fn schemathesis() -> PathBuf {
    static INSTALLED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    installed_once(&INSTALLED, "install-schemathesis", "schemathesis", "bin/st")
}

/// The Python of a virtual environment with ObsPy, installed by `.ci/install-obspy` (pinned, from PyPI) under the
/// target directory the first time a test needs it.
pub fn obspy_python() -> PathBuf {
    static INSTALLED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    installed_once(&INSTALLED, "install-obspy", "obspy", "bin/python")
}

/// Runs `tests/fdsn/obspy_client.py` against the FDSN event service at `base` (the server's root URL): each of
/// `queries` (keyword arguments of ObsPy's `Client.get_events`) gives the events ObsPy parsed, as JSON, or the
/// string `nodata`.
pub fn obspy_get_events(base: &str, queries: &serde_json::Value) -> Vec<serde_json::Value> {
    let output = std::process::Command::new(obspy_python())
        .arg(tests_dir().join("fdsn/obspy_client.py"))
        .arg(base)
        .arg(queries.to_string())
        .output()
        .expect("run the ObsPy client");
    assert!(
        output.status.success(),
        "the ObsPy client failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the ObsPy client prints JSON")
}

/// Prometheus's `promtool`, unpacked by `.ci/install-promtool` (from Debian's `prometheus` package) under the
/// target directory the first time a test needs it.
pub fn promtool() -> PathBuf {
    static INSTALLED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    installed_once(&INSTALLED, "install-promtool", "promtool", "promtool")
}

/// The address of `server`'s metrics listener, as `osds serve` prints it.
pub fn metrics_url(server: &Server) -> String {
    server
        .stdout()
        .iter()
        .find_map(|line| line.strip_prefix("osds: metrics ").map(str::to_owned))
        .expect("the metrics address on stdout")
}

/// The value of the series written exactly `series` (name and labels as exported) in a Prometheus text.
pub fn metric<T: std::str::FromStr>(scraped: &str, series: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    scraped
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no series {series} in:\n{scraped}"))
        .trim()
        .parse()
        .unwrap()
}

/// GET `url` and parse the JSON body; panics with the body on a non-2xx status.
pub async fn get_json(url: &str) -> serde_json::Value {
    let response = reqwest::get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status();
    let body = response.text().await.expect("body");
    assert!(status.is_success(), "GET {url} → {status}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {body}"))
}

/// Polls `probe` every 50 ms until it returns `Some`, or panics after `seconds`.
pub async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The archived bytes of reception record `delivery`.
pub async fn raw_bytes(server: &Server, delivery: i64) -> bytes::Bytes {
    reqwest::get(server.url(&format!("/deliveries/{delivery}/raw")))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
}

/// The ids of a `/reports` page's items, in order.
pub fn page_ids(page: &serde_json::Value) -> Vec<i64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

/// All report versions from `/reports`, following `nextCursor`.
pub async fn all_reports(server: &Server) -> Vec<serde_json::Value> {
    let mut after = 0;
    let mut all = Vec::new();
    loop {
        let page = get_json(&server.url(&format!("/reports?after={after}&limit=1000"))).await;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return all;
        }
        after = page["nextCursor"].as_i64().expect("nextCursor");
        all.extend(items);
    }
}

/// Starts a fake relay and a server on a fresh database, and waits until every upstream path is connected.
pub async fn start_connected(
    config: fake_relay::RelayConfig,
    extra: &[&str],
) -> (fake_relay::FakeRelay, Server) {
    let relay = fake_relay::FakeRelay::start(config).await.unwrap();
    let server = start_server(&relay.url(), extra);
    for path in fake_relay::channel_paths() {
        assert!(
            relay
                .wait_connected(path, 1, std::time::Duration::from_secs(20))
                .await,
            "server never connected {path}; log:\n{}",
            server.log()
        );
    }
    (relay, server)
}

/// Waits until the server sent its four queries on `/all_eew` and their reply window (0.3 s when the server
/// runs with `--upstream-query-window-secs 0.3`) has passed, so later frames count as pushes.
pub async fn wait_queries_done(relay: &fake_relay::FakeRelay) {
    eventually(20, "queries sent", || async {
        (relay
            .received()
            .await
            .iter()
            .filter(|(path, text)| path == "/all_eew" && text.starts_with("query_"))
            .count()
            >= 4)
            .then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
}
