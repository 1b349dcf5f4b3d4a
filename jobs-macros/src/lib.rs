//! The `#[job]` attribute (stub).
