//! A trained model's GPU copy where the page runs its passes ([`super::encoder`] for encoders,
//! [`super::decoder`] for decoders): the copy while the GPU works, the measured choice of backend
//! per pass when the page chose, and why it is not on the GPU when it is not.

use std::cell::RefCell;
use std::rc::Rc;

use super::placement::{Choice, Crossover, Place};
use crate::cpu::Kernel;

/// A model's copy on the GPU (`G`), if it has one, and where its passes go.
pub struct Placed<G> {
    gpu: RefCell<Option<Rc<G>>>,
    note: RefCell<Option<String>>,
    crossover: Option<Crossover>,
}

impl<G> Placed<G> {
    /// Every pass on the CPU kernel; `note` says why, where there is something to say.
    pub fn cpu(note: Option<String>) -> Placed<G> {
        Placed { gpu: RefCell::new(None), note: RefCell::new(note), crossover: None }
    }

    /// Passes on `gpu`: where `crossover` predicts it faster, or every pass without one (the
    /// reader forced the GPU).
    pub fn gpu(gpu: G, crossover: Option<Crossover>) -> Placed<G> {
        Placed { gpu: RefCell::new(Some(Rc::new(gpu))), note: RefCell::new(None), crossover }
    }

    /// The measured choice for a pass of `flops`, when the page chose and the GPU still works.
    pub fn choice(&self, flops: u64) -> Option<Choice> {
        let choice = self.crossover?.choose(flops);
        self.gpu.borrow().as_ref().map(|_| choice)
    }

    /// The GPU copy, when a pass of `flops` runs on it.
    pub fn gpu_for(&self, flops: u64) -> Option<Rc<G>> {
        let wanted = self.choice(flops).is_none_or(|c| c.place == Place::Gpu);
        self.gpu.borrow().clone().filter(|_| wanted)
    }

    /// Where a pass of `flops` runs, for the page: "the GPU (WebGPU)" or "the CPU kernel (…)".
    pub fn place_text(&self, flops: u64) -> String {
        match self.gpu_for(flops) {
            Some(_) => "the GPU (WebGPU)".to_string(),
            None => format!("the CPU kernel ({})", Kernel::Simd.describe()),
        }
    }

    /// `on` (where a pass of `flops` runs, as the page says it), and why when a measurement chose.
    pub fn with_why(&self, flops: u64, on: String) -> String {
        match self.choice(flops) {
            Some(c) => format!("{on}, {}", c.why()),
            None => on,
        }
    }

    /// Why the model is not on the GPU, when it was meant to be.
    pub fn note(&self) -> Option<String> {
        self.note.borrow().clone()
    }

    /// The GPU failed: every later pass runs on the CPU kernel, and `note` says why.
    pub fn fail(&self, note: String) {
        *self.gpu.borrow_mut() = None;
        *self.note.borrow_mut() = Some(note);
    }
}
