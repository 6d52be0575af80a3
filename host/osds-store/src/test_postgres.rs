//! Throwaway PostgreSQL servers for tests: a cluster made with `initdb` in a temporary folder, reached over a
//! Unix socket in that folder (no port to collide with another test), stopped and deleted when dropped. Debian's
//! server is installed by `.ci/install-postgres` when missing. Run as root, the server runs as the `postgres`
//! user (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The port in the socket's name; nothing listens on TCP.
const SOCKET_PORT: u16 = 5432;

/// A running throwaway cluster.
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
}

impl Cluster {
    /// Makes and starts a cluster in a new temporary folder (`what` names it).
    pub fn start(what: &str) -> Cluster {
        let bin = server_bin();
        let dir = std::env::temp_dir().join(format!(
            "osds-pg-{what}-{}-{}",
            std::process::id(),
            osds_time::now_ms()
        ));
        std::fs::create_dir_all(&dir).expect("create the cluster's folder");
        if as_root() {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir));
        }
        let cluster = Cluster { dir, bin };
        let data = cluster.data();
        cluster.server_command("initdb", |c| {
            c.arg("-D")
                .arg(&data)
                .args(["-U", "osds", "--auth=trust", "--no-sync"])
                .args(["--encoding=UTF8", "--locale=C"]);
        });
        cluster.resume();
        cluster
    }

    /// Starts the server (again, after [`Cluster::stop`]); returns once it takes connections.
    pub fn resume(&self) {
        let data = self.data();
        self.server_command("pg_ctl", |c| {
            c.arg("-D").arg(&data).args(["-w", "-s", "-l"]);
            c.arg(self.dir.join("server.log")).arg("-o").arg(format!(
                "-c listen_addresses='' -k {} -p {SOCKET_PORT}",
                self.dir.display()
            ));
            c.arg("start");
        });
    }

    /// Stops the server as a crash would (every connection cut, nothing flushed first); the data stays for
    /// [`Cluster::resume`].
    pub fn stop(&self) {
        let data = self.data();
        self.server_command("pg_ctl", |c| {
            c.arg("-D")
                .arg(&data)
                .args(["-w", "-s", "-m", "immediate", "stop"]);
        });
    }

    /// The URL of a new, empty database `name` on the cluster.
    pub async fn database(&self, name: &str) -> String {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url_of("postgres"))
            .await
            .expect("connect to the throwaway cluster");
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .await
            .expect("create a database");
        self.url_of(name)
    }

    /// Makes database `name` (empty, or a copy of database `template`, which nothing may be connected to) and
    /// returns its URL. Synchronous (`createdb`), for test support that runs outside a runtime.
    pub fn create_database(&self, name: &str, template: Option<&str>) -> String {
        let host = self.dir.clone();
        self.server_command("createdb", |c| {
            c.arg("-h")
                .arg(&host)
                .args(["-p", &SOCKET_PORT.to_string(), "-U", "osds"]);
            if let Some(template) = template {
                c.args(["-T", template]);
            }
            c.arg(name);
        });
        self.url_of(name)
    }

    /// PostgreSQL's client program `name` (`pg_dump`, `pg_restore`, `dropdb`, ...) set to reach this cluster.
    pub fn client(&self, name: &str) -> Command {
        let mut command = Command::new(self.bin.join(name));
        command
            .env("PGHOST", &self.dir)
            .env("PGPORT", SOCKET_PORT.to_string())
            .env("PGUSER", "osds");
        command
    }

    /// Has the cluster stopped and deleted once this process has ended, for a cluster kept in a `static` (never
    /// dropped): a shell left behind waits for the process to go.
    pub fn stop_when_this_process_ends(&self) {
        let pg_ctl = self.server_program("pg_ctl", |c| {
            c.arg("-D")
                .arg(self.data())
                .args(["-s", "-m", "immediate", "stop"]);
        });
        let stop: Vec<String> = std::iter::once(pg_ctl.get_program())
            .chain(pg_ctl.get_args())
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect();
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            stop = stop.join(" "),
            dir = shell_quote(&self.dir.to_string_lossy()),
        );
        // Started in the background of a shell that ends at once: the watchdog outlives this process.
        let status = Command::new("sh")
            .args(["-c", &format!("({script}) &")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("start the cluster's watchdog");
        assert!(status.success(), "the cluster's watchdog did not start");
    }

    /// The URL of database `database` on the cluster.
    pub fn url_of(&self, database: &str) -> String {
        format!(
            "postgres://osds@localhost/{database}?host={}&port={SOCKET_PORT}",
            self.dir.display()
        )
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs the server's program `name` (as the `postgres` user when run as root), which must succeed.
    fn server_command(&self, name: &str, args: impl FnOnce(&mut Command)) {
        run(&mut self.server_program(name, args));
    }

    /// The server's program `name` with its arguments, run as the `postgres` user when run as root.
    fn server_program(&self, name: &str, args: impl FnOnce(&mut Command)) -> Command {
        let program = self.bin.join(name);
        let mut command = if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        args(&mut command);
        command.current_dir(&self.dir);
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Not `stop`: a test that failed may have stopped the server already, and a drop must not panic.
        let data = self.data();
        let _ = self
            .server_program("pg_ctl", |c| {
                c.arg("-D")
                    .arg(&data)
                    .args(["-w", "-s", "-m", "immediate", "stop"]);
            })
            .stdin(Stdio::null())
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Whether the tests run as root (asked of `id`: the crate has no libc binding of its own).
fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

/// The folder of the newest installed server's programs, installing the server first when there is none.
fn server_bin() -> PathBuf {
    if let Some(bin) = newest_server() {
        return bin;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/install-postgres");
    run(Command::new("bash").arg(script));
    newest_server().expect("no PostgreSQL server after .ci/install-postgres")
}

fn newest_server() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn run(command: &mut Command) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
