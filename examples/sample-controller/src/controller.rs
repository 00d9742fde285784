//! Kubernetes' sample-controller on vigil-runtime: the Foo kind (CRD `../foo-crd.yaml`), the
//! pure decision, the reconcile and the wiring (see docs/runtime.md). `main.rs` runs it;
//! vigil-runtime's end-to-end tests include this file and run it on a test cluster.
#![allow(clippy::disallowed_names)] // upstream's kind is `Foo`

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{CustomResource, Resource as _, ResourceExt as _};
use serde::{Deserialize, Serialize};
use vigil_runtime::cache::Cache;
use vigil_runtime::events::EventNote;
use vigil_runtime::{Manager, Runtime};

pub const NAME: &str = "sample-controller";

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[kube(group = "samplecontroller.k8s.io", version = "v1alpha1", kind = "Foo")]
#[kube(namespaced, status = "FooStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    pub deployment_name: String,
    pub replicas: Option<i32>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    pub available_replicas: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed")]
    Api(#[from] kube::Error),
    #[error("Resource {0:?} already exists and is not managed by Foo")]
    ResourceExists(String),
}

/// What a sync does to the Deployment, decided from the cache by [`decide`].
#[derive(Debug, PartialEq)]
pub enum Step {
    Create(Box<Deployment>),
    Scale(i32),
    Keep,
    /// Someone else's Deployment has the name: leave it, and say so.
    NotOurs,
}

struct Context {
    rt: Runtime,
    deployments: Cache<Deployment>,
}

/// The wiring: a cache per kind, the Foo controller owning Deployments.
pub fn add(manager: &mut Manager) {
    manager.add(NAME, |rt| async move {
        let foos = rt.cache::<Foo>().build();
        let deployments = rt.cache::<Deployment>().build();
        let controller = rt.controller(&foos).owns(&deployments);
        let context = Arc::new(Context { rt, deployments });
        controller.run(reconcile, context).await;
    });
}

/// The pure decision: the Deployment step for `foo`, given its Deployment as cached.
pub fn decide(foo: &Foo, deployment: Option<&Deployment>) -> Step {
    let Some(deployment) = deployment else {
        return Step::Create(Box::new(new_deployment(foo)));
    };
    let ours = (deployment.owner_references().iter())
        .any(|o| o.controller == Some(true) && foo.uid().as_ref() == Some(&o.uid));
    let current = deployment.spec.as_ref().and_then(|s| s.replicas);
    match foo.spec.replicas {
        _ if !ours => Step::NotOurs,
        Some(wanted) if current != Some(wanted) => Step::Scale(wanted),
        _ => Step::Keep,
    }
}

/// The Deployment a Foo owns: `nginx:latest`, labels `app=nginx` and `controller=<foo>`.
pub fn new_deployment(foo: &Foo) -> Deployment {
    let labels = BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo.name_any()),
    ]);
    let container = Container {
        name: "nginx".to_owned(),
        image: Some("nginx:latest".to_owned()),
        ..Container::default()
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace(),
            owner_references: foo.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

async fn reconcile(foo: Arc<Foo>, ctx: Arc<Context>) -> Result<Action, Error> {
    let (runtime, namespace) = (&ctx.rt, foo.namespace().unwrap_or_default());
    let name = &foo.spec.deployment_name;
    if name.is_empty() {
        tracing::error!(foo = %foo.name_any(), "deployment name must be specified");
        return Ok(Action::await_change());
    }
    let key = ObjectRef::new(name).within(&namespace);
    let cached = ctx.deployments.get(&key);
    let api: Api<Deployment> = Api::namespaced(runtime.client().clone(), &namespace);
    let params = PatchParams::apply(&runtime.field_manager());
    let deployment = match decide(&foo, cached.as_deref()) {
        Step::Create(deployment) => api.create(&PostParams::default(), &deployment).await?,
        Step::Scale(replicas) => {
            let patch = serde_json::json!({"spec": {"replicas": replicas}});
            api.patch(name, &params, &Patch::Merge(&patch)).await?
        }
        Step::Keep => cached.as_deref().cloned().unwrap_or_default(),
        Step::NotOurs => {
            let error = Error::ResourceExists(name.clone());
            let note = EventNote::warning("ErrResourceExists", error.to_string());
            runtime.event(foo.as_ref(), &note, "Sync").await;
            return Err(error);
        }
    };
    let available = deployment.status.and_then(|s| s.available_replicas);
    let desired = FooStatus {
        available_replicas: available.unwrap_or(0),
    };
    let current = foo.status.as_ref(); // written only if it differs:
    (runtime.write_status(foo.as_ref(), current, &desired)).await?;
    let synced = EventNote::normal("Synced", "Foo synced successfully");
    runtime.event(foo.as_ref(), &synced, "Sync").await;
    Ok(Action::await_change())
}
