//! The real service started inside the test process: archive, decoders, shaper and gateway as `osds serve`
//! wires them ([`osds_server::service::Service`]), with requests sent to its router without a socket.

use super::database::{Snapshot, copy_into};
use super::tempdir;
use axum::body::Body;
use axum::http::Request;
use osds_api::gateway::GatewayConfig;
use osds_api::live::LiveConfig;
use osds_server::ingest::UpstreamConfig;
use osds_server::service::{DetectorPlan, Service, ServiceConfig};
use osds_store::BackupSettings;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tower::ServiceExt;

/// A service on the archive of `dir` (`dir/osds.db`, or its PostgreSQL database: `support::database`), ingesting from `upstream` when given (with the fake relay's fast
/// timings), with the per-client limits out of the way.
pub fn config(dir: &Path, upstream: Option<&str>) -> ServiceConfig {
    ServiceConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: super::database::url_for(dir),
        upstream: upstream.map(|url| UpstreamConfig {
            check_interval: Duration::from_millis(200),
            silence_timeout: Duration::from_millis(1500),
            backoff_cap: Duration::from_millis(500),
            query_window: Duration::from_millis(300),
            ..UpstreamConfig::new(url)
        }),
        ingester_name: "test".into(),
        live: LiveConfig::default(),
        components_dir: None,
        report_cache_mb: 16,
        ingest_queue_bytes: osds_store::DEFAULT_QUEUE_BYTES,
        canary_fixtures: None,
        canary_recent: 0,
        admin_socket: dir.join("admin.sock"),
        backups: BackupSettings {
            directory: dir.join("backups"),
            every: None,
            keep: 1,
        },
        connections: osds_api::server::ConnectionLimits::default(),
        gateway: GatewayConfig {
            rate_per_second: 1e9,
            burst: 1e9,
            max_connections: 1_000_000,
            ..GatewayConfig::default()
        },
        public_base_url: None,
        tls: None,
        shutdown_grace: Duration::from_secs(1),
        limits: Default::default(),
        detector: DetectorPlan::Off,
        metrics_listen: None,
    }
}

/// A response received in-process.
pub struct Fetched {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

/// A started service and its router.
pub struct InProcess {
    service: Option<Service>,
    router: axum::Router,
    pub dir: PathBuf,
    /// Whether `dir` was made for this service (and goes with it, unless the test fails).
    owns_dir: bool,
}

impl InProcess {
    /// The service `config` describes; `dir` (its directory) stays.
    pub async fn start(config: ServiceConfig, dir: PathBuf) -> InProcess {
        InProcess::launch(config, dir, false).await
    }

    async fn launch(config: ServiceConfig, dir: PathBuf, owns_dir: bool) -> InProcess {
        let service = Service::start(config)
            .await
            .unwrap_or_else(|e| panic!("start the service: {e:#}"));
        InProcess {
            router: service.router(),
            service: Some(service),
            dir,
            owns_dir,
        }
    }

    /// The service, not ingesting, on a copy of the archive `snapshot` in a new directory.
    pub async fn on_copy_of(snapshot: &Snapshot) -> InProcess {
        let dir = tempdir("in-process");
        copy_into(snapshot, &dir);
        InProcess::launch(config(&dir, None), dir, true).await
    }

    /// GET `path` (relative to /api/v1). An event stream's body is left unread (it never ends).
    pub async fn get(&self, path: &str) -> Fetched {
        self.get_with(path, &[]).await
    }

    /// [`InProcess::get`] with request headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Fetched {
        let mut request = Request::get(format!("/api/v1{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Body::empty()).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = if headers
            .get("content-type")
            .is_some_and(|v| v == "text/event-stream")
        {
            Vec::new()
        } else {
            axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap()
                .to_vec()
        };
        Fetched {
            status,
            headers,
            body,
        }
    }

    /// Stops the service in order (the writer flushed).
    pub async fn stop(mut self) {
        if let Some(service) = self.service.take() {
            service.stop().await;
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if self.owns_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
