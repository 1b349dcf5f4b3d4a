//! [`JobsBackend`](crate::JobsBackend) for each driver this crate is built with.

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
