//! The text of the enqueue's multi-row `INSERT … VALUES`, by shape, built once per process.
//!
//! Every value is a bound parameter, so the text depends only on the [`RowShape`], the
//! number of rows, whether the clock is injected and whether the statement returns its
//! rows: a connection prepares each text once, and the process builds each once (at most
//! `3 × 2 × 2 × ROWS_PER_STATEMENT` texts). A `JSON_TABLE` over one JSON array, an
//! earlier form, cost the server 35 % more per job.
//!
//! The server's cost per row is what the row's values hold, so the common case gets a
//! shape of its own: a job due now with no uniqueness key ([`RowShape::Plain`]) is eight
//! parameters and constants, and returns only its id. A job scheduled for later, or
//! holding a key, is [`RowShape::Full`]: its `scheduled_at` and `state` are computed from
//! its `created_at` in the same row (MySQL and MariaDB let a value name a column set
//! before it), so the database's clock is read once per statement.

use std::fmt::Write as _;
use std::sync::{LazyLock, OnceLock};

use jobs_driver::NewJob;

/// The first id the connection's last inserting statement generated (0 after
/// `LAST_INSERT_ID(0)` when none has since); a statement that inserts nothing leaves it as
/// it was.
pub(crate) const LAST_INSERT_ID: &str = "SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id";

/// The most rows one statement inserts; a larger batch takes several, in one transaction.
pub(crate) const ROWS_PER_STATEMENT: usize = 100;

/// What the rows of one statement need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowShape {
    /// Every row is due now and has no uniqueness key: `available`, scheduled at its
    /// creation, new for certain (so `RETURNING id` is all the caller needs).
    Plain,
    /// Any row: a run time or delay computes `scheduled_at` and `state`; with `unique`,
    /// a row whose key is held returns the holder (`ON DUPLICATE KEY UPDATE`).
    Full {
        /// Some row holds a uniqueness key.
        unique: bool,
    },
}

impl RowShape {
    /// The shape that fits every job of `rows`.
    pub(crate) fn of(rows: &[&NewJob]) -> RowShape {
        let plain =
            |job: &&NewJob| job.unique.is_none() && job.run_at.is_none() && job.delay_ms.unwrap_or(0) == 0;
        if rows.iter().all(plain) {
            RowShape::Plain
        } else {
            RowShape::Full { unique: rows.iter().any(|job| job.unique.is_some()) }
        }
    }

    /// Parameters per row (after `$1`, the injected clock, and `$2`, the token).
    pub(crate) fn params_per_row(self) -> usize {
        match self {
            RowShape::Plain => 8,
            RowShape::Full { .. } => 12,
        }
    }

    fn index(self) -> usize {
        match self {
            RowShape::Plain => 0,
            RowShape::Full { unique: false } => 1,
            RowShape::Full { unique: true } => 2,
        }
    }
}

const COLUMNS: &str = "INSERT INTO jobs (created_at, scheduled_at, state, kind, queue, args, meta, tags, priority, \
                       max_attempts, timeout_ms, attempted_by, errors, unique_key, unique_states, lock_token) VALUES ";

static TEXTS: LazyLock<Vec<OnceLock<String>>> =
    LazyLock::new(|| (0..3 * 2 * 2 * ROWS_PER_STATEMENT).map(|_| OnceLock::new()).collect());

/// The statement for `rows` rows (1 to [`ROWS_PER_STATEMENT`]) of `shape`. `$1` is the
/// injected clock (`clock`) or unused, `$2` the token. With `returning`, it returns
/// `id` (plain), or each row's `id, lock_token, state, unique_key` (full: the new
/// row, or the one holding its key).
pub(crate) fn statement(shape: RowShape, rows: usize, clock: bool, returning: bool) -> &'static str {
    let rows = rows.clamp(1, ROWS_PER_STATEMENT);
    let slot = ((shape.index() * 2 + usize::from(clock)) * 2 + usize::from(returning)) * ROWS_PER_STATEMENT
        + rows
        - 1;
    TEXTS[slot].get_or_init(|| build(shape, rows, clock, returning))
}

fn build(shape: RowShape, rows: usize, clock: bool, returning: bool) -> String {
    let now = if clock { "$1" } else { "UTC_TIMESTAMP(6)" };
    let per_row = shape.params_per_row();
    let mut sql = String::with_capacity(300 + rows * 190);
    sql.push_str(COLUMNS);
    for row in 0..rows {
        let p = 3 + row * per_row;
        if row > 0 {
            sql.push_str(",\n");
        }
        // The job's own columns: kind, queue, args, meta, tags, priority, max_attempts,
        // timeout_ms (after a full row's run time and delay).
        let own = if shape == RowShape::Plain { p } else { p + 2 };
        let own = (own..own + 8).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ");
        // Writing to a String cannot fail.
        let _ = match shape {
            // The token marks the rows for a read-back only where nothing is returned (a
            // sync connection); otherwise new rows need none, and NULLs cost its index less.
            RowShape::Plain => write!(
                sql,
                "({now}, created_at, 'available', {own}, '[]', '[]', NULL, NULL, {})",
                if returning { "NULL" } else { "$2" },
            ),
            RowShape::Full { .. } => write!(
                sql,
                "({now}, COALESCE(${p}, created_at + INTERVAL ${} MICROSECOND), \
                 IF(scheduled_at > created_at, 'scheduled', 'available'), \
                 {own}, '[]', '[]', ${}, ${}, $2)",
                p + 1,
                p + 10,
                p + 11,
            ),
        };
    }
    if shape == (RowShape::Full { unique: true }) {
        sql.push_str("\nON DUPLICATE KEY UPDATE jobs.id = jobs.id");
    }
    if returning {
        sql.push_str(match shape {
            RowShape::Plain => "\nRETURNING id",
            RowShape::Full { .. } => "\nRETURNING id, lock_token, state, unique_key",
        });
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders(sql: &str) -> usize {
        sql.matches('$').count()
    }

    #[test]
    fn each_shape_binds_its_parameters_and_is_built_once() {
        let plain = statement(RowShape::Plain, 3, false, true);
        assert_eq!(placeholders(plain), 3 * 8);
        assert!(plain.ends_with("RETURNING id"), "{plain}");
        assert!(std::ptr::eq(plain, statement(RowShape::Plain, 3, false, true)));
        let sync = statement(RowShape::Plain, 3, true, false);
        assert_eq!(placeholders(sync), 3 * 8 + 3 + 3, "the clock and the token in every row");
        let full = statement(RowShape::Full { unique: true }, 2, false, true);
        assert_eq!(placeholders(full), 2 * 12 + 2);
        assert!(full.contains("ON DUPLICATE KEY UPDATE"));
        assert!(!statement(RowShape::Full { unique: false }, 2, false, true).contains("ON DUPLICATE"));
        assert_eq!(
            statement(RowShape::Plain, 500, false, true),
            statement(RowShape::Plain, 100, false, true)
        );
    }

    #[test]
    fn only_jobs_due_now_without_a_key_are_plain() {
        let now = NewJob::new("k", "q", "{}");
        let zero = NewJob { delay_ms: Some(0), ..NewJob::new("k", "q", "{}") };
        let later = NewJob { delay_ms: Some(5), ..NewJob::new("k", "q", "{}") };
        let keyed = NewJob { unique: Some((vec![1], Vec::new())), ..NewJob::new("k", "q", "{}") };
        assert_eq!(RowShape::of(&[&now, &zero]), RowShape::Plain);
        assert_eq!(RowShape::of(&[&now, &later]), RowShape::Full { unique: false });
        assert_eq!(RowShape::of(&[&keyed, &now]), RowShape::Full { unique: true });
    }
}
