//! The bench crate's tests that need a real node (`../shared/kube/node-up.sh`). CI's stage 3 runs
//! every crate's `node` target; elsewhere each test skips itself, saying so.

mod node_critical_service_clients;
