//! A batch's insert, round by round: the rows an insert returns, the holders of the keys
//! it did not take, and the rows whose holder finished meanwhile, which go again.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Bytea, Nullable};
use jobs_driver::{Deduplicated, DriverError, Inserted, NewJob, Result};

/// One row returned by an insert statement: `id, wakes, unique_key`.
#[derive(QueryableByName)]
pub(super) struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Bool)]
    pub(super) wakes: bool,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) unique_key: Option<Vec<u8>>,
}

/// The job holding a uniqueness key.
#[derive(QueryableByName)]
pub(super) struct Holder {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Bytea)]
    pub(super) unique_key: Vec<u8>,
}

/// How many times an insert goes again for keys whose holder finished between the insert
/// and the look-up of the holder.
pub(super) const KEY_ROUNDS: usize = 5;

/// A batch's insert, statement by statement: each row is inserted, or its key's holder is
/// found; a row whose holder finished before it was found goes again.
pub(super) struct Rounds<'d, 'a> {
    dedup: &'d Deduplicated<'a>,
    /// Each row's result once known.
    done: Vec<Option<Inserted>>,
    /// The rows of the next insert.
    pending: Vec<usize>,
    /// The rows the last insert did not take (their key was held).
    held: Vec<usize>,
    /// The queues that received available jobs.
    queues: Vec<String>,
}

impl<'d, 'a> Rounds<'d, 'a> {
    pub(super) fn new(dedup: &'d Deduplicated<'a>) -> Self {
        let n = dedup.rows.len();
        Rounds { dedup, done: vec![None; n], pending: (0..n).collect(), held: Vec::new(), queues: Vec::new() }
    }

    /// The rows to insert now.
    pub(super) fn rows(&self) -> Vec<&'a NewJob> {
        self.pending.iter().map(|&i| self.dedup.rows[i]).collect()
    }

    /// Takes the insert's returned rows: one per row inserted, in the order given. A
    /// row with a key that is not among them was not inserted.
    pub(super) fn inserted(&mut self, returned: &[InsertedRow]) -> Result<()> {
        let mut next = returned.iter().peekable();
        self.held.clear();
        for &i in &self.pending {
            let job = self.dedup.rows[i];
            let key = job.unique.as_ref().map(|(key, _)| key.as_slice());
            match next.peek() {
                Some(row) if row.unique_key.as_deref() == key => {
                    self.done[i] = Some(Inserted { id: row.id, existing: false });
                    if row.wakes && !self.queues.iter().any(|q| **q == *job.queue) {
                        self.queues.push(job.queue.to_string());
                    }
                    next.next();
                }
                _ if key.is_some() => self.held.push(i),
                _ => return Err(DriverError::unexpected("a job without a uniqueness key was not inserted")),
            }
        }
        if next.next().is_some() {
            return Err(DriverError::unexpected("an insert returned more rows than it was given"));
        }
        self.pending.clear();
        Ok(())
    }

    /// The keys of the rows the last insert did not take.
    pub(super) fn held_keys(&self) -> Vec<&'a [u8]> {
        self.held
            .iter()
            .filter_map(|&i| self.dedup.rows[i].unique.as_ref().map(|(k, _)| k.as_slice()))
            .collect()
    }

    /// Takes the holders found: their rows come back as the holder, `existing`; a row
    /// whose holder is gone goes again.
    pub(super) fn holders(&mut self, holders: &[Holder]) {
        for &i in &self.held {
            let key = self.dedup.rows[i].unique.as_ref().map(|(k, _)| k.as_slice());
            match holders.iter().find(|h| Some(h.unique_key.as_slice()) == key) {
                Some(holder) => self.done[i] = Some(Inserted { id: holder.id, existing: true }),
                None => self.pending.push(i),
            }
        }
        self.held.clear();
    }

    pub(super) fn finished(&self) -> bool {
        self.pending.is_empty()
    }

    /// Each input's result, and the queues that received available jobs.
    pub(super) fn results(self) -> Result<(Vec<Inserted>, Vec<String>)> {
        let per_row: Option<Vec<Inserted>> = self.done.into_iter().collect();
        let per_row = per_row.ok_or_else(|| {
            DriverError::unexpected(format!(
                "a uniqueness key changed hands {KEY_ROUNDS} times during one insert"
            ))
        })?;
        Ok((self.dedup.results(&per_row)?, self.queues))
    }
}
