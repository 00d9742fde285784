//! One operation at a time per cluster, across processes: an exclusive `flock` on
//! `<root>/.locks/<id>`. Two operators (or a restarted one racing its predecessor's last call)
//! could otherwise both see "no cluster yet" and start two. The kernel drops the lock when the
//! holder dies, so a crash never leaves a cluster locked.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::Duration;

/// Held while it lives.
#[derive(Debug)]
pub struct ClusterLock {
    _file: File,
}

/// Waits (polling, never blocking a worker thread) up to `patience` for the lock.
pub async fn acquire(dir: &Path, id: &str, patience: Duration) -> std::io::Result<ClusterLock> {
    std::fs::create_dir_all(dir)?;
    // Opened with O_CLOEXEC (Rust's default), so a sandbox spawned under the lock does not
    // inherit it and hold it for its whole life.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(id))?;
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        // std's exclusive file lock is flock(LOCK_EX | LOCK_NB) on Linux.
        match file.try_lock() {
            Ok(()) => return Ok(ClusterLock { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => return Err(error),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                format!("cluster {id} is busy with another operation"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lock_is_refused_until_it_is_dropped() {
        let dir = std::env::temp_dir().join(format!("vigil-lock-test-{}", std::process::id()));
        let held = acquire(&dir, "c1", Duration::ZERO).await.expect("first");
        let busy = acquire(&dir, "c1", Duration::from_millis(30))
            .await
            .expect_err("held elsewhere");
        assert_eq!(busy.kind(), std::io::ErrorKind::WouldBlock);
        acquire(&dir, "c2", Duration::ZERO)
            .await
            .expect("another cluster's lock is independent");
        drop(held);
        acquire(&dir, "c1", Duration::ZERO)
            .await
            .expect("free once dropped");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
