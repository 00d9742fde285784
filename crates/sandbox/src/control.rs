//! Commands that stop and restart the listener while the store lives on: sent by
//! [`Sandbox`](crate::Sandbox) and by the admin endpoint, served by the supervisor in `serve/`.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

/// Commands to the listener supervisor.
#[derive(Debug)]
pub(crate) enum Control {
    Stop(oneshot::Sender<()>),
    Start(oneshot::Sender<std::io::Result<()>>),
}

/// Restart through the control channel (used by the admin endpoint).
pub(crate) async fn restart_via(control: &mpsc::Sender<Control>, down: Duration) {
    let (ack, done) = oneshot::channel();
    if control.send(Control::Stop(ack)).await.is_err() {
        return;
    }
    let _ = done.await;
    tokio::time::sleep(down).await;
    let (ack, done) = oneshot::channel();
    if control.send(Control::Start(ack)).await.is_ok()
        && let Ok(Err(e)) = done.await
    {
        tracing::error!(error = %e, "sandbox could not listen again");
    }
}
