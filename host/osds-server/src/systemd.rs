//! systemd's service protocol, for `Type=notify` units (`deploy/osds.service`): `READY=1` once the listener is
//! bound, `WATCHDOG=1` at half the unit's `WatchdogSec` for as long as the runtime runs tasks, `STOPPING=1` when
//! the drain begins. Outside systemd (no `NOTIFY_SOCKET`) each is a no-op.

use sd_notify::NotifyState;
use std::time::Duration;
use tokio::sync::watch;

/// The service serves at `url`.
pub fn ready(url: &str) {
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&format!("serving {url}")),
    ]);
}

/// The service has begun to stop.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

/// When the unit asks for a watchdog (`WATCHDOG_USEC`), pings it at half the interval until `shutdown`: a
/// runtime that stops running tasks stops the pings, and systemd restarts the service.
pub fn spawn_watchdog(mut shutdown: watch::Receiver<bool>) {
    let Some(interval) = watchdog_interval() else {
        return;
    };
    let every = interval / 2;
    tracing::info!(every = ?every, "systemd watchdog enabled");
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => notify(&[NotifyState::Watchdog]),
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    });
}

/// The unit's watchdog interval, as sd_watchdog_enabled(3) reads it: `WATCHDOG_USEC`, unless `WATCHDOG_PID`
/// names another process. (`sd_notify::watchdog_enabled` also wants `WATCHDOG_PID` present, which systemd
/// always sets; the manual does not.)
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

fn notify(states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(false, states) {
        tracing::warn!(%error, "could not notify systemd");
    }
}
