//! A real `osds serve` process on a real socket, as the end-to-end tests and the benchmarks run it: started on
//! a port the system picks (or a given one), in its own directory (database, admin socket, `server.log`), ready once it printed
//! `osds: serving URL`, killed when dropped.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How to start one `osds serve`.
pub struct Launch {
    binary: PathBuf,
    dir: PathBuf,
    database: PathBuf,
    /// A database URL served instead of `database` (a PostgreSQL one).
    database_url: Option<String>,
    /// `--listen`: a port the system picks unless a test restarts a server where its clients expect it.
    listen: String,
    args: Vec<OsString>,
    /// A program (and its arguments) the server is started through: `program args… binary serve …`.
    wrapper: Option<(OsString, Vec<OsString>)>,
    /// Variables set for the process, besides the ones every test server gets.
    envs: Vec<(OsString, OsString)>,
    startup: Duration,
}

impl Launch {
    /// `binary serve` in `dir` (created if missing), on the database `dir/osds.db`.
    pub fn new(binary: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Launch {
        let dir = dir.into();
        Launch {
            binary: binary.into(),
            database: dir.join("osds.db"),
            database_url: None,
            listen: "127.0.0.1:0".to_owned(),
            dir,
            args: Vec::new(),
            wrapper: None,
            envs: Vec::new(),
            startup: Duration::from_secs(120),
        }
    }

    /// Serves the database at `path` instead.
    pub fn database(mut self, path: impl Into<PathBuf>) -> Launch {
        self.database = path.into();
        self
    }

    /// Serves the archive at `url` (e.g. `postgres://…`) instead of a SQLite file.
    pub fn database_url(mut self, url: impl Into<String>) -> Launch {
        self.database_url = Some(url.into());
        self
    }

    /// Listens on `address` (e.g. the one a stopped server used) instead of a port the system picks.
    pub fn listen(mut self, address: impl Into<String>) -> Launch {
        self.listen = address.into();
        self
    }

    /// More `osds serve` arguments (a later flag does not override an earlier one: each is given once).
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts the server through `program args…` (which must end by running the command it is given, e.g.
    /// `sh -c '…; exec "$0" "$@"'`), so it can run in a namespace the test prepares. The server's pid is the
    /// wrapper's.
    pub fn wrapped<I, S>(mut self, program: impl Into<OsString>, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.wrapper = Some((program.into(), args.into_iter().map(Into::into).collect()));
        self
    }

    /// Starts the process and waits until it serves (or fails, with its log in the error).
    /// Sets the variable `name` for the process.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.envs.push((name.into(), value.into()));
        self
    }

    pub fn start(self) -> anyhow::Result<Server> {
        std::fs::create_dir_all(&self.dir)?;
        let log = std::fs::File::create(self.dir.join("server.log"))?;
        let mut command = match &self.wrapper {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        let mut child = command
            .arg("serve")
            .args(["--listen", &self.listen])
            .arg("--database-url")
            .arg(
                self.database_url
                    .clone()
                    .unwrap_or_else(|| format!("sqlite://{}", self.database.display())),
            )
            .arg("--admin-socket")
            .arg(self.dir.join("admin.sock"))
            .args(&self.args)
            .env_remove("OSDS_CONFIG")
            .env("OSDS_LOG", "warn")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| anyhow::anyhow!("start {} serve: {e}", self.binary.display()))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        // The line naming the address, then stdout drained for the process's life so it never blocks on a
        // full pipe.
        let (base_tx, base_rx) = mpsc::channel();
        let stdout_lines = Arc::new(Mutex::new(Vec::new()));
        let lines = stdout_lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("osds: serving ") {
                    let _ = base_tx.send(url.trim().to_string());
                }
                lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        let mut server = Server {
            child,
            base: String::new(),
            db_path: self.database,
            dir: self.dir,
            remove_dir: false,
            stdout: stdout_lines,
        };
        match base_rx.recv_timeout(self.startup) {
            Ok(base) => {
                server.base = base;
                Ok(server)
            }
            Err(_) => {
                server.kill();
                anyhow::bail!(
                    "osds serve did not start within {:?}; log:\n{}",
                    self.startup,
                    server.log()
                )
            }
        }
    }
}

/// A running `osds serve`, killed (SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT/api/v1` (or `https://`).
    pub base: String,
    pub db_path: PathBuf,
    pub dir: PathBuf,
    remove_dir: bool,
    /// Every line the process wrote to stdout so far.
    stdout: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Removes the server's directory when it is dropped, unless the thread is panicking (a failed test keeps
    /// its database and log to look at).
    pub fn removing_dir(mut self) -> Server {
        self.remove_dir = true;
        self
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn ws_url(&self, path: &str) -> String {
        self.url(path)
            .replacen("http://", "ws://", 1)
            .replacen("https://", "wss://", 1)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The lines written to stdout so far (`osds: serving URL` first, after `osds: metrics URL` when served).
    pub fn stdout(&self) -> Vec<String> {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// SIGTERM, then waits (up to 20 s) for the service to finish its shutdown.
    pub async fn stop(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        for _ in 0..400 {
            if self.child.try_wait().expect("wait").is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("osds serve did not stop; log:\n{}", self.log());
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server and hands its directory to the caller (who may start another server in it).
    pub fn into_dir(mut self) -> PathBuf {
        self.kill();
        self.remove_dir = false;
        self.dir.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if self.remove_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
