//! SIGTERM and SIGINT, listened for from the moment a process starts, not from the moment it
//! first waits for them.
//!
//! A signal's default action kills the process at once: no Lease released, no data directory
//! cleaned up, no in-flight reconcile finished. A handler installed only when the process
//! settles down to wait (after it has printed "ready", served `/readyz` or taken the Lease)
//! leaves a window in which a supervisor's SIGTERM — a pod deleted while it starts, a test that
//! stops what it just saw ready — meets that default action. Under load the window is wide
//! enough to hit. So a process installs [`ShutdownSignals`] first, before anything can report
//! it ready; a signal that arrives before anyone waits is kept and seen by the first
//! [`ShutdownSignals::recv`].
//!
//! (`tokio::signal::ctrl_c()` is no substitute: it installs its handler on first poll, not when
//! the future is made.)

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT handlers, installed when this value is made.
#[derive(Debug)]
pub struct ShutdownSignals {
    terminate: Signal,
    interrupt: Signal,
}

impl ShutdownSignals {
    /// Installs the handlers: from now on SIGTERM and SIGINT no longer end the process; they
    /// are kept until [`Self::recv`] sees them.
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves on the next SIGTERM or SIGINT, or at once for one received since
    /// [`Self::install`] that no earlier call saw.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SIGTERM sent before anyone waits is not lost, and does not kill the test process.
    #[tokio::test]
    async fn a_signal_before_the_wait_is_kept() {
        let mut signals = ShutdownSignals::install().expect("handlers");
        // To this very process, whose default action would end the test binary.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        tokio::time::timeout(std::time::Duration::from_secs(10), signals.recv())
            .await
            .expect("the SIGTERM sent before recv is seen");
    }
}
