//! A real browser as the client: headless Chromium (Debian's package, driven through ChromeDriver's WebDriver
//! API) opens `EventSource` on `/stream`; the server closes the stream every 1.5 s, the browser reconnects by
//! itself with `Last-Event-ID`, and the page ends up with every report exactly once, in order.

mod support;

use fake_relay::RelayConfig;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{eventually, get_json, start_connected, tempdir, tests_dir};

/// Installs Chromium and ChromeDriver with the project's own script when they are missing.
fn ensure_browser() {
    if std::path::Path::new("/usr/bin/chromium").exists()
        && std::path::Path::new("/usr/bin/chromedriver").exists()
    {
        return;
    }
    let status = Command::new("bash")
        .arg(tests_dir().join("../.ci/install-browser"))
        .status()
        .expect("run .ci/install-browser");
    assert!(status.success(), ".ci/install-browser failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A ChromeDriver process with one headless Chromium session; both end when dropped.
struct Browser {
    driver: Child,
    port: u16,
    base: String,
    session: String,
    http: reqwest::Client,
}

impl Browser {
    async fn start() -> Browser {
        let port = free_port();
        let log = tempdir("chromedriver").join("chromedriver.log");
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        eventually(30, "chromedriver ready", || async {
            let status = http.get(format!("{base}/status")).send().await.ok()?;
            let body: Value = status.json().await.ok()?;
            (body["value"]["ready"] == true).then_some(())
        })
        .await;
        let profile = tempdir("chromium-profile");
        let capabilities = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--disable-quic", "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        format!("--user-data-dir={}", profile.display()),
                    ],
                },
            }},
        });
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("create session")
            .json()
            .await
            .expect("session JSON");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_string();
        Browser {
            driver,
            port,
            base,
            session,
            http,
        }
    }

    async fn command(&self, path: &str, body: Value) -> Value {
        let response: Value = self
            .http
            .post(format!("{}/session/{}{path}", self.base, self.session))
            .json(&body)
            .send()
            .await
            .expect("WebDriver command")
            .json()
            .await
            .expect("WebDriver JSON");
        assert!(
            response["value"]["error"].is_null(),
            "WebDriver {path} failed: {response}"
        );
        response["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.command("/url", json!({ "url": url })).await;
    }

    async fn eval(&self, script: &str) -> Value {
        self.command("/execute/sync", json!({ "script": script, "args": [] }))
            .await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes ChromeDriver close Chromium; killing ChromeDriver alone leaves Chromium
        // running. Plain blocking HTTP, since drop cannot await (and runs on a panic too).
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            if stream.write_all(request.as_bytes()).is_ok() {
                let _ = stream.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

const PAGE_SCRIPT: &str = r#"
window.received = [];
window.readies = [];
window.opens = 0;
const source = new EventSource('/api/v1/stream');
source.onopen = () => { window.opens += 1; };
source.addEventListener('ready', (e) => window.readies.push(JSON.parse(e.data)));
source.addEventListener('report', (e) => {
  const report = JSON.parse(e.data);
  if (String(report.id) !== e.lastEventId) { window.mismatch = e.lastEventId; }
  window.received.push(report.id);
});
return true;
"#;

fn cea_frame(n: u32) -> String {
    format!(
        r#"{{"type":"cenc_eew","ID":"b{n}","EventID":"20260829{n:04}.0001","ReportTime":"2026-08-29 06:07:28","ReportNum":1,"OriginTime":"2026-08-29 06:07:28","HypoCenter":"新疆阿克苏地区温宿县","Latitude":42.2,"Longitude":80.502,"Magnitude":4.0,"Depth":null,"MaxIntensity":5.1}}"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_eventsource_resumes_by_itself_and_gets_every_report_once() {
    ensure_browser();
    let (relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--live-max-connection-secs",
            "1.5",
            "--live-retry-ms",
            "200",
        ],
    )
    .await;
    let browser = Browser::start().await;
    browser.open(&server.url("/status")).await;
    browser.eval(PAGE_SCRIPT).await;
    eventually(20, "the page's stream is ready", || async {
        (browser.eval("return window.readies.length").await == 1).then_some(())
    })
    .await;

    // Reports arrive over about five seconds, across several server-side closes and browser reconnects.
    const LAST: u32 = 50;
    for n in 1..=LAST {
        relay.push_to("/cenc_eew", cea_frame(n).as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually(30, "every report in the page", || async {
        let received = browser.eval("return window.received").await;
        (received.as_array().unwrap().len() >= LAST as usize).then_some(())
    })
    .await;
    // Anything sent twice would arrive right after the last one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = browser.eval("return window.received").await;
    let archived: Vec<Value> = get_json(&server.url("/reports?limit=1000")).await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(archived.len(), LAST as usize);
    assert_eq!(
        received.as_array().unwrap(),
        &archived,
        "every report exactly once, in order"
    );
    assert_eq!(
        browser.eval("return window.mismatch ?? null").await,
        Value::Null
    );

    // The browser really reconnected, and each reconnection resumed from the last id it had.
    let readies = browser.eval("return window.readies").await;
    let readies = readies.as_array().unwrap();
    assert!(
        readies.len() >= 3,
        "expected several reconnections: {readies:?}"
    );
    assert_eq!(
        readies[0]["cursor"], 0,
        "the first connection starts at the newest cursor"
    );
    assert!(
        readies[1..]
            .iter()
            .any(|r| r["cursor"].as_i64().unwrap() > 0),
        "a reconnection resumed with Last-Event-ID: {readies:?}"
    );
    assert!(browser.eval("return window.opens").await.as_i64().unwrap() >= 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_page_renders_every_documented_path_offline() {
    ensure_browser();
    let server = support::start_server("ws://127.0.0.1:9", &["--no-ingest"]);
    let document: Value = serde_norway::from_str(
        &std::fs::read_to_string(tests_dir().join("../schemas/openapi.yaml")).unwrap(),
    )
    .unwrap();
    let documented: Vec<String> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let browser = Browser::start().await;
    browser.open(&server.url("/docs")).await;
    // Every path is a rendered section with its heading on screen, in the document's order; the page asks
    // nothing of any other host.
    let rendered = browser
        .eval(
            "return [...document.querySelectorAll('section[data-path]')]
                .filter(s => s.offsetHeight > 0 && s.querySelector('h2').innerText.length > 0)
                .map(s => s.dataset.path)",
        )
        .await;
    let rendered: Vec<String> = serde_json::from_value(rendered).unwrap();
    assert_eq!(rendered, documented);
    let fetched = browser
        .eval("return performance.getEntriesByType('resource').map(r => r.name)")
        .await;
    let origin = server.base.trim_end_matches("/api/v1");
    for name in fetched.as_array().unwrap() {
        assert!(
            name.as_str().unwrap().starts_with(origin),
            "the page loads nothing from elsewhere: {fetched}"
        );
    }
    let title = browser.eval("return document.title").await;
    assert!(title.as_str().unwrap().contains("reference"), "{title}");
    // Every schema is shown with its fields: each field of the document's own schema, by name, on screen,
    // and a response's schema is a link to them.
    let shown = browser
        .eval(
            "return Object.fromEntries([...document.querySelectorAll('section[data-schema]')]
                .filter(s => s.offsetHeight > 0)
                .map(s => [s.dataset.schema,
                    [...s.querySelectorAll('tr td:first-child code')].map(c => c.innerText)]))",
        )
        .await;
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for (name, schema) in schemas {
        let fields: Vec<&String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        let rendered = &shown[name.as_str()];
        assert!(!rendered.is_null(), "schema {name} not shown: {shown}");
        for field in fields {
            assert!(
                rendered
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f == field.as_str()),
                "{name}.{field} not shown: {rendered}"
            );
        }
    }
    let linked = browser
        .eval("return document.querySelectorAll('section[data-path] a[href=\"#schema-ReportPage\"]').length")
        .await;
    assert!(linked.as_u64().unwrap() > 0, "{linked}");
}

const SC_FRAME: &str = r#"{"type":"sc_eew","ID":811,"EventID":"202608281313.0001_1","ReportTime":"2026-08-28 13:14:01","ReportNum":1,"OriginTime":"2026-08-28 13:13:34","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":5.3,"Depth":12,"MaxIntensity":7.1}"#;

impl Browser {
    /// The page as Chromium draws it: the PNG's width, height and RGB(A) pixels, 8 bits each.
    async fn screenshot(&self) -> (u32, u32, usize, Vec<u8>) {
        use base64::Engine;
        let response: Value = self
            .http
            .get(format!("{}/session/{}/screenshot", self.base, self.session))
            .send()
            .await
            .expect("WebDriver screenshot")
            .json()
            .await
            .expect("WebDriver JSON");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(response["value"].as_str().expect("a base64 PNG"))
            .expect("base64");
        let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder.read_info().expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
        let info = reader.next_frame(&mut pixels).expect("a frame");
        let channels = info.color_type.samples();
        pixels.truncate(info.line_size * info.height as usize);
        (info.width, info.height, channels, pixels)
    }
}

/// The live map page, as a person would open it: a report pushed through the relay appears on it as it is
/// archived, in the list and as a red marker at its place on the coastline's map (read back from a
/// screenshot); a cancelled training report is marked as such.
#[tokio::test(flavor = "multi_thread")]
async fn the_live_map_shows_a_pushed_report_where_it_is() {
    ensure_browser();
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    let browser = Browser::start().await;
    browser
        .command("/window/rect", json!({ "width": 1300, "height": 850 }))
        .await;
    browser.open(&server.url("/map")).await;
    eventually(20, "the map follows the live channels", || async {
        let state = browser
            .eval("return document.getElementById('state').textContent")
            .await;
        (state == "live").then_some(())
    })
    .await;
    let coast = browser
        .eval("return document.querySelectorAll('path.coast').length")
        .await;
    assert!(
        coast.as_u64().unwrap() > 50,
        "the coastline is drawn: {coast}"
    );
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('circle.eew').length")
            .await,
        0
    );

    relay.push_to("/sc_eew", SC_FRAME.as_bytes()).await;
    let cancelled =
        std::fs::read(tests_dir().join("fixtures/fj/cancel-and-training-flags.json")).unwrap();
    relay.push_to("/fj_eew", &cancelled).await;
    eventually(20, "both reports on the map", || async {
        let markers = browser
            .eval("return document.querySelectorAll('circle.eew').length")
            .await;
        (markers == 2).then_some(())
    })
    .await;
    let sc = browser
        .eval("return document.querySelector('#eew [data-source=sc]').textContent")
        .await;
    let sc = sc.as_str().unwrap();
    assert!(
        sc.starts_with("sc M5.3 12 km 四川内江市隆昌市 2026-08-28T05:13:34Z"),
        "{sc}"
    );
    let fj = browser
        .eval("const e = document.querySelector('#eew [data-source=fj]'); return [e.textContent, e.className]")
        .await;
    assert!(
        fj[0].as_str().unwrap().contains("(cancelled) (test)"),
        "{fj}"
    );
    assert!(fj[1].as_str().unwrap().contains("cancelled"), "{fj}");

    // The screenshot: red where the sc marker is drawn, not red a little way off it.
    let at = browser
        .eval(
            "const r = document.querySelector('circle.eew[data-source=sc]').getBoundingClientRect(); \
             return [r.x + r.width / 2, r.y + r.height / 2, window.devicePixelRatio]",
        )
        .await;
    let (cx, cy, ratio) = (
        at[0].as_f64().unwrap(),
        at[1].as_f64().unwrap(),
        at[2].as_f64().unwrap(),
    );
    let (width, height, channels, pixels) = browser.screenshot().await;
    let rgb = |x: f64, y: f64| {
        let (x, y) = ((x * ratio) as u32, (y * ratio) as u32);
        assert!(
            x < width && y < height,
            "({x}, {y}) outside {width}x{height}"
        );
        let at = (y * width + x) as usize * channels;
        (pixels[at], pixels[at + 1], pixels[at + 2])
    };
    let red = |(r, g, b): (u8, u8, u8)| r > 200 && g < 80 && b < 80;
    assert!(red(rgb(cx, cy)), "the marker is red: {:?}", rgb(cx, cy));
    assert!(
        !red(rgb(cx + 40.0, cy + 40.0)),
        "{:?}",
        rgb(cx + 40.0, cy + 40.0)
    );
}
