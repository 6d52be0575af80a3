//! A component that loops forever, allocates without bound or panics fails that one payload, within its
//! deadline, and the host decodes the next payload normally. Memory a component keeps between calls does not
//! make later payloads fail.

mod support;

use support::{guest_component_dir, json_lines, osds, tempdir};

/// `osds decode` of `files` with the components in `components` and `flags`: its output and the JSON line per
/// file.
fn decode_with(
    components: &std::path::Path,
    files: &[std::path::PathBuf],
    flags: &[&str],
) -> (std::process::Output, Vec<serde_json::Value>) {
    let output = osds()
        .arg("decode")
        .arg("--components-dir")
        .arg(components)
        .args(flags)
        .args(files)
        .output()
        .unwrap();
    let lines = json_lines(&output);
    (output, lines)
}

#[test]
fn hostile_component_fails_each_payload_and_the_host_carries_on() {
    let components = guest_component_dir("hostile-decoder", "hostile_decoder.wasm");
    let payloads = tempdir("hostile-payloads");
    let mut files = Vec::new();
    for (name, body) in [
        ("1-loop", r#"{"type":"hostile_eew","do":"loop"}"#),
        ("2-fine", r#"{"type":"hostile_eew","do":"nothing"}"#),
        ("3-alloc", r#"{"type":"hostile_eew","do":"alloc"}"#),
        ("4-panic", r#"{"type":"hostile_eew","do":"panic"}"#),
        ("5-fine", r#"{"type":"hostile_eew","do":"nothing"}"#),
    ] {
        let path = payloads.join(format!("{name}.json"));
        std::fs::write(&path, body).unwrap();
        files.push(path);
    }
    // A budget no allocation loop comes near on a loaded machine: the memory limit, not the clock, stops it.
    let (output, lines) = decode_with(&components, &files, &["--component-deadline-ms", "5000"]);
    assert_eq!(
        lines.len(),
        5,
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success());

    assert_eq!(lines[0]["kind"], "timeout", "{}", lines[0]);
    assert_eq!(lines[1]["control"]["kind"], "pong", "{}", lines[1]);
    assert_eq!(lines[2]["kind"], "trap", "{}", lines[2]);
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("memory"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3]["kind"], "trap", "{}", lines[3]);
    assert!(
        lines[3]["error"]
            .as_str()
            .unwrap()
            .contains("hostile decoder panics on purpose"),
        "{}",
        lines[3]
    );
    assert_eq!(lines[4]["control"]["kind"], "pong", "{}", lines[4]);
}

#[test]
fn memory_a_component_keeps_between_calls_does_not_fail_later_payloads() {
    let components = guest_component_dir("hostile-decoder", "hostile_decoder.wasm");
    let payloads = tempdir("keeping-payloads");
    // Each call keeps 12 MiB: ten calls in one instance would pass the 64 MiB limit.
    let files: Vec<_> = (0..10)
        .map(|n| {
            let path = payloads.join(format!("{n}-keep.json"));
            std::fs::write(&path, r#"{"type":"hostile_eew","do":"keep"}"#).unwrap();
            path
        })
        .collect();
    let (output, lines) = decode_with(&components, &files, &[]);
    assert_eq!(
        lines.len(),
        10,
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in &lines {
        assert_eq!(line["control"]["kind"], "pong", "{line}");
    }
    assert!(output.status.success());
}

#[test]
fn a_component_for_another_world_is_refused_with_a_clear_message() {
    let dir = tempdir("not-a-component");
    std::fs::write(dir.join("junk.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let output = osds()
        .arg("decode")
        .arg("--components-dir")
        .arg(&dir)
        .arg(support::tests_dir().join("fixtures/cq/typical.json"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("junk.wasm"), "{stderr}");
}
