//! The trained model's loads, as the panel shows them: the model on show, a load under way with
//! its progress, and why the last one failed. A new load replaces one under way (the older one
//! stops at its next read, and its result is dropped); a failed load leaves the model on show,
//! and everything the reader set, as they were. The loading itself is `jobs::web::load`.

use std::cell::Cell;
use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::jobs::web::load::{load, LoadedModel, Source};
use crate::jobs::web::ModelFile;
use crate::model::spec::Holding;
use crate::model::Model;
use crate::ui::browser::Alive;

/// A model on show: the model, its file (the workers get a copy), and what its load reported.
#[derive(Clone)]
pub struct Shown {
    /// The model: an encoder or a decoder.
    pub model: Model,
    /// Its file and id.
    pub file: Rc<ModelFile>,
    /// What the loader noted about the folder.
    pub notes: Vec<String>,
    /// How much was read, how fast.
    pub summary: String,
}

/// A load under way.
#[derive(Clone, Debug, PartialEq)]
pub struct Loading {
    /// What is loaded ("the folder bert-base-uncased").
    pub what: String,
    /// Bytes read.
    pub done: f64,
    /// Bytes to read, when known.
    pub total: Option<f64>,
}

/// Where the panel's loads stand (the model on show is the panel's, `super::models`).
#[derive(Clone, Default)]
pub struct LoadState {
    /// The load under way.
    pub loading: Option<Loading>,
    /// Why the last load failed.
    pub error: Option<String>,
    /// The source of the failed load, when trying it again can help (a download).
    pub retry: Option<Retry>,
}

/// A source that can be asked for again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Retry {
    /// The built-in model.
    BuiltIn,
    /// A served folder.
    Served(String),
}

/// The panel's loads: their state, and which one is the latest.
#[derive(Clone, Copy)]
pub struct Loader {
    /// Where the loads stand.
    pub state: RwSignal<LoadState, LocalStorage>,
    /// Set to stop the load under way.
    stop: StoredValue<Rc<Cell<bool>>, LocalStorage>,
    /// Whether the panel that loads is still on the page.
    alive: StoredValue<Alive>,
}

impl Loader {
    /// No model yet, nothing loading.
    pub fn new() -> Loader {
        Loader {
            state: RwSignal::new_local(LoadState::default()),
            stop: StoredValue::new_local(Rc::new(Cell::new(false))),
            alive: StoredValue::new(Alive::here()),
        }
    }

    /// Loads `source`, replacing any load under way, with `held` bytes taken by the model on
    /// show; `loaded` gets the model.
    /// A load whose panel leaves the page stops, and its model is never handed over.
    pub fn start(self, source: Source, held: u64, loaded: impl Fn(Shown) + 'static) {
        let (Some(old), Some(alive)) = (self.stop.try_get_value(), self.alive.try_get_value()) else {
            return;
        };
        old.set(true);
        let stop = Rc::new(Cell::new(false));
        self.stop.set_value(stop.clone());
        let retry = match &source {
            Source::BuiltIn => Some(Retry::BuiltIn),
            Source::Served(path) => Some(Retry::Served(path.clone())),
            Source::Reader(_) => None,
        };
        let what = source.describe();
        self.state.update(|s| {
            s.loading = Some(Loading { what: what.clone(), done: 0.0, total: None });
            s.error = None;
        });
        let state = self.state;
        spawn_local(async move {
            let progress = {
                let (stop, what) = (stop.clone(), what.clone());
                let alive = alive.clone();
                move |done: f64, total: Option<f64>| {
                    if !alive.get() {
                        stop.set(true);
                    } else if !stop.get() {
                        state.update(|s| s.loading = Some(Loading { what: what.clone(), done, total }));
                    }
                }
            };
            let result = load(source, held, stop.clone(), progress).await;
            if stop.get() || !alive.get() {
                return;
            }
            match result {
                Ok(done) => {
                    state.set(LoadState::default());
                    loaded(shown(done));
                }
                // "Try again" only where it could help (not for a file that is wrong).
                Err(e) => state.update(|s| {
                    s.loading = None;
                    s.error = Some(format!("Could not load {what}: {}.", e.message));
                    s.retry = retry.filter(|_| e.retry_helps);
                }),
            }
        });
    }
}

impl Shown {
    /// Bytes the model takes in the page's wasm memory ([`Model::page_bytes`]).
    pub fn bytes(&self) -> u64 {
        self.model.page_bytes(crate::model::load::model_file::FileBytes::byte_len(&self.file.bytes) as u64)
    }
}

fn shown(done: LoadedModel) -> Shown {
    let held_at_8_bits = matches!(&done.model, Model::Decoder(d) if d.holding() == Holding::Int8Only);
    let summary = match held_at_8_bits {
        false => format!(
            "Read {:.1} MB of weights in {:.1} s ({:.0} MB/s), converted to f16 in this page.",
            done.bytes_read as f64 / 1e6,
            done.seconds,
            done.megabytes_per_second()
        ),
        true => format!(
            "Read {:.1} MB of weights in {:.1} s ({:.0} MB/s), converted to f16 in this page, then built at 8 bits a block at a time in {:.1} s.",
            done.bytes_read as f64 / 1e6,
            done.seconds - done.build_seconds,
            done.read_megabytes_per_second(),
            done.build_seconds
        ),
    };
    Shown { model: done.model, file: done.file, notes: done.notes, summary }
}
