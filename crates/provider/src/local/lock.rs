//! One operation at a time per cluster, across processes: an exclusive `flock` on
//! `<root>/.locks/<id>`. Two operators (or a restarted one racing its predecessor's last call)
//! could otherwise both see "no cluster yet" and start two. The kernel drops the lock when the
//! holder dies, so a crash never leaves a cluster locked.

use std::fs::File;
use std::os::fd::AsRawFd as _;
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
        // SAFETY: flock(2) on a descriptor this function owns; no memory is shared.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if locked {
            return Ok(ClusterLock { _file: file });
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::WouldBlock {
            return Err(error);
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
