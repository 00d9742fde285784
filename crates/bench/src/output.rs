//! Standard output whose reader may go away (`vigil-bench sandbox | head -3`): as in `vigil`'s
//! one-shot commands, `say!` never panics on a closed pipe; the first write that meets one
//! ends the bench at once, with success (a bench owns nothing that outlives its children, which
//! die with it).

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// `println!` for the benches: a closed pipe ends the process quietly instead of panicking.
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
    static FAILED: AtomicBool = AtomicBool::new(false);
    if FAILED.load(Ordering::Relaxed) {
        return;
    }
    match writeln!(std::io::stdout().lock(), "{text}") {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        // Another failure (a full disk behind a redirection): say so once where it can still
        // be read, and let the bench finish.
        Err(e) => {
            if !FAILED.swap(true, Ordering::Relaxed) {
                eprintln!("vigil-bench: cannot write to standard output ({e}); output dropped");
            }
        }
    }
}
