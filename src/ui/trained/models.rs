//! The panel's models: the loads, the model on show, and what a new model means for the reader's
//! heads, layer and link. Each model on show gets its own [`super::view::EncoderView`] (made
//! when it is shown, dropped with everything computed from it when another replaces it), so no
//! result of one model ever meets another.

use leptos::prelude::*;

use super::loader::{LoadState, Loader, Retry, Shown};
use crate::attention::HeadSet;
use crate::jobs::web::load::Source;
use crate::settings::{LoadedFrom, TrainedSource};
use crate::ui::state::{AppState, TrainedChoices};

/// The panel's models, shared by its parts through context.
#[derive(Clone, Copy)]
pub struct Models {
    /// The reader's sentence, layer, heads and the link's source.
    choices: TrainedChoices,
    /// The loads.
    loader: Loader,
    /// Where the loads stand.
    pub load: RwSignal<LoadState, LocalStorage>,
    /// The model on show, once one is.
    pub shown: RwSignal<Option<Shown>, LocalStorage>,
    /// Whether the next model shown is the page's first (the one its link names).
    first: StoredValue<bool>,
    /// What the link said that the model cannot show (heads or a layer it lacks, other weights).
    pub link_notes: RwSignal<Vec<String>>,
}

impl Models {
    /// The panel's models; starts loading the one the link names (the reader's own files
    /// cannot come with a link: the panel asks for them).
    pub fn new() -> Models {
        let choices = AppState::get().trained;
        let loader = Loader::new();
        let models = Models {
            choices,
            loader,
            load: loader.state,
            shown: RwSignal::new_local(None),
            first: StoredValue::new(true),
            link_notes: RwSignal::new(Vec::new()),
        };
        match choices.source.get_untracked() {
            TrainedSource::BuiltIn => models.open(Source::BuiltIn),
            TrainedSource::Served { path, .. } => models.open(Source::Served(path)),
            TrainedSource::Files { .. } => {}
        }
        models
    }

    /// Shares them with the panel's parts.
    pub fn provide(self) {
        provide_context(self);
    }

    /// The panel's models, from any of its parts.
    pub fn get() -> Models {
        expect_context::<Models>()
    }

    /// Loads a model from `source` (replacing a load under way); the model on show stays until
    /// the new one is ready, and stays when it fails.
    pub fn open(self, source: Source) {
        let from = match &source {
            Source::BuiltIn => LoadedFrom::BuiltIn,
            Source::Served(path) => LoadedFrom::Served(path.clone()),
            Source::Reader(_) => LoadedFrom::Files,
        };
        let held = self.shown.with_untracked(|s| s.as_ref().map_or(0, Shown::bytes));
        self.loader.start(source, held, move |shown: Shown| self.adopt(shown, &from));
    }

    /// Loads the source of the last failed load again.
    pub fn reload(self) {
        match self.load.with_untracked(|s| s.retry.clone()) {
            Some(Retry::BuiltIn) => self.open(Source::BuiltIn),
            Some(Retry::Served(path)) => self.open(Source::Served(path)),
            None => {}
        }
    }

    /// The name and weights' id of the reader's own model the link names, while the page waits
    /// for its files.
    pub fn waiting_for_files(&self) -> Option<(String, String)> {
        if self.shown.with(Option::is_some) || self.load.with(|s| s.loading.is_some()) {
            return None;
        }
        match self.choices.source.get() {
            TrainedSource::Files { name, weights } => Some((name, weights)),
            _ => None,
        }
    }

    /// The title's name: the model on show's, else the one the link names.
    pub fn name(&self) -> String {
        if let Some(name) = self.shown.with(|s| s.as_ref().map(|s| s.model.name().to_string())) {
            return name;
        }
        match self.choices.source.get() {
            TrainedSource::Files { name, .. } => name,
            TrainedSource::Served { path, .. } => path,
            TrainedSource::BuiltIn => crate::model::encoder::BUILT_IN_NAME.to_string(),
        }
    }

    /// A model loaded: the reader's heads and layer for it, the link's source, then the model.
    fn adopt(self, shown: Shown, from: &LoadedFrom) {
        let model = shown.model.clone();
        let first = self.first.get_value();
        self.first.set_value(false);
        let adoption = self.choices.source.get_untracked().after_load(from, first, model.name(), model.id());
        let spec = model.spec();
        let mut notes = Vec::new();
        if adoption.link_applies {
            let (heads, layer) = (self.choices.heads.get_untracked(), self.choices.layer.get_untracked());
            let (heads, layer, said) = spec.fit_link(model.name(), &heads, layer);
            self.choices.heads.set(heads);
            self.choices.layer.set(layer);
            notes.extend(said);
        } else {
            self.choices.heads.set(HeadSet::all(spec.total_heads()));
            self.choices.layer.update(|l| *l = (*l).min(spec.layers - 1));
        }
        notes.extend(adoption.note);
        self.link_notes.set(notes);
        self.choices.source.set(adoption.source);
        self.choices.shape.set(*spec);
        self.choices.name.set(Some(model.name().to_string()));
        self.shown.set(Some(shown));
    }
}
