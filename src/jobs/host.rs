//! What a job needs from where it runs besides the model: a clock, and a turn for the browser
//! between steps. The page's is `jobs::web::PageHost`; natively, `jobs::native::NativeHost`.

use std::future::Future;
use std::pin::Pin;

use crate::attention::clock::Clock;

/// A future of the page's one thread (never sent elsewhere).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A clock and the browser's turn.
pub trait Host: Clock {
    /// Resolves once the browser has had a turn (rendered, handled events).
    fn turn(&self) -> LocalFuture<'static, ()>;
}

/// A host's clock as the backend's timing functions take it (they take a sized clock).
pub struct HostClock<'a>(pub &'a dyn Host);

impl Clock for HostClock<'_> {
    fn now_ms(&self) -> f64 {
        self.0.now_ms()
    }

    fn resolution_ms(&self) -> f64 {
        self.0.resolution_ms()
    }
}
