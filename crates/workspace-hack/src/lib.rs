//! No code: this crate only unifies the features of the workspace's shared dependencies (see its
//! Cargo.toml), so that every crate built on its own reuses what the whole workspace compiled.
