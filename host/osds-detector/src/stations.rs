//! The operator's station table (`--stations FILE`): a CSV with the columns `network, code, name, region,
//! suspended, lat, lon, img_x, img_y` in any order (the layout of NIED's station list as matched to the
//! monitor images); a station without a pixel is not on the images. The project ships NIED's K-NET/KiK-net
//! stations with their pixels (`data/kmoni-stations.csv`) as the default.

use crate::csv::{Csv, number};
use crate::detector::Station;
use crate::trigger::StationPosition;
use anyhow::Context;
use std::path::Path;

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableStation {
    pub network: String,
    pub code: String,
    pub name: String,
    pub region: String,
    pub suspended: bool,
    pub latitude: f64,
    pub longitude: f64,
    /// Pixel on the monitor images, when the station has one.
    pub pixel: Option<(u32, u32)>,
}

impl TableStation {
    /// A station the detector can use: in service and on the images.
    pub fn usable(&self) -> bool {
        !self.suspended && self.pixel.is_some()
    }

    pub fn to_station(&self) -> Station {
        Station {
            code: self.code.clone(),
            name: Some(self.name.clone()).filter(|n| !n.is_empty()),
            latitude: self.latitude,
            longitude: self.longitude,
        }
    }
}

const COLUMNS: [&str; 9] = [
    "network",
    "code",
    "name",
    "region",
    "suspended",
    "lat",
    "lon",
    "img_x",
    "img_y",
];

/// Parses the table; a malformed row is an error naming its line.
pub fn parse(text: &str) -> anyhow::Result<Vec<TableStation>> {
    let table = Csv::parse(text, "the station table")?;
    let at = table.columns(&COLUMNS)?;
    table
        .rows
        .iter()
        .map(|(line, cells)| {
            let field = |i: usize| cells.get(at[i]).copied().unwrap_or("");
            let row = || -> anyhow::Result<TableStation> {
                let pixel = match (field(7), field(8)) {
                    ("", "") => None,
                    (x, y) => Some((
                        x.parse()
                            .with_context(|| format!("`img_x` is not a pixel: {x:?}"))?,
                        y.parse()
                            .with_context(|| format!("`img_y` is not a pixel: {y:?}"))?,
                    )),
                };
                let latitude = number(cells, at[5], COLUMNS[5])?;
                let longitude = number(cells, at[6], COLUMNS[6])?;
                anyhow::ensure!(
                    (-90.0..=90.0).contains(&latitude) && (-180.0..=180.0).contains(&longitude),
                    "coordinates out of range: {latitude}, {longitude}"
                );
                anyhow::ensure!(!field(1).is_empty(), "a station needs a code");
                Ok(TableStation {
                    network: field(0).to_string(),
                    code: field(1).to_string(),
                    name: field(2).to_string(),
                    region: field(3).to_string(),
                    suspended: matches!(field(4), "1" | "true"),
                    latitude,
                    longitude,
                    pixel,
                })
            };
            row().with_context(|| format!("station table line {line}"))
        })
        .collect()
}

/// The stations the detector uses and their pixels on the monitor images.
#[derive(Debug, Clone, Default)]
pub struct Network {
    pub stations: Vec<Station>,
    pub pixels: Vec<(u32, u32)>,
}

impl Network {
    /// The usable rows of a table (in service, with a pixel).
    pub fn from_table(table: &[TableStation]) -> Network {
        let (stations, pixels) = table
            .iter()
            .filter(|row| row.usable())
            .filter_map(|row| Some((row.to_station(), row.pixel?)))
            .unzip();
        Network { stations, pixels }
    }

    /// The usable stations of the shipped K-NET/KiK-net table.
    pub fn shipped() -> Network {
        Network::from_table(&shipped())
    }

    pub fn positions(&self) -> Vec<StationPosition> {
        self.stations
            .iter()
            .map(|s| StationPosition {
                latitude: s.latitude,
                longitude: s.longitude,
            })
            .collect()
    }
}

/// The shipped table: NIED K-NET/KiK-net stations, pixels matched by KyoshinEewViewer for ingen (MIT).
const SHIPPED: &str = include_str!("../data/kmoni-stations.csv");

/// The shipped station table.
pub fn shipped() -> Vec<TableStation> {
    parse(SHIPPED).expect("the shipped station table parses")
}

/// Reads and parses a table file.
pub fn load(path: &Path) -> anyhow::Result<Vec<TableStation>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    parse(&text).with_context(|| format!("station table {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "network,code,name,region,suspended,lat,lon,img_x,img_y\n\
                         K-NET,TST001,Alpha,Test,0,35.0,135.0,120,200\n\
                         KiK-net,TST002,Beta,Test,1,35.1,135.1,121,199\n\
                         K-NET,TST003,Gamma,Test,0,35.2,135.2,,\n";

    #[test]
    fn rows_parse_and_only_stations_in_service_with_a_pixel_are_usable() {
        let stations = parse(TABLE).unwrap();
        assert_eq!(stations.len(), 3);
        assert_eq!(stations[0].pixel, Some((120, 200)));
        assert!(stations[0].usable());
        assert!(!stations[1].usable(), "suspended");
        assert!(!stations[2].usable(), "no pixel");
        assert_eq!(stations[0].to_station().code, "TST001");
    }

    #[test]
    fn the_shipped_table_has_the_usable_k_net_and_kik_net_stations() {
        let stations = shipped();
        assert_eq!(stations.len(), 1946);
        assert_eq!(stations.iter().filter(|s| s.usable()).count(), 1366);
    }

    #[test]
    fn columns_may_come_in_any_order() {
        let table = "lat,lon,code,name,region,network,suspended,img_y,img_x\n34.5,133.5,X1,n,r,K-NET,0,10,20\n";
        let stations = parse(table).unwrap();
        assert_eq!(stations[0].pixel, Some((20, 10)));
        assert_eq!(stations[0].latitude, 34.5);
    }

    #[test]
    fn bad_rows_name_their_line() {
        let error = parse(
            "network,code,name,region,suspended,lat,lon,img_x,img_y\nK,A,n,r,0,north,135,1,1\n",
        )
        .unwrap_err();
        assert!(format!("{error:#}").contains("line 2"), "{error:#}");
        assert!(parse("code,lat\nA,1\n").is_err(), "missing columns");
        assert!(parse("").is_err());
    }
}
