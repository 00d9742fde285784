//! The vault backends policies name: each opened once (again when its retention changes), and
//! how each is doing, as captures and health checks saw it. A change of health wakes the
//! controller, which reports it in the policies' status.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use vigil_vault::{EncryptionKey, Vault, VaultOptions};

use super::error::BackendError;
use super::model::{BackendHealth, BackendRef};

/// The open vaults and their health.
pub struct Backends {
    /// Each with the retention it was opened with.
    vaults: tokio::sync::Mutex<HashMap<BackendRef, (u32, Vault)>>,
    health: Mutex<HashMap<BackendRef, BackendHealth>>,
    changed: Arc<Notify>,
}

impl Backends {
    /// `changed` is notified when a backend starts failing or answers again.
    pub fn new(changed: Arc<Notify>) -> Self {
        Self {
            vaults: tokio::sync::Mutex::default(),
            health: Mutex::default(),
            changed,
        }
    }

    /// The vault of a backend, opened on first use (and again when its retention changes).
    pub async fn vault(&self, backend: &BackendRef, retention: u32) -> Result<Vault, BackendError> {
        let mut vaults = self.vaults.lock().await;
        if let Some((r, vault)) = vaults.get(backend)
            && *r == retention
        {
            return Ok(vault.clone());
        }
        let key = match &backend.key_file {
            Some(path) => {
                Some(
                    EncryptionKey::from_file(path).map_err(|source| BackendError::Key {
                        location: backend.location.clone(),
                        path: path.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let options = VaultOptions {
            retention: retention as usize,
            key,
        };
        let vault = Vault::open(&backend.location, options)
            .await
            .map_err(|source| BackendError::vault(backend, source))?;
        vaults.insert(backend.clone(), (retention, vault.clone()));
        Ok(vault)
    }

    fn health(&self) -> std::sync::MutexGuard<'_, HashMap<BackendRef, BackendHealth>> {
        // A plain map: a panic elsewhere cannot leave it half-updated.
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The backend answered (`wrote`: a record was written).
    pub fn succeeded(&self, backend: &BackendRef, wrote: bool) {
        let mut health = self.health();
        let h = health.entry(backend.clone()).or_default();
        let recovered = h.error.take().is_some();
        if wrote {
            h.last_capture = Some(k8s_openapi::jiff::Timestamp::now().to_string());
        }
        drop(health);
        if recovered {
            tracing::info!(backend = %backend.location, "status vault backend answers again");
            self.changed.notify_one();
        }
    }

    pub fn failed(&self, backend: &BackendRef, error: &str) {
        let mut health = self.health();
        let h = health.entry(backend.clone()).or_default();
        let new = h.error.is_none();
        h.error = Some(error.to_owned());
        drop(health);
        if new {
            tracing::warn!(backend = %backend.location, %error, "status vault backend fails; captures are kept and retried");
            self.changed.notify_one();
        }
    }

    /// How a backend is doing, with `pending` captures waiting for it.
    pub fn health_of(&self, backend: &BackendRef, pending: usize) -> BackendHealth {
        let mut h = self.health().get(backend).cloned().unwrap_or_default();
        h.pending = pending;
        h
    }
}
