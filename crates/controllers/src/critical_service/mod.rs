//! CriticalService: keeps critical Services answering. When a covered Service has no ready
//! endpoint of its own, one fallback pod from a PodTemplate answers for it, and goes as soon as a
//! real endpoint is ready again.

mod cache;
pub mod controller;
pub mod decide;
pub mod fallback;
pub mod lame;
pub mod model;
pub mod registration;

pub use controller::{NAME, PERMISSIONS};
