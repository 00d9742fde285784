//! Vigil's custom resource types; CRDs are generated from them. No I/O lives here.
//! The types arrive with the controllers that use them.
