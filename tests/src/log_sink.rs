//! What a test binary's workers log, kept in memory: a `tracing` subscriber writing into
//! a [`LogSink`], as an application's subscriber would print it.

use std::sync::{Arc, Mutex};

/// A log sink: what the subscriber wrote.
#[derive(Clone, Default)]
pub struct LogSink(Arc<Mutex<Vec<u8>>>);

impl LogSink {
    /// Installs a plain-text subscriber writing into a new sink as the process's global
    /// one (once per test binary: a second call panics) and returns the sink.
    pub fn install_global() -> LogSink {
        let sink = LogSink::default();
        let subscriber = tracing_subscriber::fmt().with_writer(sink.clone()).with_ansi(false).finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber in this binary");
        sink
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LogSink;
    fn make_writer(&'a self) -> LogSink {
        self.clone()
    }
}
