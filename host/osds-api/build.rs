//! Turns `schemas/openapi.yaml` into what the service serves about itself: the document as JSON
//! (`/api/v1/openapi.json`) and a readable reference page (`/api/v1/docs`: every path, then every schema with
//! its fields), both made here so the running service
//! needs no YAML parser, no network and no script from elsewhere.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let source = manifest.join("../../schemas/openapi.yaml");
    println!("cargo:rerun-if-changed={}", source.display());
    let yaml = std::fs::read_to_string(&source).expect("read schemas/openapi.yaml");
    let document: Value = serde_norway::from_str(&yaml).expect("schemas/openapi.yaml is YAML");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    std::fs::write(
        out.join("openapi.json"),
        serde_json::to_string(&document).expect("JSON"),
    )
    .expect("write openapi.json");
    std::fs::write(out.join("docs.html"), page(&document)).expect("write docs.html");
}

const METHODS: [&str; 3] = ["get", "head", "options"];

/// The reference page: every path with its operations, parameters and responses, in the document's order.
fn page(document: &Value) -> String {
    let info = &document["info"];
    let title = info["title"].as_str().unwrap_or("API");
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} — reference</title><style>{STYLE}</style></head><body>\n\
         <h1>{title}</h1><p class=\"version\">version {version} · \
         <a href=\"openapi.json\">openapi.json</a> · <a href=\"openapi.yaml\">openapi.yaml</a></p>\n{description}",
        title = escape(title),
        version = escape(info["version"].as_str().unwrap_or("")),
        description = text(info["description"].as_str().unwrap_or("")),
    );
    let empty = serde_json::Map::new();
    let paths = document["paths"].as_object().unwrap_or(&empty);
    html.push_str("<nav><h2>Paths</h2><ul>\n");
    for (path, item) in paths {
        let summary = METHODS
            .iter()
            .find_map(|m| item[*m]["summary"].as_str())
            .unwrap_or("");
        let _ = writeln!(
            html,
            "<li><a href=\"#{anchor}\"><code>{path}</code></a> {summary}</li>",
            anchor = anchor(path),
            path = escape(path),
            summary = escape(summary),
        );
    }
    html.push_str("</ul><p><a href=\"#schemas\">Schemas</a>: every body's fields</p></nav>\n");
    for (path, item) in paths {
        let _ = writeln!(
            html,
            "<section class=\"path\" id=\"{anchor}\" data-path=\"{path}\"><h2><code>{path}</code></h2>",
            anchor = anchor(path),
            path = escape(path),
        );
        let shared = item["parameters"].as_array().cloned().unwrap_or_default();
        for method in METHODS {
            let operation = &item[method];
            if operation.is_null() {
                continue;
            }
            operation_html(&mut html, document, method, operation, &shared);
        }
        html.push_str("</section>\n");
    }
    schemas_html(&mut html, document);
    html.push_str("</body></html>\n");
    html
}

/// Every schema of `components.schemas` with its fields (those of an `allOf` gathered), each field's type
/// (a linked schema, an array of one, or its bounds and values) and description.
fn schemas_html(html: &mut String, document: &Value) {
    let Some(schemas) = document["components"]["schemas"].as_object() else {
        return;
    };
    html.push_str("<section class=\"schemas\" id=\"schemas\"><h2>Schemas</h2>\n");
    for (name, schema) in schemas {
        let _ = write!(
            html,
            "<section class=\"schema\" id=\"schema-{name}\" data-schema=\"{name}\"><h3><code>{name}</code></h3>{}",
            text(schema["description"].as_str().unwrap_or("")),
            name = escape(name),
        );
        let mut fields = Vec::new();
        let mut required = Vec::new();
        gather_fields(document, schema, &mut fields, &mut required);
        if fields.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", type_html(schema));
        } else {
            html.push_str("<table><tr><th>field</th><th>type</th><th>description</th></tr>\n");
            for (field, field_schema) in &fields {
                let _ = writeln!(
                    html,
                    "<tr><td><code>{name}</code>{required}</td><td>{kind}</td><td>{description}</td></tr>",
                    name = escape(field),
                    required = if required.contains(field) {
                        " (required)"
                    } else {
                        ""
                    },
                    kind = type_html(field_schema),
                    description = inline(field_schema["description"].as_str().unwrap_or("")),
                );
            }
            html.push_str("</table>\n");
        }
        html.push_str("</section>\n");
    }
    html.push_str("</section>\n");
}

/// The fields of `schema` and of every schema its `allOf` names, in order, each once.
fn gather_fields(
    document: &Value,
    schema: &Value,
    fields: &mut Vec<(String, Value)>,
    required: &mut Vec<String>,
) {
    for part in schema["allOf"].as_array().into_iter().flatten() {
        gather_fields(document, resolve(document, part), fields, required);
    }
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        if !fields.iter().any(|(known, _)| known == name) {
            fields.push((name.clone(), field.clone()));
        }
    }
    for name in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str() {
            required.push(name.to_string());
        }
    }
}

/// A schema's type in a few words: a link to the schema it names, an array of something, one of several, or
/// its type with bounds and values.
fn type_html(schema: &Value) -> String {
    if let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/components/schemas/"))
    {
        return format!(
            "<a href=\"#schema-{name}\"><code>{name}</code></a>",
            name = escape(name)
        );
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(choices) = schema[key].as_array() {
            return choices
                .iter()
                .map(type_html)
                .collect::<Vec<_>>()
                .join(" or ");
        }
    }
    if !schema["items"].is_null() {
        return format!("array of {}", type_html(&schema["items"]));
    }
    let summary = schema_summary(schema);
    if summary.is_empty() {
        "any".to_string()
    } else {
        summary
    }
}

fn operation_html(
    html: &mut String,
    document: &Value,
    method: &str,
    operation: &Value,
    shared: &[Value],
) {
    let _ = write!(
        html,
        "<h3><span class=\"method\">{}</span> {}</h3>{}",
        method.to_uppercase(),
        escape(operation["summary"].as_str().unwrap_or("")),
        text(operation["description"].as_str().unwrap_or("")),
    );
    let parameters: Vec<Value> = shared
        .iter()
        .chain(operation["parameters"].as_array().into_iter().flatten())
        .map(|p| resolve(document, p).clone())
        .collect();
    if !parameters.is_empty() {
        html.push_str(
            "<table><tr><th>parameter</th><th>in</th><th>schema</th><th>description</th></tr>\n",
        );
        for parameter in &parameters {
            let _ = writeln!(
                html,
                "<tr><td><code>{name}</code>{required}</td><td>{place}</td><td>{schema}</td><td>{description}</td></tr>",
                name = escape(parameter["name"].as_str().unwrap_or("")),
                required = if parameter["required"] == true {
                    " (required)"
                } else {
                    ""
                },
                place = escape(parameter["in"].as_str().unwrap_or("")),
                schema = schema_summary(resolve(document, &parameter["schema"])),
                description = inline(parameter["description"].as_str().unwrap_or("")),
            );
        }
        html.push_str("</table>\n");
    }
    if let Some(responses) = operation["responses"].as_object() {
        html.push_str("<table><tr><th>status</th><th>response</th></tr>\n");
        for (status, response) in responses {
            let response = resolve(document, response);
            let schema = response["content"]
                .as_object()
                .and_then(|content| content.values().next())
                .and_then(|media| media["schema"]["$ref"].as_str())
                .and_then(|reference| reference.rsplit('/').next())
                .map(|name| {
                    format!(
                        " <a href=\"#schema-{name}\"><code>{name}</code></a>",
                        name = escape(name)
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}{schema}</td></tr>",
                escape(status),
                inline(response["description"].as_str().unwrap_or("")),
            );
        }
        html.push_str("</table>\n");
    }
}

/// A `$ref` to `#/components/...` followed once.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => document.pointer(pointer).unwrap_or(value),
        None => value,
    }
}

/// A parameter schema in a few words: its type, bounds, default and enumeration.
fn schema_summary(schema: &Value) -> String {
    let mut parts = Vec::new();
    match &schema["type"] {
        Value::String(kind) => parts.push(kind.clone()),
        Value::Array(kinds) => parts.push(
            kinds
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
        ),
        _ => {}
    }
    for (key, label) in [
        ("minimum", "min"),
        ("maximum", "max"),
        ("maxLength", "max length"),
        ("pattern", "pattern"),
        ("default", "default"),
    ] {
        if !schema[key].is_null() {
            parts.push(format!("{label} {}", schema[key]));
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        parts.push(format!(
            "one of {}",
            values
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    escape(&parts.join(", "))
}

/// A description: paragraphs (split on blank lines), `- ` lines as a list, `code` spans kept.
fn text(description: &str) -> String {
    let mut html = String::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    let flush_paragraph = |html: &mut String, paragraph: &mut Vec<&str>| {
        if !paragraph.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", inline(&paragraph.join(" ")));
            paragraph.clear();
        }
    };
    let flush_list = |html: &mut String, items: &mut Vec<String>| {
        if !items.is_empty() {
            html.push_str("<ul>");
            for item in items.drain(..) {
                let _ = write!(html, "<li>{}</li>", inline(&item));
            }
            html.push_str("</ul>\n");
        }
    };
    for line in description.lines().map(str::trim) {
        if line.is_empty() {
            flush_paragraph(&mut html, &mut paragraph);
            flush_list(&mut html, &mut items);
        } else if let Some(item) = line.strip_prefix("- ") {
            flush_paragraph(&mut html, &mut paragraph);
            items.push(item.to_string());
        } else if let Some(last) = items.last_mut() {
            last.push(' ');
            last.push_str(line);
        } else {
            paragraph.push(line);
        }
    }
    flush_paragraph(&mut html, &mut paragraph);
    flush_list(&mut html, &mut items);
    html
}

/// Escapes text and turns `code` spans into `<code>`.
fn inline(text: &str) -> String {
    let mut html = String::new();
    for (i, part) in escape(text).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(html, "<code>{part}</code>");
        } else {
            html.push_str(part);
        }
    }
    html
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn anchor(path: &str) -> String {
    path.trim_matches('/')
        .replace(['/', '{', '}'], "-")
        .trim_matches('-')
        .to_string()
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}\
code{font-family:ui-monospace,monospace;background:#f3f3f3;padding:0 .2em}\
table{border-collapse:collapse;margin:.5rem 0 1rem;width:100%}td,th{border:1px solid #ddd;padding:.3rem .5rem;\
text-align:left;vertical-align:top}section.path{border-top:2px solid #ccc;margin-top:2rem}\
.method{font-family:ui-monospace,monospace;background:#225;color:#fff;padding:0 .4em;margin-right:.4em}\
.version{color:#666}";
