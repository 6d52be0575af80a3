//! A large archive, and what it costs to serve: a generator that writes N report versions (default 1,000,000)
//! into a fresh SQLite archive through the host's own single writer (`osds_store`, the schema and statements
//! the service uses), then `osds serve --no-ingest` on it (time to the first 200 of `/api/v1/status`, memory at
//! rest) and query throughput measured by `wrk` as a separate process, against Datasette serving the same file.

use crate::harness::proc_memory;
use anyhow::{Context, Result, bail};
use fake_relay::{FakeRelay, RelayConfig};
use futures_util::{StreamExt, TryStreamExt};
use osds_testkit::server::{Launch, Server};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// (channel, upstream `type`) of the generated reports, round robin by event.
const CHANNELS: [&wolfx_core::Channel; 4] = [
    &wolfx_core::CEA,
    &wolfx_core::SC,
    &wolfx_core::FJ,
    &wolfx_core::CQ,
];
const PLACES: [&str; 8] = [
    "四川雅安市芦山县",
    "重庆荣昌区",
    "新疆阿克苏地区温宿县",
    "台湾花莲县附近海域",
    "云南大理州漾濞县",
    "四川内江市隆昌市",
    "福建泉州市永春县",
    "甘肃临夏州积石山县",
];
/// Events start 2024-01-01 00:00:00 Beijing time, one every this many seconds.
const EVENT_SPACING_SECS: i64 = 480;
const FIRST_EVENT_UNIX: i64 = 1_704_038_400; // 2023-12-31T16:00:00Z = 2024-01-01 00:00 UTC+8

/// Revisions of event `e`: 1 to 10, 5.5 on average.
fn revisions(event: u64) -> u64 {
    1 + (event * 7 + event / 3) % 10
}

/// A frame as the channel sends it, for revision `revision` of event `event`.
fn frame(event: u64, revision: u64) -> (String, &'static wolfx_core::Channel) {
    let channel = CHANNELS[(event % 4) as usize];
    let origin = FIRST_EVENT_UNIX + event as i64 * EVENT_SPACING_SECS;
    let origin_text = beijing(origin);
    let issued = beijing(origin + 8 + 6 * revision as i64);
    let place = PLACES[(event % 8) as usize];
    // Magnitudes 1.0 to 7.0, nudged by revision.
    let magnitude = 1.0 + ((event * 37) % 61) as f64 / 10.0 + revision as f64 * 0.01;
    let lat = 20.0 + (event % 2000) as f64 / 100.0;
    let lon = 95.0 + (event % 3000) as f64 / 100.0;
    let depth = 5 + event % 20;
    let intensity = (magnitude * 1.2).min(12.0);
    let date = &origin_text[..10].replace('-', "");
    let frame = match channel.source {
        "cea" => format!(
            r#"{{"type":"cenc_eew","ID":"g{event}r{revision}","EventID":"{date}.{event:07}","ReportTime":"{issued}","ReportNum":{revision},"OriginTime":"{origin_text}","HypoCenter":"{place}","Latitude":{lat:.3},"Longitude":{lon:.3},"Magnitude":{magnitude:.1},"Depth":{depth},"MaxIntensity":{intensity:.1}}}"#
        ),
        "sc" => format!(
            r#"{{"type":"sc_eew","ID":{event}{revision},"EventID":"{date}.{event:07}_{revision}","ReportTime":"{issued}","ReportNum":{revision},"OriginTime":"{origin_text}","HypoCenter":"{place}","Latitude":{lat:.3},"Longitude":{lon:.3},"Magunitude":{magnitude:.1},"Depth":{depth}.0,"MaxIntensity":{intensity:.1}}}"#
        ),
        "fj" => format!(
            r#"{{"type":"fj_eew","EventID":"{date}{event:07}_{revision}","ReportTime":"{issued}","ReportNum":{revision},"OriginTime":"{origin_text}","HypoCenter":"{place}","Latitude":{lat:.2},"Longitude":{lon:.2},"Magunitude":{magnitude:.1},"isFinal":{}}}"#,
            revision == revisions(event)
        ),
        _ => format!(
            r#"{{"type":"cq_eew","ID":"q{event}r{revision}","EventID":"{date}{event:07}_{revision}","ReportTime":"{issued}","ReportNum":{revision},"OriginTime":"{origin_text}","HypoCenter":"{place}","Latitude":{lat:.1},"Longitude":{lon:.1},"Magnitude":{magnitude:.1},"Depth":{depth},"MaxIntensity":{intensity:.1}}}"#
        ),
    };
    (frame, channel)
}

/// `YYYY-MM-DD HH:MM:SS` in Beijing time (UTC+8) of a Unix time.
fn beijing(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .with_timezone(&osds_time::beijing())
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// Writes `versions` report versions into a fresh archive at `path` through the host's writer, in
/// transactions of `batch` frames. Returns the seconds it took.
pub async fn generate(path: &Path, versions: u64) -> Result<f64> {
    if path.exists() {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    generate_at(&format!("sqlite://{}", path.display()), versions).await
}

/// [`generate`] into the (new, empty) archive at `url`, SQLite's or PostgreSQL's.
async fn generate_at(url: &str, versions: u64) -> Result<f64> {
    const BATCH: usize = 5_000;
    let started = Instant::now();
    let (store, mut writer) = osds_store::open(url).await?;
    writer.register_ingester("bench").await?;
    let session = writer
        .open_session(
            "/all_eew",
            osds_store::SocketRole::Redundant,
            "ws://osds-bench.invalid/all_eew",
        )
        .await?;
    let decoders = crate::incoming::embedded_decoders()?;
    let (mut written, mut event) = (0_u64, 0_u64);
    let mut batch = Vec::with_capacity(BATCH);
    let mut last_print = Instant::now();
    while written < versions {
        let revisions = revisions(event).min(versions - written);
        for revision in 1..=revisions {
            let (text, _) = frame(event, revision);
            batch.push(crate::incoming::decoded_incoming(&decoders, session, text)?);
        }
        written += revisions;
        event += 1;
        if batch.len() >= BATCH || written >= versions {
            writer.ingest(&batch).await?;
            batch.clear();
            if last_print.elapsed() > Duration::from_secs(10) {
                last_print = Instant::now();
                println!(
                    "archive: {written} of {versions} versions written ({:.0} s, {:.0} versions/s)",
                    started.elapsed().as_secs_f64(),
                    written as f64 / started.elapsed().as_secs_f64()
                );
            }
        }
    }
    let counts = store.archive_counts().await?;
    if counts.versions as u64 != versions {
        bail!(
            "the archive holds {} versions, {versions} were written",
            counts.versions
        );
    }
    drop(writer);
    drop(store);
    Ok(started.elapsed().as_secs_f64())
}

/// The versions an existing archive at `path` holds, if it can be read.
async fn existing_versions(path: &Path) -> Option<u64> {
    if !path.is_file() {
        return None;
    }
    let (store, writer) = osds_store::open(&format!("sqlite://{}", path.display()))
        .await
        .ok()?;
    drop(writer);
    let counts = store.archive_counts().await.ok()?;
    Some(counts.versions as u64)
}

// ---------------------------------------------------------------------------------------------------------

pub struct Startup {
    pub listen_secs: f64,
    pub first_200_secs: f64,
    pub status_secs: f64,
    pub rss_rest_kb: u64,
    pub hwm_kb: u64,
}

/// Load measured by wrk on one endpoint.
pub struct Load {
    pub name: String,
    pub target: &'static str,
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    /// Bytes wrk read per response (head and body).
    pub bytes_per_response: f64,
    pub errors: String,
}

pub struct QueryResults {
    pub versions: u64,
    pub events: i64,
    pub db_bytes: u64,
    pub generate_secs: Option<f64>,
    pub startup: Startup,
    pub loads: Vec<Load>,
    pub wrk: String,
    pub page_cost: Option<crate::breakdown::PageCost>,
}

/// The measured queries on the server at `api` (its `/api/v1` path), as wrk scripts: `/reports` pages after a
/// random cursor up to `high`, the `/events` filters of the contract, and events by id from `ids`.
fn cases(api: &str, high: i64, ids: &[String]) -> Vec<(&'static str, String)> {
    // Filtered event pages: `sc` events with magnitude >= 4, a random page of the first 100.
    vec![
        (
            "/reports?limit=1000 (random after)",
            lua_random_path(&format!("{api}/reports?limit=1000&after="), 0, high, ""),
        ),
        (
            "/events?limit=100&source=sc&minMagnitude=4 (random page 1-100)",
            lua_random_path(
                &format!("{api}/events?limit=100&source=sc&minMagnitude=4&page="),
                1,
                100,
                "",
            ),
        ),
        (
            "/events/{id} (random of 2000 ids)",
            lua_pick_path(&format!("{api}/events/"), ids, ""),
        ),
        // Every other filter shape of the contract: deep pages of the whole list, a year, a text search (四川,
        // a quarter of the events).
        (
            "/events?limit=100 (random page 1-1875, to the last)",
            lua_random_path(&format!("{api}/events?limit=100&page="), 1, 1875, ""),
        ),
        (
            "/events?limit=100&from=2025-01-01&to=2025-12-31&minMagnitude=3 (random page 1-100)",
            lua_random_path(
                &format!(
                    "{api}/events?limit=100&from=2025-01-01&to=2025-12-31&minMagnitude=3&page="
                ),
                1,
                100,
                "",
            ),
        ),
        (
            "/events?limit=100&q=四川 (random page 1-469, to the last)",
            lua_random_path(
                &format!("{api}/events?limit=100&q=%E5%9B%9B%E5%B7%9D&page="),
                1,
                469,
                "",
            ),
        ),
        // The place filters (issue 43): a circle (13,056 events), a box (16,063), a depth range (56,250), UTC
        // instants with a maximum magnitude (21,365), and the whole list by magnitude.
        (
            "/events?limit=100&latitude=30&longitude=105&maxRadiusKm=300 (random page 1-131, to the last)",
            lua_random_path(
                &format!("{api}/events?limit=100&latitude=30&longitude=105&maxRadiusKm=300&page="),
                1,
                131,
                "",
            ),
        ),
        (
            "/events?limit=100&minLatitude=25&maxLatitude=30&minLongitude=100&maxLongitude=110 (random page 1-161)",
            lua_random_path(
                &format!(
                    "{api}/events?limit=100&minLatitude=25&maxLatitude=30&minLongitude=100&maxLongitude=110&page="
                ),
                1,
                161,
                "",
            ),
        ),
        (
            "/events?limit=100&minDepthKm=10&maxDepthKm=15 (random page 1-563)",
            lua_random_path(
                &format!("{api}/events?limit=100&minDepthKm=10&maxDepthKm=15&page="),
                1,
                563,
                "",
            ),
        ),
        (
            "/events?limit=100&start=2025-01-01T00:00:00Z&end=2025-07-01T00:00:00Z&maxMagnitude=5 (random page 1-214)",
            lua_random_path(
                &format!(
                    "{api}/events?limit=100&start=2025-01-01T00:00:00Z&end=2025-07-01T00:00:00Z&maxMagnitude=5&page="
                ),
                1,
                214,
                "",
            ),
        ),
        (
            "/events?limit=100&order=magnitude (random page 1-1875, to the last)",
            lua_random_path(
                &format!("{api}/events?limit=100&order=magnitude&page="),
                1,
                1875,
                "",
            ),
        ),
    ]
}

/// The archive's event count and event ids from across it (pages spread over the whole list), from the server
/// at `base`.
async fn sample_event_ids(client: &reqwest::Client, base: &str) -> Result<(i64, Vec<String>)> {
    let status: serde_json::Value = client
        .get(format!("{}/status", base))
        .send()
        .await?
        .json()
        .await?;
    let events = status["archive"]["events"].as_i64().unwrap_or(0);
    // Event ids from across the archive: pages spread over the whole list.
    let mut ids = Vec::new();
    let pages = (events / 100).max(1);
    for k in 0..20 {
        let page = 1 + k * pages / 20;
        let list: serde_json::Value = client
            .get(format!("{}/events?limit=100&page={page}", base))
            .send()
            .await?
            .json()
            .await?;
        for item in list["items"].as_array().into_iter().flatten() {
            if let Some(id) = item["id"].as_str() {
                ids.push(id.to_string());
            }
        }
    }
    if ids.is_empty() {
        bail!("no events listed by the server");
    }
    Ok((events, ids))
}

/// `wrk`'s name and version, as it prints them.
fn wrk_version() -> String {
    std::process::Command::new("wrk")
        .arg("-v")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

async fn serve_archive(
    osds: &Path,
    database_url: &str,
    dir: &Path,
    serve_args: &[String],
) -> Result<(Server, Startup)> {
    let started = Instant::now();
    let launch = Launch::new(osds, dir)
        .database_url(database_url)
        .args(["--no-ingest"])
        .args(["--backup-dir".into(), dir.join("backups").into_os_string()])
        .args(["--backup-every-secs", "0"])
        .args(crate::harness::UNLIMITED)
        .args(serve_args.iter().cloned());
    // Waiting for the line blocks: off the runtime's threads.
    let served = tokio::task::spawn_blocking(move || launch.start()).await??;
    let base = served.base.clone();
    let listen_secs = started.elapsed().as_secs_f64();
    let client = reqwest::Client::new();
    let status_url = format!("{base}/status");
    let first_200_secs = loop {
        if let Ok(response) = client.get(&status_url).send().await
            && response.status() == 200
        {
            let _ = response.bytes().await;
            break started.elapsed().as_secs_f64();
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("no 200 from /status within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    // One more /status, timed alone: it counts the archive's rows on every call.
    let at = Instant::now();
    client.get(&status_url).send().await?.bytes().await?;
    let status_secs = at.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_rest_kb, hwm_kb) = proc_memory(served.pid()).unwrap_or((0, 0));
    Ok((
        served,
        Startup {
            listen_secs,
            first_200_secs,
            status_secs,
            rss_rest_kb,
            hwm_kb,
        },
    ))
}

/// New report versions a second per case of [`under_ingest`].
const LIVE_VERSIONS_PER_SEC: u64 = 10;

/// The `/events` cases again on a copy of the archive while new versions arrive from the fake relay
/// (`LIVE_VERSIONS_PER_SEC`): each moves the horizon, so each kept list is brought up to date before it is
/// served. The copy is deleted after (the archive is reused as it is).
async fn under_ingest(
    osds: &Path,
    db: &Path,
    dir: &Path,
    cases: &[(&str, String)],
    wrk_options: &WrkOptions,
    serve_args: &[String],
) -> Result<Vec<Load>> {
    let live = dir.join("live");
    std::fs::create_dir_all(&live)?;
    let copy = live.join("osds.db");
    println!("query: copying the archive for the live-ingest cases");
    std::fs::copy(db, &copy)?;
    let relay = Arc::new(FakeRelay::start(RelayConfig::default()).await?);
    let launch = Launch::new(osds, &live)
        .database(&copy)
        .args(["--upstream-url".to_string(), relay.url()])
        .args(["--backup-dir".into(), live.join("backups").into_os_string()])
        .args(["--backup-every-secs", "0"])
        .args(crate::harness::UNLIMITED)
        .args(serve_args.iter().cloned());
    let served = tokio::task::spawn_blocking(move || launch.start()).await??;
    if !relay
        .wait_connected("/cq_eew", 1, Duration::from_secs(60))
        .await
    {
        bail!("the live-ingest server never connected /cq_eew to the relay");
    }
    let pushing = Arc::new(AtomicBool::new(true));
    let pusher = {
        let (relay, pushing) = (relay.clone(), pushing.clone());
        tokio::spawn(async move {
            let mut pace =
                tokio::time::interval(Duration::from_millis(1000 / LIVE_VERSIONS_PER_SEC));
            let mut n = 0;
            while pushing.load(Ordering::Relaxed) {
                pace.tick().await;
                relay
                    .push_to("/cq_eew", crate::harness::cq_frame("L", n, 1).as_bytes())
                    .await;
                n += 1;
            }
            n
        })
    };
    let origin = origin_of(&served.base);
    let mut loads = Vec::new();
    for (name, script) in cases
        .iter()
        .filter(|(name, _)| name.starts_with("/events?"))
    {
        let name = format!("{name}, {LIVE_VERSIONS_PER_SEC} new versions/s arriving");
        println!("query: wrk osds {name}");
        loads.push(wrk(&origin, script, dir, &name, "osds", wrk_options).await?);
    }
    pushing.store(false, Ordering::Relaxed);
    let pushed = pusher.await?;
    println!("query: {pushed} versions pushed during the live-ingest cases");
    drop(served);
    if let Ok(relay) = Arc::try_unwrap(relay) {
        relay.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&live);
    Ok(loads)
}

/// Runs wrk against `base` with a Lua script picking each request's path; parses requests/s and the p50/p99.
async fn wrk(
    base: &str,
    script: &str,
    dir: &Path,
    name: &str,
    target: &'static str,
    options: &WrkOptions,
) -> Result<Load> {
    let path = dir.join(format!(
        "{target}-{}.lua",
        name.replace(['/', ' ', '?'], "_")
    ));
    std::fs::write(&path, script)?;
    let run = |seconds: u64| {
        tokio::process::Command::new("wrk")
            .arg(format!("-t{}", options.threads))
            .arg(format!("-c{}", options.connections))
            .arg(format!("-d{seconds}s"))
            .arg("--latency")
            // Slow answers are measured, not dropped as timeouts (wrk's default is 2 s).
            .args(["--timeout", "60s"])
            .arg("-s")
            .arg(&path)
            .arg(base)
            .output()
    };
    if options.warmup_seconds > 0 {
        run(options.warmup_seconds)
            .await
            .context("run wrk (bench/install-peers.sh installs it)")?;
    }
    let output = run(options.seconds)
        .await
        .context("run wrk (bench/install-peers.sh installs it)")?;
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    if !output.status.success() {
        bail!(
            "wrk failed: {}\n{text}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let requests_per_sec = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("no Requests/sec in wrk output:\n{text}"))?;
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p))
            .and_then(|v| wrk_duration_ms(v.trim()))
    };
    // `8268 requests in 10.00s, 1.23GB read`
    let summary = text.lines().find(|l| l.contains("requests in"));
    let requests: u64 = summary
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let bytes_read = summary
        .and_then(|l| l.rsplit_once(", "))
        .and_then(|(_, read)| read.trim().strip_suffix(" read"))
        .and_then(wrk_bytes)
        .unwrap_or(f64::NAN);
    let errors = text
        .lines()
        .filter(|l| l.contains("Non-2xx") || l.contains("Socket errors"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Load {
        name: name.to_string(),
        target,
        requests_per_sec,
        p50_ms: percentile("50%").unwrap_or(f64::NAN),
        p99_ms: percentile("99%").unwrap_or(f64::NAN),
        requests,
        bytes_per_response: bytes_read / requests.max(1) as f64,
        errors,
    })
}

/// wrk's sizes: `612.00B`, `1.23KB`, `4.50MB`, `1.02GB` (powers of 1,024).
fn wrk_bytes(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number * scale)
}

/// wrk's durations: `512.00us`, `3.21ms`, `1.02s`, `2.00m`.
fn wrk_duration_ms(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    Some(match unit {
        "us" => number / 1000.0,
        "ms" => number,
        "s" => number * 1000.0,
        "m" => number * 60_000.0,
        _ => return None,
    })
}

pub struct WrkOptions {
    pub threads: usize,
    pub connections: usize,
    pub seconds: u64,
    /// A load of this length first, not counted, so both servers are measured warm (their caches filled).
    pub warmup_seconds: u64,
}

/// A Lua script: each request is a path made from a random pick (math.random is seeded per wrk thread).
fn lua_random_path(template_prefix: &str, low: i64, high: i64, suffix: &str) -> String {
    format!(
        "math.randomseed(os.time() + tonumber(tostring({{}}):sub(8), 16))\n\
         request = function()\n  return wrk.format(\"GET\", \"{template_prefix}\" .. math.random({low}, {high}) .. \"{suffix}\")\nend\n"
    )
}

/// A Lua script: each request is one of `requests` (a path and its headers), picked at random.
fn lua_pick_request(requests: &[(String, Vec<(&str, String)>)]) -> String {
    let list = requests
        .iter()
        .map(|(path, headers)| {
            let headers = headers
                .iter()
                .map(|(name, value)| format!("[\"{name}\"]={}", lua_string(value)))
                .collect::<Vec<_>>()
                .join(",");
            format!("{{\"{path}\",{{{headers}}}}}")
        })
        .collect::<Vec<_>>()
        .join(",\n");
    format!(
        "math.randomseed(os.time() + tonumber(tostring({{}}):sub(8), 16))\nlocal requests = {{{list}}}\n\
         request = function()\n  local r = requests[math.random(1, #requests)]\n  return wrk.format(\"GET\", r[1], r[2])\nend\n"
    )
}

/// `text` as a Lua string literal (an ETag holds quotes).
fn lua_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn lua_pick_path(prefix: &str, items: &[String], suffix: &str) -> String {
    let list = items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "math.randomseed(os.time() + tonumber(tostring({{}}):sub(8), 16))\nlocal ids = {{{list}}}\n\
         request = function()\n  return wrk.format(\"GET\", \"{prefix}\" .. ids[math.random(1, #ids)] .. \"{suffix}\")\nend\n"
    )
}

/// Datasette's canned queries equivalent to the three osds endpoints (the same SQL as osds's store).
fn datasette_metadata(db_name: &str) -> String {
    let report_columns = "r.id, r.event_key, r.source, r.received_at, r.delivery_id, r.report_json, r.decoder_name, r.decoder_sha256";
    let event_columns = "e.id AS e_id, e.source AS e_source, e.source_event_id, e.origin_at AS e_origin_at, e.report_count, e.missing_revisions, r.id, r.event_key, r.source, r.received_at, r.delivery_id, r.report_json, r.decoder_name, r.decoder_sha256";
    let reports = format!(
        "SELECT {report_columns} FROM reports r WHERE r.id > :after AND r.id <= (SELECT MAX(id) FROM reports) ORDER BY r.id LIMIT 1000"
    );
    let events = format!(
        "SELECT (SELECT COUNT(*) FROM events e WHERE e.source = :source AND e.magnitude >= :min) AS total, {event_columns} \
         FROM events e JOIN reports r ON r.id = e.latest_report_id WHERE e.source = :source AND e.magnitude >= :min \
         ORDER BY e.sort_ms DESC, e.last_report_id DESC LIMIT 100 OFFSET :offset"
    );
    let event = format!(
        "SELECT {event_columns}, v.id AS v_id, v.revision AS v_revision, v.received_at AS v_received_at, \
         v.delivery_id AS v_delivery_id, v.report_json AS v_report_json, v.decoder_name AS v_decoder_name \
         FROM events e JOIN reports r ON r.id = e.latest_report_id JOIN reports v ON v.event_key = e.id \
         JOIN deliveries d ON d.id = v.delivery_id WHERE e.id = :id ORDER BY v.revision, v.id"
    );
    serde_json::json!({
        "databases": { db_name: { "queries": {
            "reports_after": { "sql": reports },
            "events_page": { "sql": events },
            "event": { "sql": event },
        }}}
    })
    .to_string()
}

/// The whole query benchmark: archive (generated unless `reuse` and present), startup, wrk on osds and Datasette.
pub async fn run(
    osds: &Path,
    root: &Path,
    versions: u64,
    reuse: bool,
    datasette: Option<PathBuf>,
    wrk_options: &WrkOptions,
    serve_args: &[String],
) -> Result<QueryResults> {
    let db = root.join(format!("osds-bench-archive-{versions}.db"));
    let generate_secs = if reuse && existing_versions(&db).await == Some(versions) {
        println!("query: reusing {} ({versions} versions)", db.display());
        None
    } else {
        println!(
            "query: writing {versions} versions into {} through the host's writer",
            db.display()
        );
        let secs = generate(&db, versions).await?;
        println!("query: archive written in {secs:.1} s");
        Some(secs)
    };
    let db_bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    let dir = root.join(format!("osds-bench-query-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;

    let (served, startup) = serve_archive(
        osds,
        &format!("sqlite://{}", db.display()),
        &dir,
        serve_args,
    )
    .await?;
    let client = reqwest::Client::new();
    let (events, ids) = sample_event_ids(&client, &served.base).await?;
    let api = url_path(&served.base);
    let high = versions.saturating_sub(1000) as i64;
    let cases = cases(&api, high, &ids);
    let wrk_version = wrk_version();
    let mut loads = Vec::new();
    let origin = origin_of(&served.base);
    for (name, script) in &cases {
        println!("query: wrk osds {name}");
        loads.push(wrk(&origin, script, &dir, name, "osds", wrk_options).await?);
    }
    // The warm-up leaves part of the report cache cold (random pages over ~1,000 blocks at ~20 ms a cold one),
    // so /reports is measured again once every page has been read: the steady state of a long-running server
    // whose cache holds the archive.
    let started = Instant::now();
    let page_starts: Vec<i64> = (0..=high).step_by(1000).collect();
    let reads = futures_util::stream::iter(page_starts.iter().map(|after| {
        let url = format!("{}/reports?limit=1000&after={after}", served.base);
        let client = client.clone();
        async move {
            client
                .get(url)
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await
        }
    }))
    .buffer_unordered(2)
    // Counted, not kept: the bodies add up to ~600 MB.
    .try_fold(0usize, |pages, _body| async move { Ok(pages + 1) })
    .await
    .context("read every /reports page")?;
    println!(
        "query: read every /reports page once ({reads} pages in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let name = "/reports?limit=1000 (random after, every page read once before)";
    println!("query: wrk osds {name}");
    loads.push(wrk(&origin, &cases[0].1, &dir, name, "osds", wrk_options).await?);
    // Compression and revalidation: 100 pages of each list, plain, with an encoding asked for, and with each
    // page's ETag (fetched once before; answered 304 without a body).
    let lists = [
        (
            "/reports?limit=1000 (100 pages)",
            (0..100)
                .map(|k| format!("{api}/reports?limit=1000&after={}", k * high / 100))
                .collect::<Vec<_>>(),
        ),
        (
            "/events?limit=100&source=sc&minMagnitude=4 (page 1-100)",
            (1..=100)
                .map(|page| format!("{api}/events?limit=100&source=sc&minMagnitude=4&page={page}"))
                .collect(),
        ),
    ];
    for (list, paths) in &lists {
        let mut etags = Vec::new();
        for path in paths {
            let response = client
                .get(format!("{origin}{path}"))
                .send()
                .await?
                .error_for_status()?;
            etags.push(
                response
                    .headers()
                    .get("etag")
                    .and_then(|v| v.to_str().ok())
                    .with_context(|| format!("no ETag on {path}"))?
                    .to_owned(),
            );
        }
        for variant in ["plain", "gzip", "br", "If-None-Match"] {
            let requests: Vec<(String, Vec<(&str, String)>)> = paths
                .iter()
                .zip(&etags)
                .map(|(path, etag)| {
                    let headers = match variant {
                        "gzip" | "br" => vec![("Accept-Encoding", variant.to_owned())],
                        "If-None-Match" => vec![("If-None-Match", etag.clone())],
                        _ => Vec::new(),
                    };
                    (path.clone(), headers)
                })
                .collect();
            let name = format!("{list}, {variant}");
            println!("query: wrk osds {name}");
            loads.push(
                wrk(
                    &origin,
                    &lua_pick_request(&requests),
                    &dir,
                    &name,
                    "osds",
                    wrk_options,
                )
                .await?,
            );
        }
    }
    drop(served);
    loads.extend(
        under_ingest(osds, &db, &dir, &cases[1..], wrk_options, serve_args)
            .await
            .context("queries under live ingest")?,
    );
    println!("query: timing 100 /reports pages in-process (archive read vs serialisation)");
    let page_cost = crate::breakdown::page_cost(&db, versions, 100).await.ok();

    if let Some(datasette) = datasette {
        let db_name = db
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("osds")
            .to_string();
        let metadata = dir.join("metadata.json");
        std::fs::write(&metadata, datasette_metadata(&db_name))?;
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            listener.local_addr()?.port()
        };
        println!("query: datasette on 127.0.0.1:{port} (immutable, the same file)");
        let mut child = tokio::process::Command::new(&datasette)
            .arg("serve")
            .arg("-i")
            .arg(&db)
            .arg("--metadata")
            .arg(&metadata)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--setting", "sql_time_limit_ms", "20000"])
            .args(["--setting", "max_returned_rows", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("datasette.log"))?)
            .kill_on_drop(true)
            .spawn()
            .context("start datasette (bench/install-peers.sh installs it)")?;
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = client.get(format!("{base}/-/versions.json")).send().await
                && r.status() == 200
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("datasette did not answer within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ds = format!("/{db_name}");
        let first = client
            .get(format!("{base}{ds}/event.json?id={}&_shape=array", ids[0]))
            .send()
            .await?;
        if first.status() != 200 {
            bail!(
                "datasette canned query answered {}: {}",
                first.status(),
                first.text().await.unwrap_or_default()
            );
        }
        let ds_cases = [
            (
                "/reports?limit=1000 (random after)",
                lua_random_path(
                    &format!("{ds}/reports_after.json?_shape=array&after="),
                    0,
                    high,
                    "",
                ),
            ),
            (
                "/events?limit=100&source=sc&minMagnitude=4 (random page 1-100)",
                lua_random_path(
                    &format!("{ds}/events_page.json?_shape=array&source=sc&min=4&offset="),
                    0,
                    99,
                    "00",
                ),
            ),
            (
                "/events/{id} (random of 2000 ids)",
                lua_pick_path(&format!("{ds}/event.json?_shape=array&id="), &ids, ""),
            ),
        ];
        for (name, script) in &ds_cases {
            println!("query: wrk datasette {name}");
            loads.push(wrk(&base, script, &dir, name, "datasette", wrk_options).await?);
        }
        let _ = child.kill().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(QueryResults {
        versions,
        events,
        db_bytes,
        generate_secs,
        startup,
        loads,
        wrk: wrk_version,
        page_cost,
    })
}

/// `http://127.0.0.1:1234/api/v1` → `/api/v1`.
fn url_path(base: &str) -> String {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    rest.find('/')
        .map_or(String::new(), |i| rest[i..].to_string())
}

/// `http://127.0.0.1:1234/api/v1` → `http://127.0.0.1:1234`.
fn origin_of(base: &str) -> String {
    let path = url_path(base);
    base[..base.len() - path.len()].to_string()
}

/// The query cases on a PostgreSQL archive of `versions` versions, written through the host's writer into a
/// throwaway cluster and served by `osds serve --no-ingest` (no Datasette peer, no live ingest: see `run`).
pub async fn run_postgres(
    osds: &Path,
    root: &Path,
    versions: u64,
    wrk_options: &WrkOptions,
    serve_args: &[String],
) -> Result<QueryResults> {
    let cluster = osds_store::test_postgres::Cluster::start("bench-query");
    let url = cluster.database("osds").await;
    println!(
        "query-postgres: writing {versions} versions into PostgreSQL through the host's writer"
    );
    let generate_secs = generate_at(&url, versions).await?;
    println!("query-postgres: archive written in {generate_secs:.1} s");
    let size = cluster
        .client("psql")
        .args([
            "-tA",
            "-d",
            "osds",
            "-c",
            "SELECT pg_database_size(current_database())",
        ])
        .output()?;
    let db_bytes = String::from_utf8_lossy(&size.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let dir = root.join(format!("osds-bench-query-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (served, startup) = serve_archive(osds, &url, &dir, serve_args).await?;
    let client = reqwest::Client::new();
    let (events, ids) = sample_event_ids(&client, &served.base).await?;
    let api = url_path(&served.base);
    let origin = origin_of(&served.base);
    let mut loads = Vec::new();
    for (name, script) in cases(&api, versions.saturating_sub(1000) as i64, &ids) {
        println!("query-postgres: wrk osds {name}");
        loads.push(wrk(&origin, &script, &dir, name, "osds-pg", wrk_options).await?);
    }
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(QueryResults {
        versions,
        events,
        db_bytes,
        generate_secs: Some(generate_secs),
        startup,
        loads,
        wrk: wrk_version(),
        page_cost: None,
    })
}

pub fn print(results: &QueryResults, wrk_options: &WrkOptions) {
    println!();
    println!(
        "archive: {} versions in {} events, {:.0} MB on disk{}",
        results.versions,
        results.events,
        results.db_bytes as f64 / 1e6,
        results
            .generate_secs
            .map(|s| format!(
                ", written in {s:.1} s ({:.0} versions/s)",
                results.versions as f64 / s
            ))
            .unwrap_or_else(|| " (reused)".to_string())
    );
    println!("{:-<110}", "");
    let s = &results.startup;
    println!(
        "{:<58} {:.3} s to `osds: serving`, {:.3} s to the first 200 of /status",
        "startup (osds serve --no-ingest)", s.listen_secs, s.first_200_secs
    );
    println!(
        "{:<58} {:.1} ms",
        "one /status on the archive (counts every table)",
        s.status_secs * 1000.0
    );
    println!(
        "{:<58} VmRSS {:.1} MB, VmHWM {:.1} MB",
        "memory at rest (2 s after the first 200)",
        s.rss_rest_kb as f64 / 1024.0,
        s.hwm_kb as f64 / 1024.0
    );
    println!("{:-<110}", "");
    println!(
        "query throughput: {} -t{} -c{} -d{}s, a separate process; latencies in ms",
        results.wrk, wrk_options.threads, wrk_options.connections, wrk_options.seconds
    );
    println!(
        "{:<66} {:<10} {:>10} {:>8} {:>8} {:>9} {:>10}",
        "endpoint", "server", "req/s", "p50", "p99", "requests", "B/answer"
    );
    for load in &results.loads {
        println!(
            "{:<66} {:<10} {:>10.1} {:>8.2} {:>8.2} {:>9} {:>10.0}{}",
            load.name,
            load.target,
            load.requests_per_sec,
            load.p50_ms,
            load.p99_ms,
            load.requests,
            load.bytes_per_response,
            if load.errors.is_empty() {
                String::new()
            } else {
                format!("  ({})", load.errors)
            }
        );
    }
    for osds in results.loads.iter().filter(|l| l.target == "osds") {
        if let Some(peer) = results
            .loads
            .iter()
            .find(|l| l.target == "datasette" && l.name == osds.name)
        {
            println!(
                "ratio osds/datasette {:<46} req/s {:.2}x, p99 {:.2}x",
                osds.name,
                osds.requests_per_sec / peer.requests_per_sec,
                osds.p99_ms / peer.p99_ms
            );
        }
    }
    if let Some(cost) = &results.page_cost {
        println!(
            "{:<58} archive read + rendering (cold cache) {:.2} ms, writing the body {:.2} ms, body {:.0} kB",
            format!("where a /reports?limit=1000 goes ({} pages)", cost.pages),
            cost.read_ms,
            cost.serialize_ms,
            cost.body_bytes / 1000.0
        );
    }
    println!("{:-<110}", "");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beijing_dates() {
        assert_eq!(beijing(FIRST_EVENT_UNIX), "2024-01-01 00:00:00");
        assert_eq!(beijing(1_788_008_050), "2026-08-29 20:54:10");
    }

    #[test]
    fn generated_frames_decode() {
        for event in 0..8 {
            for revision in 1..=revisions(event) {
                let (text, channel) = frame(event, revision);
                assert!(
                    matches!(
                        wolfx_core::decode(channel, text.as_bytes()),
                        Ok(wolfx_core::Decoded::Report(_))
                    ),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn wrk_durations() {
        assert_eq!(wrk_duration_ms("512.00us"), Some(0.512));
        assert_eq!(wrk_duration_ms("3.21ms"), Some(3.21));
        assert_eq!(wrk_duration_ms("1.02s"), Some(1020.0));
        assert_eq!(url_path("http://127.0.0.1:80/api/v1"), "/api/v1");
        assert_eq!(
            origin_of("http://127.0.0.1:80/api/v1"),
            "http://127.0.0.1:80"
        );
        assert_eq!(wrk_bytes("612.00B"), Some(612.0));
        assert_eq!(wrk_bytes("1.50KB"), Some(1536.0));
        assert_eq!(wrk_bytes("2.00MB"), Some(2_097_152.0));
    }

    #[test]
    fn lua_requests_carry_their_headers_with_quotes_escaped() {
        let script = lua_pick_request(&[(
            "/api/v1/reports?after=1".to_owned(),
            vec![("If-None-Match", "W/\"ab\"".to_owned())],
        )]);
        assert!(
            script.contains(r#"{"/api/v1/reports?after=1",{["If-None-Match"]="W/\"ab\""}}"#),
            "{script}"
        );
    }
}
