//! The statements of the workflow store (see the parent module), one per step of the rules.

/// `JSON_TABLE` of the ids in `$n` (a JSON array), as table `$alias` with column `id`.
macro_rules! ids {
    ($n:literal, $alias:literal) => {
        concat!("JSON_TABLE(", $n, ", '$[*]' COLUMNS (id BIGINT PATH '$')) AS ", $alias)
    };
}

pub(crate) const DEPENDENCY_STATES: &str = concat!(
    "SELECT j.id, j.kind, j.state, j.result FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id"
);

/// The ids in `$n` as a derived table `$alias` with column `id`, for a locking read to
/// start from. Joined first (`STRAIGHT_JOIN`) to a table forced onto the index of its
/// key, it makes InnoDB lock only the rows of those ids, in the order of the array
/// (`ids_json` sorts it). The other spellings lock far more where the planner may pick a
/// scan, as it does on a small table: an `IN (SELECT … JSON_TABLE …)` reads the whole
/// table, locking every row, and the bare `JSON_TABLE` MySQL 9 refuses in a locking read.
macro_rules! locking_ids {
    ($n:literal, $alias:literal) => {
        concat!("(SELECT x.id FROM ", ids!($n, "x"), ") AS ", $alias)
    };
}

/// The jobs `$1`, locked (`$lock`), in a locking read.
macro_rules! locking_read {
    ($columns:literal, $lock:literal) => {
        concat!(
            "SELECT ",
            $columns,
            " FROM ",
            locking_ids!("$1", "t"),
            " STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id ORDER BY j.id ",
            $lock
        )
    };
}

// A share lock when it may wait; an eager settle's, which must not, takes the rows
// exclusively (MySQL's share lock takes no SKIP LOCKED in MariaDB's spelling, nor the
// reverse).
pub(crate) const LOCK_DEPENDENCIES: [&str; 2] = [
    locking_read!("j.id, j.kind, j.state, j.result", "LOCK IN SHARE MODE"),
    locking_read!("j.id, j.kind, j.state, j.result", "FOR UPDATE SKIP LOCKED"),
];

pub(crate) const INSERT_WORKFLOW: &str =
    "INSERT INTO job_workflows (name, on_failure, created_at) VALUES ($1, $2, UTC_TIMESTAMP(6))";

pub(crate) const LOCK_WORKFLOW: &str =
    "SELECT callback_id, sealed_at IS NOT NULL AS sealed FROM job_workflows WHERE id = $1 FOR UPDATE";
pub(crate) const SET_BATCH: &str = "\
UPDATE job_workflows SET callback_id = $2, sealed_at = IF($3, COALESCE(sealed_at, UTC_TIMESTAMP(6)), sealed_at)
WHERE id = $1";

// One JSON array per edge (`jobs_driver::workflow::edges_json`).
pub(crate) const INSERT_EDGES: &str = "\
INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome, result)
SELECT e.depends_on, e.job_id, e.kind, e.needs, e.outcome, e.result
FROM JSON_TABLE($1, '$[*]' COLUMNS (depends_on BIGINT PATH '$[0]', job_id BIGINT PATH '$[1]',
                                   kind VARCHAR(255) PATH '$[2]', needs VARCHAR(16) PATH '$[3]',
                                   outcome VARCHAR(16) PATH '$[4]', result LONGTEXT PATH '$[5]')) AS e";

pub(crate) const DEPENDENTS_UNSETTLED: &str = concat!(
    "SELECT DISTINCT d.job_id AS id FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d ON d.outcome IS NULL AND d.depends_on = t.id ORDER BY d.job_id LIMIT $2"
);
// Re-open's read (in a retry, perhaps in an application's `REPEATABLE READ` transaction):
// a locking read, which sees the edges a settle committed after the transaction's
// snapshot. Repeats a dependent per edge (the caller removes them).
pub(crate) const DEPENDENTS_SETTLED: &str = concat!(
    "SELECT d.job_id AS id FROM ",
    locking_ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d FORCE INDEX (PRIMARY) ON d.depends_on = t.id
WHERE d.outcome IS NOT NULL ORDER BY d.job_id LIMIT $2 FOR UPDATE"
);

// Locks only the jobs (the workflows' settings, which never change, are read after).
macro_rules! lock_jobs {
    ($lock:literal) => {
        locking_read!(
            "j.id, j.state, j.waiting_on, j.failed_on, j.workflow_id,
       COALESCE(JSON_UNQUOTE(JSON_EXTRACT(j.errors, '$[last].error_type')) = 'dependency_failed', FALSE)
           AND j.cancel_requested_at IS NULL AS cancelled_by_dependency",
            $lock
        )
    };
}
pub(crate) const LOCK: [&str; 2] = [lock_jobs!("FOR UPDATE"), lock_jobs!("FOR UPDATE SKIP LOCKED")];
pub(crate) const SETTINGS: &str = concat!(
    "SELECT w.id, w.on_failure FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_workflows w FORCE INDEX (PRIMARY) ON w.id = t.id"
);

/// The edges from `$1` to `$2` whose outcome is `$where`, locked.
macro_rules! locked_edges {
    ($where:literal) => {
        concat!(
            "SELECT d.depends_on, d.job_id, d.kind, d.needs, d.outcome, d.result FROM ",
            locking_ids!("$1", "t"),
            " STRAIGHT_JOIN job_dependencies d FORCE INDEX (PRIMARY) ON d.depends_on = t.id
WHERE d.job_id IN (SELECT u.id FROM ",
            ids!("$2", "u"),
            ") AND d.outcome ",
            $where,
            " FOR UPDATE"
        )
    };
}
pub(crate) const EDGES_UNSETTLED: &str = locked_edges!("IS NULL");
pub(crate) const EDGES_SETTLED: &str = locked_edges!("IS NOT NULL");

pub(crate) const SETTLED_EDGES_INTO: &str = concat!(
    "SELECT d.depends_on, d.job_id, d.kind, d.needs, d.outcome, d.result FROM ",
    locking_ids!("$1", "u"),
    " STRAIGHT_JOIN job_dependencies d FORCE INDEX (job_dependencies_job_idx) ON d.job_id = u.id
WHERE d.outcome IS NOT NULL FOR UPDATE"
);

// `$1`: a JSON array of `[depends_on, job_id]` pairs.
pub(crate) const SET_OUTCOME: &str = "\
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (depends_on BIGINT PATH '$[0]', job_id BIGINT PATH '$[1]')) AS e
STRAIGHT_JOIN job_dependencies d FORCE INDEX (PRIMARY) ON d.depends_on = e.depends_on AND d.job_id = e.job_id
SET d.outcome = $2, d.result = $3";

// The edges into those of `$1` that a delete removed (not those it left: running).
pub(crate) const DELETE_EDGES_INTO_GONE: &str = concat!(
    "DELETE d FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d FORCE INDEX (job_dependencies_job_idx) ON d.job_id = t.id LEFT JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = d.job_id WHERE j.id IS NULL"
);

pub(crate) const DELETE_EDGES_INTO: &str = concat!(
    "DELETE d FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d FORCE INDEX (job_dependencies_job_idx) ON d.job_id = t.id"
);

/// `UPDATE` of the jobs `$1` with `$set` and the counters (`$2`, `$3`) and workflow (`$4`).
macro_rules! update {
    ($set:literal, $where:literal) => {
        concat!(
            "UPDATE ",
            ids!("$1", "t"),
            " STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id SET ",
            $set,
            "j.waiting_on = $2, j.failed_on = $3, j.workflow_id = COALESCE($4, j.workflow_id)",
            $where
        )
    };
}

pub(crate) const SET_COUNTERS: &str = update!("", "");
pub(crate) const PEND: &str = update!(
    "j.state = 'pending', j.finalized_at = NULL, j.cancel_requested_at = NULL, ",
    " WHERE j.state <> 'running'"
);
pub(crate) const RELEASED_QUEUES: &str = concat!(
    "SELECT DISTINCT j.queue FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id
WHERE j.state = 'pending' AND j.scheduled_at <= COALESCE($2, UTC_TIMESTAMP(6))"
);
pub(crate) const RELEASE: &str = update!(
    "j.state = IF(j.scheduled_at > COALESCE($5, UTC_TIMESTAMP(6)), 'scheduled', 'available'), ",
    " WHERE j.state = 'pending'"
);
pub(crate) const CANCEL: &str = update!(
    "j.state = 'cancelled', j.finalized_at = COALESCE($5, UTC_TIMESTAMP(6)),
     j.errors = JSON_MERGE_PRESERVE(j.errors, CONCAT('[', $6, ']')), ",
    " WHERE j.state IN ('pending', 'available', 'scheduled')"
);

// A page of the unsettled edges (their index, from the cursor `$1` on), each dependency
// once, looked up by primary key.
pub(crate) const FINISHED_WITH_UNSETTLED: &str = "\
SELECT d.depends_on AS id,
       COALESCE((SELECT j.state IN ('completed', 'discarded', 'cancelled') FROM jobs j WHERE j.id = d.depends_on),
                TRUE) AS finished
FROM (SELECT DISTINCT depends_on FROM job_dependencies
      WHERE outcome IS NULL AND depends_on > $1 ORDER BY depends_on LIMIT $2) AS d
ORDER BY d.depends_on";

pub(crate) const DEPENDENCIES: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id = $1 ORDER BY depends_on";

/// The workflows of the jobs `$1`: before a person's delete, those it may empty.
pub(crate) const WORKFLOWS_OF: &str = concat!(
    "SELECT DISTINCT j.workflow_id AS id FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id WHERE j.workflow_id IS NOT NULL ORDER BY 1"
);

// The removal of emptied workflows, in three statements so that it locks only the rows
// it deletes, in id order, never waiting: of `$1`, those no member is left in but a batch
// still open to members (a plain read: current under the driver's `READ COMMITTED`; a
// closed workflow never gains a member); then those locked, skipping a row another
// transaction holds (MySQL spells no SKIP LOCKED in a multi-table DELETE); then the
// delete of those.
pub(crate) const EMPTY_CLOSED_WORKFLOWS: &str = concat!(
    "SELECT w.id FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_workflows w FORCE INDEX (PRIMARY) ON w.id = t.id ",
    "WHERE (w.callback_id IS NULL OR w.sealed_at IS NOT NULL) ",
    "AND NOT EXISTS (SELECT 1 FROM jobs j FORCE INDEX (jobs_workflow_idx) WHERE j.workflow_id = w.id)"
);
pub(crate) const LOCK_WORKFLOWS: &str = concat!(
    "SELECT w.id FROM ",
    locking_ids!("$1", "t"),
    " STRAIGHT_JOIN job_workflows w FORCE INDEX (PRIMARY) ON w.id = t.id ORDER BY w.id FOR UPDATE SKIP LOCKED"
);
pub(crate) const DELETE_WORKFLOWS: &str = concat!(
    "DELETE w FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_workflows w FORCE INDEX (PRIMARY) ON w.id = t.id"
);
