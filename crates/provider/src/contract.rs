//! The contract every [`ClusterProvider`] keeps, as checks any provider's tests can run: written
//! once against `&dyn ClusterProvider`, run against each provider Vigil ships (and usable by a
//! team writing its own).
//!
//! Each check returns `Err` with what broke instead of panicking, so it can live in the library
//! and a test decides how to fail. Checks poll with [`ContractTiming`]: nothing in the contract
//! blocks, so "eventually Running" is a deadline, not a single call.

use std::time::Duration;

use crate::{
    Addon, AddonState, ClusterIdentity, ClusterProvider, ClusterRequest, ClusterState, Deletion,
    ProviderCluster, ProviderError,
};

/// How long the checks wait for long operations, and how often they ask.
#[derive(Debug, Clone, Copy)]
pub struct ContractTiming {
    /// The most any one operation (provisioning, upgrade, addon install, delete) may take.
    pub deadline: Duration,
    /// Between two polls.
    pub poll: Duration,
}

impl Default for ContractTiming {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(20),
            poll: Duration::from_millis(50),
        }
    }
}

/// What the checks need from a provider's test beyond the trait: making it refuse deletes.
pub trait ContractHooks: Send + Sync {
    /// From now on, deletes of cluster `id` are refused.
    fn refuse_deletes(&self, id: &str);
    /// Deletes of cluster `id` are allowed again.
    fn allow_deletes(&self, id: &str);
}

pub type ContractResult<T = ()> = Result<T, String>;

/// A create request with the shape a KubernetesCluster makes.
pub fn request(
    uuid: &str,
    name: &str,
    kube_version: &str,
    addons: &[(&str, &str)],
) -> ClusterRequest {
    ClusterRequest {
        identity: ClusterIdentity {
            uuid: uuid.to_owned(),
            name: name.to_owned(),
        },
        type_: "iks".into(),
        env: "test".into(),
        kube_version: kube_version.to_owned(),
        os_version: "UBUNTU_20_64".into(),
        product_name: "Contract tests".into(),
        product_short_name: "ct".into(),
        addons: addons_of(addons),
        labels: Default::default(),
    }
}

/// `[("coredns", "1.11.3")]` → addons.
pub fn addons_of(addons: &[(&str, &str)]) -> Vec<Addon> {
    addons
        .iter()
        .map(|(name, version)| Addon {
            name: (*name).to_owned(),
            version: (*version).to_owned(),
        })
        .collect()
}

/// Polls `get` until `done` holds; `Unavailable` answers are retried until the deadline.
pub async fn wait_for(
    provider: &dyn ClusterProvider,
    id: &str,
    timing: ContractTiming,
    what: &str,
    done: impl Fn(&ProviderCluster) -> bool,
) -> ContractResult<ProviderCluster> {
    let deadline = tokio::time::Instant::now() + timing.deadline;
    let mut last;
    loop {
        match provider.get(id).await {
            Ok(Some(cluster)) if done(&cluster) => return Ok(cluster),
            Ok(Some(cluster)) => last = format!("{cluster:?}"),
            Ok(None) => last = "gone".into(),
            Err(e @ ProviderError::Unavailable(_)) => last = e.to_string(),
            Err(e) => return Err(format!("waiting for {what} of {id}: {e}")),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{id} not {what} within {:?}; last: {last}",
                timing.deadline
            ));
        }
        tokio::time::sleep(timing.poll).await;
    }
}

/// Calls `delete` until `Gone`.
pub async fn delete_until_gone(
    provider: &dyn ClusterProvider,
    id: &str,
    timing: ContractTiming,
) -> ContractResult {
    let deadline = tokio::time::Instant::now() + timing.deadline;
    loop {
        match provider.delete(id).await {
            Ok(Deletion::Gone) => return Ok(()),
            Ok(Deletion::InProgress(_)) | Err(ProviderError::Unavailable(_)) => {}
            Err(e) => return Err(format!("deleting {id}: {e}")),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("{id} not gone within {:?}", timing.deadline));
        }
        tokio::time::sleep(timing.poll).await;
    }
}

fn running(c: &ProviderCluster) -> bool {
    c.state == ClusterState::Running
}

/// Whether `master` (what the server reports) is the requested `kube` version: `1.28` is met by
/// any `1.28.x`, `1.28.3` only by `1.28.3`.
pub fn version_matches(kube: &str, master: &str) -> bool {
    let (Some(want), Some(have)) = (crate::parse_version(kube), crate::parse_version(master))
    else {
        return false;
    };
    let patch_given = kube.trim_start_matches('v').split('.').count() == 3;
    want.0 == have.0 && want.1 == have.1 && (!patch_given || want.2 == have.2)
}

fn ensure(condition: bool, what: impl FnOnce() -> String) -> ContractResult {
    if condition { Ok(()) } else { Err(what()) }
}

fn expect_rejected<T: std::fmt::Debug>(
    result: Result<T, ProviderError>,
    reason: &str,
    call: &str,
) -> ContractResult<String> {
    match result {
        Err(ProviderError::Rejected {
            reason: got,
            message,
        }) if got == reason => Ok(message),
        other => Err(format!("{call}: expected Rejected {reason}, got {other:?}")),
    }
}

/// Create → Provisioning (or already Running) → Running with a URL and the master version; a
/// second create and `find` return the same cluster. Returns it, Running.
pub async fn create_and_find(
    provider: &dyn ClusterProvider,
    request: &ClusterRequest,
    timing: ContractTiming,
) -> ContractResult<ProviderCluster> {
    let created = provider
        .create(request)
        .await
        .map_err(|e| format!("create: {e}"))?;
    ensure(
        matches!(
            created.state,
            ClusterState::Provisioning | ClusterState::Running
        ),
        || format!("a new cluster is {:?}", created.state),
    )?;
    ensure(created.identity == request.identity, || {
        format!("create answered identity {}", created.identity)
    })?;
    let again = provider
        .create(request)
        .await
        .map_err(|e| format!("second create: {e}"))?;
    ensure(again.id == created.id, || {
        format!("a second create made {} besides {}", again.id, created.id)
    })?;
    let found = provider
        .find(&request.identity)
        .await
        .map_err(|e| format!("find: {e}"))?;
    ensure(found.as_ref().map(|c| &c.id) == Some(&created.id), || {
        format!("find returned {found:?}, not {}", created.id)
    })?;
    let cluster = wait_for(provider, &created.id, timing, "Running", running).await?;
    ensure(cluster.api_server_url.is_some(), || {
        "a Running cluster has no apiServerURL".into()
    })?;
    let master = cluster.master_version.clone().unwrap_or_default();
    ensure(version_matches(&request.kube_version, &master), || {
        format!(
            "asked for {}, the server reports {master:?}",
            request.kube_version
        )
    })?;
    ensure(cluster.kubeconfig.is_some(), || {
        "a Running cluster has no kubeconfig".into()
    })?;
    let other = ClusterIdentity {
        uuid: request.identity.uuid.clone(),
        name: format!("{}-nobody", request.identity.name),
    };
    let nobody = provider
        .find(&other)
        .await
        .map_err(|e| format!("find: {e}"))?;
    ensure(nobody.is_none(), || {
        format!("find of an identity never created returned {nobody:?}")
    })?;
    Ok(cluster)
}

/// Upgrading forward reaches Running on the new version; a downgrade is `DowngradeRefused`.
pub async fn upgrade_forward_only(
    provider: &dyn ClusterProvider,
    id: &str,
    to: &str,
    timing: ContractTiming,
) -> ContractResult<ProviderCluster> {
    let started = provider
        .upgrade(id, to)
        .await
        .map_err(|e| format!("upgrade to {to}: {e}"))?;
    ensure(started.kube_version == to, || {
        format!("upgrade answered kubeVersion {}", started.kube_version)
    })?;
    let cluster = wait_for(provider, id, timing, "Running the new version", |c| {
        running(c)
            && c.master_version
                .as_deref()
                .is_some_and(|m| version_matches(to, m))
    })
    .await?;
    expect_rejected(
        provider.upgrade(id, "1.20").await,
        "DowngradeRefused",
        "downgrade to 1.20",
    )?;
    match provider.upgrade("c-does-not-exist", to).await {
        Err(ProviderError::NotFound(_)) => Ok(cluster),
        other => Err(format!("upgrade of a missing cluster: {other:?}")),
    }
}

/// Unknown addons are `UnknownAddon` (naming the addon); a wanted set converges (installed at the
/// asked versions — or, with no nodes, applied and reported as unable to run — the rest removed).
pub async fn addons_converge(
    provider: &dyn ClusterProvider,
    id: &str,
    timing: ContractTiming,
    nodes: Nodes,
) -> ContractResult {
    let message = expect_rejected(
        provider
            .set_addons(id, &addons_of(&[("no-such-addon", "1.0.0")]))
            .await,
        "UnknownAddon",
        "set_addons with an unknown addon",
    )?;
    ensure(message.contains("no-such-addon"), || {
        format!("the rejection does not name the addon: {message}")
    })?;
    let first = addons_of(&[("metrics-server", "0.7.2"), ("cert-manager", "1.16.1")]);
    converge(provider, id, &first, timing, nodes).await?;
    let second = addons_of(&[("metrics-server", "0.7.3"), ("coredns", "1.11.3")]);
    converge(provider, id, &second, timing, nodes).await
}

/// Whether the provider's clusters have nodes to run addons on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nodes {
    /// Addons run: each must end `Installed`.
    Present,
    /// A control plane alone (`hosted`): addons are applied but cannot run, so each must end
    /// `Failed` with the reason `NoWorkerNodes` — never `Installed`.
    None,
}

/// Whether an addon reached the state the contract expects of it.
fn settled(addon: &crate::AddonStatus, nodes: Nodes) -> bool {
    match nodes {
        Nodes::Present => addon.state == AddonState::Installed,
        Nodes::None => {
            addon.state == AddonState::Failed
                && addon
                    .message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("NoWorkerNodes"))
        }
    }
}

async fn converge(
    provider: &dyn ClusterProvider,
    id: &str,
    wanted: &[Addon],
    timing: ContractTiming,
    nodes: Nodes,
) -> ContractResult {
    provider
        .set_addons(id, wanted)
        .await
        .map_err(|e| format!("set_addons {wanted:?}: {e}"))?;
    wait_for(
        provider,
        id,
        timing,
        "running exactly the wanted addons",
        |c| {
            c.addons.len() == wanted.len()
                && wanted.iter().all(|w| {
                    c.addons
                        .iter()
                        .any(|a| a.name == w.name && a.version == w.version && settled(a, nodes))
                })
        },
    )
    .await
    .map(|_| ())
}

/// A refused delete is `DeleteRefused` and the cluster stays; allowed again, delete reaches
/// `Gone`, the cluster cannot be found, and deleting again is still `Gone`.
pub async fn delete_refused_then_gone(
    provider: &dyn ClusterProvider,
    hooks: &dyn ContractHooks,
    cluster: &ProviderCluster,
    timing: ContractTiming,
) -> ContractResult {
    hooks.refuse_deletes(&cluster.id);
    let refused = provider.delete(&cluster.id).await;
    hooks.allow_deletes(&cluster.id);
    let message = expect_rejected(refused, "DeleteRefused", "a refused delete")?;
    ensure(!message.is_empty(), || "the refusal says nothing".into())?;
    let still = provider
        .get(&cluster.id)
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure(still.is_some(), || {
        "the cluster is gone although its delete was refused".into()
    })?;
    delete_until_gone(provider, &cluster.id, timing).await?;
    let gone = provider
        .get(&cluster.id)
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure(gone.is_none(), || format!("get after delete: {gone:?}"))?;
    let found = provider
        .find(&cluster.identity)
        .await
        .map_err(|e| format!("find: {e}"))?;
    ensure(found.is_none(), || format!("find after delete: {found:?}"))?;
    match provider.delete(&cluster.id).await {
        Ok(Deletion::Gone) => Ok(()),
        other => Err(format!("deleting a deleted cluster: {other:?}")),
    }
}

/// Creates with an unknown addon or an unparsable version are rejected and make nothing.
pub async fn bad_creates_are_rejected(
    provider: &dyn ClusterProvider,
    uuid: &str,
) -> ContractResult {
    let unknown = request(uuid, "bad-addon", "1.30", &[("no-such-addon", "1")]);
    expect_rejected(
        provider.create(&unknown).await,
        "UnknownAddon",
        "create with an unknown addon",
    )?;
    let version = request(uuid, "bad-version", "latest", &[]);
    expect_rejected(
        provider.create(&version).await,
        "UnsupportedVersion",
        "create with kubeVersion latest",
    )?;
    for r in [&unknown, &version] {
        let found = provider
            .find(&r.identity)
            .await
            .map_err(|e| format!("find: {e}"))?;
        ensure(found.is_none(), || {
            format!("a rejected create left a cluster: {found:?}")
        })?;
    }
    Ok(())
}

/// The whole contract on one cluster of identity `uuid`/`name`, created at `from` and upgraded
/// to `to`; deletes it at the end (also when a check fails, as far as the provider lets it).
pub async fn run_all(
    provider: &dyn ClusterProvider,
    hooks: &dyn ContractHooks,
    uuid: &str,
    name: &str,
    versions: (&str, &str),
    timing: ContractTiming,
) -> ContractResult {
    run_all_with(
        provider,
        hooks,
        uuid,
        name,
        versions,
        timing,
        Nodes::Present,
    )
    .await
}

/// [`run_all`] for a provider whose clusters may have no nodes to run addons on.
pub async fn run_all_with(
    provider: &dyn ClusterProvider,
    hooks: &dyn ContractHooks,
    uuid: &str,
    name: &str,
    (from, to): (&str, &str),
    timing: ContractTiming,
    nodes: Nodes,
) -> ContractResult {
    bad_creates_are_rejected(provider, uuid).await?;
    let request = request(uuid, name, from, &[("coredns", "1.11.3")]);
    let cluster = create_and_find(provider, &request, timing).await?;
    let checks = async {
        upgrade_forward_only(provider, &cluster.id, to, timing).await?;
        addons_converge(provider, &cluster.id, timing, nodes).await?;
        delete_refused_then_gone(provider, hooks, &cluster, timing).await
    };
    let outcome = checks.await;
    if outcome.is_err() {
        let _ = delete_until_gone(provider, &cluster.id, timing).await;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minor_version_is_met_by_any_patch_and_a_patch_only_by_itself() {
        assert!(version_matches("1.28", "1.28.5"));
        assert!(version_matches("1.28.3", "1.28.3"));
        assert!(!version_matches("1.28.3", "1.28.0"));
        assert!(!version_matches("1.29", "1.28.0"));
        assert!(!version_matches("1.29", "garbage"));
    }
}
