//! What an application's code around a transactional enqueue looks like, shared by the
//! enqueue tests of each backend: the welcome mail's arguments, and an error type that
//! carries diesel's, the framework's, and a business rule's errors out of a transaction.

use serde::{Deserialize, Serialize};

/// The welcome mail's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// The new user.
    pub user_id: i64,
    /// Where to send it.
    pub email: String,
}

/// The arguments for user `user_id`.
pub fn welcome(user_id: i64) -> Welcome {
    Welcome { user_id, email: format!("user{user_id}@example.com") }
}

/// A business rule that fails and rolls the transaction back.
#[derive(Debug, thiserror::Error)]
#[error("business rule failed")]
pub struct Rollback;

/// The application's error inside a transaction.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// From diesel.
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    /// From the jobs framework.
    #[error(transparent)]
    Jobs(#[from] jobs_core::Error),
    /// A business rule.
    #[error(transparent)]
    Rule(#[from] Rollback),
}
