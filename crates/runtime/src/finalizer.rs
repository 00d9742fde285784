//! Finalizers, through kube-runtime's helper (`kube::runtime::finalizer`), whose flow is:
//!
//! 1. the object lacks the finalizer and is not being deleted: add it (a JSON patch that
//!    `test`s the finalizer list it read, so two writers cannot both add it) and stop — the
//!    update brings the next reconcile;
//! 2. the object has it and is not being deleted: `apply`;
//! 3. the object has it and is being deleted: `cleanup`; only once that succeeds is the
//!    finalizer removed (again a `test`ed patch, so another's finalizer is never removed), and
//!    the API server deletes the object;
//! 4. the object lacks it and is being deleted: nothing left to do.
//!
//! A failed `apply` or `cleanup` keeps the finalizer, and the error policy retries.

use std::future::Future;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
pub use kube::runtime::finalizer::{Error, Event};

/// Runs `apply` or `cleanup` for `obj` under the finalizer `name`, as the module documentation
/// describes. `api` must address `obj`'s resource in `obj`'s namespace.
pub async fn finalized<K, E, Apply, Cleanup>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    apply: impl FnOnce(Arc<K>) -> Apply,
    cleanup: impl FnOnce(Arc<K>) -> Cleanup,
) -> Result<Action, Error<E>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    E: std::error::Error + 'static,
    Apply: Future<Output = Result<Action, E>>,
    Cleanup: Future<Output = Result<Action, E>>,
{
    kube::runtime::finalizer(api, name, obj, |event| async move {
        match event {
            Event::Apply(obj) => apply(obj).await,
            Event::Cleanup(obj) => cleanup(obj).await,
        }
    })
    .await
}
