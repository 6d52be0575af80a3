use super::*;
use serde_json::json;

fn station(code: &str, azimuth: f64, residual: Option<f64>, used: bool) -> StationPick {
    StationPick {
        code: code.to_string(),
        name: None,
        latitude: 37.0,
        longitude: 137.0,
        distance_km: 42.5,
        azimuth_degrees: azimuth,
        pick_at: Some(1_704_093_025_000),
        residual_seconds: residual,
        used,
        s_wave_reached: false,
        peaks: BTreeMap::new(),
        magnitude: None,
    }
}

fn solution_json() -> Value {
    json!({
        "eventId": "hyp:20240101T071022:1",
        "reportNumber": 3,
        "status": "preliminary",
        "firstDetectedAt": 1704093024000i64,
        "reportedAt": 1704093030000i64,
        "recordedAt": 1704093030120i64,
        "algorithm": "hyp-grid/1",
        "epicenter": "Noto Peninsula",
        "hypocentre": {
            "latitude": 37.5, "longitude": 137.3, "depthKm": 10.0,
            "originAt": 1704093022500i64, "calculatedAt": 1704093029900i64,
            "score": 0.42, "bestScore": 0.40, "depthFixed": false,
            "quietStationCount": 2, "sLikeStationCount": 1
        },
        "magnitude": {
            "value": null, "type": null, "stationCount": 1, "uncertainty": 0.0,
            "calculatedAt": 1704093029900i64, "retained": false
        },
        "stations": [
            {
                "code": "ISK001", "name": "Suzu", "latitude": 37.44, "longitude": 137.26,
                "distanceKm": 7.1, "azimuthDegrees": 0.0, "pickAt": 1704093024000i64,
                "residualSeconds": 0.5, "used": true, "sWaveReached": true,
                "peaks": {"surface:intensity": 5.9, "surface:pgaGal": 850.0}, "magnitude": 7.2
            },
            {
                "code": "ISK002", "latitude": 37.3, "longitude": 136.9, "distanceKm": 38.0,
                "azimuthDegrees": 120.0, "pickAt": 1704093028000i64, "residualSeconds": -0.5,
                "used": true, "sWaveReached": false, "peaks": {}
            },
            {
                "code": "TYM001", "latitude": 36.7, "longitude": 137.2, "distanceKm": 89.0,
                "azimuthDegrees": 240.0, "residualSeconds": 0.5, "used": true, "sWaveReached": false
            },
            {
                "code": "NIG001", "latitude": 37.9, "longitude": 138.9, "distanceKm": 150.0,
                "azimuthDegrees": 60.0, "used": false, "sWaveReached": false
            }
        ]
    })
}

fn solution() -> Solution {
    serde_json::from_value(solution_json()).expect("the fixture is a solution")
}

fn shaped(value: Value) -> Value {
    let bytes = serde_json::to_vec(&value).unwrap();
    serde_json::from_slice(&shape_bytes(&bytes).expect("shapes")).unwrap()
}

fn shape_error(value: Value) -> String {
    shape_bytes(&serde_json::to_vec(&value).unwrap())
        .expect_err("expected an error")
        .message
}

// --- grade table -------------------------------------------------------------------------------------------

#[test]
fn grade_s_exactly_at_every_s_boundary() {
    assert_eq!(grade(20, Some(90.0), Some(0.5), false), Grade::S);
    assert_eq!(grade(300, Some(0.0), Some(0.0), false), Grade::S);
}

#[test]
fn grade_each_criterion_just_past_its_s_boundary_gives_a() {
    assert_eq!(grade(19, Some(90.0), Some(0.5), false), Grade::A);
    assert_eq!(grade(20, Some(90.1), Some(0.5), false), Grade::A);
    assert_eq!(grade(20, Some(90.0), Some(0.51), false), Grade::A);
    assert_eq!(grade(10, Some(135.0), Some(0.8), false), Grade::A);
}

#[test]
fn grade_a_b_c_boundaries() {
    assert_eq!(grade(9, Some(90.0), Some(0.5), false), Grade::B);
    assert_eq!(grade(20, Some(135.1), Some(0.5), false), Grade::B);
    assert_eq!(grade(20, Some(90.0), Some(0.81), false), Grade::B);
    assert_eq!(grade(6, Some(180.0), Some(1.2), false), Grade::B);

    assert_eq!(grade(5, Some(90.0), Some(0.5), false), Grade::C);
    assert_eq!(grade(20, Some(180.1), Some(0.5), false), Grade::C);
    assert_eq!(grade(20, Some(90.0), Some(1.21), false), Grade::C);
    assert_eq!(grade(3, Some(270.0), Some(2.0), false), Grade::C);

    assert_eq!(grade(2, Some(90.0), Some(0.5), false), Grade::D);
    assert_eq!(grade(20, Some(270.1), Some(0.5), false), Grade::D);
    assert_eq!(grade(20, Some(90.0), Some(2.01), false), Grade::D);
    assert_eq!(grade(0, Some(90.0), Some(0.5), false), Grade::D);
}

#[test]
fn grade_is_the_worst_of_the_three() {
    assert_eq!(grade(25, Some(170.0), Some(0.3), false), Grade::B);
    assert_eq!(grade(7, Some(60.0), Some(0.1), false), Grade::B);
    assert_eq!(grade(30, Some(60.0), Some(1.5), false), Grade::C);
    assert_eq!(grade(12, Some(100.0), Some(1.0), false), Grade::B);
    assert_eq!(grade(4, Some(200.0), Some(0.6), false), Grade::C);
}

#[test]
fn grade_d_when_depth_fixed_or_gap_or_rms_unknown() {
    assert_eq!(grade(30, Some(45.0), Some(0.1), true), Grade::D);
    assert_eq!(grade(30, None, Some(0.1), false), Grade::D);
    assert_eq!(grade(30, Some(45.0), None, false), Grade::D);
    assert_eq!(grade(30, None, None, false), Grade::D);
}

#[test]
fn grade_serialises_as_its_letter() {
    assert_eq!(
        serde_json::to_string(&[Grade::S, Grade::A, Grade::B, Grade::C, Grade::D]).unwrap(),
        r#"["S","A","B","C","D"]"#
    );
}

// --- azimuth gap and rms -----------------------------------------------------------------------------------

#[test]
fn azimuth_gap_wraps_around_north() {
    let stations = [
        station("a", 350.0, None, true),
        station("b", 10.0, None, true),
    ];
    assert_eq!(azimuth_gap_degrees(&stations), Some(340.0));
}

#[test]
fn azimuth_gap_of_four_quadrants_is_90() {
    let stations: Vec<_> = [270.0, 0.0, 180.0, 90.0]
        .iter()
        .map(|&a| station("s", a, None, true))
        .collect();
    assert_eq!(azimuth_gap_degrees(&stations), Some(90.0));
}

#[test]
fn azimuth_gap_largest_gap_may_be_inside_or_across_north() {
    let inside: Vec<_> = [10.0, 20.0, 200.0, 350.0]
        .iter()
        .map(|&a| station("s", a, None, true))
        .collect();
    assert_eq!(azimuth_gap_degrees(&inside), Some(180.0));
    // 360 and -90 are read as 0 and 270.
    let normalised: Vec<_> = [360.0, -90.0]
        .iter()
        .map(|&a| station("s", a, None, true))
        .collect();
    assert_eq!(azimuth_gap_degrees(&normalised), Some(270.0));
}

#[test]
fn azimuth_gap_needs_two_used_stations() {
    assert_eq!(azimuth_gap_degrees(&[]), None);
    assert_eq!(azimuth_gap_degrees(&[station("a", 10.0, None, true)]), None);
    let one_used = [
        station("a", 10.0, None, true),
        station("b", 200.0, None, false),
    ];
    assert_eq!(azimuth_gap_degrees(&one_used), None);
    // Two used stations at the same azimuth leave the whole circle open.
    let same = [
        station("a", 10.0, None, true),
        station("b", 10.0, None, true),
    ];
    assert_eq!(azimuth_gap_degrees(&same), Some(360.0));
}

#[test]
fn rms_over_used_stations_with_a_residual() {
    let stations = [
        station("a", 0.0, Some(3.0), true),
        station("b", 0.0, Some(-4.0), true),
        station("c", 0.0, None, true),
        station("d", 0.0, Some(100.0), false),
    ];
    let rms = rms_seconds(&stations).unwrap();
    assert!((rms - 12.5f64.sqrt()).abs() < 1e-12, "{rms}");
    assert_eq!(rms_seconds(&[station("a", 0.0, None, true)]), None);
    assert_eq!(rms_seconds(&[station("a", 0.0, Some(1.0), false)]), None);
    assert_eq!(rms_seconds(&[]), None);
}

#[test]
fn quality_of_the_fixture() {
    let q = quality(&solution());
    assert_eq!(q.station_count, 3);
    assert_eq!(q.rms_seconds, Some(0.5));
    assert_eq!(q.azimuth_gap_degrees, Some(120.0));
    assert_eq!(q.grade, Grade::C);
    assert_eq!(
        serde_json::to_value(&q).unwrap(),
        json!({"grade": "C", "rmsSeconds": 0.5, "azimuthGapDegrees": 120.0, "stationCount": 3,
               "horizontalUncertaintyKm": null, "depthUncertaintyKm": null})
    );
}

#[test]
fn quality_carries_the_solutions_own_uncertainty() {
    let mut input = solution_json();
    input["hypocentre"]["horizontalUncertaintyKm"] = json!(7.5);
    input["hypocentre"]["depthUncertaintyKm"] = json!(12.5);
    let report = shaped(input.clone());
    assert_eq!(report["quality"]["horizontalUncertaintyKm"], 7.5);
    assert_eq!(report["quality"]["depthUncertaintyKm"], 12.5);
    input["hypocentre"]["depthUncertaintyKm"] = json!(-1.0);
    assert!(shape_error(input).contains("uncertainties"));
}

#[test]
fn quality_is_d_with_a_fixed_depth() {
    let mut s = solution();
    s.hypocentre.depth_fixed = true;
    assert_eq!(quality(&s).grade, Grade::D);
}

// --- shape -------------------------------------------------------------------------------------------------

#[test]
fn shape_field_order_is_fixed() {
    let report = shaped(solution_json());
    let keys: Vec<_> = report.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "reportNumber",
            "reportedAt",
            "recordedAt",
            "epicenter",
            "algorithm",
            "quality",
            "event",
            "stations"
        ]
    );
    let event_keys: Vec<_> = report["event"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        event_keys,
        [
            "id",
            "status",
            "firstDetectedAt",
            "hypEstimate",
            "magnitude",
            "magnitudeType",
            "magnitudeStationCount",
            "magnitudeUncertainty",
            "magnitudeCalculatedAt",
            "magnitudeRetained",
            "magnitudeEstimateLocation",
            "hypCompletion",
            "evidence"
        ]
    );
}

#[test]
fn shape_top_level_and_quality() {
    let report = shaped(solution_json());
    assert_eq!(report["reportNumber"], 3);
    assert_eq!(report["reportedAt"], 1_704_093_030_000i64);
    assert_eq!(report["recordedAt"], 1_704_093_030_120i64);
    assert_eq!(report["epicenter"], "Noto Peninsula");
    assert_eq!(report["algorithm"], "hyp-grid/1");
    assert_eq!(
        report["quality"],
        json!({"grade": "C", "rmsSeconds": 0.5, "azimuthGapDegrees": 120.0, "stationCount": 3,
               "horizontalUncertaintyKm": null, "depthUncertaintyKm": null})
    );
    // Optional objects absent from the solution are absent from the report.
    for key in ["epicenterRegion", "hypSelection", "sourceFrames", "region"] {
        assert!(report.get(key).is_none(), "{key}");
    }
}

#[test]
fn shape_event_and_hyp_estimate() {
    let report = shaped(solution_json());
    let event = &report["event"];
    assert_eq!(event["id"], "hyp:20240101T071022:1");
    assert_eq!(event["status"], "preliminary");
    assert_eq!(event["firstDetectedAt"], 1_704_093_024_000i64);
    assert_eq!(
        event["hypEstimate"],
        json!({
            "latitude": 37.5, "longitude": 137.3, "depthKm": 10.0,
            "originAt": 1704093022500i64, "calculatedAt": 1704093029900i64,
            "stationCount": 3, "score": 0.42, "bestScore": 0.40,
            "quietStationCount": 2, "sLikeStationCount": 1
        })
    );
    // Position only inside hypEstimate.
    assert!(event.get("latitude").is_none());
    assert!(event.get("longitude").is_none());
    assert!(event.get("depthKm").is_none());
}

#[test]
fn shape_keeps_an_unknown_magnitude_null() {
    let report = shaped(solution_json());
    let event = report["event"].as_object().unwrap();
    assert_eq!(event["magnitude"], Value::Null);
    assert_eq!(event["magnitudeType"], Value::Null);
    assert_eq!(event["magnitudeStationCount"], 1);
    assert_eq!(event["magnitudeUncertainty"], 0.0);
    assert_eq!(event["magnitudeCalculatedAt"], 1_704_093_029_900i64);
    assert_eq!(event["magnitudeRetained"], false);
    assert_eq!(event["magnitudeEstimateLocation"], json!({}));
    assert_eq!(event["hypCompletion"], json!({}));

    // A magnitude field left out entirely is the same as null.
    let mut input = solution_json();
    let magnitude = input["magnitude"].as_object_mut().unwrap();
    magnitude.remove("value");
    magnitude.remove("type");
    assert_eq!(shaped(input)["event"]["magnitude"], Value::Null);
}

#[test]
fn shape_carries_a_known_magnitude() {
    let mut input = solution_json();
    input["magnitude"] = json!({
        "value": 7.4, "type": "Mw", "stationCount": 12, "uncertainty": 0.2,
        "calculatedAt": 1704093031000i64, "retained": true,
        "estimateLocation": {"latitude": 37.5, "longitude": 137.3}
    });
    let event = shaped(input)["event"].clone();
    assert_eq!(event["magnitude"], 7.4);
    assert_eq!(event["magnitudeType"], "Mw");
    assert_eq!(event["magnitudeStationCount"], 12);
    assert_eq!(event["magnitudeUncertainty"], 0.2);
    assert_eq!(event["magnitudeRetained"], true);
    assert_eq!(
        event["magnitudeEstimateLocation"],
        json!({"latitude": 37.5, "longitude": 137.3})
    );
}

#[test]
fn shape_evidence_only_for_used_stations() {
    let report = shaped(solution_json());
    assert_eq!(
        report["event"]["evidence"],
        json!([
            {"code": "ISK001", "pickAt": 1704093024000i64, "residualSeconds": 0.5, "azimuthDegrees": 0.0, "distanceKm": 7.1},
            {"code": "ISK002", "pickAt": 1704093028000i64, "residualSeconds": -0.5, "azimuthDegrees": 120.0, "distanceKm": 38.0},
            {"code": "TYM001", "pickAt": null, "residualSeconds": 0.5, "azimuthDegrees": 240.0, "distanceKm": 89.0}
        ])
    );
}

#[test]
fn shape_stations_snapshot_has_every_station() {
    let report = shaped(solution_json());
    let stations = report["stations"].as_array().unwrap();
    assert_eq!(stations.len(), 4);
    assert_eq!(
        stations[0],
        json!({
            "code": "ISK001", "name": "Suzu", "latitude": 37.44, "longitude": 137.26, "distanceKm": 7.1,
            "sWaveReached": true, "used": true,
            "peaks": {"surface:intensity": 5.9, "surface:pgaGal": 850.0}, "magnitude": 7.2
        })
    );
    assert_eq!(
        stations[3],
        json!({
            "code": "NIG001", "name": null, "latitude": 37.9, "longitude": 138.9, "distanceKm": 150.0,
            "sWaveReached": false, "used": false, "peaks": {}, "magnitude": null
        })
    );
    let keys: Vec<_> = stations[0].as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "code",
            "name",
            "latitude",
            "longitude",
            "distanceKm",
            "sWaveReached",
            "used",
            "peaks",
            "magnitude"
        ]
    );
}

#[test]
fn shape_optional_objects_when_given() {
    let mut input = solution_json();
    input["epicenterRegion"] = json!({"code": "390", "name": "能登半島沖", "source": "jma-2023"});
    input["selection"] = json!({"windowStart": 1704093020000i64, "selectedAt": 1704093029950i64, "candidateCount": 4});
    input["completion"] = json!({"reason": "still-tracking"});
    input["sourceFrames"] = json!([{"layer": "jma_s", "at": 1704093029000i64}]);
    input["region"] = json!("Hokuriku");
    let report = shaped(input);
    let keys: Vec<_> = report.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "reportNumber",
            "reportedAt",
            "recordedAt",
            "epicenter",
            "epicenterRegion",
            "algorithm",
            "quality",
            "hypSelection",
            "event",
            "stations",
            "sourceFrames"
        ]
    );
    assert_eq!(
        report["epicenterRegion"],
        json!({"code": "390", "name": "能登半島沖", "source": "jma-2023"})
    );
    assert_eq!(
        report["hypSelection"],
        json!({"windowStartAt": 1704093020000i64, "selectedAt": 1704093029950i64, "candidateCount": 4})
    );
    assert_eq!(
        report["event"]["hypCompletion"],
        json!({"reason": "still-tracking"})
    );
    assert_eq!(
        report["sourceFrames"],
        json!([{"layer": "jma_s", "at": 1704093029000i64}])
    );
}

#[test]
fn shape_bytes_is_compact_and_deterministic() {
    let bytes = serde_json::to_vec(&solution_json()).unwrap();
    let a = shape_bytes(&bytes).unwrap();
    let b = shape_bytes(&bytes).unwrap();
    assert_eq!(a, b);
    let text = String::from_utf8(a).unwrap();
    assert!(
        text.starts_with(r#"{"reportNumber":3,"reportedAt":1704093030000,"#),
        "{text}"
    );
    assert!(!text.contains('\n') && !text.contains("\": ") && !text.contains(", \""));
}

#[test]
fn solution_round_trips_through_serde() {
    let s = solution();
    let again: Solution = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
    assert_eq!(s, again);
    assert_eq!(
        serde_json::to_value(&s.magnitude).unwrap()["type"],
        Value::Null
    );
}

// --- validation --------------------------------------------------------------------------------------------

#[test]
fn rejects_report_number_zero() {
    let mut input = solution_json();
    input["reportNumber"] = json!(0);
    assert!(shape_error(input).contains("reportNumber"));
}

#[test]
fn rejects_an_unknown_status() {
    for status in ["", "final", "Preliminary"] {
        let mut input = solution_json();
        input["status"] = json!(status);
        assert!(shape_error(input).contains("status"), "{status}");
    }
    for status in EventStatus::ALL.map(EventStatus::as_str) {
        let mut input = solution_json();
        input["status"] = json!(status);
        assert_eq!(shaped(input)["event"]["status"], status);
        assert_eq!(
            EventStatus::parse(status).map(EventStatus::as_str),
            Some(status)
        );
    }
}

#[test]
fn rejects_an_empty_event_id() {
    let mut input = solution_json();
    input["eventId"] = json!("");
    assert!(shape_error(input).contains("eventId"));
}

#[test]
fn rejects_coordinates_out_of_range() {
    for (field, value) in [
        ("latitude", 90.5),
        ("latitude", -91.0),
        ("longitude", 180.01),
        ("longitude", -181.0),
        ("depthKm", -0.1),
    ] {
        let mut input = solution_json();
        input["hypocentre"][field] = json!(value);
        assert!(shape_error(input).contains(field), "{field} {value}");
    }
    // The bounds themselves are fine.
    let mut input = solution_json();
    input["hypocentre"]["latitude"] = json!(-90.0);
    input["hypocentre"]["longitude"] = json!(180.0);
    input["hypocentre"]["depthKm"] = json!(0.0);
    assert_eq!(shaped(input)["event"]["hypEstimate"]["depthKm"], 0.0);
}

#[test]
fn rejects_non_finite_numbers() {
    let mut s = solution();
    s.hypocentre.latitude = f64::NAN;
    assert!(shape(&s).unwrap_err().message.contains("latitude"));
    let mut s = solution();
    s.hypocentre.depth_km = f64::INFINITY;
    assert!(shape(&s).unwrap_err().message.contains("depthKm"));
    let mut s = solution();
    s.stations[1].azimuth_degrees = f64::NAN;
    assert!(shape(&s).unwrap_err().message.contains("ISK002"));
}

#[test]
fn rejects_non_object_optional_objects() {
    let mut input = solution_json();
    input["completion"] = json!("done");
    assert!(shape_error(input).contains("completion"));
    let mut input = solution_json();
    input["epicenterRegion"] = json!([1, 2]);
    assert!(shape_error(input).contains("epicenterRegion"));
}

#[test]
fn rejects_malformed_input() {
    assert!(
        shape_bytes(b"not json")
            .unwrap_err()
            .message
            .contains("solution")
    );
    let mut input = solution_json();
    input.as_object_mut().unwrap().remove("hypocentre");
    assert!(shape_error(input).contains("hypocentre"));
    let mut input = solution_json();
    input["reportNumber"] = json!(-1);
    assert!(shape_error(input).contains("solution"));
}

#[test]
fn shape_error_displays_its_message() {
    let e = ShapeError::new("boom");
    assert_eq!(e.to_string(), "boom");
    let _: &dyn std::error::Error = &e;
}
