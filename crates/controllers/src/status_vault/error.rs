//! What can keep the status vault from answering, typed, each keeping its source: a backend that
//! cannot be opened or read ([`BackendError`]), and why a restore cannot decide yet
//! ([`Pending`]).

use super::model::BackendRef;

/// A backend a policy names did not answer.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Its encryption key file cannot be read or is not a key.
    #[error("the encryption key of {location} ({path}): {source}")]
    Key {
        /// The backend's location.
        location: String,
        /// The key file.
        path: String,
        /// What the vault said of it.
        #[source]
        source: vigil_vault::Error,
    },
    /// Opening, reading or writing the backend failed.
    #[error("{location}: {source}")]
    Vault {
        /// The backend's location.
        location: String,
        /// What the vault said.
        #[source]
        source: vigil_vault::Error,
    },
}

impl BackendError {
    /// `source`, from the backend `backend`.
    pub fn vault(backend: &BackendRef, source: vigil_vault::Error) -> Self {
        Self::Vault {
            location: backend.location.clone(),
            source,
        }
    }
}

/// Why a restore cannot decide yet: do not act on the object, look again later.
#[derive(Debug, thiserror::Error)]
pub enum Pending {
    /// The policies are not loaded: which cover the object is not known.
    #[error("the status backup policies are not loaded yet")]
    PoliciesNotLoaded,
    /// Records of the previous object are still queued: restoring now could hand back a stale
    /// status.
    #[error("records of the previous object are still on their way to the vault")]
    CapturesOnTheirWay,
    /// A backend did not answer.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The newest record cannot be read: never applied; a human restores it.
    #[error(
        "the newest status record of {object} in {location} cannot be read ({reason}); nothing restored — restore it with `vigil status restore` once fixed"
    )]
    CorruptRecord {
        /// The object's key in the vault.
        object: String,
        /// The backend's location.
        location: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// The object cannot be handled as a dynamic object.
    #[error("cannot read the object: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// Reading the object from the API failed.
    #[error("reading the object: {0}")]
    Read(#[source] kube::Error),
    /// The object has no resourceVersion, so the status write could not be conditional.
    #[error("the object has no resourceVersion")]
    NoResourceVersion,
    /// The object changed since it was seen with an empty status.
    #[error("the object changed since it was seen empty; look again")]
    Changed,
    /// Writing the status failed.
    #[error("writing the status: {0}")]
    Write(#[source] kube::Error),
}
