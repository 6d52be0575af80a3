//! Settings are strict on the real binary: the config file's keys and `OSDS_*` variables are checked against
//! the command being run, and a file key becomes that command's default, below its flag.

mod support;

use support::{osds, tempdir};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_config_file_sets_defaults_and_refuses_what_the_command_does_not_take() {
    let dir = tempdir("config");
    let database = dir.join("from-file.db");
    let file = dir.join("osds.toml");
    std::fs::write(
        &file,
        format!(
            "database-url = \"sqlite://{}\"\nbackup-keep = 3\n",
            database.display()
        ),
    )
    .unwrap();
    // The file's settings are the command's: the backup looks for the file's database (which does not exist).
    let taken = osds()
        .arg("--config")
        .arg(&file)
        .arg("backup")
        .output()
        .unwrap();
    assert!(!taken.status.success());
    assert!(
        stderr(&taken).contains(&format!("database {} does not exist", database.display())),
        "{}",
        stderr(&taken)
    );
    // A flag beats the file.
    let flagged = dir.join("from-flag.db");
    let taken = osds()
        .arg("--config")
        .arg(&file)
        .arg("backup")
        .arg("--database-url")
        .arg(format!("sqlite://{}", flagged.display()))
        .output()
        .unwrap();
    assert!(
        stderr(&taken).contains(&format!("database {} does not exist", flagged.display())),
        "{}",
        stderr(&taken)
    );

    // A key of another command (`listen` is `serve`'s) is refused before anything runs.
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\n").unwrap();
    let refused = osds()
        .arg("--config")
        .arg(&file)
        .arg("backup")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("config key `listen` does not apply to `osds backup`"),
        "{}",
        stderr(&refused)
    );

    // A misspelt key names the nearest one.
    std::fs::write(&file, "databse-url = \"sqlite://x.db\"\n").unwrap();
    let misspelt = osds()
        .arg("--config")
        .arg(&file)
        .arg("backup")
        .output()
        .unwrap();
    assert_eq!(misspelt.status.code(), Some(2));
    assert!(
        stderr(&misspelt).contains("did you mean `database-url`?"),
        "{}",
        stderr(&misspelt)
    );

    // So does an OSDS_ variable no command reads.
    let variable = osds()
        .env("OSDS_DATABSE_URL", "sqlite://x.db")
        .args(["backup", "--help"])
        .output()
        .unwrap();
    assert_eq!(variable.status.code(), Some(2));
    assert!(
        stderr(&variable).contains("OSDS_DATABSE_URL is not a setting of any command"),
        "{}",
        stderr(&variable)
    );
}

#[test]
fn a_database_that_does_not_exist_is_refused_by_every_command_but_serve() {
    let dir = tempdir("missing-database");
    let database = dir.join("typo.db");
    let url = format!("sqlite://{}", database.display());
    let solutions = dir.join("solutions.jsonl");
    std::fs::write(&solutions, "").unwrap();
    let solutions = solutions.to_str().unwrap();
    let commands: [&[&str]; 6] = [
        &["reparse"],
        &["hyp", "hide", "hyp:20240101T000000:1"],
        &["hyp", "unhide", "hyp:20240101T000000:1"],
        &["hyp", "import", solutions],
        &["hyp", "backfill", "hyp:20240101T000000:1"],
        &["backup"],
    ];
    for command in commands {
        let output = osds()
            .args(command)
            .args(["--database-url", &url])
            .output()
            .unwrap();
        assert!(!output.status.success(), "osds {command:?} succeeded");
        let message = stderr(&output);
        assert!(
            message.contains(&database.display().to_string()) && message.contains("does not exist"),
            "osds {command:?}: {message}"
        );
        assert!(!database.exists(), "osds {command:?} created the database");
    }
}

/// A database URL that is neither SQLite's nor PostgreSQL's is refused with a reason, never taken as a file
/// name (it was: `postgres://host/db` made a SQLite archive under `./postgres:/host/db`); so is a PostgreSQL
/// one where only a SQLite file will do (backups), with what to do instead.
#[test]
fn a_database_url_the_command_cannot_take_is_refused_and_nothing_is_created() {
    let dir = tempdir("not-sqlite");
    // A listening address already taken: were the URL taken, `serve` would still stop instead of serving.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let serve = |url: &str| -> Vec<String> {
        [
            "serve",
            "--no-ingest",
            "--listen",
            &listen,
            "--database-url",
            url,
        ]
        .map(String::from)
        .to_vec()
    };
    for (command, url, reason) in [
        (serve("archive.db"), "archive.db", "is not a SQLite URL"),
        (
            ["backup", "--database-url", "postgres://localhost/osds"]
                .map(String::from)
                .to_vec(),
            "postgres://localhost/osds",
            "back it up with pg_dump",
        ),
        (
            [
                "restore",
                "--database-url",
                "postgresql://localhost/osds",
                "osds-x.db",
            ]
            .map(String::from)
            .to_vec(),
            "postgresql://localhost/osds",
            "restored with pg_restore",
        ),
        // Taken as PostgreSQL's: no server there, so the service stops before making anything.
        (
            serve("postgres://127.0.0.1:1/osds"),
            "postgres://127.0.0.1:1/osds",
            "open database postgres://127.0.0.1:1/osds",
        ),
    ] {
        let output = osds().current_dir(&dir).args(&command).output().unwrap();
        assert!(!output.status.success(), "osds {command:?} took {url}");
        let message = stderr(&output);
        assert!(message.contains(reason), "{url}: {message}");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{url} left {left:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_deployment_configuration_is_one_osds_serve_takes() {
    // deploy/osds.toml as the systemd unit uses it, with the paths, the metrics port and the detector's network
    // source overridden by flags (a flag beats the file) so it runs in a test directory without the internet.
    let relay = fake_relay::FakeRelay::start(fake_relay::RelayConfig::default())
        .await
        .unwrap();
    let dir = support::tempdir("deploy");
    let config = support::tests_dir().join("../deploy/osds.toml");
    let frames = format!("sqlite://{}", dir.join("frames.db").display());
    let backups = dir.join("backups");
    let server = support::launch(
        dir.clone(),
        &relay.url(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--hyp-source",
            "off",
            "--hyp-frames-url",
            &frames,
            "--backup-dir",
            backups.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    )
    .start()
    .unwrap_or_else(|e| panic!("{e:#}"))
    .removing_dir();
    let status = support::get_json(&server.url("/status")).await;
    assert_eq!(status["backups"]["everySeconds"], 86400);
    assert_eq!(status["backups"]["keep"], 7);
    assert!(
        server.stdout()[0].starts_with("osds: metrics http://127.0.0.1:"),
        "{:?}",
        server.stdout()
    );
    let unit =
        std::fs::read_to_string(support::tests_dir().join("../deploy/osds.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/osds --config /etc/osds/osds.toml serve"));
    assert!(unit.contains("\nType=notify\n") && unit.contains("\nWatchdogSec="));
}

/// Under the unit's `Type=notify` and `WatchdogSec`, `osds serve` speaks systemd's protocol on the socket it is
/// given: ready once it serves, alive while it runs, stopping when told to stop. (Each message is waited for,
/// up to a bound; none is timed.)
#[tokio::test(flavor = "multi_thread")]
async fn serve_tells_systemd_it_is_ready_alive_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempdir("systemd");
    let notify_path = dir.join("notify.sock");
    let systemd = UnixDatagram::bind(&notify_path).unwrap();
    systemd
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let received = |want: &str| {
        let mut buffer = [0u8; 4096];
        let mut seen = Vec::new();
        loop {
            let n = systemd
                .recv(&mut buffer)
                .unwrap_or_else(|e| panic!("no {want} from osds serve ({e}); got {seen:?}"));
            let message = String::from_utf8_lossy(&buffer[..n]).into_owned();
            if message.lines().any(|line| line == want) {
                return message;
            }
            seen.push(message);
        }
    };
    let mut server = support::launch(dir.join("service"), "ws://127.0.0.1:9", &["--no-ingest"])
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "400000")
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"));
    let ready = received("READY=1");
    assert!(
        ready.contains(&format!("STATUS=serving {}", server.base)),
        "{ready}"
    );
    received("WATCHDOG=1");
    received("WATCHDOG=1");
    server.stop().await;
    received("STOPPING=1");
    let _ = std::fs::remove_dir_all(dir);
}

/// A pod in a namespace with a Service named `osds` gets Kubernetes' service-link variables: the command runs,
/// and a warning names them (a misspelt setting beside them is still refused).
#[test]
fn kubernetes_service_link_variables_do_not_stop_a_command() {
    let injected = [
        ("OSDS_SERVICE_HOST", "10.96.0.11"),
        ("OSDS_SERVICE_PORT", "8080"),
        ("OSDS_SERVICE_PORT_HTTP", "8080"),
        ("OSDS_PORT", "tcp://10.96.0.11:8080"),
        ("OSDS_PORT_8080_TCP", "tcp://10.96.0.11:8080"),
        ("OSDS_PORT_8080_TCP_PROTO", "tcp"),
        ("OSDS_PORT_8080_TCP_PORT", "8080"),
        ("OSDS_PORT_8080_TCP_ADDR", "10.96.0.11"),
    ];
    let fixture = support::tests_dir().join("fixtures/cq/depth-0.json");
    let run = |extra: Option<(&str, &str)>| {
        let mut command = osds();
        command
            .envs(injected)
            .args(["decode", "--type", "cq_eew"])
            .arg(&fixture);
        if let Some((name, value)) = extra {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let output = run(None);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(support::json_lines(&output).len(), 1);
    let warning = stderr(&output);
    assert!(warning.contains("Kubernetes"), "{warning}");
    for (name, _) in injected {
        assert!(warning.contains(name), "{name} not named: {warning}");
    }
    let misspelt = run(Some(("OSDS_DATABSE_URL", "sqlite://x.db")));
    assert_eq!(misspelt.status.code(), Some(2));
    assert!(
        stderr(&misspelt).contains("OSDS_DATABSE_URL is not a setting of any command"),
        "{}",
        stderr(&misspelt)
    );
}

/// Completions and manual pages come from the command definitions, so they name every command and flag: the
/// bash script is valid bash, and each page is a roff page of its command.
#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = osds().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let script = String::from_utf8(output.stdout).unwrap();
        for word in ["reparse", "simulate", "database-url", "trusted-proxy"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let dir = tempdir("man");
    let script = dir.join("osds.bash");
    let bash = osds().args(["completions", "bash"]).output().unwrap();
    std::fs::write(&script, bash.stdout).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{}", stderr(&checked));

    let pages = dir.join("man1");
    let man = osds().args(["man", "--dir"]).arg(&pages).output().unwrap();
    assert!(man.status.success(), "{}", stderr(&man));
    let page = |name: &str| std::fs::read_to_string(pages.join(format!("{name}.1"))).unwrap();
    assert!(page("osds").contains(".TH osds 1"));
    for command in [
        "serve",
        "decode",
        "components",
        "reparse",
        "hyp",
        "simulate",
        "backup",
        "restore",
    ] {
        let text = page(&format!("osds-{command}"));
        assert!(
            text.contains(&format!(
                ".TH osds-{command} 1  \"osds-{command} {}\"",
                env!("CARGO_PKG_VERSION")
            )),
            "{command}: {text}"
        );
        assert!(text.contains(".SH OPTIONS"), "{command}");
    }
    assert!(page("osds-serve").contains("\\-\\-trusted\\-proxy"));
    let _ = std::fs::remove_dir_all(dir);
}
