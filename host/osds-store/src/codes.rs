//! The ingest path's codes, as types: how a delivery came and what became of it, a socket's role, why a session
//! ended, why an outage began. Each spells itself (`as_str`) as the archive stores it and the API shows it, and
//! is read back from that spelling ([`Code::parse`]); the contract tests pin those spellings.

/// A code stored as text: every value, its spelling, and the value a stored text spells.
pub trait Code: Copy + Sized + 'static {
    /// What the column holds, for messages: `delivery marker`.
    const WHAT: &'static str;
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;

    /// The value spelled `text`, if it is one.
    fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == text)
    }

    /// The value a stored `text` spells; the archive holds only values this service wrote, so another one is
    /// an error naming it (never a guess).
    fn stored(text: &str) -> anyhow::Result<Self> {
        Self::parse(text).ok_or_else(|| {
            anyhow::anyhow!(
                "the archive holds `{text}` as a {}, which is not one",
                Self::WHAT
            )
        })
    }
}

/// How a delivery arrived (`deliveries.marker`, the spec's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Marker {
    /// Pushed on the channel's own socket.
    PrimaryPush,
    /// Pushed on `/all_eew`.
    RedundantPush,
    /// On either socket, within the reply window of the query sent after connecting: the reply, or a push.
    QueryOrPush,
}

impl Code for Marker {
    const WHAT: &'static str = "delivery marker";
    const ALL: &'static [Marker] = &[
        Marker::PrimaryPush,
        Marker::RedundantPush,
        Marker::QueryOrPush,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Marker::PrimaryPush => "primary-websocket-push",
            Marker::RedundantPush => "redundant-websocket-push",
            Marker::QueryOrPush => "primary/redundant-websocket-query-or-push",
        }
    }
}

/// Which socket an upstream session is (`sessions.role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketRole {
    /// A channel's own socket.
    Primary,
    /// `/all_eew`, which carries every channel.
    Redundant,
}

impl Code for SocketRole {
    const WHAT: &'static str = "socket role";
    const ALL: &'static [SocketRole] = &[SocketRole::Primary, SocketRole::Redundant];

    fn as_str(self) -> &'static str {
        match self {
            SocketRole::Primary => "primary",
            SocketRole::Redundant => "redundant",
        }
    }
}

/// What became of a delivered unit (`deliveries.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryOutcome {
    /// A new report version.
    NewVersion,
    /// A version the archive had already.
    Duplicate,
    /// No decoder could read it, or its report could not be stored (kept for `osds reparse`).
    Unparsed,
    /// Of a type no channel decodes (heartbeats, other agencies' frames).
    Ignored,
}

impl Code for DeliveryOutcome {
    const WHAT: &'static str = "delivery outcome";
    const ALL: &'static [DeliveryOutcome] = &[
        DeliveryOutcome::NewVersion,
        DeliveryOutcome::Duplicate,
        DeliveryOutcome::Unparsed,
        DeliveryOutcome::Ignored,
    ];

    fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::NewVersion => "new-version",
            DeliveryOutcome::Duplicate => "duplicate",
            DeliveryOutcome::Unparsed => "unparsed",
            DeliveryOutcome::Ignored => "ignored",
        }
    }
}

impl DeliveryOutcome {
    /// The `outcome` label of `osds_ingest_units_total` (documented as such: a new version is `archived`).
    pub fn metric_label(self) -> &'static str {
        match self {
            DeliveryOutcome::NewVersion => "archived",
            other => other.as_str(),
        }
    }
}

/// Why an upstream session ended or could not begin (`sessions.end_reason`, a socket's `lastError`, an
/// outage's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndReason {
    ClosedByUpstream,
    /// A frame over `--upstream-max-frame-mib` was refused.
    FrameTooLarge,
    ConnectionLost,
    /// No message within the silence timeout.
    Silence,
    SendFailed,
    ServiceStopping,
    /// The relay answered the upgrade with an HTTP error.
    UpgradeRefused,
    ConnectFailed,
    ConnectTimeout,
    /// Left open by a process that stopped without closing it (written by SQL at the next start).
    Interrupted,
}

impl Code for EndReason {
    const WHAT: &'static str = "session end reason";
    const ALL: &'static [EndReason] = &[
        EndReason::ClosedByUpstream,
        EndReason::FrameTooLarge,
        EndReason::ConnectionLost,
        EndReason::Silence,
        EndReason::SendFailed,
        EndReason::ServiceStopping,
        EndReason::UpgradeRefused,
        EndReason::ConnectFailed,
        EndReason::ConnectTimeout,
        EndReason::Interrupted,
    ];

    fn as_str(self) -> &'static str {
        match self {
            EndReason::ClosedByUpstream => "closed_by_upstream",
            EndReason::FrameTooLarge => "frame_too_large",
            EndReason::ConnectionLost => "connection_lost",
            EndReason::Silence => "silence",
            EndReason::SendFailed => "send_failed",
            EndReason::ServiceStopping => "service_stopping",
            EndReason::UpgradeRefused => "upgrade_refused",
            EndReason::ConnectFailed => "connect_failed",
            EndReason::ConnectTimeout => "connect_timeout",
            EndReason::Interrupted => "interrupted",
        }
    }
}

/// Why a channel's outage began (`outages.reason`, shown in `/status`): a sentence for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutageReason {
    /// The service started and has not yet connected the channel.
    ServiceStarted,
    /// An operator added the channel and it is not yet connected.
    ChannelAdded,
    /// The service stopped (cleanly).
    ServiceStopped,
    /// The process stopped without closing its sockets (found at the next start).
    StoppedUnexpectedly,
    /// The only ingesters holding the channel on a PostgreSQL archive stopped without saying so (found by
    /// another ingester, or by the same one registering again).
    IngesterStopped,
    /// The last socket carrying the channel (`path`) ended or could not begin.
    SocketLost {
        path: String,
        reason: Option<EndReason>,
    },
}

impl std::fmt::Display for OutageReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutageReason::ServiceStarted => f.write_str("service started; not yet connected"),
            OutageReason::ChannelAdded => f.write_str("channel added; not yet connected"),
            OutageReason::ServiceStopped => f.write_str("service stopped"),
            OutageReason::StoppedUnexpectedly => f.write_str("service stopped unexpectedly"),
            OutageReason::IngesterStopped => f.write_str("ingester stopped"),
            OutageReason::SocketLost { path, reason } => {
                write!(f, "{path}: {}", reason.map_or("", EndReason::as_str))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spellings are the archive's and the API's: a rename here would orphan stored rows.
    #[test]
    fn every_code_keeps_its_stored_spelling() {
        let markers = [
            Marker::PrimaryPush,
            Marker::RedundantPush,
            Marker::QueryOrPush,
        ]
        .map(Marker::as_str);
        assert_eq!(
            markers,
            [
                "primary-websocket-push",
                "redundant-websocket-push",
                "primary/redundant-websocket-query-or-push"
            ]
        );
        assert_eq!(
            [SocketRole::Primary, SocketRole::Redundant].map(SocketRole::as_str),
            ["primary", "redundant"]
        );
        let reasons = [
            EndReason::ClosedByUpstream,
            EndReason::FrameTooLarge,
            EndReason::ConnectionLost,
            EndReason::Silence,
            EndReason::SendFailed,
            EndReason::ServiceStopping,
            EndReason::UpgradeRefused,
            EndReason::ConnectFailed,
            EndReason::ConnectTimeout,
            EndReason::Interrupted,
        ]
        .map(EndReason::as_str);
        let outages = [
            OutageReason::ServiceStarted,
            OutageReason::ChannelAdded,
            OutageReason::ServiceStopped,
            OutageReason::StoppedUnexpectedly,
            OutageReason::IngesterStopped,
            OutageReason::SocketLost {
                path: "/sc_eew".into(),
                reason: Some(EndReason::Silence),
            },
        ]
        .map(|reason| reason.to_string());
        assert_eq!(
            outages,
            [
                "service started; not yet connected",
                "channel added; not yet connected",
                "service stopped",
                "service stopped unexpectedly",
                "ingester stopped",
                "/sc_eew: silence"
            ]
        );
        assert_eq!(
            reasons,
            [
                "closed_by_upstream",
                "frame_too_large",
                "connection_lost",
                "silence",
                "send_failed",
                "service_stopping",
                "upgrade_refused",
                "connect_failed",
                "connect_timeout",
                "interrupted"
            ]
        );
    }

    /// Every code reads back as the value that wrote it; what this service never wrote is refused by name.
    #[test]
    fn every_code_reads_back_from_its_spelling() {
        fn round_trip<C: Code + PartialEq + std::fmt::Debug>() {
            for &code in C::ALL {
                assert_eq!(C::stored(code.as_str()).unwrap(), code);
            }
            let error = C::stored("bogus").unwrap_err().to_string();
            assert!(
                error.contains("`bogus`") && error.contains(C::WHAT),
                "{error}"
            );
        }
        round_trip::<Marker>();
        round_trip::<SocketRole>();
        round_trip::<EndReason>();
        round_trip::<DeliveryOutcome>();
        assert_eq!(
            DeliveryOutcome::ALL
                .iter()
                .map(|o| o.as_str())
                .collect::<Vec<_>>(),
            ["new-version", "duplicate", "unparsed", "ignored"]
        );
        assert_eq!(
            DeliveryOutcome::ALL
                .iter()
                .map(|o| o.metric_label())
                .collect::<Vec<_>>(),
            ["archived", "duplicate", "unparsed", "ignored"]
        );
    }
}
