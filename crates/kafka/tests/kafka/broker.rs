//! The admin client against a real broker (`VIGIL_TEST_KAFKA_BOOTSTRAP`; `.ci/kafka-broker start`
//! provides one). Without it the test says so and passes.

use std::collections::BTreeMap;

use vigil_kafka::{Admin, ClientConfig, ConfigChange};

fn broker() -> Option<Admin> {
    match std::env::var("VIGIL_TEST_KAFKA_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => Some(Admin::new(ClientConfig::plaintext(b))),
        _ => {
            eprintln!(
                "note: VIGIL_TEST_KAFKA_BOOTSTRAP not set; skipping (run .ci/kafka-broker start)"
            );
            None
        }
    }
}

#[tokio::test]
async fn topic_lifecycle() {
    let Some(admin) = broker() else { return };
    let name = format!("vigil-client-{}", std::process::id());
    let _ = admin.delete_topic(&name).await;
    let configs = BTreeMap::from([("retention.ms".to_owned(), "3600000".to_owned())]);
    let id = admin
        .create_topic(&name, 2, 1, &configs)
        .await
        .expect("create");
    let again = admin
        .create_topic(&name, 2, 1, &configs)
        .await
        .expect_err("exists");
    assert_eq!(
        again.code(),
        Some(vigil_kafka::TOPIC_ALREADY_EXISTS),
        "{again}"
    );

    let topics = admin
        .describe_topics(std::slice::from_ref(&name))
        .await
        .expect("describe");
    let topic = &topics[&name];
    assert_eq!((topic.partitions, topic.replication_factor), (2, 1));
    assert_eq!(topic.id, id);

    let described = admin
        .describe_configs(std::slice::from_ref(&name))
        .await
        .expect("configs");
    let retention = &described[&name]["retention.ms"];
    assert_eq!(retention.value.as_deref(), Some("3600000"));

    admin
        .alter_configs(
            &name,
            &[
                ConfigChange::Set("cleanup.policy".into(), "compact".into()),
                ConfigChange::Delete("retention.ms".into()),
            ],
        )
        .await
        .expect("alter");
    let described = admin
        .describe_configs(std::slice::from_ref(&name))
        .await
        .expect("configs");
    let configs = &described[&name];
    assert_eq!(
        configs["cleanup.policy"].value.as_deref(),
        Some("compact"),
        "{configs:?}"
    );
    // Deleted: back to the broker's default (or not listed, as Tansu does).
    assert_ne!(
        configs.get("retention.ms").and_then(|c| c.value.as_deref()),
        Some("3600000"),
        "{configs:?}"
    );

    match admin.create_partitions(&name, 3).await {
        Ok(()) => {
            let topics = admin
                .describe_topics(std::slice::from_ref(&name))
                .await
                .expect("describe");
            assert_eq!(topics[&name].partitions, 3);
        }
        Err(vigil_kafka::Error::Unsupported(api)) => {
            eprintln!("note: this broker does not support {api}");
        }
        Err(e) => panic!("create partitions: {e}"),
    }

    admin.delete_topic(&name).await.expect("delete");
    admin
        .delete_topic(&name)
        .await
        .expect("deleting again is fine");
    let topics = admin
        .describe_topics(std::slice::from_ref(&name))
        .await
        .expect("describe");
    assert!(topics.is_empty(), "{topics:?}");
    assert!(admin.requests().total() >= 10);
}
