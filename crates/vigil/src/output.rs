//! Standard output for a command-line tool whose reader may go away: `vigil manifests | head`,
//! `vigil demo | head -3`, a terminal that closes.
//!
//! Rust's `say!` panics with a backtrace when the pipe is closed ("failed printing to stdout:
//! Broken pipe"). A reader that has read enough is not a failure of Vigil's, so `say!` never
//! panics; the first write that meets a closed pipe stops the command quietly:
//! - a command with a graceful stop (`demo`, `sandbox`) has called [`stop_when_closed`] and waits
//!   on [`closed`] beside SIGTERM and SIGINT: it cleans up exactly as on SIGTERM (the demo deletes
//!   the cluster it provisioned) and exits with success; whatever it prints meanwhile is dropped;
//! - every other command ends at once with success, as `head`'s writer would (the one-shot
//!   commands own nothing that outlives them).

use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

/// Whether the running command stops gracefully (see [`stop_when_closed`]).
static GRACEFUL: AtomicBool = AtomicBool::new(false);

/// Flips to `true` once standard output is found closed.
fn channel() -> &'static watch::Sender<bool> {
    static CLOSED: OnceLock<watch::Sender<bool>> = OnceLock::new();
    CLOSED.get_or_init(|| watch::channel(false).0)
}

/// `say!` for Vigil's CLI: writes a line to standard output; a closed pipe stops the command
/// quietly instead of panicking (see the module's documentation).
#[macro_export]
macro_rules! say {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

/// Writes one line; see `say!`.
pub fn line(text: std::fmt::Arguments<'_>) {
    if *channel().borrow() {
        return;
    }
    let written = writeln!(std::io::stdout().lock(), "{text}");
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => reader_gone(),
        // Another failure (a full disk behind a redirection): say so where it can still be read,
        // once, and go on; the command's own work matters more than its story.
        Err(e) => {
            if !channel().send_replace(true) {
                eprintln!("vigil: cannot write to standard output ({e}); output dropped");
            }
        }
    }
}

/// The reader of standard output is gone.
fn reader_gone() {
    channel().send_replace(true);
    if !GRACEFUL.load(Ordering::SeqCst) {
        std::process::exit(0);
    }
}

/// Declares that this command stops gracefully when standard output closes: from now on a
/// closed pipe wakes [`closed`] instead of ending the process.
pub fn stop_when_closed() {
    GRACEFUL.store(true, Ordering::SeqCst);
}

/// Resolves once standard output is found closed (never, while it stays open).
pub async fn closed() {
    let mut rx = channel().subscribe();
    // `wait_for` fails only if the sender is dropped, which a static never is.
    let _ = rx.wait_for(|closed| *closed).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn closed_wakes_once_the_pipe_is_found_closed() {
        stop_when_closed();
        let waiter = tokio::spawn(closed());
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        reader_gone();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("closed() woke")
            .expect("task");
    }
}
