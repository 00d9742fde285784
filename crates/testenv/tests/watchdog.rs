//! The watchdog ends a hung test's binary with a message naming the test. The parent test runs
//! this same binary again, asking it to run only `hangs_when_asked` with a one-second limit.

use std::process::Command;
use std::time::Duration;

const CHILD_ENV: &str = "VIGIL_WATCHDOG_TEST_CHILD";

/// Does nothing unless run as the child: then it arms the watchdog and never finishes.
#[test]
fn hangs_when_asked() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let _watchdog = vigil_testenv::Watchdog::arm().expect("armed");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_hung_test_ends_its_binary_naming_the_test() {
    let out = Command::new(std::env::current_exe().expect("test binary"))
        // Captured output, as in a normal run: the message must get through anyway.
        .args(["--exact", "hangs_when_asked", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env(vigil_testenv::WATCHDOG_ENV, "1")
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr: {stderr}");
    assert!(
        stderr.contains("watchdog: test `hangs_when_asked`"),
        "stderr: {stderr}"
    );
}
