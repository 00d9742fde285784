//! Vigil's controllers, one module each: a pure `decide` step and a thin `apply` step.
//! They arrive with their issues (CriticalService, ConfigMapSync, status vault).
