//! What the tests on the real node (the `node` target's modules, CI's third stage) share: whether a node and
//! Vigil's image are there, Helm bound to the node, an HTTP probe from the host, and what the
//! host's /proc says about a container's process (its uid, its root mount, its connections).
//!
//! A node comes from `../shared/kube/node-up.sh` (which exports `KUBE_NODE_NAME`,
//! `VIGIL_TEST_KUBECONFIG` and `KUBE_NODE_IMAGE_WEB`); Vigil's image from `.ci/image`, loaded with
//! `node-load-image.sh` (`VIGIL_TEST_IMAGE` names it). Without them the tests print a note and pass.

// Not every part is used by every test.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The real node and the image under test.
pub struct Node {
    /// Vigil's image as loaded into the node (`localhost/vigil:0.1.0`).
    pub image: String,
    /// The node's web server image (busybox httpd: `/` answers `pod=<name> ...`).
    pub web_image: String,
    /// The node's admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The node is this test's alone while it holds it (see [`NODE`]).
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// One test on the node at a time. The tests install the chart (cluster-wide CRDs and RBAC, the
/// image's pods on the one kubelet) and measure what clients see, so two at once would meet and
/// disturb each other's figures; they ran one after the other when each was a test binary of its
/// own.
static NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The node, or None with a note saying what is missing (the test then passes without running).
pub fn node(test: &str) -> Option<Node> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if var("KUBE_NODE_NAME").is_none() {
        eprintln!(
            "skipped {test}: no real node (run ../shared/kube/node-up.sh and eval its exports)"
        );
        return None;
    }
    let Some(image) = var("VIGIL_TEST_IMAGE") else {
        eprintln!(
            "skipped {test}: no VIGIL_TEST_IMAGE (build it with `.ci/image`, load it with node-load-image.sh)"
        );
        return None;
    };
    let (Some(web_image), Some(kubeconfig)) =
        (var("KUBE_NODE_IMAGE_WEB"), var("VIGIL_TEST_KUBECONFIG"))
    else {
        eprintln!("skipped {test}: KUBE_NODE_IMAGE_WEB or VIGIL_TEST_KUBECONFIG unset");
        return None;
    };
    // A test that failed while holding the node poisons the lock; the next one may still run.
    let alone = NODE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(Node {
        image,
        web_image,
        kubeconfig: PathBuf::from(kubeconfig),
        _alone: alone,
    })
}

/// `repository` and `tag` of an image reference (`localhost/vigil:0.1.0`).
pub fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository, tag),
        _ => (image, ""),
    }
}

/// GET `http://addr/` from the host with a 1 s bound on connecting and on the answer: the body,
/// or None on any failure (refused, reset, timed out, not a 200).
pub async fn http_get(addr: SocketAddrV4) -> Option<String> {
    http_get_path(addr, "/").await
}

/// GET `http://addr{path}`, as [`http_get`].
pub async fn http_get_path(addr: SocketAddrV4, path: &str) -> Option<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n")?;
        let status = head.lines().next()?.split_whitespace().nth(1)?;
        (status == "200").then(|| body.trim().to_owned())
    };
    tokio::time::timeout(Duration::from_secs(1), exchange)
        .await
        .ok()
        .flatten()
}

/// What the host's /proc says about a container's main process.
#[derive(Debug)]
pub struct ContainerProcess {
    pub pid: u32,
    /// Real, effective, saved and filesystem uids (`Uid:` of /proc/PID/status).
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
    /// The mount options of the process's `/` (from its mountinfo).
    pub root_mount_options: String,
    /// The process's environment.
    pub env: BTreeMap<String, String>,
    /// Remote ends of its established TCP connections (its network namespace's /proc/PID/net/tcp).
    pub peers: Vec<SocketAddrV4>,
}

/// The process running `program` whose environment says `POD_NAME=pod`, if any (needs root to
/// read other users' /proc entries; the node needs root anyway).
pub fn container_process(program: &str, pod: &str) -> Option<ContainerProcess> {
    let wanted = format!("POD_NAME={pod}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).next() != Some(program.as_bytes()) {
            continue;
        }
        let Ok(environ) = std::fs::read(dir.join("environ")) else {
            continue;
        };
        let env: BTreeMap<String, String> = environ
            .split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect();
        if !environ.split(|b| *b == 0).any(|kv| kv == wanted.as_bytes()) {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let ids = |key: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|rest| {
                    rest.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mountinfo = std::fs::read_to_string(dir.join("mountinfo")).ok()?;
        // Fields: id parent major:minor root mount-point options ...
        // The last mount on `/` is the one the process sees.
        let root_mount_options = mountinfo
            .lines()
            .rev()
            .find_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (fields.get(4) == Some(&"/")).then(|| fields.get(5).copied().unwrap_or_default())
            })
            .unwrap_or_default()
            .to_owned();
        let tcp = std::fs::read_to_string(dir.join("net/tcp")).unwrap_or_default();
        return Some(ContainerProcess {
            pid,
            uids: ids("Uid:"),
            gids: ids("Gid:"),
            root_mount_options,
            env,
            peers: established_peers(&tcp),
        });
    }
    None
}

/// Remote addresses of the ESTABLISHED (state 01) connections in a /proc/net/tcp table.
fn established_peers(table: &str) -> Vec<SocketAddrV4> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) != Some(&"01") {
                return None;
            }
            let (ip, port) = fields.get(2)?.split_once(':')?;
            // The address is the in-memory (little-endian) u32, in hex.
            let ip = u32::from_str_radix(ip, 16).ok()?;
            let port = u16::from_str_radix(port, 16).ok()?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip.swap_bytes()), port))
        })
        .collect()
}

#[test]
fn proc_net_tcp_addresses_are_read_as_the_kernel_writes_them() {
    let table = "  sl  local_address rem_address   st\n   0: 0100007F:1F90 0161610A:01BB 01 0\n   1: 0100007F:1F90 00000000:0000 0A 0\n";
    assert_eq!(
        established_peers(table),
        [SocketAddrV4::new(Ipv4Addr::new(10, 97, 97, 1), 443)]
    );
}

/// The pods of `namespace` and its recent Events, for a failure message: what the kubelet made
/// of them (phase, conditions, container states) and what it said.
pub async fn diagnose(client: &kube::Client, namespace: &str) -> String {
    use k8s_openapi::api::core::v1::{Event, Pod};
    use kube::api::{Api, ListParams};
    let mut out = String::new();
    if let Ok(pods) = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        for pod in pods.items {
            let name = pod.metadata.name.unwrap_or_default();
            let status = serde_json::to_string(&pod.status).unwrap_or_default();
            out.push_str(&format!("pod {name}: {status}\n"));
        }
    }
    if let Ok(events) = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        for event in events.items {
            out.push_str(&format!(
                "event {} {}: {} {}\n",
                event.involved_object.name.unwrap_or_default(),
                event.type_.unwrap_or_default(),
                event.reason.unwrap_or_default(),
                event.message.unwrap_or_default()
            ));
        }
    }
    out
}

/// The logs of a pod's container, for a failure message (empty when they cannot be read).
pub async fn logs(client: &kube::Client, namespace: &str, pod: &str) -> String {
    use k8s_openapi::api::core::v1::Pod;
    kube::Api::<Pod>::namespaced(client.clone(), namespace)
        .logs(pod, &kube::api::LogParams::default())
        .await
        .unwrap_or_else(|e| format!("(no logs: {e})"))
}
