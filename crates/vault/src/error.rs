//! What can go wrong with a vault, each case saying what to do about it.

/// An error of the vault or one of its backends.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file system operation failed (dir backend).
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The S3 server answered with an error.
    #[error("S3 {operation} {object}: {reason}")]
    S3 {
        operation: &'static str,
        object: String,
        reason: String,
    },
    /// The bucket named in the location does not exist.
    #[error("S3 bucket {bucket:?} does not exist at {endpoint}; create it first")]
    NoSuchBucket { bucket: String, endpoint: String },
    /// The backend could not be reached at all (connection refused, timeout, DNS).
    #[error("vault {location} is unreachable: {reason}")]
    Unreachable { location: String, reason: String },
    /// A stored record cannot be read back: truncated, not JSON, a damaged envelope, or a record
    /// stored under another object's key. Never applied.
    #[error("corrupt record {what}: {reason}")]
    Corrupt { what: String, reason: String },
    /// A record was encrypted with a different key than the one given.
    #[error(
        "record {what} was encrypted with another key (key id {found}; the given key's id is {expected})"
    )]
    WrongKey {
        what: String,
        found: String,
        expected: String,
    },
    /// A record is encrypted and no key was given.
    #[error("record {what} is encrypted; give the encryption key (key id {key_id})")]
    KeyRequired { what: String, key_id: String },
    /// The encryption key itself is unusable.
    #[error("invalid encryption key: {0}")]
    InvalidKey(String),
    /// The location string is not a directory path or an `s3://bucket/prefix` URL.
    #[error("invalid vault location {location:?}: {reason}")]
    Location { location: String, reason: String },
    /// A record could not be encoded (should not happen with JSON values).
    #[error("encoding a record: {0}")]
    Encode(#[from] serde_json::Error),
}

impl Error {
    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }

    /// Whether this is about one stored record (skip it and go on) rather than the vault as a
    /// whole (stop).
    pub fn is_corrupt_record(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}
