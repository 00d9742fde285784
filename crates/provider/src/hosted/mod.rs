//! The `hosted` provider: each cluster is an upstream control plane — etcd, kube-apiserver and
//! kube-controller-manager — running as pods of the management cluster (the one Vigil runs
//! in), in the KubernetesCluster's namespace, as Kamaji and k0smotron run theirs.
//!
//! Everything it knows is in the management cluster's objects, all labelled
//! `vigil.dev/cluster: <name>`: a record (ConfigMap `<name>-control-plane`: the identity, the
//! version and addons asked for), the PKI in Secrets, the Services, the workloads. Any replica of
//! Vigil, or one restarted between two steps, finds the same cluster there: the record is
//! created with a plain create (a second one fails), and every other object by server-side
//! apply of a manifest that depends only on the record and the Services' addresses, so a step
//! repeated makes nothing twice. An object whose `vigil.dev/applied-hash` matches its manifest
//! is not written at all: a settled cluster costs reads only.
//!
//! Nothing blocks: `create`, `upgrade` and `set_addons` record what is asked and make one
//! step; every `get` makes the next (apply what differs, step an upgrade, read how the
//! workloads are doing, ask the API server its version) and reports. Layout: `config.rs` (the
//! catalog and settings), `names.rs` (names, labels, ids), `pki.rs` (certificates),
//! `secrets.rs` (which certificates each Secret holds, renewed when needed), `manifests.rs`
//! (the objects), `decide.rs` (versions to run, state to report), `store.rs` (the reads and
//! writes), this file (the provider's calls).

pub mod config;
pub mod decide;
pub mod manifests;
pub mod names;
pub mod pki;
pub mod secrets;
pub mod store;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt as _;

pub use config::{Exposure, HostedConfig, VersionImages};
use decide::{Deployed, Found};

use manifests::{API_SERVER_SERVICE_PORT, Addresses, url_host};
use names::{Names, UUID_LABEL};
use secrets::{Endpoint, Files};
use store::{Live, Store, unavailable};

use crate::{
    Addon, AddonState, AddonStatus, ClusterIdentity, ClusterProvider, ClusterRequest, ClusterState,
    Deletion, ProviderCluster, ProviderError, ProviderResult, catalog,
};

/// The record's keys.
mod record {
    pub const UUID: &str = "uuid";
    pub const KUBE_VERSION: &str = "kubeVersion";
    pub const ADDONS: &str = "addons";
    pub const TYPE: &str = "type";
    pub const ENV: &str = "env";
    pub const OS_VERSION: &str = "osVersion";
    pub const PRODUCT: &str = "product";
    pub const DELETING: &str = "deleting";
}

/// The `hosted` provider.
pub struct HostedProvider {
    store: Store,
    config: HostedConfig,
    /// One operation at a time per cluster within this process (the controller already
    /// serialises per object; this guards direct callers and tests).
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Clients of the hosted API servers, by id, with the kubeconfig they were made from.
    clients: Mutex<HashMap<String, (String, kube::Client)>>,
}

impl std::fmt::Debug for HostedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedProvider")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn rejected(reason: &str, message: String) -> ProviderError {
    ProviderError::Rejected {
        reason: reason.to_owned(),
        message,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A Secret's data as text files (certificates, keys and kubeconfigs are all text).
fn files_of(secret: &Secret) -> Files {
    secret
        .data
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
        .collect()
}

fn cluster_ip(service: Option<&Service>) -> Option<IpAddr> {
    service?.spec.as_ref()?.cluster_ip.as_deref()?.parse().ok()
}

impl HostedProvider {
    /// Checks the settings; touches nothing.
    pub fn new(client: kube::Client, config: HostedConfig) -> Result<Self, String> {
        config.check()?;
        Ok(Self {
            store: Store::new(client),
            config,
            locks: Mutex::default(),
            clients: Mutex::default(),
        })
    }

    pub fn config(&self) -> &HostedConfig {
        &self.config
    }

    async fn hold(&self, id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let mutex = lock(&self.locks).entry(id.to_owned()).or_default().clone();
        mutex.lock_owned().await
    }

    /// One step of the cluster whose record is `record`, and the report.
    async fn step(&self, names: &Names, record: &ConfigMap) -> ProviderResult<ProviderCluster> {
        let data = record.data.clone().unwrap_or_default();
        let get = |key: &str| data.get(key).cloned().unwrap_or_default();
        let target = get(record::KUBE_VERSION);
        let wanted_addons: Vec<Addon> =
            serde_json::from_str(&get(record::ADDONS)).unwrap_or_default();
        let mut report = ProviderCluster {
            id: names.id(),
            identity: ClusterIdentity {
                uuid: get(record::UUID),
                name: names.cluster.clone(),
            },
            state: ClusterState::Provisioning,
            progress: None,
            kube_version: target.clone(),
            master_version: None,
            api_server_url: None,
            addons: Vec::new(),
            kubeconfig: None,
            message: None,
            type_: get(record::TYPE),
            env: get(record::ENV),
            os_version: get(record::OS_VERSION),
        };
        let live = self.store.live(names).await?;
        if data.contains_key(record::DELETING) {
            report.state = ClusterState::Deleting;
            report.progress = Some(format!("waiting for {}", live.remaining()));
            return Ok(report);
        }

        // The Services first: their addresses go into certificates and flags.
        let mut services = BTreeMap::new();
        for desired in [
            manifests::etcd_service(names),
            manifests::etcd_peer_service(names),
            manifests::api_server_service(names, &self.config),
        ] {
            let name = desired["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let current = live.service(&name);
            let service = match self
                .store
                .ensure::<Service>(names, current, desired)
                .await?
            {
                Some(applied) => Some(applied),
                None => current.cloned(),
            };
            services.insert(name, service);
        }
        let api_service = services.get(&names.api_server()).cloned().flatten();
        let (Some(etcd_ip), Some(api_ip)) = (
            cluster_ip(services.get(&names.etcd()).and_then(Option::as_ref)),
            cluster_ip(api_service.as_ref()),
        ) else {
            report.progress = Some("waiting for the Services' addresses".into());
            return Ok(report);
        };
        let addresses = Addresses {
            etcd: etcd_ip,
            api_server: api_ip,
        };
        let (endpoint, url, waiting_for_address) =
            self.endpoint(&addresses, api_service.as_ref()).await?;

        // The PKI: kept, completed or renewed.
        let current: BTreeMap<String, Files> = live
            .secrets
            .iter()
            .map(|s| (s.name_any(), files_of(s)))
            .collect();
        let planned = secrets::plan(
            names,
            &self.config,
            &addresses,
            &endpoint,
            &current,
            SystemTime::now(),
        )
        .map_err(|e| unavailable("making the certificates", e))?;
        for (name, (component, files)) in &planned.secrets {
            if current.get(name) == Some(files) {
                continue;
            }
            let desired = manifests::secret(names, name, component, files);
            self.store.ensure::<Secret>(names, None, desired).await?;
        }

        // The workloads, at the versions this step runs.
        let etcd = manifests::etcd(names, &self.config, &addresses);
        let etcd_live = live.stateful_set(&names.etcd());
        let etcd_now = self
            .store
            .ensure::<StatefulSet>(names, etcd_live, etcd)
            .await?;
        let api_live = live.deployment(&names.api_server());
        let kcm_live = live.deployment(&names.controller_manager());
        let versions = match decide::versions(
            &self.config,
            &target,
            api_live.and_then(|d| Deployed::among(d, &live.pods, names::API_SERVER)),
            kcm_live.and_then(|d| Deployed::among(d, &live.pods, names::CONTROLLER_MANAGER)),
        ) {
            Ok(versions) => versions,
            Err(ProviderError::Rejected { message, .. }) => {
                report.state = ClusterState::Failed;
                report.message = Some(message);
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        let api = manifests::api_server(names, &self.config, &addresses, versions.api_server);
        let api_now = self
            .store
            .ensure::<Deployment>(names, api_live, api)
            .await?;
        let budget = manifests::api_server_budget(names);
        let budget_live = live
            .budgets
            .iter()
            .find(|b| b.name_any() == names.api_server());
        self.store
            .ensure::<PodDisruptionBudget>(names, budget_live, budget)
            .await?;
        let kcm = manifests::controller_manager(names, &self.config, versions.controller_manager);
        let kcm_now = self
            .store
            .ensure::<Deployment>(names, kcm_live, kcm)
            .await?;

        // How it is doing: the workloads, then the API server itself.
        let admin = planned
            .secrets
            .get(&names.admin())
            .map(|(_, files)| files.clone())
            .unwrap_or_default();
        let kubeconfig = secrets::admin_kubeconfig(&names.cluster, &url, &admin);
        let client = match &kubeconfig {
            Some(k) => self.client(&names.id(), k).await.ok(),
            None => None,
        };
        let master = match &client {
            Some(client) => master_version(client).await,
            None => None,
        };
        let api_server = api_now.as_ref().or(api_live);
        let controller_manager = kcm_now.as_ref().or(kcm_live);
        let lingering = [
            (api_server, names::API_SERVER),
            (controller_manager, names::CONTROLLER_MANAGER),
        ]
        .into_iter()
        .map(|(deployment, component)| {
            let image = deployment.and_then(decide::image_of).unwrap_or_default();
            decide::lingering(&live.pods, component, image)
        })
        .sum();
        let found = Found {
            etcd: etcd_now.as_ref().or(etcd_live),
            api_server,
            controller_manager,
            pods: &live.pods,
            claims: &live.claims,
            lingering,
        };
        let health = decide::state(
            &target,
            found,
            master.as_deref(),
            waiting_for_address.as_deref(),
        );
        report.state = health.state;
        report.progress = health.progress;
        report.message = health.message;
        report.master_version = master.clone();
        if master.is_some() {
            report.api_server_url = Some(url);
            report.kubeconfig = kubeconfig;
        }
        report.addons = match (&client, master.is_some()) {
            (Some(client), true) => self.addons(client, &wanted_addons).await,
            _ => pending_addons(&wanted_addons, "waiting for the API server"),
        };
        Ok(report)
    }

    /// Where clients reach the API server: the extra addresses for its certificate, its URL,
    /// and what the address still waits for (a load balancer's).
    async fn endpoint(
        &self,
        addresses: &Addresses,
        service: Option<&Service>,
    ) -> ProviderResult<(Endpoint, String, Option<String>)> {
        let cluster_url = format!(
            "https://{}:{API_SERVER_SERVICE_PORT}",
            url_host(addresses.api_server)
        );
        match self.config.exposure {
            Exposure::ClusterIp => Ok((Endpoint::default(), cluster_url, None)),
            Exposure::NodePort => {
                let port =
                    service.and_then(|s| s.spec.as_ref()?.ports.as_ref()?.first()?.node_port);
                let nodes = self.store.node_addresses().await?;
                match (port, nodes.first()) {
                    (Some(port), Some(node)) => Ok((
                        Endpoint {
                            ips: nodes.clone(),
                            dns_names: Vec::new(),
                        },
                        format!("https://{}:{port}", url_host(*node)),
                        None,
                    )),
                    _ => Ok((
                        Endpoint::default(),
                        cluster_url,
                        Some("waiting for the Service's node port and a node address".into()),
                    )),
                }
            }
            Exposure::LoadBalancer => {
                let ingress = service.and_then(|s| {
                    s.status
                        .as_ref()?
                        .load_balancer
                        .as_ref()?
                        .ingress
                        .as_ref()?
                        .first()
                        .cloned()
                });
                let ip = ingress
                    .as_ref()
                    .and_then(|i| i.ip.as_deref()?.parse::<IpAddr>().ok());
                let host = ingress.as_ref().and_then(|i| i.hostname.clone());
                match (ip, host) {
                    (Some(ip), _) => Ok((
                        Endpoint {
                            ips: vec![ip],
                            dns_names: Vec::new(),
                        },
                        format!("https://{}:{API_SERVER_SERVICE_PORT}", url_host(ip)),
                        None,
                    )),
                    (None, Some(host)) => Ok((
                        Endpoint {
                            ips: Vec::new(),
                            dns_names: vec![host.clone()],
                        },
                        format!("https://{host}:{API_SERVER_SERVICE_PORT}"),
                        None,
                    )),
                    (None, None) => Ok((
                        Endpoint::default(),
                        cluster_url,
                        Some("waiting for the load balancer's address".into()),
                    )),
                }
            }
        }
    }

    /// A client of the hosted API server (made again when the kubeconfig changes).
    async fn client(&self, id: &str, kubeconfig: &str) -> ProviderResult<kube::Client> {
        if let Some((made_from, client)) = lock(&self.clients).get(id)
            && made_from == kubeconfig
        {
            return Ok(client.clone());
        }
        let mut config = crate::kubeconfig::client_config(kubeconfig)
            .await
            .map_err(|e| unavailable("the admin kubeconfig", e))?;
        config.connect_timeout = Some(self.config.probe_timeout);
        config.read_timeout = Some(self.config.probe_timeout);
        config.write_timeout = Some(self.config.probe_timeout);
        let client = kube::Client::try_from(config).map_err(|e| unavailable("a client", e))?;
        lock(&self.clients).insert(id.to_owned(), (kubeconfig.to_owned(), client.clone()));
        Ok(client)
    }

    /// Converges the addons in the hosted cluster: each one a Deployment there, as the local
    /// provider makes them. A hosted cluster has no nodes of its own, so an addon's pods run
    /// only once worker nodes join: until then it is reported `Failed` with that reason (never
    /// `Installed`, and not `Installing` either, which would have the controller ask every few
    /// seconds for as long as no node joins); its Deployment is in place, and the next look
    /// after nodes join finds it installing, then installed.
    async fn addons(&self, client: &kube::Client, wanted: &[Addon]) -> Vec<AddonStatus> {
        let converged = match crate::addons::converge(client, wanted).await {
            Ok(converged) => converged.addons,
            Err(e) => return pending_addons(wanted, &format!("listing addons: {e}")),
        };
        let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
            .list(&kube::api::ListParams::default().limit(1))
            .await
            .map(|l| l.items.len());
        converged
            .into_iter()
            .map(|mut addon| {
                // Installing, or failed past its progress deadline: with no node, no pod.
                let waiting = matches!(addon.state, AddonState::Installing | AddonState::Failed);
                if waiting && nodes.as_ref().is_ok_and(|n| *n == 0) {
                    addon.state = AddonState::Failed;
                    // A fixed text: the rollout's own words change between the pass that
                    // applied the Deployment and the next, and a status that changes is a
                    // write at rest.
                    addon.message = Some(NO_WORKER_NODES.to_owned());
                }
                addon
            })
            .collect()
    }

    /// Merges `data` (if any) into the record of `id`, then makes a step from it.
    async fn record_and_step(
        &self,
        id: &str,
        names: &Names,
        data: &BTreeMap<String, String>,
    ) -> ProviderResult<ProviderCluster> {
        if !data.is_empty() {
            self.store.update_record(names, data).await?;
        }
        let record = self
            .store
            .record(names)
            .await?
            .ok_or_else(|| ProviderError::NotFound(id.to_owned()))?;
        self.step(names, &record).await
    }

    /// The record of an id, if the cluster exists.
    async fn record_of(&self, id: &str) -> ProviderResult<Option<(Names, ConfigMap)>> {
        let Some(names) = Names::from_id(id) else {
            return Ok(None);
        };
        Ok(self.store.record(&names).await?.map(|r| (names, r)))
    }
}

/// The version the API server reports, asked twice: a replica that stops closes its idle
/// connections, and a request sent on one at that moment fails though the Service serves.
async fn master_version(client: &kube::Client) -> Option<String> {
    let version = match client.apiserver_version().await {
        Ok(version) => version,
        Err(_) => client.apiserver_version().await.ok()?,
    };
    let git = version.git_version;
    Some(git.strip_prefix('v').unwrap_or(&git).to_owned())
}

/// Why an addon of a hosted cluster does not run.
const NO_WORKER_NODES: &str = "NoWorkerNodes: the hosted cluster has no worker nodes, so the \
     addon's pods cannot run; its Deployment is applied and starts when nodes join";

fn pending_addons(wanted: &[Addon], why: &str) -> Vec<AddonStatus> {
    wanted
        .iter()
        .map(|a| AddonStatus {
            name: a.name.clone(),
            version: a.version.clone(),
            state: AddonState::Installing,
            message: Some(why.to_owned()),
        })
        .collect()
}

/// The record's data for a request.
fn record_data(request: &ClusterRequest) -> BTreeMap<String, String> {
    BTreeMap::from([
        (record::UUID.to_owned(), request.identity.uuid.clone()),
        (
            record::KUBE_VERSION.to_owned(),
            request.kube_version.clone(),
        ),
        (
            record::ADDONS.to_owned(),
            serde_json::to_string(&request.addons).unwrap_or_else(|_| "[]".into()),
        ),
        (record::TYPE.to_owned(), request.type_.clone()),
        (record::ENV.to_owned(), request.env.clone()),
        (record::OS_VERSION.to_owned(), request.os_version.clone()),
        (record::PRODUCT.to_owned(), request.product_name.clone()),
    ])
}

#[async_trait::async_trait]
impl ClusterProvider for HostedProvider {
    async fn find(&self, identity: &ClusterIdentity) -> ProviderResult<Option<ProviderCluster>> {
        if names::check_name(&identity.name).is_err() || names::check_uuid(&identity.uuid).is_err()
        {
            return Ok(None);
        }
        let records = self
            .store
            .records(
                &names::record_selector(identity),
                self.config.namespaces.as_deref(),
            )
            .await?;
        let Some(record) = records.into_iter().min_by_key(|r| r.namespace()) else {
            return Ok(None);
        };
        let names = Names::new(&record.namespace().unwrap_or_default(), &identity.name);
        let _held = self.hold(&names.id()).await;
        self.step(&names, &record).await.map(Some)
    }

    async fn create(&self, request: &ClusterRequest) -> ProviderResult<ProviderCluster> {
        let identity = &request.identity;
        names::check_name(&identity.name).map_err(|m| rejected("InvalidName", m))?;
        names::check_uuid(&identity.uuid).map_err(|m| rejected("InvalidName", m))?;
        catalog::check(&request.addons)?;
        self.config.resolve(&request.kube_version)?;
        let namespace = request
            .labels
            .get("namespace")
            .filter(|n| !n.is_empty())
            .or(self.config.default_namespace.as_ref());
        let Some(namespace) = namespace else {
            return Err(rejected(
                "NoNamespace",
                "the hosted provider runs a control plane in its KubernetesCluster's namespace, \
                 and the request names none"
                    .into(),
            ));
        };
        let names = Names::new(namespace, &identity.name);
        let _held = self.hold(&names.id()).await;
        let record = match self.store.record(&names).await? {
            Some(record) => record,
            None => {
                let desired = manifests::record(&names, identity, &record_data(request));
                match self.store.create_record(&names, &desired).await? {
                    Some(created) => created,
                    // Made meanwhile by another replica or call: that one is the cluster.
                    None => self.store.record(&names).await?.ok_or_else(|| {
                        unavailable("reading the record another call created", "not found")
                    })?,
                }
            }
        };
        if record.labels().get(UUID_LABEL) != Some(&identity.uuid) {
            return Err(rejected(
                "NameTaken",
                format!(
                    "namespace {namespace} already has a hosted control plane named {} for \
                     another product (uuid {})",
                    identity.name,
                    record
                        .labels()
                        .get(UUID_LABEL)
                        .map_or("unknown", String::as_str)
                ),
            ));
        }
        self.step(&names, &record).await
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<ProviderCluster>> {
        let _held = self.hold(id).await;
        let Some((names, record)) = self.record_of(id).await? else {
            return Ok(None);
        };
        self.step(&names, &record).await.map(Some)
    }

    async fn upgrade(&self, id: &str, kube_version: &str) -> ProviderResult<ProviderCluster> {
        let _held = self.hold(id).await;
        let Some((names, record)) = self.record_of(id).await? else {
            return Err(ProviderError::NotFound(id.to_owned()));
        };
        let current = record
            .data
            .as_ref()
            .and_then(|d| d.get(record::KUBE_VERSION))
            .cloned()
            .unwrap_or_default();
        if catalog::check_upgrade(&current, kube_version)? {
            // Refused before anything moves: a version outside the catalog, or a step the
            // catalog cannot make.
            let running = self
                .config
                .resolve(&current)
                .map(|v| v.version.clone())
                .unwrap_or(current.clone());
            self.config.upgrade_path(&running, kube_version)?;
            let data = BTreeMap::from([(record::KUBE_VERSION.to_owned(), kube_version.to_owned())]);
            return self.record_and_step(id, &names, &data).await;
        }
        self.record_and_step(id, &names, &BTreeMap::new()).await
    }

    async fn set_addons(&self, id: &str, addons: &[Addon]) -> ProviderResult<ProviderCluster> {
        catalog::check(addons)?;
        let _held = self.hold(id).await;
        let Some((names, _)) = self.record_of(id).await? else {
            return Err(ProviderError::NotFound(id.to_owned()));
        };
        let data = BTreeMap::from([(
            record::ADDONS.to_owned(),
            serde_json::to_string(addons).unwrap_or_else(|_| "[]".into()),
        )]);
        self.record_and_step(id, &names, &data).await
    }

    async fn delete(&self, id: &str) -> ProviderResult<Deletion> {
        let _held = self.hold(id).await;
        let Some(names) = Names::from_id(id) else {
            return Ok(Deletion::Gone);
        };
        let live: Live = self.store.live(&names).await?;
        if live.record.is_none() && live.only_the_record_is_left() {
            return Ok(Deletion::Gone);
        }
        if let Some(why) = live
            .record
            .as_ref()
            .and_then(|r| r.annotations().get(names::REFUSE_DELETE))
        {
            return Err(rejected(
                "DeleteRefused",
                format!(
                    "the record {} is annotated {}: {}",
                    names.record(),
                    names::REFUSE_DELETE,
                    if why.is_empty() {
                        "no reason given"
                    } else {
                        why
                    }
                ),
            ));
        }
        if live.record.as_ref().is_some_and(|r| {
            !r.data
                .as_ref()
                .is_some_and(|d| d.contains_key(record::DELETING))
        }) {
            let data = BTreeMap::from([(record::DELETING.to_owned(), "true".to_owned())]);
            self.store.update_record(&names, &data).await?;
        }
        self.store.delete_all_but_record(&names, &live).await?;
        if live.only_the_record_is_left() {
            self.store.delete_record(&names).await?;
            lock(&self.clients).remove(id);
            return Ok(Deletion::Gone);
        }
        Ok(Deletion::InProgress(Some(format!(
            "deleting the control plane: {} left",
            live.remaining()
        ))))
    }
}

/// The labels of a cluster's objects, for tools and tests: `vigil.dev/cluster=<name>`.
pub fn selector(cluster: &str) -> String {
    Names::new("", cluster).selector()
}
