//! Cancelling a job when its input changes. A job's [`Ticket`] is asked before every step; once
//! it says no, the job stops there. A ticket is a condition on the job's inputs (the sentence it
//! measures is still the page's, the reader has not paused it), checked when it is asked: the
//! page's resources start a new computation only once the last one has finished, so a job must
//! see for itself that it is no longer wanted. A [`Slot`] hands out tickets of which only the
//! newest is current, for a caller that starts each new job itself.

use std::cell::Cell;
use std::rc::Rc;

/// A job's right to go on.
#[derive(Clone)]
pub struct Ticket(Option<Rc<dyn Fn() -> bool>>);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ticket({})", if self.is_current() { "current" } else { "stopped" })
    }
}

impl Ticket {
    /// A ticket that is always current: a job nothing replaces.
    pub fn always() -> Ticket {
        Ticket(None)
    }

    /// A ticket current while `wanted()` holds (read afresh at every step).
    pub fn while_wanted(wanted: impl Fn() -> bool + 'static) -> Ticket {
        Ticket(Some(Rc::new(wanted)))
    }

    /// Whether the job may take its next step.
    pub fn is_current(&self) -> bool {
        self.0.as_ref().is_none_or(|wanted| wanted())
    }
}

/// Where the tickets of one kind of job come from: each new ticket stops every earlier one.
#[derive(Clone, Debug, Default)]
pub struct Slot(Rc<Cell<u64>>);

impl Slot {
    /// A new ticket; every earlier one of this slot stops being current.
    pub fn ticket(&self) -> Ticket {
        let number = self.0.get() + 1;
        self.0.set(number);
        let slot = self.0.clone();
        Ticket::while_wanted(move || slot.get() == number)
    }

    /// Stops every ticket of this slot.
    pub fn cancel(&self) {
        self.0.set(self.0.get() + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_ticket_of_a_slot_is_current() {
        let slot = Slot::default();
        let first = slot.ticket();
        assert!(first.is_current());
        let second = slot.clone().ticket();
        assert!(!first.is_current() && second.is_current());
        slot.cancel();
        assert!(!second.is_current());
        assert!(Ticket::always().is_current());
    }

    #[test]
    fn a_condition_ticket_follows_its_condition_each_time_it_is_asked() {
        let sentence = Rc::new(Cell::new(1));
        let measured = sentence.get();
        let ticket = Ticket::while_wanted({
            let sentence = sentence.clone();
            move || sentence.get() == measured
        });
        assert!(ticket.is_current());
        sentence.set(2);
        assert!(!ticket.is_current(), "the sentence changed");
        sentence.set(1);
        assert!(ticket.is_current(), "asked afresh");
    }
}
