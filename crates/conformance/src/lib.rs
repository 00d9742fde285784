//! Black-box API conformance suite; the tests live in `tests/`.
