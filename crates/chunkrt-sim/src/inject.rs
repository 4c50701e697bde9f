//! Communication errors injected into a simulated plant, shared by every simulated
//! backend so that a lost or corrupted frame behaves the same on each.

use chunkrt_core::BackendError;

/// The next `n` exchanges fail with one error, as lost or corrupted frames would.
/// Copy, allocation-free: it lives inside a backend on the control thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectedErrors {
    left: u32,
    error: BackendError,
}

impl Default for InjectedErrors {
    fn default() -> InjectedErrors {
        InjectedErrors {
            left: 0,
            error: BackendError::Injected,
        }
    }
}

impl InjectedErrors {
    /// Makes the next `cycles` calls of [`InjectedErrors::take`] return `error`
    /// (replacing whatever was still pending; `cycles = 0` clears it).
    pub fn set(&mut self, cycles: u32, error: BackendError) {
        self.left = cycles;
        self.error = error;
    }

    /// The error the current exchange must fail with, if one is still pending
    /// (counting it); `None` once they are spent.
    pub fn take(&mut self) -> Option<BackendError> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.error)
    }

    /// How many exchanges are still to fail.
    pub fn pending(&self) -> u32 {
        self.left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_exactly_the_set_number_of_exchanges_with_the_set_error() {
        let mut errors = InjectedErrors::default();
        assert_eq!(errors.take(), None);
        let lost = BackendError::WorkingCounter {
            expected: 3,
            received: 2,
        };
        errors.set(3, lost);
        let taken: Vec<_> = (0..5).map(|_| errors.take()).collect();
        assert_eq!(taken, [Some(lost), Some(lost), Some(lost), None, None]);
        errors.set(2, BackendError::Injected);
        errors.set(0, BackendError::Injected);
        assert_eq!(errors.take(), None, "set(0, ..) clears what was pending");
    }
}
