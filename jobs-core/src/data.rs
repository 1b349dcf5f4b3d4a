//! The application's own values for its jobs: a mail client, an HTTP client, its config,
//! its own pool. Registered once on the worker ([`WorkerBuilder::data`](crate::WorkerBuilder::data)),
//! reached from a job by type: as a `Data<T>` parameter of a `#[job]` function (checked
//! when the worker is built), or with [`JobContext::data`](crate::JobContext::data).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared value of the application's, handed to jobs: `Data<Mailer>` derefs to the
/// `Mailer` registered with [`WorkerBuilder::data`](crate::WorkerBuilder::data). Cloning
/// it clones an [`Arc`]. For a trait object (a mailer you fake in tests), register an
/// `Arc<dyn Mailer>` and take `Data<Arc<dyn Mailer>>`.
pub struct Data<T>(Arc<T>);

impl<T> Data<T> {
    /// Wraps a value already shared.
    pub fn from_arc(value: Arc<T>) -> Data<T> {
        Data(value)
    }

    /// The shared value.
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }

    /// Wraps `value`.
    pub fn new(value: T) -> Data<T> {
        Data(Arc::new(value))
    }
}

impl<T> From<Arc<T>> for Data<T> {
    fn from(value: Arc<T>) -> Data<T> {
        Data(value)
    }
}

impl<T> Clone for Data<T> {
    fn clone(&self) -> Self {
        Data(self.0.clone())
    }
}

impl<T> Deref for Data<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: fmt::Debug> fmt::Debug for Data<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A value a job needs from the application, by type (what a `Data<T>` parameter of a
/// `#[job]` function declares; [`Job::needs`](crate::Job::needs)).
#[derive(Clone, Copy)]
pub struct Need {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
}

impl Need {
    /// The need of a `T`.
    pub fn of<T: Send + Sync + 'static>() -> Need {
        Need { type_id: TypeId::of::<T>, type_name: std::any::type_name::<T> }
    }

    /// The type's name (`my_app::Mailer`).
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }
}

impl fmt::Debug for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Need").field(&self.type_name()).finish()
    }
}

/// The values a worker hands its jobs, one per type. Built by
/// [`WorkerBuilder::data`](crate::WorkerBuilder::data), or directly for the testing helpers
/// (`AppData::new().with(mailer).with(config)`).
/// Cloning it is cheap (the values are shared).
#[derive(Clone, Default)]
pub struct AppData {
    values: Arc<HashMap<TypeId, Entry>>,
}

/// A value, with its type's name.
type Entry = (&'static str, Arc<dyn Any + Send + Sync>);

impl AppData {
    /// No values.
    pub fn new() -> AppData {
        AppData::default()
    }

    /// With `value` (replacing a value of the same type).
    pub fn with<T: Send + Sync + 'static>(self, value: T) -> AppData {
        self.with_arc(Arc::new(value))
    }

    /// With a value already shared (replacing a value of the same type).
    pub fn with_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> AppData {
        Arc::make_mut(&mut self.values).insert(TypeId::of::<T>(), (std::any::type_name::<T>(), value));
        self
    }

    /// The value of type `T`, if there is one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Data<T>> {
        let (_, value) = self.values.get(&TypeId::of::<T>())?;
        value.clone().downcast::<T>().ok().map(Data)
    }

    /// Whether there is a value for `need`.
    pub fn has(&self, need: &Need) -> bool {
        self.values.contains_key(&(need.type_id)())
    }

    /// The first of `needs` that has no value.
    pub fn missing(&self, needs: &[Need]) -> Option<Need> {
        needs.iter().find(|n| !self.has(n)).copied()
    }

    /// The types held, by name (what [`Error::MissingData`](crate::Error::MissingData) lists).
    pub fn type_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.values.values().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names
    }
}

/// How a `#[job]` function's `Data<T>` parameter is read from the worker's values
/// (implemented for [`Data<T>`] only).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `jobs_core::Data<T>`, which a `#[job]` parameter spelled `Data<..>` must be",
    label = "a value of the application's: use `jobs_core::Data<T>` (given with `.data(value)`)",
    note = "a job's own arguments come first, and cannot be spelled `Data<..>`: rename or wrap that type"
)]
pub trait FromAppData: Sized {
    /// What it needs.
    fn need() -> Need;
    /// The value, if `data` holds it.
    fn from_app_data(data: &AppData) -> Option<Self>;
}

impl<T: Send + Sync + 'static> FromAppData for Data<T> {
    fn need() -> Need {
        Need::of::<T>()
    }

    fn from_app_data(data: &AppData) -> Option<Self> {
        data.get::<T>()
    }
}

impl fmt::Debug for AppData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.type_names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Mailer(&'static str);
    struct Config;

    #[test]
    fn values_are_found_by_type_and_needs_name_what_is_missing() {
        let data = AppData::new().with(Mailer("smtp"));
        assert_eq!(*data.get::<Mailer>().expect("mailer"), Mailer("smtp"));
        assert!(data.get::<Config>().is_none());
        let missing = data.missing(&[Need::of::<Mailer>(), Need::of::<Config>()]).expect("config is missing");
        assert!(missing.type_name().ends_with("Config"), "{missing:?}");
        assert!(data.missing(&[Need::of::<Mailer>()]).is_none());
    }
}
