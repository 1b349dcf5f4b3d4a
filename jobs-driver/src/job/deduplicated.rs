//! A batch of new jobs with each uniqueness key once: no backend's upsert takes a key twice
//! in one statement, and a later copy of a key in the batch is the first copy's job.

use std::collections::HashMap;

use super::new_job::{Inserted, NewJob};
use crate::error::{DriverError, Result};

/// A batch to insert, with the later copies of each uniqueness key taken out.
#[derive(Debug)]
pub struct Deduplicated<'a> {
    /// The jobs that go to the database, in input order: every job without a key, and the
    /// first job of each key.
    pub rows: Vec<&'a NewJob>,
    /// For each input, the index in `rows` of the job it is.
    pub slot: Vec<usize>,
}

impl<'a> Deduplicated<'a> {
    /// `jobs`, each later copy of a key mapped to its first.
    pub fn new(jobs: &'a [NewJob]) -> Deduplicated<'a> {
        let mut rows = Vec::with_capacity(jobs.len());
        let mut slot = Vec::with_capacity(jobs.len());
        let mut first_with_key: HashMap<&[u8], usize> = HashMap::new();
        for job in jobs {
            if let Some((key, _)) = &job.unique {
                if let Some(&first) = first_with_key.get(key.as_slice()) {
                    slot.push(first);
                    continue;
                }
                first_with_key.insert(key.as_slice(), rows.len());
            }
            slot.push(rows.len());
            rows.push(job);
        }
        Deduplicated { rows, slot }
    }

    /// Each input's result, in input order, from each row's (`per_row[k]` for `rows[k]`): a
    /// later copy of a key is the first copy's job, as existing. An error when the database
    /// gave back another number of rows than it was sent.
    pub fn results(&self, per_row: &[Inserted]) -> Result<Vec<Inserted>> {
        if per_row.len() != self.rows.len() {
            return Err(DriverError::unexpected(format!(
                "{} jobs inserted as {} rows",
                self.rows.len(),
                per_row.len()
            )));
        }
        let mut used = vec![false; per_row.len()];
        Ok(self
            .slot
            .iter()
            .map(|&row| {
                let first_use = !std::mem::replace(&mut used[row], true);
                Inserted { id: per_row[row].id, existing: per_row[row].existing || !first_use }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(key: u8) -> NewJob {
        NewJob { unique: Some((vec![key], Vec::new())), ..NewJob::new("k", "q", "{}") }
    }

    #[test]
    fn a_later_copy_of_a_key_is_the_first_copys_job_as_existing() {
        let jobs = [keyed(1), NewJob::new("k", "q", "{}"), keyed(1), keyed(2), NewJob::new("k", "q", "{}")];
        let batch = Deduplicated::new(&jobs);
        assert_eq!(batch.rows.len(), 4, "key 1 once");
        assert_eq!(batch.slot, vec![0, 1, 0, 2, 3]);
        let per_row = [(10, false), (11, false), (5, true), (13, false)]
            .map(|(id, existing)| Inserted { id, existing });
        let results = batch.results(&per_row).expect("results");
        let pairs: Vec<(i64, bool)> = results.iter().map(|r| (r.id, r.existing)).collect();
        assert_eq!(pairs, vec![(10, false), (11, false), (10, true), (5, true), (13, false)]);
        assert!(batch.results(&per_row[..3]).is_err(), "a row missing");
    }
}
