//! How a request ended, as a metric sees it: a broker that does not answer is `Unavailable`,
//! told from a broker that answers with an error. No broker needed: the "brokers" here are a
//! closed port and a socket that accepts and never answers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use vigil_kafka::{Admin, ClientConfig, Outcome, RequestCounts};

/// The (API, outcome) of every request's end, in order.
type Seen = Arc<Mutex<Vec<(&'static str, Outcome)>>>;

/// An admin client of `bootstrap` whose hook records every request's end.
fn recording(bootstrap: String) -> (Admin, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    let counts = Arc::new(RequestCounts::with_hook(move |api, outcome| {
        hook_seen.lock().expect("hook lock").push((api, outcome));
    }));
    let mut config = ClientConfig::plaintext(bootstrap);
    config.timeout = Duration::from_millis(300);
    (Admin::with_counts(config, counts), seen)
}

#[tokio::test]
async fn a_request_no_broker_answers_is_unavailable_under_its_api() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (admin, seen) = recording(format!("127.0.0.1:{port}"));
    admin
        .list_topics()
        .await
        .expect_err("nothing listens on that port");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![("Metadata", Outcome::Unavailable)]
    );
    assert_eq!(admin.requests().total(), 0, "nothing was sent");
}

#[tokio::test]
async fn a_broker_that_never_answers_is_unavailable_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a listener");
    let addr = listener.local_addr().expect("its address");
    // Accepts and holds connections without a word.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let (admin, seen) = recording(addr.to_string());
    admin
        .list_topics()
        .await
        .expect_err("the broker never answers");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![("Metadata", Outcome::Unavailable)],
        "the connection's ApiVersions was cut by the timeout: one failure, under the request wanted"
    );
    assert_eq!(admin.requests().total(), 1, "ApiVersions was sent");
    silent.abort();
}

#[test]
fn errors_the_broker_answers_are_not_unavailability() {
    let broker = vigil_kafka::Error::Broker {
        code: 36,
        name: "TopicAlreadyExists".into(),
        message: None,
    };
    assert_eq!(Outcome::of::<()>(&Err(broker)), Outcome::Error);
    let auth = vigil_kafka::Error::Auth("bad password".into());
    assert_eq!(Outcome::of::<()>(&Err(auth)), Outcome::Error);
    let gone = vigil_kafka::Error::Unreachable("refused".into());
    assert_eq!(Outcome::of::<()>(&Err(gone)), Outcome::Unavailable);
    assert_eq!(Outcome::of(&Ok(())), Outcome::Ok);
}

/// Against a real broker (`VIGIL_TEST_KAFKA_BOOTSTRAP`, as in tests/broker.rs): every request of
/// a connection and a listing ends `Ok`. Without a broker the test says so and passes.
#[tokio::test]
async fn requests_a_broker_answers_are_ok() {
    let Some(bootstrap) = std::env::var("VIGIL_TEST_KAFKA_BOOTSTRAP")
        .ok()
        .filter(|b| !b.is_empty())
    else {
        eprintln!(
            "note: VIGIL_TEST_KAFKA_BOOTSTRAP not set; skipping (run .ci/kafka-broker start)"
        );
        return;
    };
    let (admin, seen) = recording(bootstrap);
    admin
        .list_topics()
        .await
        .expect("the broker lists its topics");
    let seen = seen.lock().expect("lock");
    assert!(seen.contains(&("ApiVersions", Outcome::Ok)), "{seen:?}");
    assert!(seen.contains(&("Metadata", Outcome::Ok)), "{seen:?}");
    assert!(seen.iter().all(|(_, o)| *o == Outcome::Ok), "{seen:?}");
}
