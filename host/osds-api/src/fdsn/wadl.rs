//! The service's description documents: the WADL of `query` (which FDSN clients such as ObsPy read to check
//! the parameters they send) and the `catalogs` and `contributors` lists.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

/// A parameter of `query`: its name, XML Schema type, and the values it may take (empty: any).
struct Param {
    name: &'static str,
    kind: &'static str,
    options: &'static [&'static str],
    default: Option<&'static str>,
    doc: &'static str,
}

const fn param(name: &'static str, kind: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        kind,
        options: &[],
        default: None,
        doc,
    }
}

/// Every parameter `query` takes (the short names are the same parameters).
const PARAMS: &[Param] = &[
    param("starttime", "xs:dateTime", "Origin time on or after (UTC)."),
    param("start", "xs:dateTime", "Short for starttime."),
    param("endtime", "xs:dateTime", "Origin time on or before (UTC)."),
    param("end", "xs:dateTime", "Short for endtime."),
    param(
        "minlatitude",
        "xs:double",
        "Southern edge of a box (degrees).",
    ),
    param("minlat", "xs:double", "Short for minlatitude."),
    param(
        "maxlatitude",
        "xs:double",
        "Northern edge of a box (degrees).",
    ),
    param("maxlat", "xs:double", "Short for maxlatitude."),
    param(
        "minlongitude",
        "xs:double",
        "Western edge of a box (degrees).",
    ),
    param("minlon", "xs:double", "Short for minlongitude."),
    param(
        "maxlongitude",
        "xs:double",
        "Eastern edge of a box (degrees).",
    ),
    param("maxlon", "xs:double", "Short for maxlongitude."),
    param("latitude", "xs:double", "Centre of a circle (degrees)."),
    param("lat", "xs:double", "Short for latitude."),
    param("longitude", "xs:double", "Centre of a circle (degrees)."),
    param("lon", "xs:double", "Short for longitude."),
    param(
        "minradius",
        "xs:double",
        "Nearest distance from the centre (degrees).",
    ),
    param(
        "maxradius",
        "xs:double",
        "Farthest distance from the centre (degrees).",
    ),
    param("mindepth", "xs:double", "Shallowest depth (km)."),
    param("maxdepth", "xs:double", "Deepest depth (km)."),
    param("minmagnitude", "xs:double", "Smallest magnitude."),
    param("minmag", "xs:double", "Short for minmagnitude."),
    param("maxmagnitude", "xs:double", "Largest magnitude."),
    param("maxmag", "xs:double", "Short for maxmagnitude."),
    Param {
        name: "includeallorigins",
        kind: "xs:boolean",
        options: &["true", "false"],
        default: Some("false"),
        doc: "Every report as an origin (one per EEW report version or self-sensing report).",
    },
    Param {
        name: "includeallmagnitudes",
        kind: "xs:boolean",
        options: &["true", "false"],
        default: Some("false"),
        doc: "Every origin's magnitude (each origin has at most one).",
    },
    param("eventid", "xs:string", "One event by its id."),
    param("limit", "xs:int", "At most this many events (up to 10000)."),
    param("offset", "xs:int", "The first event given, counted from 1."),
    Param {
        name: "orderby",
        kind: "xs:string",
        options: &["time", "time-asc", "magnitude", "magnitude-asc"],
        default: Some("time"),
        doc: "Order of the events.",
    },
    param("catalog", "xs:string", "osds-eew or osds-hyp."),
    param("contributor", "xs:string", "An EEW channel, or osds-hyp."),
    param("updatedafter", "xs:dateTime", "Changed after (UTC)."),
    Param {
        name: "format",
        kind: "xs:string",
        options: &["xml", "text"],
        default: Some("xml"),
        doc: "QuakeML 1.2 or the FDSN text format.",
    },
    Param {
        name: "nodata",
        kind: "xs:int",
        options: &["204", "404"],
        default: Some("204"),
        doc: "The status of an answer without events.",
    },
];

fn writer() -> Writer<Vec<u8>> {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing to a Vec cannot fail.
    let _ = writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    writer
}

fn finish(writer: Writer<Vec<u8>>) -> String {
    String::from_utf8(writer.into_inner()).unwrap_or_default()
}

/// The WADL of the service. Its base is the service's path (a relative reference: the service does not know
/// the scheme and host it is reached by).
pub fn document() -> String {
    let mut w = writer();
    let _ = w
        .create_element("application")
        .with_attribute(("xmlns", "http://wadl.dev.java.net/2009/02"))
        .with_attribute(("xmlns:xs", "http://www.w3.org/2001/XMLSchema"))
        .write_inner_content(|w| {
            w.create_element("resources")
                .with_attribute(("base", format!("{}/", super::BASE_PATH).as_str()))
                .write_inner_content(|w| {
                    w.create_element("resource")
                        .with_attribute(("path", "query"))
                        .write_inner_content(|w| {
                            w.create_element("method")
                                .with_attribute(("name", "GET"))
                                .with_attribute(("id", "query"))
                                .write_inner_content(|w| {
                                    w.create_element("request").write_inner_content(|w| {
                                        for p in PARAMS {
                                            write_param(w, p)?;
                                        }
                                        Ok(())
                                    })?;
                                    w.create_element("response").write_inner_content(|w| {
                                        for media in ["application/xml", "text/plain"] {
                                            w.create_element("representation")
                                                .with_attribute(("mediaType", media))
                                                .write_empty()?;
                                        }
                                        Ok(())
                                    })?;
                                    Ok(())
                                })?;
                            Ok(())
                        })?;
                    for (path, media) in [
                        ("version", "text/plain"),
                        ("application.wadl", "application/xml"),
                        ("catalogs", "application/xml"),
                        ("contributors", "application/xml"),
                    ] {
                        w.create_element("resource")
                            .with_attribute(("path", path))
                            .write_inner_content(|w| {
                                w.create_element("method")
                                    .with_attribute(("name", "GET"))
                                    .write_inner_content(|w| {
                                        w.create_element("response").write_inner_content(|w| {
                                            w.create_element("representation")
                                                .with_attribute(("mediaType", media))
                                                .write_empty()?;
                                            Ok(())
                                        })?;
                                        Ok(())
                                    })?;
                                Ok(())
                            })?;
                    }
                    Ok(())
                })?;
            Ok(())
        });
    finish(w)
}

fn write_param<W: std::io::Write>(w: &mut Writer<W>, p: &Param) -> std::io::Result<()> {
    let mut element = w
        .create_element("param")
        .with_attribute(("name", p.name))
        .with_attribute(("style", "query"))
        .with_attribute(("type", p.kind))
        .with_attribute(("required", "false"));
    if let Some(default) = p.default {
        element = element.with_attribute(("default", default));
    }
    element.write_inner_content(|w| {
        w.create_element("doc")
            .with_attribute(("xml:lang", "en"))
            .with_attribute(("title", p.doc))
            .write_empty()?;
        for option in p.options {
            w.create_element("option")
                .with_attribute(("value", *option))
                .write_empty()?;
        }
        Ok(())
    })?;
    Ok(())
}

/// `<Names><Name>a</Name>...</Names>`, as `catalogs` and `contributors` answer.
pub fn list(outer: &str, inner: &str, names: &[&str]) -> String {
    let mut w = writer();
    let _ = w.create_element(outer).write_inner_content(|w| {
        for name in names {
            w.create_element(inner)
                .write_text_content(BytesText::new(name))?;
        }
        Ok(())
    });
    finish(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_the_wadl_names_is_one_query_takes_and_no_other() {
        let wadl = document();
        assert!(wadl.contains("base=\"/fdsnws/event/1/\""));
        for p in PARAMS {
            assert!(wadl.contains(&format!("name=\"{}\"", p.name)), "{}", p.name);
            let value = match (p.kind, p.options.first(), p.name) {
                (_, Some(option), _) => option.to_string(),
                ("xs:dateTime", ..) => "2026-01-01T00:00:00".into(),
                (_, _, "catalog") => "osds-eew".into(),
                (_, _, "contributor") => "sc".into(),
                (_, _, "eventid") => "hyp:1".into(),
                _ => "1".into(),
            };
            let mut params =
                crate::params::Params::parse(Some(&format!("{}={value}", p.name))).unwrap();
            super::super::params::Query::parse(&mut params)
                .unwrap_or_else(|e| panic!("{}: {}", p.name, e.message));
            params
                .finish()
                .unwrap_or_else(|e| panic!("{}: {}", p.name, e.message));
        }
    }

    #[test]
    fn lists_escape_their_names() {
        let xml = list("Contributors", "Contributor", &["sc", "a<b"]);
        assert!(xml.contains("<Contributor>sc</Contributor>"));
        assert!(xml.contains("<Contributor>a&lt;b</Contributor>"));
    }
}
