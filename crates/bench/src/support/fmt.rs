//! How counts and optional figures print.

/// A count, without decimals (`-0` from an empty float sum prints as `0`).
pub(crate) fn fmt_count(v: f64) -> String {
    // `+ 0.0` turns the -0.0 an empty float sum gives into 0.
    format!("{:.0}", v + 0.0)
}

/// A count, or `?` when it could not be read.
pub(crate) fn fmt_opt_count(v: Option<f64>) -> String {
    v.map_or_else(|| "?".into(), fmt_count)
}

/// A figure with two decimals, or `?` when it could not be read.
pub(crate) fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "?".into(), |v| format!("{v:.2}"))
}

/// `a - b`, when both were read.
pub(crate) fn diff(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}
