//! Loading the trained model: the f16 asset (about 43 MiB) is fetched only when the reader picks
//! the trained model, with progress, then checked and decoded ([`Model::from_asset`]).

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::model::Model;
use crate::ui::browser::{fetch_bytes, yield_to_browser};

/// Where the page finds the asset (copied next to index.html by trunk).
pub const ASSET_URL: &str = "minilm-f16.bin";

/// Loading progress, or the result.
#[derive(Clone)]
pub enum LoadState {
    /// Bytes received so far, and the total when the server said.
    Loading(f64, Option<f64>),
    /// Ready to run.
    Ready(Rc<Model>),
    /// Why it could not be loaded; the reader can retry.
    Failed(String),
}

impl LoadState {
    /// The model, once loaded.
    pub fn model(&self) -> Option<Rc<Model>> {
        match self {
            LoadState::Ready(m) => Some(m.clone()),
            _ => None,
        }
    }
}

/// Starts loading the model into `state` (on opening the panel, and on "Try again"); `loaded`
/// sees the model before the page does.
pub fn start(state: RwSignal<LoadState, LocalStorage>, loaded: impl Fn(&Model) + 'static) {
    state.set(LoadState::Loading(0.0, None));
    spawn_local(async move {
        let failed = |e: &dyn std::fmt::Display| LoadState::Failed(format!("Could not load the model: {e}."));
        let bytes =
            match fetch_bytes(ASSET_URL, move |got, total| state.set(LoadState::Loading(got, total))).await {
                Ok(b) => b,
                Err(e) => return state.set(failed(&e)),
            };
        yield_to_browser().await;
        state.set(match Model::from_asset(&bytes) {
            Ok(model) => {
                loaded(&model);
                LoadState::Ready(Rc::new(model))
            }
            Err(e) => failed(&e),
        });
    });
}
