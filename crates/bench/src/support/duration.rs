//! Durations on the command line: parsed as `vigil`'s own flags are (`250ms`, `2s`, `1m`).

pub(crate) use vigil_controllers::registry::parse_duration;
