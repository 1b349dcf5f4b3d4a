//! [`suite!`](crate::suite): every case as a test of the caller's crate, those that need
//! what the backend lacks skipped with its name; [`run`] and [`check_lacks`], which the
//! tests it writes call.

use jobs_core::driver::{Capabilities, Capability};

use crate::backend::{Backend, TestDb};
use crate::catalogue::CASES;

/// Runs case `name` on a fresh database of `B`, on a runtime of its own (tokio's, two
/// worker threads, as the cases need), after checking that the case is one of [`CASES`],
/// that `B` has what it needs, and that the driver declares what the backend says it does.
pub fn run<B, F, Fut>(name: &str, case: F)
where
    B: Backend,
    F: FnOnce(TestDb) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let listed = CASES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not a case of the suite"));
    let missing = B::CAPABILITIES.missing(listed.requires);
    assert!(missing.is_empty(), "`{name}` runs, but the backend lacks {missing:?}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the case");
    runtime.block_on(run_on(name, case, B::CAPABILITIES, B::database(12)));
}

async fn run_on<F, Fut>(
    name: &str,
    case: F,
    capabilities: Capabilities,
    database: impl std::future::Future<Output = TestDb>,
) where
    F: FnOnce(TestDb) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = database.await;
    assert_eq!(db.driver.capabilities(), capabilities, "{name}: the driver's declared capabilities");
    case(db).await;
}

/// Checks that `lacks` is what `B` lacks of what the cases need: every capability listed is
/// one `B::CAPABILITIES` does not hold and some case needs, and every capability a case
/// needs and `B` lacks is listed. (A capability no case needs is not listed, whether the
/// backend has it or not.)
pub fn check_lacks<B: Backend>(lacks: &[Capability]) {
    let needed: Vec<Capability> = CASES.iter().flat_map(|c| c.requires.iter().copied()).collect();
    for capability in lacks {
        assert!(
            !B::CAPABILITIES.has(*capability),
            "the suite is told the backend lacks {capability}, but its driver declares it: remove it from `lacks`"
        );
        assert!(needed.contains(capability), "no case needs {capability}: remove it from `lacks`");
    }
    for case in CASES {
        for capability in B::CAPABILITIES.missing(case.requires) {
            assert!(
                lacks.contains(&capability),
                "`{}` needs {capability}, which the backend lacks: add it to `lacks`",
                case.name
            );
        }
    }
}

/// Instantiates the suite for a backend: every case of [`CASES`] becomes a test; a case
/// that needs a capability in `lacks` is an ignored test whose reason names it, and a
/// generated test checks `lacks` ([`check_lacks`]); the model-based test
/// ([`model::run`](crate::model::run)) is the test `the_model_holds`. The tests need nothing of the caller's
/// crate but this one (each case runs on a runtime [`run`] builds).
///
/// ```ignore
/// jobs_conformance::suite! {
///     backend: Sqlite;
///     lacks: [SkipLocked, CountEstimates];
/// }
/// ```
#[macro_export]
macro_rules! suite {
    (backend: $backend:ty; lacks: [$($lacks:ident),* $(,)?];) => {
        $crate::with_cases!(__suite_cases { backend: $backend; lacks: [$($lacks),*]; });

        #[test]
        fn the_suite_skips_exactly_what_the_backend_lacks() {
            $crate::check_lacks::<$backend>(&[$($crate::__capability!($lacks)),*]);
        }

        #[test]
        fn the_model_holds() {
            $crate::model::run::<$backend>();
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __suite_cases {
    (backend: $backend:ty; lacks: $lacks:tt; cases: [$($name:ident: [$($capability:ident)?]),* $(,)?]) => {
        $($crate::__case!($backend; $lacks; $name; [$($capability)?]);)*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __case {
    ($backend:ty; $lacks:tt; $name:ident; []) => {
        $crate::__run_case!($backend; $name);
    };
    ($backend:ty; [$($lacks:ident),*]; $name:ident; [$capability:ident]) => {
        $crate::__if_lacks!($capability; [$($lacks),*]; $name; $backend);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run_case {
    ($backend:ty; $name:ident) => {
        #[test]
        fn $name() {
            $crate::run::<$backend, _, _>(stringify!($name), $crate::cases::$name);
        }
    };
}

/// A case that needs `$capability`: skipped (an ignored test whose reason names the
/// capability; the reason must be a literal, hence one arm per capability) if `lacks`
/// holds it, run otherwise.
#[doc(hidden)]
#[macro_export]
macro_rules! __if_lacks {
    (ListenNotify; [ListenNotify $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks LISTEN/NOTIFY (Capability::ListenNotify)"]
        fn $name() {}
    };
    (SkipLocked; [SkipLocked $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks SKIP LOCKED (Capability::SkipLocked)"]
        fn $name() {}
    };
    (CountEstimates; [CountEstimates $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks planner count estimates (Capability::CountEstimates)"]
        fn $name() {}
    };
    (JsonContainment; [JsonContainment $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks JSON containment search (Capability::JsonContainment)"]
        fn $name() {}
    };
    (Returning; [Returning $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks RETURNING (Capability::Returning)"]
        fn $name() {}
    };
    (IndexedSearch; [IndexedSearch $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks an index for searches (Capability::IndexedSearch)"]
        fn $name() {}
    };
    (Archive; [Archive $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks an archive table for finished jobs (Capability::Archive)"]
        fn $name() {}
    };
    (LivenessLocks; [LivenessLocks $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks liveness locks held by each node's process (Capability::LivenessLocks)"]
        fn $name() {}
    };
    (IndexedTags; [IndexedTags $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks an index of tags (Capability::IndexedTags)"]
        fn $name() {}
    };
    (ParallelReads; [ParallelReads $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        #[test]
        #[ignore = "skipped: the backend lacks parallel reads (Capability::ParallelReads)"]
        fn $name() {}
    };
    ($capability:ident; [$other:ident $(, $rest:ident)*]; $name:ident; $backend:ty) => {
        $crate::__if_lacks!($capability; [$($rest),*]; $name; $backend);
    };
    ($capability:ident; []; $name:ident; $backend:ty) => {
        $crate::__run_case!($backend; $name);
    };
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;

    struct NoNotifications;

    #[async_trait]
    impl Backend for NoNotifications {
        const CAPABILITIES: Capabilities = Capabilities::ALL.without(Capability::ListenNotify);

        async fn database(_connections: usize) -> TestDb {
            panic!("the check opens no database")
        }
    }

    #[test]
    fn the_lacks_check_refuses_a_missing_capability_and_one_the_backend_has() {
        check_lacks::<NoNotifications>(&[Capability::ListenNotify]);
        let missing = std::panic::catch_unwind(|| check_lacks::<NoNotifications>(&[]));
        assert!(missing.is_err(), "a case that needs what the backend lacks, not listed");
        let has = std::panic::catch_unwind(|| {
            check_lacks::<NoNotifications>(&[Capability::ListenNotify, Capability::SkipLocked])
        });
        assert!(has.is_err(), "a capability the backend has, listed as lacking");
    }

    #[test]
    fn a_case_the_backend_cannot_run_or_the_suite_does_not_have_is_refused_before_it_starts() {
        let message = |name: &'static str| {
            let refused = std::panic::catch_unwind(|| run::<NoNotifications, _, _>(name, |_| async {}));
            let payload = refused.expect_err("refused");
            payload.downcast_ref::<String>().cloned().unwrap_or_default()
        };
        let lacks = message("a_notification_wakes_an_idle_worker_before_its_poll");
        assert!(lacks.contains("the backend lacks [ListenNotify]"), "{lacks}");
        let unknown = message("no_such_case");
        assert!(unknown.contains("is not a case of the suite"), "{unknown}");
    }

    #[test]
    fn the_list_names_every_case_once() {
        let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CASES.len(), "a case listed twice");
        assert!(CASES.len() >= 59, "the suite lost cases: {}", CASES.len());
    }
}
