//! Workflow rows as backends without JSON or enum column types store them (SQLite,
//! MySQL): states and needs as names, results as JSON text, and a batch of edges as one
//! JSON array that the insert statement unpacks. A workflow's row reads alike everywhere
//! ([`WorkflowInfoRow`], for every driver's [`WORKFLOW_GET`]).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use serde_json::Value;

use super::definition::{Dependency, Needs, OnFailure, WorkflowInfo};
use super::store::{DependencyState, Edge};
use crate::error::{DriverError, Result};
use crate::state::JobState;

/// A state stored by its name (SQLite, MySQL); an unknown name is
/// [`DriverError::Unexpected`](crate::DriverError).
pub fn stored_state(name: &str) -> Result<JobState> {
    name.parse::<JobState>().map_err(|e| DriverError::unexpected(e.to_string()))
}

fn result(text: Option<&str>) -> Result<Option<Value>> {
    text.map(|t| {
        serde_json::from_str(t)
            .map_err(|e| DriverError::unexpected(format!("a stored result is not JSON: {e}")))
    })
    .transpose()
}

/// `edges` as one JSON array of `[depends_on, job_id, kind, needs, outcome, result]`, the result
/// as JSON text (or null), for an insert statement that reads it with `json_each` or
/// `JSON_TABLE`.
pub fn edges_json(edges: &[Edge]) -> String {
    let rows: Vec<Value> = edges
        .iter()
        .map(|e| {
            serde_json::json!([
                e.depends_on,
                e.job_id,
                e.kind,
                e.needs.as_str(),
                e.outcome.map(JobState::as_str),
                e.result.as_ref().map(Value::to_string),
            ])
        })
        .collect();
    Value::Array(rows).to_string()
}

/// `(depends_on, job_id)` pairs as one JSON array of two-element arrays, for a statement
/// that reads it with `json_each` or `JSON_TABLE`.
pub fn pairs_json(pairs: &[(i64, i64)]) -> String {
    Value::Array(pairs.iter().map(|(a, b)| serde_json::json!([a, b])).collect()).to_string()
}

impl Edge {
    /// An edge from its stored columns.
    pub fn from_stored(
        depends_on: i64,
        job_id: i64,
        kind: String,
        needs: &str,
        outcome: Option<&str>,
        result_text: Option<&str>,
    ) -> Result<Edge> {
        Ok(Edge {
            depends_on,
            job_id,
            kind,
            needs: Needs::from_stored(needs),
            outcome: outcome.map(stored_state).transpose()?,
            result: result(result_text)?,
        })
    }
}

impl DependencyState {
    /// A job's state and result from their stored columns.
    pub fn from_stored(
        id: i64,
        kind: String,
        state_name: &str,
        result_text: Option<&str>,
    ) -> Result<DependencyState> {
        Ok(DependencyState { id, kind, state: stored_state(state_name)?, result: result(result_text)? })
    }
}

/// The statement `workflow_get` runs on every backend (`$1`: the id), read as a
/// [`WorkflowInfoRow`].
pub const WORKFLOW_GET: &str = "SELECT id, name, on_failure, callback_id, sealed_at IS NOT NULL AS sealed \
     FROM job_workflows WHERE id = $1";

/// The statement of [`WorkflowStore::workflows_after`](super::WorkflowStore::workflows_after)
/// on every backend: the ids of the first `$2` workflows after `$1`, ascending (read as
/// [`Id`](crate::rows::Id)s).
pub const WORKFLOWS_AFTER: &str = "SELECT id FROM job_workflows WHERE id > $1 ORDER BY id LIMIT $2";

/// A `job_workflows` row as [`WORKFLOW_GET`] reads it, on any backend.
#[derive(Debug, QueryableByName)]
pub struct WorkflowInfoRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    on_failure: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    callback_id: Option<i64>,
    #[diesel(sql_type = Bool)]
    sealed: bool,
}

impl From<WorkflowInfoRow> for WorkflowInfo {
    fn from(r: WorkflowInfoRow) -> WorkflowInfo {
        WorkflowInfo {
            id: r.id,
            name: r.name,
            on_failure: OnFailure::from_stored(&r.on_failure),
            callback_id: r.callback_id,
            sealed: r.sealed,
        }
    }
}

impl From<Edge> for Dependency {
    fn from(e: Edge) -> Dependency {
        Dependency {
            depends_on: e.depends_on,
            kind: e.kind,
            needs: e.needs,
            outcome: e.outcome,
            result: e.result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_round_trip_through_their_stored_form() {
        let edge = Edge {
            depends_on: 1,
            job_id: 2,
            kind: "k".into(),
            needs: Needs::Finished,
            outcome: Some(JobState::Completed),
            result: Some(serde_json::json!({"n": "x"})),
        };
        let json: Value = serde_json::from_str(&edges_json(std::slice::from_ref(&edge))).expect("json");
        let row = &json[0];
        let back = Edge::from_stored(
            row[0].as_i64().expect("id"),
            row[1].as_i64().expect("id"),
            row[2].as_str().expect("kind").to_owned(),
            row[3].as_str().expect("needs"),
            row[4].as_str(),
            row[5].as_str(),
        )
        .expect("decodes");
        assert_eq!(back, edge);
        assert!(DependencyState::from_stored(1, "k".into(), "done", None).is_err());
    }
}
