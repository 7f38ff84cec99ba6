//! Turns of the thread a long computation runs on. A trained model's pass on the page's thread
//! cuts its products into steps of bounded work and, between two steps, gives the browser a turn
//! once a slice of time is spent: the page paints and answers the reader during a pass of
//! seconds. The same code runs at once where nothing waits for the thread (a worker, a native
//! test): [`AtOnce`] cuts nothing and never waits, and [`at_once`] runs such a computation to
//! its end in one call. Cutting a product changes which call computes an output, never the sum
//! that makes it, so a pass in turns gives the same bits as a pass at once (tested where each
//! product is cut).

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

/// How long the page's thread computes before it gives the browser a turn (BENCHMARKS.md
/// section 20: no stretch of the page's thread over about 200 ms at any shape).
pub const SLICE_MS: f64 = 40.0;

/// The most arithmetic one step of a pass on the page's thread does: under 10 ms of the wasm
/// vector kernel, so a slice of the thread ends close to its deadline.
pub const STEP_FLOPS: usize = 256 << 20;

/// A future of the thread's one owner (never sent elsewhere).
pub type TurnFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Where a long computation gives its thread away between steps.
pub trait Turns {
    /// The most arithmetic one step does (multiply and add counted separately), where products
    /// are cut into steps at all (`None`: each in one call).
    fn step_flops(&self) -> Option<usize>;
    /// Resolves at once while the current slice lasts; once it is spent, after the thread's
    /// owner has had a turn (the browser rendered and handled events).
    fn turn(&self) -> TurnFuture<'_>;
}

/// No turns: every product in one call, and nothing ever waits.
pub struct AtOnce;

impl Turns for AtOnce {
    fn step_flops(&self) -> Option<usize> {
        None
    }

    fn turn(&self) -> TurnFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}

/// Steps of at most `step` FLOPs that never wait, counted: what tests cut a pass with, finely at
/// small shapes, to check that it gives the bits of a pass at once.
pub struct InSteps {
    step: usize,
    turns: std::cell::Cell<usize>,
}

impl InSteps {
    /// Steps of at most `step` FLOPs (one row, column or head is the least a step does).
    pub fn of(step: usize) -> InSteps {
        InSteps { step, turns: std::cell::Cell::new(0) }
    }

    /// The turns taken so far.
    pub fn taken(&self) -> usize {
        self.turns.get()
    }
}

impl Turns for InSteps {
    fn step_flops(&self) -> Option<usize> {
        Some(self.step)
    }

    fn turn(&self) -> TurnFuture<'_> {
        self.turns.set(self.turns.get() + 1);
        Box::pin(std::future::ready(()))
    }
}

/// Runs `work`, a computation that never waits (its only turns are [`AtOnce`]'s), to its end.
pub fn at_once<T>(work: impl Future<Output = T>) -> T {
    let mut work = pin!(work);
    match work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("a computation run at once waited for a turn"),
    }
}

/// Runs `work` for as long as `wanted` says it is still wanted, asked each time `work` is taken up
/// again after a turn: its result, or `None` once it is not (`work` dropped there, its remaining
/// steps never run). What a pass whose text, heads or view changed, or whose owner is gone, ends
/// with on the page's thread, rather than run to an end nobody reads.
pub async fn while_wanted<T>(work: impl Future<Output = T>, wanted: impl Fn() -> bool) -> Option<T> {
    let mut work = pin!(work);
    std::future::poll_fn(move |cx| match wanted() {
        true => work.as_mut().poll(cx).map(Some),
        false => Poll::Ready(None),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_computation_with_no_turns_runs_to_its_end_in_one_call() {
        let steps = at_once(async {
            let mut steps = 0;
            for _ in 0..5 {
                AtOnce.turn().await;
                steps += 1;
            }
            steps
        });
        assert_eq!(steps, 5);
        assert_eq!(AtOnce.step_flops(), None);
    }

    /// A turn that waits once: what a page's turn does while a slice is spent.
    struct Waits;

    impl Turns for Waits {
        fn step_flops(&self) -> Option<usize> {
            Some(1)
        }

        fn turn(&self) -> TurnFuture<'_> {
            let mut waited = false;
            Box::pin(std::future::poll_fn(move |_| match std::mem::replace(&mut waited, true) {
                false => Poll::Pending,
                true => Poll::Ready(()),
            }))
        }
    }

    #[test]
    fn work_no_longer_wanted_ends_at_its_next_turn_and_takes_no_further_step() {
        use std::cell::Cell;
        let steps = Cell::new(0);
        let work = async {
            for _ in 0..10 {
                steps.set(steps.get() + 1);
                Waits.turn().await;
            }
            "done"
        };
        // Wanted when first polled and when taken up after each of its first two turns: three
        // steps, then the fourth taking-up finds it unwanted.
        let asked = Cell::new(0);
        let wanted = || {
            asked.set(asked.get() + 1);
            asked.get() <= 3
        };
        let mut run = pin!(while_wanted(work, wanted));
        let mut cx = Context::from_waker(Waker::noop());
        let ended = loop {
            if let Poll::Ready(value) = run.as_mut().poll(&mut cx) {
                break value;
            }
        };
        assert_eq!((ended, steps.get(), asked.get()), (None, 3, 4));
        // Wanted throughout: its result.
        let whole = async {
            Waits.turn().await;
            7
        };
        let mut run = pin!(while_wanted(whole, || true));
        assert_eq!(run.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(run.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
    }

    #[test]
    #[should_panic(expected = "waited for a turn")]
    fn a_computation_that_waits_is_refused_by_at_once() {
        at_once(Waits.turn());
    }
}
