//! What one step may do to the rows, beyond the rules every step obeys: the system says,
//! the invariants check.

use std::collections::HashSet;

/// What a step may do to the rows, beyond the rules every step obeys.
#[derive(Debug, Default)]
pub(super) struct Allowed {
    /// Ids that may appear (new jobs).
    pub(super) new: HashSet<i64>,
    /// Ids that may disappear (deleted, or pruned when finished).
    pub(super) vanish: HashSet<i64>,
    /// Ids that may reach a final state by an explicit action or a started run's end.
    pub(super) finish: HashSet<i64>,
}
