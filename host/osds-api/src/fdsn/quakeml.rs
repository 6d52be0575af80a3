//! The two answers of a query: QuakeML 1.2 (`format=xml`) and the FDSN text format (`format=text`), written
//! from [`Event`]s, the one shape both families are read into.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event as XmlEvent};
use std::io;

/// What a QuakeML event is: an earthquake, one the agency cancelled or the detector retracted (`not existing`),
/// or a test (`other event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Earthquake,
    NotExisting,
    Test,
}

impl Kind {
    fn quakeml(self) -> &'static str {
        match self {
            Kind::Earthquake => "earthquake",
            Kind::NotExisting => "not existing",
            Kind::Test => "other event",
        }
    }
}

/// One located report: an origin, and its magnitude when it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// Unique within its event (a report version id, a report number).
    pub key: String,
    pub time_ms: i64,
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    pub magnitude_type: String,
    /// The agency's final report, or the detector's finalized event.
    pub is_final: bool,
    /// When the report was made (issued, published), Unix ms.
    pub created_ms: Option<i64>,
}

/// An event of either family, its origins oldest first (the last is the preferred one).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The service's id (an EEW event id, or a self-sensing event id with its colons).
    pub id: String,
    pub catalog: &'static str,
    pub contributor: String,
    pub name: Option<String>,
    pub kind: Kind,
    pub origins: Vec<Origin>,
}

/// The prefix of every public ID (QuakeML's `smi:` resource identifiers).
const AUTHORITY: &str = "smi:osds";

/// An id as a QuakeML resource identifier allows it (a self-sensing id's colons become dots: the `eventid`
/// parameter takes either form).
pub fn public_id(id: &str) -> String {
    id.replace(':', ".")
}

fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn value<W: io::Write>(writer: &mut Writer<W>, name: &str, text: &str) -> io::Result<()> {
    writer.create_element(name).write_inner_content(|w| {
        w.create_element("value")
            .write_text_content(BytesText::new(text))?;
        Ok(())
    })?;
    Ok(())
}

fn text_element<W: io::Write>(writer: &mut Writer<W>, name: &str, text: &str) -> io::Result<()> {
    writer
        .create_element(name)
        .write_text_content(BytesText::new(text))?;
    Ok(())
}

fn creation_info<W: io::Write>(
    writer: &mut Writer<W>,
    agency: &str,
    created_ms: Option<i64>,
) -> io::Result<()> {
    writer
        .create_element("creationInfo")
        .write_inner_content(|w| {
            text_element(w, "agencyID", agency)?;
            if let Some(ms) = created_ms {
                text_element(w, "creationTime", &time(ms))?;
            }
            Ok(())
        })?;
    Ok(())
}

/// QuakeML 1.2 of `events`, with every origin of each (`all_origins`) or its preferred one only.
pub fn quakeml(events: &[Event], all_origins: bool) -> io::Result<Vec<u8>> {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 1);
    writer.write_event(XmlEvent::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    writer
        .create_element("q:quakeml")
        .with_attribute(("xmlns:q", "http://quakeml.org/xmlns/quakeml/1.2"))
        .with_attribute(("xmlns", "http://quakeml.org/xmlns/bed/1.2"))
        .write_inner_content(|w| {
            w.create_element("eventParameters")
                .with_attribute((
                    "publicID",
                    format!("{AUTHORITY}/fdsnws/event/1/query").as_str(),
                ))
                .write_inner_content(|w| {
                    for event in events {
                        write_event(w, event, all_origins)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    Ok(writer.into_inner())
}

fn write_event<W: io::Write>(
    w: &mut Writer<W>,
    event: &Event,
    all_origins: bool,
) -> io::Result<()> {
    let id = public_id(&event.id);
    let origin_id = |o: &Origin| format!("{AUTHORITY}/origin/{id}/{}", public_id(&o.key));
    let magnitude_id = |o: &Origin| format!("{AUTHORITY}/magnitude/{id}/{}", public_id(&o.key));
    let origins: &[Origin] = match (all_origins, event.origins.split_last()) {
        (true, _) => &event.origins,
        (false, Some((last, _))) => std::slice::from_ref(last),
        (false, None) => &[],
    };
    let preferred = event.origins.last();
    w.create_element("event")
        .with_attribute(("publicID", format!("{AUTHORITY}/event/{id}").as_str()))
        .write_inner_content(|w| {
            if let Some(origin) = preferred {
                text_element(w, "preferredOriginID", &origin_id(origin))?;
                if origin.magnitude.is_some() {
                    text_element(w, "preferredMagnitudeID", &magnitude_id(origin))?;
                }
            }
            text_element(w, "type", event.kind.quakeml())?;
            if let Some(name) = &event.name {
                w.create_element("description").write_inner_content(|w| {
                    text_element(w, "text", name)?;
                    text_element(w, "type", "earthquake name")?;
                    Ok(())
                })?;
            }
            creation_info(w, &event.contributor, None)?;
            for origin in origins {
                w.create_element("origin")
                    .with_attribute(("publicID", origin_id(origin).as_str()))
                    .write_inner_content(|w| {
                        value(w, "time", &time(origin.time_ms))?;
                        value(w, "latitude", &origin.latitude.to_string())?;
                        value(w, "longitude", &origin.longitude.to_string())?;
                        if let Some(depth) = origin.depth_km {
                            // QuakeML depths are metres.
                            value(w, "depth", &(depth * 1000.0).to_string())?;
                        }
                        text_element(w, "evaluationMode", "automatic")?;
                        let status = if origin.is_final {
                            "final"
                        } else {
                            "preliminary"
                        };
                        text_element(w, "evaluationStatus", status)?;
                        creation_info(w, &event.contributor, origin.created_ms)?;
                        Ok(())
                    })?;
            }
            for origin in origins {
                let Some(magnitude) = origin.magnitude else {
                    continue;
                };
                w.create_element("magnitude")
                    .with_attribute(("publicID", magnitude_id(origin).as_str()))
                    .write_inner_content(|w| {
                        value(w, "mag", &magnitude.to_string())?;
                        text_element(w, "type", &origin.magnitude_type)?;
                        text_element(w, "originID", &origin_id(origin))?;
                        creation_info(w, &event.contributor, origin.created_ms)?;
                        Ok(())
                    })?;
            }
            Ok(())
        })?;
    Ok(())
}

/// The FDSN text format: a header, then one line per event (its preferred origin), `|`-separated.
pub fn text(events: &[Event]) -> String {
    let clean = |s: &str| s.replace(['|', '\n', '\r'], " ");
    let mut out = String::from(
        "#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|MagAuthor|EventLocationName|EventType\n",
    );
    for event in events {
        let Some(origin) = event.origins.last() else {
            continue;
        };
        let optional = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        out.push_str(&format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}\n",
            event.id,
            time(origin.time_ms),
            origin.latitude,
            origin.longitude,
            optional(origin.depth_km),
            clean(&event.contributor),
            event.catalog,
            clean(&event.contributor),
            event.id,
            if origin.magnitude.is_some() {
                clean(&origin.magnitude_type)
            } else {
                String::new()
            },
            optional(origin.magnitude),
            clean(&event.contributor),
            clean(event.name.as_deref().unwrap_or_default()),
            event.kind.quakeml(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event {
            id: "hyp:20240101T071022:1".into(),
            catalog: "osds-hyp",
            contributor: "osds-hyp".into(),
            name: Some("能登 <&> \"x\"".into()),
            kind: Kind::Earthquake,
            origins: vec![
                Origin {
                    key: "1".into(),
                    time_ms: 1_704_093_022_000,
                    latitude: 37.5,
                    longitude: 137.27,
                    depth_km: None,
                    magnitude: None,
                    magnitude_type: "Mw".into(),
                    is_final: false,
                    created_ms: Some(1_704_093_030_000),
                },
                Origin {
                    key: "2".into(),
                    time_ms: 1_704_093_022_000,
                    latitude: 37.49,
                    longitude: 137.26,
                    depth_km: Some(16.0),
                    magnitude: Some(7.5),
                    magnitude_type: "Mw-SM99".into(),
                    is_final: true,
                    created_ms: Some(1_704_093_090_000),
                },
            ],
        }
    }

    #[test]
    fn quakeml_escapes_text_gives_metres_and_names_the_preferred_origin() {
        let xml = String::from_utf8(quakeml(&[event()], false).unwrap()).unwrap();
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
        assert!(
            xml.contains("<text>能登 &lt;&amp;&gt; &quot;x&quot;</text>"),
            "{xml}"
        );
        assert!(xml.contains("publicID=\"smi:osds/event/hyp.20240101T071022.1\""));
        assert!(xml.contains(
            "<preferredOriginID>smi:osds/origin/hyp.20240101T071022.1/2</preferredOriginID>"
        ));
        assert!(
            xml.contains("<value>16000</value>"),
            "depth in metres: {xml}"
        );
        assert_eq!(
            xml.matches("<origin ").count(),
            1,
            "the preferred origin only"
        );
        assert!(xml.contains("<evaluationStatus>final</evaluationStatus>"));
        let all = String::from_utf8(quakeml(&[event()], true).unwrap()).unwrap();
        assert_eq!(all.matches("<origin ").count(), 2);
        assert_eq!(
            all.matches("<magnitude ").count(),
            1,
            "only origins with a magnitude have one"
        );
        assert!(all.contains("<evaluationStatus>preliminary</evaluationStatus>"));
    }

    #[test]
    fn the_text_format_is_one_line_per_event_without_separators_in_fields() {
        let text = text(&[event()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let fields: Vec<&str> = lines[1].split('|').collect();
        assert_eq!(fields.len(), 14);
        assert_eq!(fields[1], "2024-01-01T07:10:22.000Z");
        assert_eq!(fields[4], "16");
        assert_eq!(fields[10], "7.5");
        assert_eq!(fields[13], "earthquake");
    }
}
