//! The OpenAPI document as a test oracle: every response a test receives is validated against the schema the
//! document declares for it, and the test can check that every documented path and status was exercised.

use super::in_process::InProcess;
use super::{Server, tests_dir};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Where a test sends its requests: the real binary over HTTP, or the service's router in-process.
pub trait Target {
    /// GET `path` (relative to /api/v1): the status, the content type and the body.
    fn fetch(&self, path: &str) -> impl Future<Output = (u16, String, Vec<u8>)>;
}

impl Target for Server {
    async fn fetch(&self, path: &str) -> (u16, String, Vec<u8>) {
        let response = reqwest::get(self.url(path)).await.expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (
            status,
            content_type,
            response.bytes().await.expect("body").to_vec(),
        )
    }
}

impl Target for InProcess {
    async fn fetch(&self, path: &str) -> (u16, String, Vec<u8>) {
        let response = self.get(path).await;
        let content_type = response
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (response.status, content_type, response.body)
    }
}

/// The OpenAPI document and the (path template, status) pairs the test has validated a response against.
pub struct Contract {
    pub doc: Value,
    validators: Mutex<BTreeMap<String, std::sync::Arc<jsonschema::Validator>>>,
    pub covered: Mutex<BTreeSet<(String, u16)>>,
}

impl Contract {
    pub fn load() -> Contract {
        let path = tests_dir().join("../schemas/openapi.yaml");
        let text = std::fs::read_to_string(&path).expect("read schemas/openapi.yaml");
        let doc: Value = serde_norway::from_str(&text).expect("openapi.yaml is YAML");
        assert_eq!(doc["openapi"], "3.1.0");
        Contract {
            doc,
            validators: Mutex::default(),
            covered: Mutex::default(),
        }
    }

    pub fn operation(&self, template: &str) -> &Value {
        let operation = &self.doc["paths"][template]["get"];
        assert!(operation.is_object(), "{template} is not in openapi.yaml");
        operation
    }

    /// Follows a local `$ref` (`#/a/b`) to the value it names.
    pub fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        match value["$ref"].as_str() {
            Some(reference) => {
                let pointer = reference.strip_prefix('#').expect("local $ref");
                self.resolve(self.doc.pointer(pointer).expect("$ref target exists"))
            }
            None => value,
        }
    }

    /// Declared query parameters of an operation, resolved.
    pub fn query_parameters(&self, template: &str) -> Vec<Value> {
        self.operation(template)["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| self.resolve(p).clone())
            .filter(|p| p["in"] == "query")
            .collect()
    }

    /// A validator for the JSON body of `status` from `template`.
    pub fn validator(&self, template: &str, status: u16) -> std::sync::Arc<jsonschema::Validator> {
        self.validator_of(template, status, "application/json")
    }

    /// A validator for the body of `status` from `template` in the media type `media` (`application/json`,
    /// `application/geo+json`), which the document must declare for that response.
    pub fn validator_of(
        &self,
        template: &str,
        status: u16,
        media: &str,
    ) -> std::sync::Arc<jsonschema::Validator> {
        let response = &self.operation(template)["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "openapi.yaml declares no {status} for GET {template}"
        );
        let schema = &self.resolve(response)["content"][media]["schema"];
        let reference = schema["$ref"].as_str().unwrap_or_else(|| {
            panic!("the {status} {media} schema of {template} should be a component $ref")
        });
        self.validator_for(reference)
    }

    /// A validator for the schema at `reference` (`#/components/schemas/X`): the whole document is the root,
    /// so every `#/components/...` reference inside resolves.
    pub fn validator_for(&self, reference: &str) -> std::sync::Arc<jsonschema::Validator> {
        if let Some(v) = self.validators.lock().unwrap().get(reference) {
            return v.clone();
        }
        let mut root = self.doc.clone();
        root["$ref"] = json!(reference);
        let validator = std::sync::Arc::new(
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|e| panic!("schema {reference} does not compile: {e}")),
        );
        self.validators
            .lock()
            .unwrap()
            .insert(reference.to_string(), validator.clone());
        validator
    }

    /// Checks `value` against a named component schema.
    pub fn check(&self, component: &str, value: &Value, what: &str) {
        let validator = self.validator_for(&format!("#/components/schemas/{component}"));
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what} does not match {component}:\n{}\nvalue: {value}",
            errors.join("\n")
        );
    }

    /// GETs `path` (relative to /api/v1), expects `status`, checks the body against the document, returns it.
    pub async fn get(
        &self,
        target: &impl Target,
        template: &str,
        path: &str,
        status: u16,
    ) -> Value {
        let (got, content_type, body) = target.fetch(path).await;
        assert_eq!(
            got,
            status,
            "GET {path}: {}",
            String::from_utf8_lossy(&body)
        );
        // JSON, or GeoJSON where the document declares it (`format=geojson`).
        let media = content_type.split(';').next().unwrap_or_default().trim();
        assert!(
            matches!(media, "application/json" | "application/geo+json"),
            "GET {path}: {content_type}"
        );
        let body: Value = serde_json::from_slice(&body).expect("JSON body");
        let validator = self.validator_of(template, status, media);
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "GET {path} ({status}) does not match openapi.yaml:\n{}\nbody: {body}",
            errors.join("\n")
        );
        if status >= 400 {
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
            assert!(body["code"].as_str().is_some_and(|c| !c.is_empty()));
        }
        self.covered
            .lock()
            .unwrap()
            .insert((template.to_string(), status));
        body
    }
}

impl Contract {
    /// Values a query parameter must accept (its bounds, its enum, its longest text) and values it must refuse
    /// (one step beyond, empty, wrong type, one character too long), read from its schema.
    pub fn probe_values(&self, parameter: &Value, template: &str) -> (Vec<String>, Vec<String>) {
        let name = parameter["name"].as_str().unwrap_or_default();
        let schema = self.resolve(&parameter["schema"]);
        let mut good: Vec<String> = Vec::new();
        let mut bad: Vec<String> = vec!["".into()];
        // An enumeration, or an open set whose known values are its examples (the channels: an operator may
        // add one; `zz` is none of this deployment's).
        let known = |schema: &Value| -> Option<Vec<Value>> {
            schema["enum"]
                .as_array()
                .or(schema["examples"].as_array())
                .cloned()
        };
        if let Some(values) = known(schema) {
            good.extend(values.iter().map(|v| v.as_str().unwrap().to_string()));
            bad.push("zz".into());
        }
        // A comma-separated list (`style: form, explode: false`) of an enumeration: each value, two together.
        if let Some(values) = known(self.resolve(&schema["items"])) {
            assert_eq!(
                parameter["explode"], false,
                "`{name}` of {template} is a list"
            );
            let values: Vec<&str> = values.iter().map(|v| v.as_str().unwrap()).collect();
            good.extend(values.iter().map(|v| v.to_string()));
            good.push(values[..2].join(","));
            bad.extend([
                "zz".into(),
                format!("{},zz", values[0]),
                format!("{},", values[0]),
            ]);
        }
        if let (Some(min), Some(max)) = (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
            let integer = schema["type"] == "integer";
            let show = |n: f64| {
                if integer {
                    format!("{}", n as i64)
                } else {
                    format!("{n}")
                }
            };
            good.extend([show(min), show(max)]);
            let step = if integer { 1.0 } else { 0.001 };
            bad.extend([show(min - step), show(max + step), "x".into()]);
        }
        if let Some(max_len) = schema["maxLength"].as_u64() {
            good.push("震".repeat(max_len as usize));
            // An empty text is the same as none: only the over-long one is refused.
            bad = vec!["震".repeat(max_len as usize + 1)];
        }
        if schema["format"] == "date" {
            good.push("2026-01-01".into());
            bad.extend(["2026-13-01".into(), "20260101".into()]);
        }
        if schema["format"] == "date-time" {
            good.extend([
                "2026-01-01T00:00:00Z".into(),
                "2026-01-01T09:00:00+09:00".into(),
            ]);
            bad.extend([
                "2026-13-01T00:00:00Z".into(),
                "2026-01-01".into(),
                "yesterday".into(),
            ]);
        }
        assert!(!good.is_empty(), "no way to probe `{name}` of {template}");
        (good, bad)
    }

    /// The parameters a parameter is only accepted with (`x-with` in the document: a circle's centre takes its
    /// radius), as `&name=value` to append to a probe.
    pub fn companions(&self, parameter: &Value) -> String {
        parameter["x-with"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| format!("&{name}={value}"))
            .collect()
    }

    /// Every documented response of `templates` with one of `statuses` was checked by [`Contract::get`].
    pub fn assert_covered(&self, templates: &[String], statuses: &[&str]) {
        let covered = self.covered.lock().unwrap().clone();
        for template in templates {
            let responses = self.operation(template)["responses"].as_object().unwrap();
            for &status in statuses {
                if responses.contains_key(status) {
                    let status: u16 = status.parse().unwrap();
                    assert!(
                        covered.contains(&(template.clone(), status)),
                        "GET {template} {status} is documented but never checked"
                    );
                }
            }
        }
    }
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
