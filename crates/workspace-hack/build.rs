//! Empty: a build script is what gives this crate's `[build-dependencies]` (syn's features on the
//! host side, for every proc-macro of the workspace) a place in the build graph.
fn main() {}
