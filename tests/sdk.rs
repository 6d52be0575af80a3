//! docs/decoders.md's "Writing a decoder component", followed literally from a folder outside this repository:
//! its `Cargo.toml`, `src/lib.rs` and frame are taken from the page itself, the crate is built for
//! `wasm32-wasip2` against the decoder SDK, `osds decode --components-dir` decodes the frame with it, and
//! `osds components check --fixtures` checks it without a server.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{json_lines, osds, tests_dir};

/// The fenced blocks of docs/decoders.md's "Writing a decoder component" section, in order, as (language, text)
/// with the list indentation removed.
fn walkthrough_blocks() -> Vec<(String, String)> {
    let page = std::fs::read_to_string(tests_dir().join("../docs/decoders.md")).unwrap();
    let start = page
        .find("## Writing a decoder component")
        .expect("docs/decoders.md has the walkthrough");
    let section = &page[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut current: Option<(String, String, usize)> = None;
    for line in section.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match (&mut current, trimmed.strip_prefix("```")) {
            (None, Some(language)) => current = Some((language.to_string(), String::new(), indent)),
            (Some(_), Some("")) => {
                let (language, text, _) = current.take().unwrap();
                blocks.push((language, text));
            }
            (Some((_, text, indent)), _) => {
                text.push_str(line.get(*indent..).unwrap_or(""));
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

fn block<'a>(blocks: &'a [(String, String)], language: &str) -> &'a str {
    let found: Vec<&str> = blocks
        .iter()
        .filter(|(l, _)| l == language)
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one ```{language} block in the walkthrough");
    found[0]
}

/// `cargo` as the test harness found it, without the variables of the outer build.
fn cargo(dir: &Path) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    command
}

/// A fresh folder outside the repository (and any workspace): in the system's temporary directory.
fn outside_repository(label: &str) -> PathBuf {
    let outside = std::env::temp_dir().join(format!(
        "osds-{label}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&outside).unwrap();
    let repository = tests_dir().join("..").canonicalize().unwrap();
    assert!(!outside.starts_with(&repository));
    outside
}

/// `osds components check WASM --fixtures fixtures`, run in `dir` with no server; what it printed, once it
/// succeeded.
fn checked_offline(dir: &Path, wasm: &Path) -> String {
    let checked = osds()
        .current_dir(dir)
        .args(["components", "check"])
        .arg(wasm)
        .args(["--fixtures", "fixtures"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stdout).to_string();
    assert!(
        checked.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    said
}

#[test]
fn a_decoder_written_outside_the_repository_with_the_sdk_decodes_a_frame() {
    let blocks = walkthrough_blocks();
    let repository = tests_dir().join("..").canonicalize().unwrap();
    let outside = outside_repository("sdk-walkthrough");

    // 1. `cargo new --lib demo-decoder`, then its Cargo.toml with this clone's path.
    let created = cargo(&outside)
        .args(["new", "--lib", "demo-decoder"])
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let crate_dir = outside.join("demo-decoder");
    let manifest = block(&blocks, "toml").replace("/path/to/osds", repository.to_str().unwrap());
    assert!(manifest.contains(&format!("{}/components/decoder-sdk", repository.display())));
    std::fs::write(crate_dir.join("Cargo.toml"), manifest).unwrap();
    // 2. src/lib.rs.
    std::fs::write(crate_dir.join("src/lib.rs"), block(&blocks, "rust")).unwrap();
    // 3. Build it. The build cache is kept between runs (only where the output goes differs).
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-walkthrough");
    let built = cargo(&crate_dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let components = target_dir.join("wasm32-wasip2/release");
    assert!(components.join("demo_decoder.wasm").is_file());
    // 4. Decode the frame with it.
    let frame = crate_dir.join("frame.json");
    std::fs::write(&frame, block(&blocks, "json").trim_end()).unwrap();
    let output = osds()
        .arg("decode")
        .arg("--components-dir")
        .arg(&components)
        .arg(&frame)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = json_lines(&output);
    let report = &lines[0];
    assert_eq!(report["source"], "demo", "{report}");
    assert_eq!(report["eventId"], "2026.0042", "{report}");
    assert_eq!(report["upstreamEventId"], "2026.0042", "{report}");
    assert_eq!(report["revision"], 2, "{report}");
    assert_eq!(report["issuedAt"], "2026-11-23T02:00:05Z", "{report}");
    assert_eq!(report["originAt"], "2026-11-23T01:59:58Z", "{report}");
    assert_eq!(report["latitude"], 24.5, "{report}");
    assert!(report["depthKm"].is_null(), "{report}");
    assert_eq!(report["maxIntensity"], 4.0, "{report}");
    assert_eq!(report["isFinal"], true, "{report}");

    // 5. Check it offline as a running server's canary would: the frame in fixtures/demo/.
    let fixtures = crate_dir.join("fixtures");
    std::fs::create_dir_all(fixtures.join("demo")).unwrap();
    std::fs::copy(&frame, fixtures.join("demo/frame.json")).unwrap();
    let said = checked_offline(&crate_dir, &components.join("demo_decoder.wasm"));
    // A new agency: nothing to compare with, the frame is decoded.
    assert!(
        said.contains("is a valid decoder for `demo`; canary: 1 payloads, 0 unchanged, 1 fixed"),
        "{said}"
    );
    std::fs::remove_dir_all(&outside).unwrap();
}

/// Each SDK carries the WIT of its world inside it, so that it builds from its own package: the same bytes as
/// the repository's `wit/` (the contract's one source), file for file.
#[test]
fn the_sdks_carry_the_repositorys_wit() {
    let root = tests_dir().join("..");
    for (sdk, world) in [
        ("components/decoder-sdk/wit", "wit/eew/v1.0.0"),
        ("components/shaper-sdk/wit", "wit/hyp/v1.0.0"),
    ] {
        let files = |dir: &str| -> Vec<(String, Vec<u8>)> {
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|entry| {
                    let path = entry.unwrap().path();
                    let name = path.file_name().unwrap().to_string_lossy().to_string();
                    (name, std::fs::read(&path).unwrap())
                })
                .collect();
            files.sort();
            files
        };
        let (carried, shipped) = (files(sdk), files(world));
        assert!(!shipped.is_empty(), "{world}");
        let names = |files: &[(String, Vec<u8>)]| -> Vec<String> {
            files.iter().map(|(name, _)| name.clone()).collect()
        };
        assert_eq!(names(&carried), names(&shipped), "{sdk} against {world}");
        assert!(
            carried == shipped,
            "{sdk} differs from {world}: copy the contract again"
        );
    }
}

/// The SDKs package cleanly (`cargo package` builds each from its package alone, with `wolfx-core` packaged
/// beside the decoder SDK), and each package holds its WIT: what a decoder author outside this repository
/// gets is complete.
#[test]
fn the_sdks_package_cleanly_with_their_wit() {
    let root = tests_dir().join("..").canonicalize().unwrap();
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-package");
    let packaged = cargo(&root)
        .args([
            "package",
            "--locked",
            "--allow-dirty",
            "-p",
            "wolfx-core",
            "-p",
            "osds-decoder-sdk",
            "-p",
            "osds-shaper-sdk",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .output()
        .unwrap();
    assert!(
        packaged.status.success(),
        "{}",
        String::from_utf8_lossy(&packaged.stderr)
    );
    for (package, wit) in [
        ("osds-decoder-sdk", "wit/decoder.wit"),
        ("osds-shaper-sdk", "wit/shaper.wit"),
    ] {
        let listed = cargo(&root)
            .args([
                "package",
                "--locked",
                "--allow-dirty",
                "--list",
                "-p",
                package,
            ])
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert!(
            listed.lines().any(|line| line == wit),
            "{package}: {listed}"
        );
    }
}

/// `osds components new` writes a decoder project that passes its own tests and builds into a component the
/// service accepts, from a folder outside this repository; the snapshot the first run writes holds on the next.
#[test]
fn a_new_decoder_project_tests_builds_and_checks_outside_the_repository() {
    let outside = outside_repository("components-new");
    let written = osds()
        .args([
            "components",
            "new",
            "cwa-decoder",
            "--source",
            "cwa",
            "--dir",
        ])
        .arg(&outside)
        .output()
        .unwrap();
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let project = outside.join("cwa-decoder");
    // Again into the same place: refused, nothing overwritten.
    let again = osds()
        .args([
            "components",
            "new",
            "cwa-decoder",
            "--source",
            "cwa",
            "--dir",
        ])
        .arg(&outside)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists and is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("components-new");
    for run in ["writes the snapshot", "checks it"] {
        let tested = cargo(&project)
            .args(["test"])
            .env("CARGO_TARGET_DIR", &target_dir)
            .output()
            .unwrap();
        assert!(
            tested.status.success(),
            "{run}: {}{}",
            String::from_utf8_lossy(&tested.stdout),
            String::from_utf8_lossy(&tested.stderr)
        );
    }
    let snapshot = std::fs::read_to_string(project.join("tests/snapshots/frame.json")).unwrap();
    assert!(
        snapshot.contains("\"eventId\": \"2026.0042\""),
        "{snapshot}"
    );

    let built = cargo(&project)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wasm = target_dir.join("wasm32-wasip2/release/cwa_decoder.wasm");
    let said = checked_offline(&project, &wasm);
    assert!(
        said.contains("`cwa-decoder` (")
            && said.contains("is a valid decoder for `cwa`; canary: 1 payloads"),
        "{said}"
    );
    std::fs::remove_dir_all(&outside).unwrap();
}
