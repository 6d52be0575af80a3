//! Builds the decoder components in `components/guests` for `wasm32-wasip2` and embeds them in the binary, so
//! `cargo run -p osds` works on a fresh checkout with only rustup and cargo. Installs the wasm target with
//! rustup when it is missing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-wasip2";
/// The guest that is the hyp report shaper, the one that is the JMA reference decoder; every other guest is a
/// channel decoder.
const SHAPER_MEMBER: &str = "hyp-shaper";
const REFERENCE_MEMBER: &str = "jma";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .expect("host/osds-runtime sits two folders below the workspace root")
        .to_path_buf();
    let guests = root.join("components/guests");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    watch(&root.join("wit"));
    watch(&root.join("components/wolfx-core/src"));
    watch(&root.join("components/hyp-core/src"));
    watch(&root.join("components/decoder-sdk"));
    watch(&root.join("components/shaper-sdk"));
    println!(
        "cargo:rerun-if-changed={}",
        root.join("components/wolfx-core/Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.lock").display()
    );
    let members = guest_members(&guests);
    for member in &members {
        watch(&guests.join(member));
    }

    ensure_wasm_target();
    // A target directory of its own: the outer cargo holds the lock on the workspace's.
    let target_dir = out_dir
        .ancestors()
        .nth(3)
        .unwrap_or(&out_dir)
        .join("osds-guests");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            WASM_TARGET,
            "--manifest-path",
        ])
        .arg(guests.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .expect("run cargo to build the decoder components");
    assert!(
        status.success(),
        "building the decoder components in {} failed",
        guests.display()
    );

    let release = target_dir.join(WASM_TARGET).join("release");
    let mut embedded = String::from(
        "/// The decoder components built from `components/guests`: (crate directory, `.wasm` bytes).\n",
    );
    embedded.push_str("pub const EMBEDDED_COMPONENTS: &[(&str, &[u8])] = &[\n");
    for member in members
        .iter()
        .filter(|m| *m != SHAPER_MEMBER && *m != REFERENCE_MEMBER)
    {
        let wasm = release.join(format!("decoder_{}.wasm", member.replace('-', "_")));
        assert!(wasm.exists(), "component {} was not built", wasm.display());
        embedded.push_str(&format!(
            "    ({member:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    embedded.push_str("];\n");
    let shaper = release.join(format!("{}.wasm", SHAPER_MEMBER.replace('-', "_")));
    assert!(
        shaper.exists(),
        "component {} was not built",
        shaper.display()
    );
    embedded.push_str(&format!(
        "/// The hyp report shaper built from `components/guests/{SHAPER_MEMBER}`.\npub const EMBEDDED_SHAPER: &[u8] = include_bytes!({:?});\n",
        shaper.display().to_string()
    ));
    let reference = release.join("jma_reference.wasm");
    assert!(
        reference.exists(),
        "component {} was not built",
        reference.display()
    );
    embedded.push_str(&format!(
        "/// The JMA reference decoder built from `components/guests/{REFERENCE_MEMBER}`.\npub const EMBEDDED_REFERENCE: &[u8] = include_bytes!({:?});\n",
        reference.display().to_string()
    ));
    fs::write(out_dir.join("embedded_components.rs"), embedded)
        .expect("write embedded_components.rs");
}

/// The guest crate directories listed as workspace members in `components/guests/Cargo.toml`.
fn guest_members(guests: &Path) -> Vec<String> {
    let manifest =
        fs::read_to_string(guests.join("Cargo.toml")).expect("read components/guests/Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("guest workspace lists members");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            let p = entry.path();
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            if p.is_dir() {
                watch(&p)
            } else {
                println!("cargo:rerun-if-changed={}", p.display())
            }
        }
    }
}

fn ensure_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("run rustc --print sysroot");
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(WASM_TARGET)
        .exists()
    {
        return;
    }
    println!(
        "cargo:warning=installing the {WASM_TARGET} target with rustup (needed to build the decoder components)"
    );
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "the {WASM_TARGET} target is missing and `rustup target add {WASM_TARGET}` failed; install it and build again"
    );
}
