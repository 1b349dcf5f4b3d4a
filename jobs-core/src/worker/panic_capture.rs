//! Turning a handler's panic into the attempt's error, with its backtrace.
//!
//! A process-wide panic hook (installed once, chaining to the previous one) stores the
//! backtrace of the panicking thread in a thread-local; the executor, which catches the
//! unwind on that same thread, takes it from there.
//!
//! A panic inside a handler is caught and becomes the attempt's error, with its backtrace
//! (and a `warn` log line from the executor): it is not a crash. So while a handler runs
//! (each poll of its future, wrapped in [`Caught`]), the hook does not pass the panic on to
//! the previous hook, which would print `thread '…' panicked at …` and a backtrace to
//! stderr as if the process were going down. Panics anywhere else (tasks the handler
//! spawns, the application) still reach the previous hook.

use std::any::Any;
use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

thread_local! {
    static LAST_BACKTRACE: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Whether this thread is running a handler whose panics are caught.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Installs the capturing hook (idempotent).
pub(crate) fn install_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let backtrace = Backtrace::force_capture().to_string();
            LAST_BACKTRACE.with(|slot| *slot.borrow_mut() = Some(backtrace));
            if !IN_HANDLER.with(Cell::get) {
                previous(info);
            }
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

/// Runs `f` as handler code: a panic in it is caught by the caller, so it is not printed.
pub(crate) fn caught<R>(f: impl FnOnce() -> R) -> R {
    let before = IN_HANDLER.with(|flag| flag.replace(true));
    let _restore = Restore(before);
    f()
}

/// Puts the flag back as it was, after a poll or a panic alike.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        IN_HANDLER.with(|flag| flag.set(self.0));
    }
}

/// A handler's future, each poll of which is [`caught`] (its panics are caught by the
/// executor's `catch_unwind` around it).
pub(crate) struct Caught<F: ?Sized>(pub(crate) Pin<Box<F>>);

impl<F: Future + ?Sized> Future for Caught<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let inner = self.0.as_mut();
        caught(|| inner.poll(cx))
    }
}
