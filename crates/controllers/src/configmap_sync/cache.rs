//! Lean caches. Every ConfigMap in the cluster is watched (a source can be any of them), so a
//! cached ConfigMap is stripped at once to its name, uid, resourceVersion, labels, Vigil's
//! annotations, immutability, and two figures computed from its data before the data is dropped:
//! the content hash and the size. The data of a source is read with one GET when a copy must be
//! written.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{Resource, ResourceExt as _};
use sha2::{Digest as _, Sha256};

use super::model::{
    CONTENT_HASH_ANNOTATION, ConfigMapView, NamespaceView, OWNER_ANNOTATION,
    SHAREABLE_WITH_ANNOTATION, SOURCE_ANNOTATION,
};

/// Annotations that only ever live in the cache (never written): what the data hashed to and
/// weighed before it was dropped.
const OBSERVED_HASH: &str = "vigil.internal/observed-hash";
const OBSERVED_SIZE: &str = "vigil.internal/observed-size";

/// The content hash of a ConfigMap's data, binaryData and immutability: `sha256:` + hex. Every
/// key and value is length-prefixed, so no two contents encode alike.
pub fn content_hash(cm: &ConfigMap) -> String {
    let mut hash = Sha256::new();
    let mut part = |tag: &[u8], bytes: &[u8]| {
        hash.update(tag);
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    for (k, v) in cm.data.iter().flatten() {
        part(b"d", k.as_bytes());
        part(b"v", v.as_bytes());
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        part(b"b", k.as_bytes());
        part(b"v", &v.0);
    }
    part(b"i", &[u8::from(cm.immutable.unwrap_or(false))]);
    hex_digest(hash)
}

/// The content hash of a Secret: its type, data and immutability (as for ConfigMaps).
pub fn secret_hash(secret: &Secret) -> String {
    let mut hash = Sha256::new();
    let mut part = |tag: &[u8], bytes: &[u8]| {
        hash.update(tag);
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    part(b"t", secret.type_.as_deref().unwrap_or("Opaque").as_bytes());
    for (k, v) in secret.data.iter().flatten() {
        part(b"d", k.as_bytes());
        part(b"v", &v.0);
    }
    part(b"i", &[u8::from(secret.immutable.unwrap_or(false))]);
    hex_digest(hash)
}

fn hex_digest(hash: Sha256) -> String {
    let digest = hash.finalize();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Bytes of a Secret's keys and values.
pub fn secret_size(secret: &Secret) -> usize {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum()
}

/// Bytes of a ConfigMap's keys and values (what the API server's 1 MiB limit counts).
pub fn content_size(cm: &ConfigMap) -> usize {
    let data: usize = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let binary: usize = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum();
    data + binary
}

/// Strips a ConfigMap to what the decision reads; its data becomes a hash and a size.
pub fn slim_config_map(cm: &mut ConfigMap) {
    let hash = content_hash(cm);
    let size = content_size(cm);
    cm.data = None;
    cm.binary_data = None;
    slim_meta(cm.meta_mut(), hash, size);
}

/// Strips a Secret the same way: its data becomes a hash and a size.
pub fn slim_secret(secret: &mut Secret) {
    let hash = secret_hash(secret);
    let size = secret_size(secret);
    secret.data = None;
    secret.string_data = None;
    slim_meta(secret.meta_mut(), hash, size);
}

/// Keeps Vigil's annotations only, plus the observed hash and size.
fn slim_meta(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    hash: String,
    size: usize,
) {
    crate::slim::meta(
        meta,
        &[
            OWNER_ANNOTATION,
            SHAREABLE_WITH_ANNOTATION,
            CONTENT_HASH_ANNOTATION,
            SOURCE_ANNOTATION,
        ],
    );
    meta.owner_references = None;
    let mut kept: BTreeMap<String, String> = meta.annotations.take().unwrap_or_default();
    kept.insert(OBSERVED_HASH.into(), hash);
    kept.insert(OBSERVED_SIZE.into(), size.to_string());
    meta.annotations = Some(kept);
}

/// Index keys of a cached ConfigMap: its name (sources and copies share it across namespaces)
/// and the ConfigMapSync owning it, so a decision reads the few ConfigMaps that concern it
/// instead of scanning the cluster's.
pub fn object_keys<K: Resource>(obj: &K) -> Vec<String> {
    let mut keys = vec![name_key(&obj.name_any())];
    if let Some(owner) = obj.annotations().get(OWNER_ANNOTATION) {
        keys.push(owner_key(owner));
    }
    keys
}

/// Index key of the ConfigMaps with this name.
pub fn name_key(name: &str) -> String {
    format!("name:{name}")
}

/// Index key of the copies a ConfigMapSync (`namespace/name`) owns.
pub fn owner_key(owner: &str) -> String {
    format!("owner:{owner}")
}

/// Index key of a ConfigMapSync: the name of its ConfigMap, so a ConfigMap event finds the
/// ConfigMapSyncs naming it without a scan.
pub fn sync_keys(sync: &vigil_apis::ConfigMapSync) -> Vec<String> {
    vec![name_key(&sync.spec.config_map_name)]
}

/// Drops a ConfigMapSync's managed fields (the rest is read).
pub fn slim_sync(sync: &mut vigil_apis::ConfigMapSync) {
    sync.meta_mut().managed_fields = None;
}

/// A cached Secret as the decision's view.
pub fn secret_view(secret: &Secret) -> ConfigMapView {
    let meta = &secret.metadata;
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    ConfigMapView {
        namespace: secret.namespace().unwrap_or_default(),
        name: secret.name_any(),
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
        labels: meta.labels.clone().unwrap_or_default(),
        owner: annotation(OWNER_ANNOTATION),
        content_hash: annotation(OBSERVED_HASH).unwrap_or_else(|| secret_hash(secret)),
        size: annotation(OBSERVED_SIZE)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| secret_size(secret)),
        immutable: secret.immutable.unwrap_or(false),
        shareable_with: annotation(SHAREABLE_WITH_ANNOTATION),
        terminating: meta.deletion_timestamp.is_some(),
    }
}

/// A cached ConfigMap as the decision's view.
pub fn config_map_view(cm: &ConfigMap) -> ConfigMapView {
    let meta = &cm.metadata;
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    ConfigMapView {
        namespace: cm.namespace().unwrap_or_default(),
        name: cm.name_any(),
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
        labels: meta.labels.clone().unwrap_or_default(),
        owner: annotation(OWNER_ANNOTATION),
        // A ConfigMap that never went through `slim_config_map` (not expected) is hashed now.
        content_hash: annotation(OBSERVED_HASH).unwrap_or_else(|| content_hash(cm)),
        size: annotation(OBSERVED_SIZE)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| content_size(cm)),
        immutable: cm.immutable.unwrap_or(false),
        shareable_with: annotation(SHAREABLE_WITH_ANNOTATION),
        terminating: meta.deletion_timestamp.is_some(),
    }
}

/// A cached namespace as the decision's view.
pub fn namespace_view(ns: &Namespace) -> NamespaceView {
    NamespaceView {
        name: ns.name_any(),
        labels: ns.metadata.labels.clone().unwrap_or_default(),
        terminating: ns.metadata.deletion_timestamp.is_some(),
    }
}

/// What the controller needs of a kind it copies (ConfigMap, Secret).
pub trait Copied:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The content hash (as the lean cache computes it).
    fn hash(&self) -> String;
    /// Slims a listed object as the lean cache does.
    fn slim(&mut self);
    /// The object as the decision's view.
    fn view(&self) -> ConfigMapView;
    /// An object with this one's content (data, type, immutability) and empty metadata.
    fn content(&self) -> Self;
}

impl Copied for ConfigMap {
    fn hash(&self) -> String {
        content_hash(self)
    }
    fn slim(&mut self) {
        slim_config_map(self);
    }
    fn view(&self) -> ConfigMapView {
        config_map_view(self)
    }
    fn content(&self) -> Self {
        ConfigMap {
            data: self.data.clone(),
            binary_data: self.binary_data.clone(),
            immutable: self.immutable,
            ..ConfigMap::default()
        }
    }
}

impl Copied for Secret {
    fn hash(&self) -> String {
        secret_hash(self)
    }
    fn slim(&mut self) {
        slim_secret(self);
    }
    fn view(&self) -> ConfigMapView {
        secret_view(self)
    }
    fn content(&self) -> Self {
        Secret {
            data: self.data.clone(),
            type_: self.type_.clone(),
            immutable: self.immutable,
            ..Secret::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn cm(data: &[(&str, &str)], binary: &[(&str, &[u8])], immutable: Option<bool>) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            binary_data: Some(
                binary
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            immutable,
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_hash_sees_data_binary_data_and_immutability() {
        let base = content_hash(&cm(&[("a", "1")], &[], None));
        assert!(base.starts_with("sha256:") && base.len() == 71, "{base}");
        assert_eq!(base, content_hash(&cm(&[("a", "1")], &[], Some(false))));
        assert_ne!(base, content_hash(&cm(&[("a", "2")], &[], None)));
        assert_ne!(base, content_hash(&cm(&[("a", "1")], &[], Some(true))));
        assert_ne!(base, content_hash(&cm(&[("a", "1")], &[("b", b"x")], None)));
        // Moving bytes between key and value changes the hash.
        assert_ne!(
            content_hash(&cm(&[("ab", "c")], &[], None)),
            content_hash(&cm(&[("a", "bc")], &[], None))
        );
    }

    #[test]
    fn slimming_keeps_the_hash_and_drops_the_data() {
        let mut full = cm(&[("a", "1")], &[("b", b"xy")], Some(true));
        full.metadata.name = Some("app".into());
        full.metadata.annotations = Some(BTreeMap::from([
            ("big".to_owned(), "x".repeat(1000)),
            (OWNER_ANNOTATION.to_owned(), "ns/s".to_owned()),
        ]));
        let hash = content_hash(&full);
        slim_config_map(&mut full);
        assert!(full.data.is_none() && full.binary_data.is_none());
        let view = config_map_view(&full);
        assert_eq!(view.content_hash, hash);
        assert_eq!(view.size, 2 + 3);
        assert_eq!(view.owner.as_deref(), Some("ns/s"));
        assert!(view.immutable);
        assert!(!full.annotations().contains_key("big"));
    }
}
