//! GeoJSON answers checked against the GeoJSON project's own schemas (`tests/geojson`) and against the
//! JSON answer they are the map form of.

use super::tests_dir;
use serde_json::Value;

/// Validates `value` against the GeoJSON project's schema of `kind` (`Feature` or `FeatureCollection`).
pub fn check(kind: &str, value: &Value) {
    let path = tests_dir().join(format!("geojson/{kind}.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", path.display()));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a GeoJSON {kind}:\n{}\nvalue: {value}",
        errors.join("\n")
    );
}

/// `feature` is the JSON answer `answer` placed at `at`'s `latitude` and `longitude` (a `null` geometry without
/// them), with `at`'s `depthKm` and `magnitude` repeated at the top of its properties (`null`, never 0, when
/// unknown); its properties are otherwise `answer` exactly.
pub fn assert_feature_of(feature: &Value, answer: &Value, at: &Value, magnitude: &Value) {
    assert_eq!(feature["type"], "Feature");
    assert_eq!(feature["id"], answer["id"]);
    match (at["longitude"].as_f64(), at["latitude"].as_f64()) {
        (Some(longitude), Some(latitude)) => {
            assert_eq!(feature["geometry"]["type"], "Point");
            assert_eq!(
                feature["geometry"]["coordinates"],
                serde_json::json!([longitude, latitude]),
                "longitude first"
            );
        }
        _ => assert!(feature["geometry"].is_null(), "{feature}"),
    }
    let mut properties = feature["properties"].clone();
    let object = properties
        .as_object_mut()
        .expect("properties are an object");
    let depth = object.remove("depthKm").expect("depthKm is always there");
    let repeated = object
        .remove("magnitude")
        .expect("magnitude is always there");
    assert_eq!(depth, at.get("depthKm").cloned().unwrap_or(Value::Null));
    assert_eq!(&repeated, magnitude);
    assert_eq!(&properties, answer, "properties are the JSON answer");
}
