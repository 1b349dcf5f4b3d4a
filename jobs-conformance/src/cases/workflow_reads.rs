//! Reading a workflow's members: the list and the count of the jobs of one workflow
//! (`JobFilter::workflow`), finished ones included wherever they are kept, with the other
//! conditions of a filter — what the dashboard's workflow view and its whole-workflow
//! cancel and retry read.

use jobs_core::driver::{DependsOn, JobCountParams, JobFilter, JobListParams, JobOrder, JobState, OnFailure};
use jobs_core::{Count, JobRow};

use super::workflows::{finish, insert, step, workflow};
use crate::TestDb;
use crate::factory::{JobFactory, insert_all};

async fn listed(db: &TestDb, filter: &JobFilter) -> Vec<i64> {
    let params = JobListParams { filter, before: None, limit: 100 };
    let rows: Vec<JobRow> = db.driver.job_list(params).await.expect("list");
    rows.into_iter().map(|r| r.id).collect()
}

async fn counted(db: &TestDb, filter: &JobFilter) -> Count {
    db.driver.job_count(JobCountParams { filter, cap: 1_000 }).await.expect("count")
}

/// Two workflows and a job in none: a workflow's filter lists and counts its members
/// only, its finished step too, and narrows with states like any filter.
pub async fn a_workflows_members_are_listed_and_counted_by_its_id(db: TestDb) {
    let steps = |name: &str| {
        vec![
            step(&format!("{name}-0"), &[]),
            step(&format!("{name}-1"), &[DependsOn::Step(0)]),
            step(&format!("{name}-2"), &[DependsOn::Step(1)]),
        ]
    };
    let mine = insert(&db, &workflow(OnFailure::Cancel, steps("mine"))).await;
    let other = insert(&db, &workflow(OnFailure::Cancel, steps("other"))).await;
    insert_all(&*db.driver, vec![JobFactory::new("k").queue("no-workflow")]).await;
    finish(&db, "mine-0", mine[0], JobState::Completed, None).await;
    let workflow_id = db.job(mine[0]).await.workflow_id.expect("a step names its workflow");

    let members =
        JobFilter { workflow: Some(workflow_id), order: JobOrder::OldestFirst, ..JobFilter::default() };
    assert_eq!(listed(&db, &members).await, mine, "its members, the finished one too, and nothing else");
    assert_eq!(counted(&db, &members).await, Count::Exact(3));
    let finished = JobFilter { states: JobState::FINAL.to_vec(), ..members.clone() };
    assert_eq!(listed(&db, &finished).await, mine[..1]);
    assert_eq!(counted(&db, &finished).await, Count::Exact(1));
    let waiting = JobFilter { states: vec![JobState::Pending], ..members.clone() };
    assert_eq!(listed(&db, &waiting).await, mine[2..]);
    let theirs = db.job(other[0]).await.workflow_id;
    let others = JobFilter { workflow: theirs, order: JobOrder::OldestFirst, ..JobFilter::default() };
    assert_eq!(listed(&db, &others).await, other);
}
