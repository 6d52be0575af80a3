//! Synthetic earthquakes with known truth, end to end (`osds simulate`): a table of scenarios modelled on real
//! earthquakes (JMA catalogue hypocentres: Noto 2024, Iburi 2018, Kumamoto 2016, Fukushima-oki 2022) and
//! disturbances, their frames rendered as monitor-layout GIFs, and an image server in the kmoni layout that
//! publishes them the way the real monitor does (late, some lost, some repeated, an outage).

use anyhow::Context;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use osds_detector::detector::{DetectorConfig, Station};
use osds_detector::kmoni::{self, Layer, SURFACE_INTENSITY};
use osds_detector::stations::Network;
use osds_detector::synthetic::{Faults, Quake, frames, grid_network};
use osds_time::now_ms;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// A scenario: an earthquake (or two, or none) with known truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Noto,
    Iburi,
    Kumamoto,
    FukushimaOki,
    TwoEvents,
    Quiet,
    Gap,
}

impl Scenario {
    pub const ALL: [Scenario; 7] = [
        Scenario::Noto,
        Scenario::Iburi,
        Scenario::Kumamoto,
        Scenario::FukushimaOki,
        Scenario::TwoEvents,
        Scenario::Quiet,
        Scenario::Gap,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Noto => "noto",
            Scenario::Iburi => "iburi",
            Scenario::Kumamoto => "kumamoto",
            Scenario::FukushimaOki => "fukushima-oki",
            Scenario::TwoEvents => "two-events",
            Scenario::Quiet => "quiet",
            Scenario::Gap => "gap",
        }
    }

    /// What it is.
    pub fn about(self) -> &'static str {
        match self {
            Scenario::Noto => "2024 Noto: 37.495N 137.270E, 16 km, Mj 7.6",
            Scenario::Iburi => "2018 Iburi: 42.690N 142.007E, 37 km, Mj 6.7",
            Scenario::Kumamoto => "2016 Kumamoto foreshock: 32.742N 130.808E, 11 km, Mj 6.5",
            Scenario::FukushimaOki => {
                "2022 Fukushima-oki: 37.7N 141.6E, 57 km, Mj 7.4, seen only from land (one-sided)"
            }
            Scenario::TwoEvents => "Two moderate earthquakes 300 km apart at the same time",
            Scenario::Quiet => "No earthquake: a stuck station, a lone spike and dropouts",
            Scenario::Gap => "An earthquake whose frames stop for 20 s mid-event",
        }
    }
}

/// How the served images are published, the way the real monitor does: late by a second or two with spread,
/// some never, some first as the previous second's image, none during an outage; and the time of its latest
/// image at `webservice/server/pros/latest.json` (unless `no_clock`).
#[derive(Debug, Clone)]
pub struct Publication {
    /// Seconds after its observation second an image is published.
    pub publish_delay_secs: f64,
    /// Up to this many seconds more, drawn per second from the seed.
    pub publish_spread_secs: f64,
    /// Share of seconds whose images are never published.
    pub lose: f64,
    /// Share of seconds whose address serves the previous second's image for their first 3 s.
    pub repeat: f64,
    /// Frames FROM..TO (seconds from the first) are published only when the outage ends.
    pub outage: Option<std::ops::Range<u64>>,
    /// Do not serve the latest image's time (a follower falls back to its own clock).
    pub no_clock: bool,
}

/// The layers a scenario renders.
pub const LAYERS: [&str; 2] = ["jma_s", "acmap_s"];

/// Unix ms of the anchor's origin (JST wall clock, as docs/self-sensing.md gives it).
fn jst_ms(text: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .map(|t| t.and_utc().timestamp_millis() - 9 * 3_600_000)
        .unwrap_or(0)
}

/// The quakes (origin in seconds after the first frame), the network, the faults, the clock of frame 0 and
/// the frames to drop (a gap).
pub struct Setup {
    pub quakes: Vec<Quake>,
    pub stations: Vec<Station>,
    pub faults: Faults,
    pub start_ms: i64,
    pub gap: Option<std::ops::Range<u64>>,
}

pub fn setup(scenario: Scenario) -> Setup {
    let quake = |lat, lon, depth, mw| Quake {
        latitude: lat,
        longitude: lon,
        depth_km: depth,
        mw,
        origin: 5.0,
    };
    let (quakes, centre, keep_land, start): (Vec<Quake>, (f64, f64), bool, &str) = match scenario {
        Scenario::Noto => (
            vec![quake(37.495, 137.270, 16.0, 7.4)],
            (37.2, 137.4),
            false,
            "2024-01-01 16:10:17.5",
        ),
        Scenario::Iburi => (
            vec![quake(42.690, 142.007, 37.0, 6.5)],
            (42.9, 142.2),
            false,
            "2018-09-06 03:07:54.3",
        ),
        Scenario::Kumamoto => (
            vec![quake(32.742, 130.808, 11.0, 6.3)],
            (32.9, 130.7),
            false,
            "2016-04-14 21:26:29.4",
        ),
        Scenario::FukushimaOki => (
            vec![quake(37.7, 141.6, 57.0, 7.2)],
            (37.7, 140.4),
            true,
            "2022-03-16 23:35:55.0",
        ),
        Scenario::TwoEvents => (
            vec![quake(35.0, 135.0, 10.0, 6.0), quake(35.0, 138.3, 10.0, 6.0)],
            (35.0, 136.65),
            false,
            "2026-11-22 10:00:00.0",
        ),
        Scenario::Quiet => (Vec::new(), (35.0, 135.0), false, "2026-11-22 10:00:00.0"),
        Scenario::Gap => (
            vec![quake(35.0, 135.0, 10.0, 6.0)],
            (35.0, 135.1),
            false,
            "2026-11-22 10:00:00.0",
        ),
    };
    let radius = if scenario == Scenario::TwoEvents {
        260.0
    } else {
        200.0
    };
    let positions = grid_network(centre.0, centre.1, radius, 20.0, |_, lon| {
        !keep_land || lon < 141.0
    });
    let stations = positions
        .iter()
        .enumerate()
        .map(|(i, p)| Station {
            code: format!("SYN{i:04}"),
            name: Some(format!("synthetic {i}")),
            latitude: p.latitude,
            longitude: p.longitude,
        })
        .collect();
    let faults = match scenario {
        Scenario::Quiet => Faults {
            stuck: vec![(3, 4.0)],
            spike: vec![(40, 20, 5.0)],
            dropout: 0.05,
            ..Faults::default()
        },
        _ => Faults {
            dropout: 0.02,
            ..Faults::default()
        },
    };
    Setup {
        quakes,
        stations,
        faults,
        // Observation seconds are whole seconds.
        start_ms: jst_ms(start) / 1000 * 1000,
        gap: (scenario == Scenario::Gap).then_some(25..45),
    }
}

/// The scenario's network: every station on its own pixel (a station whose pixel is taken is left out).
pub fn network(stations: &[Station]) -> Network {
    let mut network = Network::default();
    let mut taken = std::collections::HashSet::new();
    for station in stations {
        let pixel = kmoni::synthetic_pixel(station.latitude, station.longitude);
        if taken.insert(pixel) {
            network.stations.push(station.clone());
            network.pixels.push(pixel);
        }
    }
    network
}

/// The network as the CSV `--stations` reads.
pub fn station_table(network: &Network) -> String {
    let mut csv = String::from("network,code,name,region,suspended,lat,lon,img_x,img_y\n");
    for (s, (x, y)) in network.stations.iter().zip(&network.pixels) {
        csv.push_str(&format!(
            "SYN,{},{},synthetic,0,{:.4},{:.4},{x},{y}\n",
            s.code,
            s.name.clone().unwrap_or_default(),
            s.latitude,
            s.longitude
        ));
    }
    csv
}

/// A rough synthetic relation of peak acceleration to realtime intensity: log10 PGA = (I + 0.5) / 2.
fn pga_of_intensity(intensity: f64) -> f64 {
    10f64.powf((intensity + 0.5) / 2.0)
}

/// One served image: when it may be served (Unix ms), and the GIF; before `available_at`, from `stale_from`,
/// its address serves `stale` (the previous second's image) instead.
struct Served {
    available_at: i64,
    gif: Vec<u8>,
    stale: Option<(i64, Vec<u8>)>,
}

/// What the image server serves: the images by path, and when each trigger-layer second is published.
pub struct Images {
    by_path: HashMap<String, Served>,
    /// (published at, observation second), for `latest.json`.
    published: Vec<(i64, i64)>,
    clock: bool,
}

/// One rendered image: frame number, layer, GIF.
pub type Rendered = (i64, Layer, Vec<u8>);

/// Renders every frame of the scenario as monitor-layout GIFs (frames inside the scenario's gap are not).
pub fn render_images(setup: &Setup, network: &Network, seconds: u64, seed: u64) -> Vec<Rendered> {
    let positions = network.positions();
    let frames = frames(
        &DetectorConfig::default().travel_times,
        &setup.quakes,
        &positions,
        seconds,
        &setup.faults,
        seed,
    );
    let mut images = Vec::new();
    for (n, frame) in frames.iter().enumerate() {
        if setup
            .gap
            .as_ref()
            .is_some_and(|gap| gap.contains(&(n as u64)))
        {
            continue;
        }
        for name in LAYERS {
            let layer = Layer::parse(name).expect("a known layer");
            let values: Vec<_> = network
                .pixels
                .iter()
                .zip(frame)
                .map(|(&pixel, value)| {
                    let value = if layer == SURFACE_INTENSITY {
                        *value
                    } else {
                        value.map(pga_of_intensity)
                    };
                    (pixel, value)
                })
                .collect();
            images.push((n as i64, layer, kmoni::render(layer, &values)));
        }
    }
    images
}

/// The rendered images as observed from `start_ms`, keyed by their path, each published as `publication`
/// says (a second after its observation second by default, plus the layer's lateness).
pub fn schedule_images(
    rendered: Vec<Rendered>,
    start_ms: i64,
    late: &[(Layer, u64)],
    publication: &Publication,
    seed: u64,
) -> Images {
    let mut rng = osds_detector::rng::Rng::new(seed ^ 0x5EED);
    // Per frame: published after this many ms, or never; and whether it repeats the previous second first.
    let frames = rendered.iter().map(|(n, ..)| *n).max().map_or(0, |n| n + 1);
    let fate: Vec<(Option<i64>, bool)> = (0..frames)
        .map(|n| {
            let delay =
                publication.publish_delay_secs + publication.publish_spread_secs * rng.uniform();
            let lost = rng.uniform() < publication.lose;
            let repeated = rng.uniform() < publication.repeat;
            let at = start_ms + n * 1000;
            let published = match &publication.outage {
                Some(outage) if outage.contains(&(n as u64)) => {
                    start_ms + outage.end as i64 * 1000 + 500
                }
                _ => at + (delay * 1000.0) as i64,
            };
            ((!lost).then_some(published), repeated)
        })
        .collect();
    let previous: HashMap<(i64, Layer), Vec<u8>> = rendered
        .iter()
        .map(|(n, layer, gif)| ((*n + 1, *layer), gif.clone()))
        .collect();
    let mut published = Vec::new();
    let by_path = rendered
        .into_iter()
        .filter_map(|(n, layer, gif)| {
            let (when, repeated) = fate[n as usize];
            let at = start_ms + n * 1000;
            let late = late
                .iter()
                .find(|(l, _)| *l == layer)
                .map_or(0, |(_, s)| *s as i64 * 1000);
            let stale = previous.get(&(n, layer)).filter(|_| repeated).cloned();
            let first = when? + late;
            let available_at = if stale.is_some() { first + 3000 } else { first };
            if layer == SURFACE_INTENSITY {
                published.push((available_at, at));
            }
            Some((
                format!("/{}", layer.image_path(at)),
                Served {
                    available_at,
                    gif,
                    stale: stale.map(|gif| (first, gif)),
                },
            ))
        })
        .collect();
    published.sort_unstable();
    Images {
        by_path,
        published,
        clock: !publication.no_clock,
    }
}

async fn serve_image(State(images): State<Arc<Images>>, request: Request) -> Response {
    let path = request.uri().path();
    let now = now_ms();
    if images.clock && path == format!("/{}", kmoni::LATEST_PATH) {
        let latest = images
            .published
            .iter()
            .take_while(|(published, _)| *published <= now)
            .map(|(_, at)| *at)
            .max();
        return match latest {
            Some(latest) => (
                [(header::CONTENT_TYPE, "application/json")],
                kmoni::latest_json(latest, now),
            )
                .into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        };
    }
    match images.by_path.get(path) {
        Some(served) if now >= served.available_at => {
            ([(header::CONTENT_TYPE, "image/gif")], served.gif.clone()).into_response()
        }
        Some(Served {
            stale: Some((from, gif)),
            ..
        }) if now >= *from => ([(header::CONTENT_TYPE, "image/gif")], gif.clone()).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Serves the images on `address`; returns the base URL.
pub async fn image_server(address: SocketAddr, images: Images) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listen on {address}"))?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new()
        .fallback(serve_image)
        .with_state(Arc::new(images));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(base)
}
