//! Turning a handler's panic into the attempt's error, with its backtrace.
//!
//! A process-wide panic hook (installed once, chaining to the previous one) stores the
//! backtrace of the panicking thread in a thread-local; the executor, which catches the
//! unwind on that same thread, takes it from there.

use std::any::Any;
use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static LAST_BACKTRACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the capturing hook (idempotent).
pub(crate) fn install_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let backtrace = Backtrace::force_capture().to_string();
            LAST_BACKTRACE.with(|slot| *slot.borrow_mut() = Some(backtrace));
            previous(info);
        }));
    });
}

/// The panic's message, from its payload.
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "the job panicked with a non-string payload".to_owned()
    }
}

/// The backtrace of the latest panic on this thread, if the hook captured one.
pub(crate) fn take_backtrace() -> Option<String> {
    LAST_BACKTRACE.with(|slot| slot.borrow_mut().take())
}
