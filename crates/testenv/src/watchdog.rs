//! A per-test watchdog: a test that holds its environment longer than the limit ends the whole
//! test binary with a message naming it.
//!
//! Why the whole binary: libtest cannot cancel one test, and a hung test (a cleanup waiting on a
//! namespace that never goes, a watch that never ends) otherwise keeps `cargo test` — and CI —
//! running forever with no word of which test is stuck. Failing fast, by name, is the useful
//! outcome. The limit is generous (tests that provision clusters or kill operators take a minute
//! or two); `VIGIL_TEST_WATCHDOG_SECS` changes it, `0` turns the watchdog off (for a debugger).

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// The environment variable that sets the limit in seconds (`0`: no watchdog).
pub const WATCHDOG_ENV: &str = "VIGIL_TEST_WATCHDOG_SECS";

/// The limit when the environment does not set one.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(600);

/// Armed while a test holds its environment; disarmed when dropped.
#[derive(Debug)]
pub struct Watchdog {
    // Dropping the sender wakes the thread, which then returns without doing anything.
    _disarm: mpsc::Sender<()>,
}

impl Watchdog {
    /// Arms a watchdog for the calling test (libtest names each test's thread after the test).
    /// None when switched off.
    pub fn arm() -> Option<Self> {
        let limit = limit_from(std::env::var(WATCHDOG_ENV).ok().as_deref())?;
        let test = std::thread::current()
            .name()
            .unwrap_or("an unnamed test")
            .to_owned();
        let (disarm, disarmed) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name(format!("watchdog {test}"))
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(limit) {
                    // Straight to the stream: `eprintln!` in a test's thread (and the threads it
                    // spawns) is captured by libtest and would be lost with the process.
                    let _ = writeln!(
                        std::io::stderr(),
                        "\nwatchdog: test `{test}` still holds its TestEnv after {}s; ending the \
                         test binary so the run fails instead of hanging \
                         ({WATCHDOG_ENV} sets the limit)",
                        limit.as_secs()
                    );
                    std::process::exit(124);
                }
            })
            .ok()?;
        Some(Self { _disarm: disarm })
    }
}

/// The limit from the environment variable's value: unset or unreadable means the default.
fn limit_from(value: Option<&str>) -> Option<Duration> {
    match value.map(str::trim) {
        None | Some("") => Some(DEFAULT_LIMIT),
        Some(text) => match text.parse::<u64>() {
            Ok(0) => None,
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(_) => Some(DEFAULT_LIMIT),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_comes_from_the_environment_or_the_default() {
        assert_eq!(limit_from(None), Some(DEFAULT_LIMIT));
        assert_eq!(limit_from(Some("")), Some(DEFAULT_LIMIT));
        assert_eq!(limit_from(Some("90")), Some(Duration::from_secs(90)));
        assert_eq!(limit_from(Some("0")), None);
        assert_eq!(limit_from(Some("soon")), Some(DEFAULT_LIMIT));
    }
}
