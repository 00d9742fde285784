//! Watching a set of namespaces as one stream for one reflector. With `NAMESPACES` set, an
//! operator runs one watch per namespace; merged as they are, their relist markers would wreck a
//! shared store: kube-runtime's reflector swaps its whole content at every `InitDone`, so the end
//! of namespace A's relist would drop every object of namespace B.
//!
//! [`merge`] keeps the markers meaningful for the merged stream: one `Init` at the start, one
//! `InitDone` once every namespace has listed (so `wait_until_ready` means "all synced"), and
//! later relists of a single namespace become `Apply` events plus a `Delete` for each object of
//! that namespace that the relist no longer shows.

use std::collections::HashSet;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::watcher::{Error, Event};

/// Per-namespace progress.
#[derive(Default)]
struct Namespace {
    /// Names currently present.
    present: HashSet<String>,
    /// Names seen by a relist in progress.
    relisting: Option<HashSet<String>>,
    /// Whether its first list completed.
    listed: bool,
}

/// The translation state of a merged stream.
struct Merge {
    namespaces: Vec<(String, Namespace)>,
    /// Whether the merged `Init` was sent.
    started: bool,
    /// Whether the merged `InitDone` was sent.
    synced: bool,
    /// Deletions seen during the first sync (found by a relist, or watched): the reflector is
    /// still buffering then (a `Delete` would miss its buffer), so they are sent right after
    /// the merged `InitDone`.
    deferred: Vec<(usize, String)>,
}

impl Merge {
    fn translate<K>(&mut self, i: usize, event: Event<K>) -> Vec<Event<K>>
    where
        K: Resource + Default,
    {
        let mut out = Vec::new();
        let synced = self.synced;
        let (namespace, state) = &mut self.namespaces[i];
        match event {
            Event::Init => {
                state.relisting = Some(HashSet::new());
                if !self.started {
                    self.started = true;
                    out.push(Event::Init);
                }
            }
            Event::InitApply(obj) => {
                let name = obj.meta().name.clone().unwrap_or_default();
                state.present.insert(name.clone());
                if let Some(seen) = state.relisting.as_mut() {
                    seen.insert(name);
                }
                out.push(if synced {
                    Event::Apply(obj)
                } else {
                    Event::InitApply(obj)
                });
            }
            Event::InitDone => {
                let seen = state.relisting.take().unwrap_or_default();
                // Objects the relist no longer shows were deleted while the watch was down.
                for gone in state.present.difference(&seen) {
                    if synced {
                        out.push(Event::Delete(stub(namespace, gone)));
                    } else {
                        self.deferred.push((i, gone.clone()));
                    }
                }
                state.present = seen;
                state.listed = true;
                if !synced && self.namespaces.iter().all(|(_, n)| n.listed) {
                    self.synced = true;
                    out.push(Event::InitDone);
                    for (i, name) in std::mem::take(&mut self.deferred) {
                        let (namespace, state) = &self.namespaces[i];
                        // Unless it came back meanwhile.
                        if !state.present.contains(&name) {
                            out.push(Event::Delete(stub(namespace, &name)));
                        }
                    }
                }
            }
            // A namespace that has listed watches on while the others still list; until the
            // merged `InitDone` the reflector fills a buffer that this `InitDone` swaps in
            // whole, so its changes go into that buffer (an `Apply` written to the store
            // meanwhile would be dropped by the swap; a `Delete` would miss the buffer).
            Event::Apply(obj) => {
                state
                    .present
                    .insert(obj.meta().name.clone().unwrap_or_default());
                out.push(if synced {
                    Event::Apply(obj)
                } else {
                    Event::InitApply(obj)
                });
            }
            Event::Delete(obj) => {
                let name = obj.meta().name.clone().unwrap_or_default();
                state.present.remove(&name);
                if synced {
                    out.push(Event::Delete(obj));
                } else {
                    self.deferred.push((i, name));
                }
            }
        }
        out
    }
}

/// An object that only names what a `Delete` removes.
fn stub<K: Resource + Default>(namespace: &str, name: &str) -> K {
    let mut obj = K::default();
    obj.meta_mut().name = Some(name.to_owned());
    obj.meta_mut().namespace = Some(namespace.to_owned());
    obj
}

/// Merges one watch stream per namespace into one stream with a single relist lifecycle (see
/// the module docs). One stream passes through untouched.
pub fn merge<K, S>(streams: Vec<(String, S)>) -> impl Stream<Item = Result<Event<K>, Error>> + Send
where
    K: Resource + Default + Send + 'static,
    S: Stream<Item = Result<Event<K>, Error>> + Send + 'static,
{
    let single = streams.len() == 1;
    let mut merge = Merge {
        namespaces: streams
            .iter()
            .map(|(ns, _)| (ns.clone(), Namespace::default()))
            .collect(),
        started: false,
        synced: false,
        deferred: Vec::new(),
    };
    let tagged = streams
        .into_iter()
        .enumerate()
        .map(|(i, (_, s))| s.map(move |event| (i, event)).boxed());
    futures::stream::select_all(tagged).flat_map(move |(i, event)| {
        let events: Vec<Result<Event<K>, Error>> = match event {
            Ok(event) if !single => merge.translate(i, event).into_iter().map(Ok).collect(),
            other => vec![other],
        };
        futures::stream::iter(events)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(ns: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn describe(events: &[Event<ConfigMap>]) -> Vec<String> {
        let id = |c: &ConfigMap| {
            format!(
                "{}/{}",
                c.metadata.namespace.as_deref().unwrap_or(""),
                c.metadata.name.as_deref().unwrap_or("")
            )
        };
        events
            .iter()
            .map(|e| match e {
                Event::Init => "Init".to_owned(),
                Event::InitApply(c) => format!("InitApply {}", id(c)),
                Event::InitDone => "InitDone".to_owned(),
                Event::Apply(c) => format!("Apply {}", id(c)),
                Event::Delete(c) => format!("Delete {}", id(c)),
            })
            .collect()
    }

    fn merge_of(names: &[&str]) -> Merge {
        Merge {
            namespaces: names
                .iter()
                .map(|n| ((*n).to_owned(), Namespace::default()))
                .collect(),
            started: false,
            synced: false,
            deferred: Vec::new(),
        }
    }

    #[test]
    fn one_init_and_one_init_done_for_all_namespaces() {
        let mut m = merge_of(&["a", "b"]);
        let mut out = Vec::new();
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(1, Event::Init));
        out.extend(m.translate(0, Event::InitApply(cm("a", "x"))));
        out.extend(m.translate(0, Event::InitDone));
        out.extend(m.translate(1, Event::InitApply(cm("b", "y"))));
        out.extend(m.translate(1, Event::InitDone));
        assert_eq!(
            describe(&out),
            ["Init", "InitApply a/x", "InitApply b/y", "InitDone"]
        );
    }

    #[test]
    fn a_later_relist_of_one_namespace_touches_only_that_namespace() {
        let mut m = merge_of(&["a", "b"]);
        for (i, ns, names) in [(0, "a", &["x", "old"][..]), (1, "b", &["y"][..])] {
            m.translate(i, Event::<ConfigMap>::Init);
            for name in names {
                m.translate(i, Event::InitApply(cm(ns, name)));
            }
            m.translate::<ConfigMap>(i, Event::InitDone);
        }

        let mut out = Vec::new();
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(0, Event::InitApply(cm("a", "x"))));
        out.extend(m.translate(0, Event::InitDone));
        assert_eq!(describe(&out), ["Apply a/x", "Delete a/old"]);
    }

    #[test]
    fn deletions_found_during_the_first_sync_follow_its_end() {
        let mut m = merge_of(&["a", "b"]);
        let mut out = Vec::new();
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(0, Event::InitApply(cm("a", "x"))));
        out.extend(m.translate(0, Event::InitDone));
        // Namespace a relists before b has listed once: x is gone.
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(0, Event::InitDone));
        out.extend(m.translate(1, Event::Init));
        out.extend(m.translate(1, Event::InitDone));
        assert_eq!(
            describe(&out),
            ["Init", "InitApply a/x", "InitDone", "Delete a/x"]
        );
    }

    /// Applies `events` to a kube-runtime reflector store, as the merged stream's consumer does.
    fn stored(events: &[Event<ConfigMap>]) -> Vec<String> {
        let mut writer = kube::runtime::reflector::store::Writer::<ConfigMap>::default();
        for event in events {
            writer.apply_watcher_event(event);
        }
        let mut names: Vec<String> = writer
            .as_reader()
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or(""),
                    c.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn changes_watched_while_another_namespace_lists_reach_the_store() {
        let mut m = merge_of(&["a", "b"]);
        let mut out = Vec::new();
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(0, Event::InitDone));
        // Namespace a watches on while b is still listing: x is created, then b lists y.
        out.extend(m.translate(0, Event::Apply(cm("a", "x"))));
        out.extend(m.translate(1, Event::Init));
        out.extend(m.translate(1, Event::InitApply(cm("b", "y"))));
        out.extend(m.translate(1, Event::InitDone));
        assert_eq!(
            describe(&out),
            ["Init", "InitApply a/x", "InitApply b/y", "InitDone"]
        );
        assert_eq!(stored(&out), ["a/x", "b/y"]);
    }

    #[test]
    fn deletions_watched_while_another_namespace_lists_follow_its_end() {
        let mut m = merge_of(&["a", "b"]);
        let mut out = Vec::new();
        out.extend(m.translate(0, Event::Init));
        out.extend(m.translate(0, Event::InitApply(cm("a", "x"))));
        out.extend(m.translate(0, Event::InitApply(cm("a", "z"))));
        out.extend(m.translate(0, Event::InitDone));
        out.extend(m.translate(0, Event::Delete(cm("a", "x"))));
        // Deleted and created again before the end: z stays.
        out.extend(m.translate(0, Event::Delete(cm("a", "z"))));
        out.extend(m.translate(0, Event::Apply(cm("a", "z"))));
        out.extend(m.translate(1, Event::Init));
        out.extend(m.translate(1, Event::InitDone));
        assert_eq!(
            describe(&out),
            [
                "Init",
                "InitApply a/x",
                "InitApply a/z",
                "InitApply a/z",
                "InitDone",
                "Delete a/x"
            ]
        );
        assert_eq!(stored(&out), ["a/z"]);
    }

    #[test]
    fn watch_deletes_are_remembered() {
        let mut m = merge_of(&["a", "b"]);
        m.translate::<ConfigMap>(0, Event::Init);
        m.translate::<ConfigMap>(0, Event::InitDone);
        m.translate(0, Event::Apply(cm("a", "x")));
        m.translate(0, Event::Delete(cm("a", "x")));
        let out: Vec<_> = [Event::Init, Event::InitDone]
            .into_iter()
            .flat_map(|e| m.translate::<ConfigMap>(0, e))
            .collect();
        assert!(describe(&out).is_empty(), "{:?}", describe(&out));
    }
}
