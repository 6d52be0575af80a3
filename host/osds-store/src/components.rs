//! The installed-components ledger: which decoder each channel was given on a running server, and the bytes of
//! every installed `.wasm`, so a restart (and `osds reparse`) puts back what ran. Built-in components are not
//! stored: their bytes are in the binary, found again by their SHA-256.

use crate::statements::Statements;
use crate::store::Store;
use sha2::{Digest, Sha256};

/// A channel's decoder as the last change left it.
#[derive(Debug, Clone)]
pub struct ChannelComponent {
    pub channel: String,
    /// SHA-256 of the `.wasm` in service.
    pub sha256: String,
    /// Its bytes, when they were stored (an installed component; a built-in one is not).
    pub wasm: Option<Vec<u8>>,
    /// What a rollback would put back.
    pub previous_sha256: Option<String>,
    pub changed_at: String,
}

/// What a recorded change did (`component_changes.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentAction {
    Install,
    /// Put back what the channel had before its last change.
    Rollback,
}

impl ComponentAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentAction::Install => "install",
            ComponentAction::Rollback => "rollback",
        }
    }
}

/// A component put in service on a running server.
pub struct ComponentChange {
    pub channel: String,
    pub action: ComponentAction,
    pub sha256: String,
    /// The bytes, for an installed component.
    pub wasm: Option<Vec<u8>>,
    /// What a rollback would put back after this change.
    pub previous: Option<String>,
    /// When it is made: the install time the running service shows, recorded as it is so that a restart
    /// shows the same.
    pub changed_at: String,
}

/// The writes of [`Writer::record_component`], for either backend (run in one transaction).
pub(crate) fn component_change(change: &ComponentChange) -> anyhow::Result<Statements> {
    let mut statements = Statements::default();
    if let Some(wasm) = &change.wasm {
        anyhow::ensure!(
            hex::encode(Sha256::digest(wasm)) == change.sha256,
            "the component bytes do not have the SHA-256 {}",
            change.sha256
        );
        statements
            .push(
                "INSERT INTO component_files (sha256, wasm, stored_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(change.sha256.as_str())
            .bind(wasm.clone())
            .bind(change.changed_at.as_str());
    }
    statements
        .push(
            "INSERT INTO component_changes (channel, action, sha256, previous_sha256, changed_at) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(change.channel.as_str())
        .bind(change.action.as_str())
        .bind(change.sha256.as_str())
        .bind(change.previous.clone())
        .bind(change.changed_at.as_str());
    Ok(statements)
}

impl Store {
    /// Each channel's decoder as its last recorded change left it, by channel.
    pub async fn installed_components(&self) -> anyhow::Result<Vec<ChannelComponent>> {
        let query = Statements::one(
            "SELECT c.channel, c.sha256, c.previous_sha256, c.changed_at, f.wasm FROM component_changes c \
             LEFT JOIN component_files f ON f.sha256 = c.sha256 \
             WHERE c.id IN (SELECT MAX(id) FROM component_changes GROUP BY channel) ORDER BY c.channel",
        );
        self.db
            .rows(query, |row| ChannelComponent {
                channel: row.text("channel"),
                sha256: row.text("sha256"),
                wasm: row.opt_bytes("wasm"),
                previous_sha256: row.opt_text("previous_sha256"),
                changed_at: row.text("changed_at"),
            })
            .await
    }

    /// Changes recorded after change `after` (0: all), in order, with their ids: each channel's component as
    /// that change left it. Processes of one archive follow each other's installs with it.
    pub async fn component_changes_after(
        &self,
        after: i64,
    ) -> anyhow::Result<Vec<(i64, ChannelComponent)>> {
        let mut query = Statements::one(
            "SELECT c.id, c.channel, c.sha256, c.previous_sha256, c.changed_at, f.wasm FROM component_changes c \
             LEFT JOIN component_files f ON f.sha256 = c.sha256 WHERE c.id > ? ORDER BY c.id",
        );
        query.bind(after);
        self.db
            .rows(query, |row| {
                (
                    row.int("id"),
                    ChannelComponent {
                        channel: row.text("channel"),
                        sha256: row.text("sha256"),
                        wasm: row.opt_bytes("wasm"),
                        previous_sha256: row.opt_text("previous_sha256"),
                        changed_at: row.text("changed_at"),
                    },
                )
            })
            .await
    }

    /// The id of the last recorded change (0 before any).
    pub async fn last_component_change(&self) -> anyhow::Result<i64> {
        self.db
            .one(
                Statements::one("SELECT COALESCE(MAX(id), 0) AS id FROM component_changes"),
                |row| row.int("id"),
            )
            .await
    }

    /// The id and component (SHA-256) of the last change recorded for `channel`, if any.
    pub async fn last_component_change_of(
        &self,
        channel: &str,
    ) -> anyhow::Result<Option<(i64, String)>> {
        let mut query = Statements::one(
            "SELECT id, sha256 FROM component_changes WHERE channel = ? ORDER BY id DESC LIMIT 1",
        );
        query.bind(channel);
        self.db
            .row(query, |row| (row.int("id"), row.text("sha256")))
            .await
    }

    /// The stored bytes of the component with this SHA-256, if it was ever installed.
    pub async fn component_file(&self, sha256: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let mut query = Statements::one("SELECT wasm FROM component_files WHERE sha256 = ?");
        query.bind(sha256);
        self.db.row(query, |row| row.bytes("wasm")).await
    }
}
