//! The dashboard (stub).
