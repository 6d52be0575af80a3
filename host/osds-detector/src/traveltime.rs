//! Travel times. The default is the JMA2001 table of the Japan Meteorological Agency, shipped with the project
//! (`data/jma2001-traveltimes.csv`: P and S times for depths 0–700 km and distances 0–2,000 km), read
//! bilinearly. An operator may install another table (CSV `depth_km,distance_km,p_ms,s_ms` on a full
//! depth × distance grid) or the homogeneous fallback: straight rays at Vp 6.0 and Vs 3.5 km/s from the
//! hypocentre, adequate within about 150 km of shallow events and for regions without a table. The model is a
//! value the detector is given (see `DetectorConfig`), named in the algorithm fingerprint.

use crate::csv::{Csv, number};
use anyhow::Context;
use std::path::Path;
use std::sync::LazyLock;

pub const VP_KM_S: f64 = 6.0;
pub const VS_KM_S: f64 = 3.5;

/// The JMA2001 table as shipped.
const JMA2001: &str = include_str!("../data/jma2001-traveltimes.csv");

/// How travel times are computed.
#[derive(Debug, Clone)]
pub enum Model {
    /// A table on a depth × distance grid (JMA2001 by default).
    Table(Table),
    /// Straight rays at Vp 6.0 / Vs 3.5 km/s.
    Homogeneous,
}

impl Model {
    /// The shipped JMA2001 table.
    pub fn jma2001() -> Model {
        // Parsed once: the text is a constant of the binary, so the parsed grid is too (each model owns a copy).
        static PARSED: LazyLock<Table> = LazyLock::new(|| {
            let mut table = Table::parse(JMA2001).expect("the shipped JMA2001 table parses");
            table.name = "JMA2001".to_string();
            table
        });
        Model::Table(PARSED.clone())
    }

    /// An operator's choice: `homogeneous`, or the path of a table file.
    pub fn from_argument(argument: &Path) -> anyhow::Result<Model> {
        if argument.as_os_str() == "homogeneous" {
            return Ok(Model::Homogeneous);
        }
        Ok(Model::Table(Table::load(argument)?))
    }

    /// For the fingerprint: `JMA2001 <digest>`, `table <digest>` or `Vp 6.0 Vs 3.5`.
    pub fn name(&self) -> String {
        match self {
            Model::Table(table) => format!("{} {}", table.name, table.digest),
            Model::Homogeneous => format!("Vp {VP_KM_S:.1} Vs {VS_KM_S:.1}"),
        }
    }

    /// For the algorithm fingerprint: `jma2001-<digest>`, `table-<digest>` or `vp6.0-vs3.5`.
    pub fn tag(&self) -> String {
        match self {
            Model::Table(table) => format!("{}-{}", table.name.to_lowercase(), table.digest),
            Model::Homogeneous => format!("vp{VP_KM_S:.1}-vs{VS_KM_S:.1}"),
        }
    }

    /// P travel time in seconds.
    pub fn p(&self, epicentral_km: f64, depth_km: f64) -> f64 {
        match self {
            Model::Table(table) => table.read(&table.p, epicentral_km, depth_km),
            Model::Homogeneous => hypocentral_km(epicentral_km, depth_km) / VP_KM_S,
        }
    }

    /// S travel time in seconds.
    pub fn s(&self, epicentral_km: f64, depth_km: f64) -> f64 {
        match self {
            Model::Table(table) => table.read(&table.s, epicentral_km, depth_km),
            Model::Homogeneous => hypocentral_km(epicentral_km, depth_km) / VS_KM_S,
        }
    }
}

/// A travel-time table on a depth × distance grid.
#[derive(Debug, Clone)]
pub struct Table {
    depths: Vec<f64>,
    distances: Vec<f64>,
    /// Seconds, `[depth][distance]`.
    p: Vec<Vec<f64>>,
    s: Vec<Vec<f64>>,
    /// What the fingerprint calls it (`JMA2001` for the shipped table, `table` for an operator's).
    pub name: String,
    /// Short SHA-256 of the file, for the fingerprint.
    pub digest: String,
}

impl Table {
    /// Parses the CSV (header `depth_km,distance_km,p_ms,s_ms`, columns in any order).
    pub fn parse(text: &str) -> anyhow::Result<Table> {
        use sha2::{Digest, Sha256};
        let table = Csv::parse(text, "the travel-time table")?;
        let columns = ["depth_km", "distance_km", "p_ms", "s_ms"];
        let at = table.columns(&columns)?;
        let mut rows = Vec::new();
        for (line, cells) in &table.rows {
            let value =
                |i: usize| number(cells, at[i], columns[i]).with_context(|| format!("line {line}"));
            rows.push((value(0)?, value(1)?, value(2)? / 1000.0, value(3)? / 1000.0));
        }
        let axis = |values: Vec<f64>| {
            let mut values = values;
            values.sort_by(f64::total_cmp);
            values.dedup();
            values
        };
        let depths = axis(rows.iter().map(|r| r.0).collect());
        let distances = axis(rows.iter().map(|r| r.1).collect());
        anyhow::ensure!(
            depths.len() >= 2 && distances.len() >= 2,
            "the travel-time table needs at least two depths and two distances"
        );
        let mut p = vec![vec![f64::NAN; distances.len()]; depths.len()];
        let mut s = p.clone();
        for (depth, distance, tp, ts) in rows {
            let i = depths.partition_point(|d| *d < depth);
            let j = distances.partition_point(|d| *d < distance);
            p[i][j] = tp;
            s[i][j] = ts;
        }
        anyhow::ensure!(
            p.iter().chain(&s).flatten().all(|t| t.is_finite()),
            "the travel-time table does not cover every depth × distance pair"
        );
        let digest = hex::encode(&Sha256::digest(text.as_bytes())[..6]);
        Ok(Table {
            depths,
            distances,
            p,
            s,
            name: "table".to_string(),
            digest,
        })
    }

    pub fn load(path: &Path) -> anyhow::Result<Table> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read travel-time table {}", path.display()))?;
        Table::parse(&text).with_context(|| format!("travel-time table {}", path.display()))
    }

    /// Bilinear reading, clamped to the table's edges.
    fn read(&self, grid: &[Vec<f64>], distance: f64, depth: f64) -> f64 {
        let (i, fi) = cell(&self.depths, depth);
        let (j, fj) = cell(&self.distances, distance);
        let at = |a: usize, b: usize| grid[a][b];
        let near = at(i, j) * (1.0 - fj) + at(i, j + 1) * fj;
        let far = at(i + 1, j) * (1.0 - fj) + at(i + 1, j + 1) * fj;
        near * (1.0 - fi) + far * fi
    }
}

/// The cell of `axis` holding `x` (clamped) and the fraction across it.
fn cell(axis: &[f64], x: f64) -> (usize, f64) {
    let last = axis.len() - 2;
    let i = axis
        .partition_point(|v| *v <= x)
        .saturating_sub(1)
        .min(last);
    let fraction = ((x - axis[i]) / (axis[i + 1] - axis[i])).clamp(0.0, 1.0);
    (i, fraction)
}

/// Hypocentral distance in km from epicentral distance and depth.
pub fn hypocentral_km(epicentral_km: f64, depth_km: f64) -> f64 {
    (epicentral_km * epicentral_km + depth_km * depth_km).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_arrives_after_p_and_both_grow_with_distance() {
        let homogeneous = Model::Homogeneous;
        assert!((homogeneous.p(60.0, 0.0) - 10.0).abs() < 1e-12);
        for model in [homogeneous, Model::jma2001()] {
            assert!(model.s(60.0, 10.0) > model.p(60.0, 10.0));
            assert!(model.p(100.0, 10.0) > model.p(50.0, 10.0));
        }
    }

    /// The shipped table is JMA2001 as published: 1.773 s / 3.007 s straight below a 10 km event, 17.037 s /
    /// 29.054 s at 100 km, and deep events reach 700 km.
    #[test]
    fn the_default_model_is_the_shipped_jma2001_table() {
        let model = Model::jma2001();
        assert!(model.name().starts_with("JMA2001 "), "{}", model.name());
        assert!((model.p(0.0, 10.0) - 1.773).abs() < 1e-9);
        assert!((model.s(0.0, 10.0) - 3.007).abs() < 1e-9);
        assert!((model.p(100.0, 10.0) - 17.037).abs() < 1e-9);
        assert!((model.s(100.0, 10.0) - 29.054).abs() < 1e-9);
        assert!(model.p(0.0, 700.0) > model.p(0.0, 600.0));
        let config = crate::detector::DetectorConfig::default();
        assert!(
            config.travel_times.name().starts_with("JMA2001 "),
            "the default"
        );
    }

    /// A table written from straight rays reads back as straight rays between its nodes.
    #[test]
    fn a_table_is_read_bilinearly_and_clamped() {
        let mut csv = String::from("depth_km,distance_km,p_ms,s_ms\n");
        for depth in (0..=100).step_by(10) {
            for distance in (0..=300).step_by(5) {
                let r = hypocentral_km(f64::from(distance), f64::from(depth));
                csv.push_str(&format!(
                    "{depth},{distance},{},{}\n",
                    r / VP_KM_S * 1000.0,
                    r / VS_KM_S * 1000.0
                ));
            }
        }
        let table = Table::parse(&csv).unwrap();
        let p = table.read(&table.p, 123.4, 37.0);
        assert!(
            (p - hypocentral_km(123.4, 37.0) / VP_KM_S).abs() < 0.05,
            "{p}"
        );
        // Past the edge: the edge's value.
        assert_eq!(
            table.read(&table.s, 999.0, 500.0),
            table.read(&table.s, 300.0, 100.0)
        );
    }

    #[test]
    fn an_operator_names_a_table_file_or_the_homogeneous_model() {
        let homogeneous = Model::from_argument(Path::new("homogeneous")).unwrap();
        assert_eq!(homogeneous.tag(), "vp6.0-vs3.5");
        let error = Model::from_argument(Path::new("/nonexistent/tt.csv")).unwrap_err();
        assert!(
            format!("{error:#}").contains("/nonexistent/tt.csv"),
            "{error:#}"
        );
        assert!(Model::jma2001().tag().starts_with("jma2001-"));
    }

    #[test]
    fn a_table_with_holes_or_garbage_is_refused() {
        assert!(
            Table::parse("depth_km,distance_km,p_ms,s_ms\n0,0,0,0\n0,10,1,2\n10,0,1,2\n").is_err()
        );
        assert!(Table::parse("depth_km,distance_km,p_ms\n0,0,0\n").is_err());
        assert!(Table::parse("depth_km,distance_km,p_ms,s_ms\n0,0,x,0\n").is_err());
    }
}
