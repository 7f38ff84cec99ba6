//! Cancelling a job when its input changes: each kind of job has a [`Slot`]; starting one takes
//! the slot's next [`Ticket`], and a job whose ticket is no longer the newest stops at its next
//! step (the sentence, the heads or the backend it was computing for is gone).

use std::cell::Cell;
use std::rc::Rc;

/// Where the tickets of one kind of job come from.
#[derive(Clone, Debug, Default)]
pub struct Slot(Rc<Cell<u64>>);

/// A job's right to go on: current until its slot hands out a newer one.
#[derive(Clone, Debug)]
pub struct Ticket {
    slot: Option<Rc<Cell<u64>>>,
    number: u64,
}

impl Slot {
    /// A new ticket; every earlier one of this slot stops being current.
    pub fn ticket(&self) -> Ticket {
        let number = self.0.get() + 1;
        self.0.set(number);
        Ticket { slot: Some(self.0.clone()), number }
    }

    /// Stops every ticket of this slot (a job the reader paused).
    pub fn cancel(&self) {
        self.0.set(self.0.get() + 1);
    }
}

impl Ticket {
    /// A ticket that is always current: a job nothing replaces.
    pub fn always() -> Ticket {
        Ticket { slot: None, number: 0 }
    }

    /// Whether this is still its slot's newest ticket.
    pub fn is_current(&self) -> bool {
        self.slot.as_ref().is_none_or(|s| s.get() == self.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_ticket_is_current() {
        let slot = Slot::default();
        let first = slot.ticket();
        assert!(first.is_current());
        let second = slot.clone().ticket();
        assert!(!first.is_current() && second.is_current());
        slot.cancel();
        assert!(!second.is_current());
        assert!(Ticket::always().is_current());
    }
}
