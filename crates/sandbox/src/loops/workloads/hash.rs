//! The `pod-template-hash` label: FNV-32a of the pod template (and the collision count),
//! rendered with apimachinery's `rand.SafeEncodeString`, as `controller.ComputeHash` does.
//!
//! Upstream hashes a `spew` dump of the Go struct; that dump cannot be reproduced outside Go, so
//! the template is hashed as canonical JSON (sorted keys) instead. The names have the real shape
//! (`<deployment>-<hash>`, the same alphabet and length range) and are stable for equal
//! templates, but differ from the names a real cluster would pick for the same template.

use serde_json::Value;

/// The label every ReplicaSet of a Deployment and its pods carry.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

const FNV_OFFSET: u32 = 2_166_136_261;
const FNV_PRIME: u32 = 16_777_619;

fn fnv32a(hash: u32, bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ u32::from(*b)).wrapping_mul(FNV_PRIME))
}

/// Serializes with object keys sorted, whatever map order serde_json was built with.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// apimachinery's `rand.SafeEncodeString`: each character mapped into an alphabet without
/// vowels (no accidental words) and without characters that look alike.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The hash of a pod template with the Deployment's `status.collisionCount`.
pub fn pod_template_hash(template: &Value, collision_count: Option<u32>) -> String {
    let mut text = String::new();
    canonical(template, &mut text);
    let mut hash = fnv32a(FNV_OFFSET, text.as_bytes());
    if let Some(count) = collision_count {
        hash = fnv32a(hash, &count.to_le_bytes());
    }
    safe_encode(&hash.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(FNV_OFFSET, b""), 0x811c_9dc5);
        assert_eq!(fnv32a(FNV_OFFSET, b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(FNV_OFFSET, b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_of_digits_uses_the_upstream_alphabet() {
        // Digits '0'..'9' map to "456789bcdf", so hashes look like the real "768f597794".
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn hash_is_stable_key_order_independent_and_salted_by_collisions() {
        let a = json!({"metadata": {"labels": {"app": "web", "tier": "x"}}, "spec": {"containers": [{"name": "c"}]}});
        let b = json!({"spec": {"containers": [{"name": "c"}]}, "metadata": {"labels": {"tier": "x", "app": "web"}}});
        assert_eq!(pod_template_hash(&a, None), pod_template_hash(&b, None));
        assert_ne!(pod_template_hash(&a, None), pod_template_hash(&a, Some(1)));
        let h = pod_template_hash(&a, None);
        assert!(h.len() <= 10 && h.chars().all(|c| "456789bcdf".contains(c)));
    }
}
