//! The one place the buffer touches atomics and interior mutability.
//!
//! Under `cfg(loom)` these are loom's instrumented types, so the loom model in
//! `tests/loom.rs` explores every interleaving of the real code; otherwise they are
//! the standard library's, wrapped to offer the same closure-based API.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

/// `std::cell::UnsafeCell` with loom's `with` / `with_mut` access API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared raw pointer to the value.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with an exclusive raw pointer to the value.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
