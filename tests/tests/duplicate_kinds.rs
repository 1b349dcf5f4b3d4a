//! Two jobs claiming one kind name: the registry refuses to start and names both.

use jobs_core::{Error, JobContext, Registry, job};

mod billing {
    use super::*;

    #[job(kind = "send_receipt")]
    pub(crate) async fn send_receipt(_ctx: JobContext, _order: i64) -> Result<(), std::io::Error> {
        Ok(())
    }
}

mod shipping {
    use super::*;

    #[job(kind = "send_receipt")]
    pub(crate) async fn notify_customer(_ctx: JobContext, _order: i64) -> Result<(), std::io::Error> {
        Ok(())
    }
}

#[test]
fn two_jobs_with_one_kind_fail_registration_naming_both() {
    let err = Registry::from_inventory().expect_err("duplicate kinds must be refused");
    match &err {
        Error::DuplicateKind { kind, first, second } => {
            assert_eq!(kind, "send_receipt");
            let mut names = [first.as_str(), second.as_str()];
            names.sort_unstable();
            assert_eq!(
                names,
                ["duplicate_kinds::billing::send_receipt", "duplicate_kinds::shipping::notify_customer"]
            );
        }
        other => panic!("expected DuplicateKind, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("send_receipt") && text.contains("notify_customer"), "{text}");

    // Registering the same type twice is fine.
    let registry = Registry::new()
        .with::<billing::send_receipt>()
        .and_then(|r| r.with::<billing::send_receipt>())
        .expect("same type twice");
    assert_eq!(registry.kinds(), ["send_receipt"]);
    assert!(
        Registry::new()
            .with::<billing::send_receipt>()
            .and_then(|r| r.with::<shipping::notify_customer>())
            .is_err()
    );
}
