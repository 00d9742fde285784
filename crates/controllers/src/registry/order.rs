//! Which controllers start, and in what order: the ones asked for, each after the controllers it
//! consults ([`Registration::after`]), and none without one it requires
//! ([`Registration::requires`]). Checked before anything starts, with an error that names the fix.

use super::Registration;

/// Why a set of controllers cannot start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OrderError {
    /// A name no registered controller has.
    #[error("unknown controller {name:?}; available: {available}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        available: String,
    },
    /// A controller asked for without one it requires.
    #[error(
        "controller {controller} requires {requires}, which is not in the list: add it (--controllers {controller},{requires},…)"
    )]
    Missing {
        /// The controller that cannot start alone.
        controller: &'static str,
        /// What it requires.
        requires: &'static str,
    },
    /// Controllers that each wait for another: a registration bug.
    #[error("controllers {0} each start after another: no start order exists")]
    Cycle(String),
}

/// The registrations of `asked` (names, in any order, duplicates ignored) in start order: every
/// controller after those it requires or consults, otherwise in `registry`'s order.
pub fn start_order<'r>(
    registry: &'r [Registration],
    asked: &[impl AsRef<str>],
) -> Result<Vec<&'r Registration>, OrderError> {
    let mut chosen: Vec<&Registration> = Vec::new();
    for name in asked {
        let name = name.as_ref().trim();
        let found =
            registry
                .iter()
                .find(|r| r.name == name)
                .ok_or_else(|| OrderError::Unknown {
                    name: name.to_owned(),
                    available: registry
                        .iter()
                        .map(|r| r.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
        if !chosen.iter().any(|c| c.name == found.name) {
            chosen.push(found);
        }
    }
    for c in &chosen {
        if let Some(requires) = c
            .requires
            .iter()
            .find(|r| !chosen.iter().any(|o| o.name == **r))
        {
            return Err(OrderError::Missing {
                controller: c.name,
                requires,
            });
        }
    }
    // Registry order first, then repeatedly the first whose predecessors have all started.
    chosen.sort_by_key(|c| registry.iter().position(|r| r.name == c.name));
    let waits_for =
        |c: &Registration, other: &str| c.requires.contains(&other) || c.after.contains(&other);
    let mut ordered: Vec<&Registration> = Vec::with_capacity(chosen.len());
    while !chosen.is_empty() {
        let ready = chosen.iter().position(|c| {
            chosen
                .iter()
                .all(|other| other.name == c.name || !waits_for(c, other.name))
        });
        match ready {
            Some(i) => ordered.push(chosen.remove(i)),
            None => {
                return Err(OrderError::Cycle(
                    chosen.iter().map(|c| c.name).collect::<Vec<_>>().join(", "),
                ));
            }
        }
    }
    Ok(ordered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::test_support::registration;

    fn names(order: &[&Registration]) -> Vec<&'static str> {
        order.iter().map(|r| r.name).collect()
    }

    #[test]
    fn a_controller_starts_after_those_it_consults_whatever_the_registry_order() {
        let mut consumer = registration("consumer");
        consumer.after = &["producer"];
        let registry = [consumer, registration("producer"), registration("other")];
        let order = start_order(&registry, &["other", "consumer", "producer"]).expect("order");
        assert_eq!(names(&order), ["producer", "consumer", "other"]);
        // Without the one it consults, it starts alone.
        let order = start_order(&registry, &["consumer"]).expect("order");
        assert_eq!(names(&order), ["consumer"]);
    }

    #[test]
    fn a_missing_requirement_is_refused_with_the_fix() {
        let mut needy = registration("needy");
        needy.requires = &["base"];
        let registry = [needy, registration("base")];
        let error = start_order(&registry, &["needy"]).expect_err("refused");
        assert_eq!(
            error,
            OrderError::Missing {
                controller: "needy",
                requires: "base"
            }
        );
        assert!(error.to_string().contains("--controllers needy,base"));
        let order = start_order(&registry, &["needy", "base", "needy"]).expect("order");
        assert_eq!(names(&order), ["base", "needy"]);
    }

    #[test]
    fn unknown_names_and_cycles_are_errors() {
        let mut a = registration("a");
        a.after = &["b"];
        let mut b = registration("b");
        b.after = &["a"];
        let registry = [a, b];
        assert!(matches!(
            start_order(&registry, &["a", "b"]),
            Err(OrderError::Cycle(_))
        ));
        let unknown = start_order(&registry, &["c"]).expect_err("unknown");
        assert_eq!(
            unknown.to_string(),
            "unknown controller \"c\"; available: a, b"
        );
    }

    #[test]
    fn the_shipped_controllers_start_in_an_order_that_exists() {
        let all: Vec<&str> = crate::registry::names().collect();
        let order = start_order(crate::registry::CONTROLLERS, &all).expect("order");
        let position = |n: &str| order.iter().position(|r| r.name == n);
        for r in crate::registry::CONTROLLERS {
            for before in r.after.iter().chain(r.requires) {
                assert!(
                    position(before) < position(r.name),
                    "{before} before {}",
                    r.name
                );
            }
        }
    }
}
