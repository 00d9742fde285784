//! How a PATCH changes an object: its flavours (the JSON and merge patches come from the
//! `json-patch` crate), strategic merge patch and server-side apply with field ownership.

pub mod apply;
pub mod strategic_merge;

/// Patch flavours, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply { force: bool },
}

/// Media types of PATCH bodies.
pub const PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// Custom resources take every patch type but strategic merge.
pub const CUSTOM_RESOURCE_PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];
