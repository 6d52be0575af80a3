use super::*;

fn report(channel: &Channel, json: &str) -> Report {
    match decode(channel, json.as_bytes()) {
        Ok(Decoded::Report(r)) => r,
        other => panic!("expected a report, got {other:?}"),
    }
}

fn error(channel: &Channel, bytes: &[u8]) -> DecodeError {
    decode(channel, bytes).expect_err("expected an error")
}

#[test]
fn beijing_time_becomes_utc_across_a_day_boundary() {
    assert_eq!(
        beijing_to_utc_rfc3339("2026-08-28 13:13:56").as_deref(),
        Some("2026-08-28T05:13:56Z")
    );
    assert_eq!(
        beijing_to_utc_rfc3339("2026-01-01 07:59:59").as_deref(),
        Some("2025-12-31T23:59:59Z")
    );
    assert_eq!(
        beijing_to_utc_rfc3339("2024-03-01 03:00:00").as_deref(),
        Some("2024-02-29T19:00:00Z")
    );
    assert_eq!(
        beijing_to_utc_rfc3339("2026/08/29 06:07:28").as_deref(),
        Some("2026-08-28T22:07:28Z")
    );
}

#[test]
fn impossible_times_are_refused() {
    for bad in [
        "2026-02-29 00:00:00",
        "2026-13-01 00:00:00",
        "2026-01-01 24:00:00",
        "2026-01-01",
        "yesterday",
        "",
    ] {
        assert_eq!(beijing_to_utc_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn revision_suffix_is_stripped_only_when_it_is_digits() {
    assert_eq!(
        strip_revision_suffix("202608281313.0001_2"),
        "202608281313.0001"
    );
    assert_eq!(strip_revision_suffix("20241027182139_1"), "20241027182139");
    assert_eq!(
        strip_revision_suffix("202608290607.0001"),
        "202608290607.0001"
    );
    assert_eq!(strip_revision_suffix("abc_x1"), "abc_x1");
    assert_eq!(strip_revision_suffix("_12"), "_12");
    assert_eq!(strip_revision_suffix("abc_"), "abc_");
}

#[test]
fn sc_sample_maps_every_field() {
    let r = report(
        &SC,
        r#"{"type":"sc_eew","ID":8187,"EventID":"202608281313.0001_2","ReportTime":"2026-08-28 13:13:56","ReportNum":2,"OriginTime":"2026-08-28 13:13:34","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":5.2,"Depth":0.0,"MaxIntensity":7.1}"#,
    );
    assert_eq!(r.event_id, "202608281313.0001");
    assert_eq!(r.upstream_event_id, "202608281313.0001_2");
    assert_eq!(r.revision, 2);
    assert_eq!(r.issued_at.as_deref(), Some("2026-08-28T05:13:56Z"));
    assert_eq!(r.origin_at.as_deref(), Some("2026-08-28T05:13:34Z"));
    assert_eq!(r.epicenter.as_deref(), Some("四川内江市隆昌市"));
    assert_eq!((r.latitude, r.longitude), (Some(29.239), Some(105.227)));
    assert_eq!(r.depth_km, None, "sc depth 0 means not determined");
    assert_eq!(r.magnitude, Some(5.2));
    assert_eq!(r.max_intensity, Some(Intensity::Number(7.1)));
    assert!(!r.is_final && !r.is_cancelled && !r.is_test);
}

#[test]
fn zero_depth_is_kept_outside_sc_and_null_depth_is_null_everywhere() {
    let cea = r#"{"type":"cenc_eew","EventID":"1","ReportNum":1,"Depth":0}"#;
    assert_eq!(report(&CEA, cea).depth_km, Some(0.0));
    let sc_null = r#"{"type":"sc_eew","EventID":"1_1","ReportNum":1,"Depth":null}"#;
    assert_eq!(report(&SC, sc_null).depth_km, None);
    let sc_real = r#"{"type":"sc_eew","EventID":"1_1","ReportNum":1,"Depth":"12.5"}"#;
    assert_eq!(report(&SC, sc_real).depth_km, Some(12.5));
}

#[test]
fn absent_fields_stay_null_not_zero() {
    let r = report(
        &FJ,
        r#"{"type":"fj_eew","EventID":"20241027182139_1","ReportNum":"1"}"#,
    );
    assert_eq!(r.revision, 1);
    assert_eq!(
        (r.latitude, r.longitude, r.depth_km, r.magnitude),
        (None, None, None, None)
    );
    assert_eq!(
        (r.issued_at, r.origin_at, r.epicenter, r.max_intensity),
        (None, None, None, None)
    );
}

#[test]
fn both_magnitude_spellings_on_every_channel() {
    for channel in CHANNELS {
        let a = format!(
            r#"{{"type":"{}","EventID":"1","ReportNum":1,"Magnitude":"4.5"}}"#,
            channel.type_tag
        );
        let b = format!(
            r#"{{"type":"{}","EventID":"1","ReportNum":1,"Magunitude":4.6}}"#,
            channel.type_tag
        );
        assert_eq!(report(&channel, &a).magnitude, Some(4.5));
        assert_eq!(report(&channel, &b).magnitude, Some(4.6));
    }
}

#[test]
fn flags_map_from_jma_style_names() {
    let r = report(
        &CQ,
        r#"{"type":"cq_eew","EventID":"9","ReportNum":3,"isCancel":true,"isTraining":"true","isFinal":1}"#,
    );
    assert!(r.is_cancelled && r.is_test && r.is_final);
    let e = error(
        &CQ,
        br#"{"type":"cq_eew","EventID":"9","ReportNum":3,"isFinal":"maybe"}"#,
    );
    assert_eq!(e.kind, ErrorKind::Malformed);
}

#[test]
fn intensity_keeps_labels_and_numbers() {
    let label = report(&CQ, r#"{"EventID":"9","ReportNum":3,"MaxIntensity":"5-"}"#);
    assert_eq!(label.max_intensity, Some(Intensity::Text("5-".into())));
    let number = report(&CQ, r#"{"EventID":"9","ReportNum":3,"MaxIntensity":"6"}"#);
    assert_eq!(number.max_intensity, Some(Intensity::Number(6.0)));
}

#[test]
fn control_frames_are_recognised_by_any_decoder() {
    let hb = decode(
        &CEA,
        br#"{"type":"heartbeat","ver":22,"id":"2778613","timestamp":1788008050926}"#,
    );
    assert_eq!(
        hb,
        Ok(Decoded::Control(Control::Heartbeat(Some(
            1_788_008_050_926
        ))))
    );
    let pong = decode(&SC, br#"{"type":"pong","timestamp":"17"}"#);
    assert_eq!(pong, Ok(Decoded::Control(Control::Pong(Some(17)))));
}

#[test]
fn errors_are_typed() {
    assert_eq!(error(&SC, b"\xff\xfe{").kind, ErrorKind::Malformed);
    assert_eq!(
        error(&SC, br#"{"type":"sc_eew","EventID":"#).kind,
        ErrorKind::Malformed
    );
    assert_eq!(error(&SC, b"42").kind, ErrorKind::Malformed);
    assert_eq!(
        error(&SC, br#"[{"type":"sc_eew"}]"#).kind,
        ErrorKind::Unsupported
    );
    assert_eq!(
        error(&SC, br#"{"type":"jma_eew","EventID":"1","ReportNum":1}"#).kind,
        ErrorKind::Unsupported
    );
    assert_eq!(
        error(&SC, br#"{"type":"sc_eew","ReportNum":1}"#).kind,
        ErrorKind::MissingField
    );
    assert_eq!(
        error(&SC, br#"{"type":"sc_eew","EventID":"1_1"}"#).kind,
        ErrorKind::MissingField
    );
    assert_eq!(
        error(
            &SC,
            br#"{"type":"sc_eew","EventID":"1_1","ReportNum":1,"Latitude":"north"}"#
        )
        .kind,
        ErrorKind::Malformed
    );
    assert_eq!(
        error(
            &SC,
            br#"{"type":"sc_eew","EventID":"1_1","ReportNum":1,"OriginTime":"soon"}"#
        )
        .kind,
        ErrorKind::Malformed
    );
}

#[test]
fn suffix_disagreeing_with_report_num_keeps_both_facts() {
    let r = report(
        &SC,
        r#"{"type":"sc_eew","EventID":"202608281313.0001_5","ReportNum":4}"#,
    );
    assert_eq!(
        (r.upstream_event_id.as_str(), r.revision),
        ("202608281313.0001_5", 4)
    );
}
