//! The fan-out peer: nginx with the nchan pub/sub module (Debian `libnginx-mod-nchan`, installed by
//! `bench/install-peers.sh`), run as a child process with its own configuration in a temporary folder.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

pub const NCHAN_MODULE: &str = "/usr/lib/nginx/modules/ngx_nchan_module.so";

/// A running nginx (master and its workers) serving one nchan channel: `POST /pub`, `GET /sub` (EventSource
/// with `Accept: text/event-stream`, or a WebSocket upgrade). Stopped (SIGTERM to the master) when dropped.
pub struct Nginx {
    child: Option<std::process::Child>,
    dir: PathBuf,
    pub port: u16,
}

impl Nginx {
    pub fn available() -> bool {
        Path::new(NCHAN_MODULE).is_file() && which("nginx").is_some()
    }

    pub fn start(root: &Path, workers: usize, max_connections: usize) -> Result<Nginx> {
        Nginx::start_buffered(root, workers, max_connections, 16)
    }

    /// Like [`Nginx::start`], keeping the last `buffer` messages for subscribers that resume
    /// (`last_event_id`).
    pub fn start_buffered(
        root: &Path,
        workers: usize,
        max_connections: usize,
        buffer: usize,
    ) -> Result<Nginx> {
        let nginx =
            which("nginx").context("nginx is not installed (run bench/install-peers.sh)")?;
        let dir = root.join(format!("osds-bench-nchan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tmp"))
            .with_context(|| format!("create {}", dir.display()))?;
        let port = free_port()?;
        let d = dir.display();
        // `user` only matters when the master runs as root; the workers then stay root to use `dir`.
        let user = if rustix::process::geteuid().is_root() {
            "user root;"
        } else {
            ""
        };
        let config = format!(
            r#"load_module {NCHAN_MODULE};
{user}
worker_processes {workers};
worker_rlimit_nofile {nofile};
daemon off;
master_process on;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{
    worker_connections {max_connections};
    multi_accept on;
}}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /pub {{
            nchan_publisher;
            nchan_channel_id bench;
            nchan_message_buffer_length {buffer};
            nchan_message_timeout 10m;
        }}
        location = /sub {{
            nchan_subscriber;
            nchan_channel_id bench;
            nchan_subscriber_first_message newest;
        }}
    }}
}}
"#,
            nofile = max_connections * 2 + 100,
        );
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config)?;
        let child = std::process::Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start nginx")?;
        let mut nginx = Nginx {
            child: Some(child),
            dir,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && nginx.pids().len() > workers
            {
                break;
            }
            if let Some(child) = nginx.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(nginx.dir.join("error.log")).unwrap_or_default();
                nginx.child = None;
                bail!("nginx exited ({status}); log:\n{log}");
            }
            if Instant::now() > deadline {
                bail!("nginx did not listen on port {port} within 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }

    pub fn base(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The master and its worker processes.
    pub fn pids(&self) -> Vec<u32> {
        let Some(master) = self.child.as_ref().map(|c| c.id()) else {
            return Vec::new();
        };
        let mut pids = vec![master];
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                // Field 4 (after the parenthesised command) is the parent pid.
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok());
                if ppid == Some(master) {
                    pids.push(pid);
                }
            }
        }
        pids
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM to the master: it stops its workers (a SIGKILL would leave them running).
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
