//! The trained model in the page: all-MiniLM-L6-v2 on any sentence, its 72 heads prunable.
//!
//! The f16 asset (about 43 MiB) loads only when the reader picks the trained model, with a
//! progress bar. Drift is the cosine of the pruned sentence embedding to the unpruned one, and a
//! small check (which of two sentences is closer in meaning to a third) shows behaviour change.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::{ProgressEvent, XmlHttpRequest, XmlHttpRequestResponseType};

use super::app::ActiveBackend;
use super::heads::{describe_head, draw_heatmap};
use super::yield_to_browser;
use super::{arrow_focus, download};
use crate::backend::Backend;
use crate::cpu::Kernel;
use crate::export::{attention_csv, importance_csv};
use crate::gpu::{GpuBert, GpuError};
use crate::model::asset;
use crate::model::bert::{Bert, BertOutput, HEADS, LAYERS};
use crate::model::tokenizer::{Token, Tokenizer};
use crate::viz::colormap::viridis_css_gradient;

/// Where the page finds the asset (copied next to index.html by trunk).
pub const ASSET_URL: &str = "minilm-f16.bin";

/// Sentences a reader can start from: a word-sense pair and a few others.
pub const EXAMPLES: [&str; 4] = [
    "He sat on the bank of the river and watched the water.",
    "She went to the bank to pay off her loan.",
    "The cat sat on the mat because it was tired.",
    "Attention heads that can be removed are redundant.",
];

/// The check: which candidate is closer in meaning to the anchor? The full model reads "bank"
/// in context and picks the financial sentence (0.403 against 0.380 for the word match);
/// prune the 12 heads of layer 1, and it falls back to the shared word.
const ANCHOR: &str = "I deposited my paycheck at the bank.";
const CANDIDATES: [&str; 2] =
    ["We sat on the grassy bank by the river.", "The financial institution approved my loan."];

/// The model and its tokenizer, once loaded; its weights also on the GPU when the page has one.
#[derive(Clone)]
pub struct Loaded {
    bert: Rc<Bert>,
    tokenizer: Rc<Tokenizer>,
    gpu: Option<Rc<GpuBert>>,
}

impl Loaded {
    /// One forward pass on the GPU if the model is there, else on the CPU kernel; layers before
    /// the first one whose pruned heads differ from `base`'s are taken from `base`.
    async fn run(
        &self,
        ids: &[u32],
        mask: &[bool; LAYERS * HEADS],
        base: Option<&BertOutput>,
    ) -> Result<BertOutput, GpuError> {
        match &self.gpu {
            Some(gpu) => gpu.forward_from(&self.bert, ids, mask, base).await,
            None => Ok(self.bert.forward_from(Kernel::Simd, ids, mask, base)),
        }
    }

    async fn embed(&self, text: &str, mask: &[bool; LAYERS * HEADS]) -> Result<Vec<f32>, GpuError> {
        let ids: Vec<u32> = self.tokenizer.encode(text).iter().map(|t| t.id).collect();
        Ok(self.run(&ids, mask, None).await?.embedding)
    }

    /// Where forward passes run, for the page.
    fn where_label(&self) -> &'static str {
        if self.gpu.is_some() {
            "the GPU (WebGPU)"
        } else {
            "the CPU kernel (wasm simd128)"
        }
    }
}

/// Loading progress, or the result.
#[derive(Clone)]
pub enum LoadState {
    /// Bytes received so far, and the total when the server said.
    Loading(f64, Option<f64>),
    /// Ready to run.
    Ready(Rc<Loaded>),
    /// Why it could not be loaded; the reader can retry.
    Failed(String),
}

/// A forward pass of the trained model, `None` until it has run (or when it could not).
type ModelRun = LocalResource<Option<Shared<BertOutput>>>;

/// A value shared by pointer; equal only to itself, so memos notify on every new value.
#[derive(Debug)]
struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A download that receives no data for this long is abandoned, with a message and a retry.
const STALL_MS: f64 = 15_000.0;

/// Downloads `url` as bytes, reporting progress; gives up if the data stops coming.
async fn download(url: &str, progress: impl Fn(f64, Option<f64>) + 'static) -> Result<Vec<u8>, String> {
    let js = |e: wasm_bindgen::JsValue| format!("{e:?}");
    let xhr = XmlHttpRequest::new().map_err(js)?;
    xhr.open("GET", url).map_err(js)?;
    xhr.set_response_type(XmlHttpRequestResponseType::Arraybuffer);
    let last_data = Rc::new(std::cell::Cell::new(super::now_ms()));
    let on_progress = Closure::<dyn Fn(ProgressEvent)>::new({
        let last_data = last_data.clone();
        move |e: ProgressEvent| {
            last_data.set(super::now_ms());
            progress(e.loaded(), e.length_computable().then(|| e.total()));
        }
    });
    // The watchdog: once a second, abort if nothing arrived for STALL_MS.
    let stalled = Rc::new(std::cell::Cell::new(false));
    let watchdog = Closure::<dyn Fn()>::new({
        let (xhr, stalled) = (xhr.clone(), stalled.clone());
        move || {
            if super::now_ms() - last_data.get() > STALL_MS && !stalled.replace(true) {
                let _ = xhr.abort();
            }
        }
    });
    let timer = window()
        .set_interval_with_callback_and_timeout_and_arguments_0(watchdog.as_ref().unchecked_ref(), 1000)
        .map_err(js)?;
    xhr.set_onprogress(Some(on_progress.as_ref().unchecked_ref()));
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let tx = RefCell::new(Some(tx));
    let on_end = Closure::<dyn Fn()>::new(move || {
        if let Some(tx) = tx.borrow_mut().take() {
            let _ = tx.send(());
        }
    });
    xhr.set_onloadend(Some(on_end.as_ref().unchecked_ref()));
    xhr.send().map_err(js)?;
    let _ = rx.await;
    window().clear_interval_with_handle(timer);
    drop((on_progress, on_end, watchdog));
    if stalled.get() {
        return Err(format!("the download stalled (no data for {:.0} s)", STALL_MS / 1000.0));
    }
    match xhr.status().unwrap_or(0) {
        200 => Ok(js_sys::Uint8Array::new(&xhr.response().map_err(js)?).to_vec()),
        0 => Err("the download failed".into()),
        status => Err(format!("the server answered {status}")),
    }
}

async fn load(
    state: RwSignal<LoadState, LocalStorage>,
    backend: RwSignal<Option<ActiveBackend>, LocalStorage>,
    note: RwSignal<Option<String>>,
) {
    state.set(LoadState::Loading(0.0, None));
    let bytes = match download(ASSET_URL, move |got, total| state.set(LoadState::Loading(got, total))).await {
        Ok(b) => b,
        Err(e) => return state.set(LoadState::Failed(format!("Could not load the model: {e}."))),
    };
    yield_to_browser().await;
    // Checked against the hash built into the page before a byte is decoded: a damaged file is
    // refused whole, never half-loaded.
    if let Err(e) = asset::verify(&bytes) {
        return state.set(LoadState::Failed(format!("Could not load the model: {e}.")));
    }
    let result = asset::decode(&bytes).map_err(|e| e.to_string()).and_then(|mut a| {
        let bert = Bert::from_tensors(|name| a.tensors.remove(name)).map_err(|e| e.to_string())?;
        let tokenizer = Tokenizer::from_vocab(&a.vocab).map_err(|e| e.to_string())?;
        Ok(Loaded { bert: Rc::new(bert), tokenizer: Rc::new(tokenizer), gpu: None })
    });
    let mut loaded = match result {
        Ok(loaded) => loaded,
        Err(e) => return state.set(LoadState::Failed(format!("Could not load the model: {e}."))),
    };
    // On a GPU backend the weights go to the device too; if that fails, the CPU kernel runs.
    // The page may still be choosing its backend (asking for an adapter is asynchronous).
    while backend.with_untracked(Option::is_none) {
        yield_to_browser().await;
    }
    let ctx = backend.with_untracked(|b| match b.as_ref().map(|b| &b.backend) {
        Some(Backend::Gpu(ctx)) => Some(ctx.clone()),
        _ => None,
    });
    if let Some(ctx) = ctx {
        match GpuBert::new(ctx, &loaded.bert).await {
            Ok(gpu) => loaded.gpu = Some(Rc::new(gpu)),
            Err(e) => note.set(Some(format!("The trained model runs on the CPU because {e}."))),
        }
    }
    state.set(LoadState::Ready(Rc::new(loaded)));
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b)).max(1e-12)
}

fn mask_of(pruned: &BTreeSet<usize>) -> [bool; LAYERS * HEADS] {
    let mut mask = [false; LAYERS * HEADS];
    pruned.iter().filter(|&&i| i < LAYERS * HEADS).for_each(|&i| mask[i] = true);
    mask
}

/// The check's answer under a mask: the closer candidate, and both cosines.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CheckAnswer {
    closer: usize,
    cosines: [f64; 2],
    /// The heads pruned when it was asked.
    pruned: [bool; LAYERS * HEADS],
}

async fn check(m: &Loaded, mask: &[bool; LAYERS * HEADS]) -> Result<CheckAnswer, GpuError> {
    let anchor = m.embed(ANCHOR, mask).await?;
    let mut cosines = [0.0; 2];
    for (c, text) in cosines.iter_mut().zip(CANDIDATES) {
        *c = cosine(&anchor, &m.embed(text, mask).await?);
    }
    Ok(CheckAnswer { closer: usize::from(cosines[1] > cosines[0]), cosines, pruned: *mask })
}

/// The trained-model panel: text, tokens, a layer's heatmaps, the 6 x 12 head grid, drift.
#[component]
pub fn TrainedModel(
    text: RwSignal<String>,
    layer: RwSignal<usize>,
    pruned: RwSignal<BTreeSet<usize>>,
    backend: RwSignal<Option<ActiveBackend>, LocalStorage>,
) -> impl IntoView {
    let state = RwSignal::new_local(LoadState::Loading(0.0, None));
    // Why the trained model is not on the GPU, when the page has one but the model does not.
    let note = RwSignal::new(None::<String>);
    spawn_local(load(state, backend, note));
    let model = move || match state.get() {
        LoadState::Ready(m) => Some(m),
        _ => None,
    };
    // A GPU failure mid-session: keep going on the CPU kernel, say so, keep every setting.
    let fall_back = move |e: GpuError| {
        note.set(Some(format!("The trained model switched to the CPU because {e}.")));
        if let LoadState::Ready(m) = state.get_untracked() {
            state.set(LoadState::Ready(Rc::new(Loaded { gpu: None, ..(*m).clone() })));
        }
    };

    let tokens = Memo::new(move |_| {
        state.with(|s| match s {
            LoadState::Ready(m) => m.tokenizer.encode(&text.read()),
            _ => Vec::<Token>::new(),
        })
    });
    let ids = move || tokens.read().iter().map(|t| t.id).collect::<Vec<u32>>();
    let full: ModelRun = LocalResource::new(move || {
        let (ids, m) = (ids(), model());
        async move {
            let out = m?.run(&ids, &[false; LAYERS * HEADS], None).await.map_err(fall_back).ok()?;
            Some(Shared(Arc::new(out)))
        }
    });
    // The layer the last pruned pass started from, and its time in milliseconds.
    let last_pass = RwSignal::new(None::<(usize, f64)>);
    let current: ModelRun = LocalResource::new(move || {
        let (full, mask, ids, m) = (full.get().flatten(), mask_of(&pruned.read()), ids(), model());
        async move {
            let full = full?;
            if !mask.iter().any(|&m| m) {
                return Some(full);
            }
            // Only the layers from the first pruned one on are computed again.
            let t0 = super::now_ms();
            let out = m?.run(&ids, &mask, Some(&full.0)).await.map_err(fall_back).ok()?;
            last_pass.set(Some((out.first_computed, super::now_ms() - t0)));
            Some(Shared(Arc::new(out)))
        }
    });
    // While a pass for a new set of pruned heads runs, its resource still holds the last
    // pass: numbers show only once they belong to the heads the page says are pruned.
    let drift = move || {
        let (full, now) = (full.get().flatten()?, current.get().flatten()?);
        (now.0.pruned == mask_of(&pruned.read())).then(|| cosine(&full.0.embedding, &now.0.embedding))
    };
    let check_full = LocalResource::new(move || {
        let m = model();
        async move { check(&*m?, &[false; LAYERS * HEADS]).await.map_err(fall_back).ok() }
    });
    let check_now = LocalResource::new(move || {
        let (m, mask) = (model(), mask_of(&pruned.read()));
        async move { check(&*m?, &mask).await.map_err(fall_back).ok() }
    });

    // Importance: the embedding drift (1 - cosine) when each head alone is removed, computed in
    // the background so the page stays responsive; tagged with the tokens it belongs to.
    let importance = RwSignal::new(None::<(Vec<u32>, Vec<f64>)>);
    Effect::new(move |_| {
        let ids = ids();
        let Some(full) = full.get().flatten() else { return };
        let Some(model) = model() else { return };
        spawn_local(async move {
            let mut values = Vec::with_capacity(LAYERS * HEADS);
            for i in 0..LAYERS * HEADS {
                // One forward pass per head, with the browser's turn in between.
                yield_to_browser().await;
                if tokens.with_untracked(|t| t.iter().map(|t| t.id).ne(ids.iter().copied())) {
                    return; // the text changed; a newer run is on its way
                }
                let mut mask = [false; LAYERS * HEADS];
                mask[i] = true;
                match model.run(&ids, &mask, Some(&full.0)).await {
                    Ok(out) => values.push(1.0 - cosine(&full.0.embedding, &out.embedding)),
                    Err(e) => return fall_back(e),
                }
            }
            importance.set(Some((ids, values)));
        });
    });
    let importance_now = move || {
        importance.with(|i| i.as_ref().filter(|(for_ids, _)| *for_ids == ids()).map(|(_, v)| v.clone()))
    };
    let least_first = |values: &[f64]| {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
        order
    };

    // "Prune the k least important heads", by the importance ranking of the current sentence.
    let k = RwSignal::new(0usize);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(values) = importance_now() {
            pruned.set(least_first(&values).into_iter().take(count).collect());
        }
    };
    // The contrast with the synthetic presets: a few heads matter, most can go.
    let half_pruned = LocalResource::new(move || {
        let (values, full, ids, m) = (importance_now(), full.get().flatten(), ids(), model());
        async move {
            let (values, full) = (values?, full?);
            let mut mask = [false; LAYERS * HEADS];
            least_first(&values).iter().take(36).for_each(|&i| mask[i] = true);
            let half = m?.run(&ids, &mask, Some(&full.0)).await.map_err(fall_back).ok()?;
            let mut sorted = values;
            sorted.sort_by(f64::total_cmp);
            Some((
                sorted[sorted.len() - 1],
                sorted[sorted.len() / 2],
                cosine(&full.0.embedding, &half.embedding),
            ))
        }
    });
    let contrast = move || {
        let (most, median, half) = half_pruned.get().flatten()?;
        Some(format!(
            "For this sentence, removing the single most important head moves the embedding by {most:.4} \
             (1 - cosine), the median head by {median:.5}. Pruning the 36 least important heads, half the \
             model, still leaves the embedding at cosine {half:.4} to the full one. In the random-weight \
             presets every head matters about equally: removing any one moves the output by roughly \
             1/sqrt(H) of its size."
        ))
    };
    let running_on = move || model().map(|m| format!("Running on {}.", m.where_label()));

    let progress = move || match state.get() {
        LoadState::Loading(got, total) => Some((got, total)),
        _ => None,
    };
    let failed = move || match state.get() {
        LoadState::Failed(e) => Some(e),
        _ => None,
    };
    let ready = move || matches!(state.get(), LoadState::Ready(_));

    let export_error = RwSignal::new(None::<String>);
    let export_layer = move |_| {
        let l = layer.get_untracked().min(LAYERS - 1);
        let result = match current.get_untracked().flatten() {
            Some(out) => {
                let pieces: Vec<String> =
                    tokens.with_untracked(|t| t.iter().map(|t| t.piece.clone()).collect());
                attention_csv(&pieces, HEADS, &out.0.attention[l]).map_err(|e| e.to_string()).and_then(
                    |csv| download::csv(&format!("headlab-minilm-layer{}-attention.csv", l + 1), &csv),
                )
            }
            None => Err("the model has not run yet".to_string()),
        };
        export_error.set(result.err());
    };
    let export_importance = move |_| {
        let result = match importance_now() {
            Some(values) => {
                let order = least_first(&values);
                // Heads are numbered layer * 12 + head, as in the link's pruned= list.
                download::csv(
                    "headlab-minilm-importance.csv",
                    &importance_csv(&values, &order, &pruned.get_untracked()),
                )
            }
            None => Err("importance is still being measured".to_string()),
        };
        export_error.set(result.err());
    };

    view! {
        <section class="panel trained" aria-labelledby="trained-title" data-testid="trained">
            <h2 id="trained-title">"A trained model: all-MiniLM-L6-v2 (6 layers × 12 heads)"</h2>
            {move || {
                progress()
                    .map(|(got, total)| {
                        let mib = |b: f64| b / 1048576.0;
                        view! {
                            <label class="loading" data-testid="model-progress">
                                {match total {
                                    Some(t) => format!("Loading the model: {:.1} of {:.1} MiB", mib(got), mib(t)),
                                    None => format!("Loading the model: {:.1} MiB", mib(got)),
                                }}
                                <progress max=total.unwrap_or(45.0 * 1048576.0) value=got></progress>
                            </label>
                        }
                    })
            }}
            {move || {
                failed()
                    .map(|e| {
                        view! {
                            <p class="error" role="alert" data-testid="model-error">
                                {e} " "
                                <button on:click=move |_| spawn_local(load(state, backend, note))>"Try again"</button>
                            </p>
                        }
                    })
            }}
            <p class="muted" data-testid="trained-backend">{running_on}</p>
            {move || note.get().map(|n| view! { <p class="backend-note" data-testid="trained-note">{n}</p> })}
            <Show when=ready>
                <label class="text-input">
                    "Sentence "
                    <textarea
                        data-testid="text"
                        rows="2"
                        maxlength=crate::settings::MAX_TEXT_CHARS.to_string()
                        prop:value=move || text.get()
                        on:change=move |ev| text.set(event_target_value(&ev))
                    ></textarea>
                </label>
                <div class="buttons examples">
                    {EXAMPLES
                        .iter()
                        .map(|&e| view! { <button on:click=move |_| text.set(e.to_string())>{e}</button> })
                        .collect_view()}
                </div>
                <p class="tokens" data-testid="tokens">
                    {move || tokens.read().iter().map(|t| view! { <span class="token">{t.piece.clone()}</span> }).collect_view()}
                </p>
                {move || {
                    (tokens.read().len() >= crate::model::tokenizer::MAX_TOKENS)
                        .then(|| {
                            view! {
                                <p class="backend-note" data-testid="tokens-cut">
                                    {format!(
                                        "The sentence is cut at {} tokens, the most this model reads (its position table ends there).",
                                        crate::model::tokenizer::MAX_TOKENS,
                                    )}
                                </p>
                            }
                        })
                }}
                <div class="drift-numbers trained-numbers">
                    <span>"Cosine of the pruned sentence embedding to the full one: "</span>
                    <strong data-testid="trained-cosine">{move || drift().map(|c| format!("{c:.6}")).unwrap_or_else(|| "computing…".into())}</strong>
                    <span>{move || format!(" ({} of 72 heads pruned)", pruned.read().len())}</span>
                </div>
                <p class="muted" data-testid="trained-pass">
                    {move || {
                        last_pass
                            .get()
                            .filter(|_| !pruned.read().is_empty())
                            .map(|(first, ms)| {
                                format!(
                                    "Last change recomputed layers {}-{LAYERS} only (those after the first pruned head), in {ms:.1} ms.",
                                    first + 1,
                                )
                            })
                    }}
                </p>
                <p data-testid="trained-check">
                    {move || {
                        let (Some(f), Some(n)) = (check_full.get().flatten(), check_now.get().flatten()) else {
                            return String::new();
                        };
                        if n.pruned != mask_of(&pruned.read()) {
                            return "Check: asking the pruned model…".into();
                        }
                        let name = |i: usize| format!("\"{}\"", CANDIDATES[i]);
                        format!(
                            "Check: which is closer in meaning to \"{ANCHOR}\"? Full model: {} ({:.3} vs {:.3}). Pruned: {} ({:.3} vs {:.3}){}",
                            name(f.closer), f.cosines[0], f.cosines[1], name(n.closer), n.cosines[0], n.cosines[1],
                            if f.closer == n.closer { "." } else { " — the answer flipped." }
                        )
                    }}
                </p>
                <label>
                    "Layer "
                    <select
                        data-testid="layer"
                        prop:value=move || layer.get().to_string()
                        on:change=move |ev| layer.set(event_target_value(&ev).parse().unwrap_or(0).min(LAYERS - 1))
                    >
                        {(0..LAYERS).map(|l| view! { <option value=l.to_string()>{format!("{}", l + 1)}</option> }).collect_view()}
                    </select>
                </label>
                <p class="legend">
                    "Rows are query tokens, columns key tokens; 0 "
                    <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
                    " each head's largest weight. Pruned heads leave later layers' patterns changed."
                </p>
                <div class="heads trained-heads" data-testid="trained-heads">
                    {(0..HEADS).map(|h| view! { <LayerHead h=h layer=layer current=current tokens=tokens /> }).collect_view()}
                </div>
                <div class="buttons">
                    <span class="muted">"Download:"</span>
                    <button data-testid="export-trained-attention-csv" on:click=export_layer>
                        "This layer's attention (CSV)"
                    </button>
                    <button
                        data-testid="export-trained-importance-csv"
                        disabled=move || importance_now().is_none()
                        on:click=export_importance
                    >
                        "Importance of all 72 heads (CSV)"
                    </button>
                </div>
                {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                <h3>"All 72 heads: darker = removing it alone moves the embedding more"</h3>
                <div
                    class="head-grid"
                    data-testid="head-grid"
                    role="group"
                    aria-label="Heads by layer; arrow keys move between them"
                    on:keydown=move |ev| arrow_focus(&ev)
                >
                    {(0..LAYERS)
                        .map(|l| {
                            view! {
                                <div class="head-grid-row">
                                    <span class="muted">{format!("layer {}", l + 1)}</span>
                                    {(0..HEADS)
                                        .map(|h| {
                                            let i = l * HEADS + h;
                                            let off = move || pruned.read().contains(&i);
                                            let value = move || importance_now().map(|v| v[i]);
                                            let max = move || importance_now().map(|v| v.iter().copied().fold(1e-9, f64::max)).unwrap_or(1.0);
                                            view! {
                                                <button
                                                    class="grid-head"
                                                    aria-label=format!("layer {}, head {h}", l + 1)
                                                    data-nav="grid"
                                                    data-testid=format!("grid-{l}-{h}")
                                                    aria-pressed=move || (!off()).to_string()
                                                    title=move || format!("layer {}, head {h}: {}", l + 1, value().map(|v| format!("drift {v:.5} if removed alone")).unwrap_or_else(|| "measuring…".into()))
                                                    style=move || format!("--weight: {:.3}", value().map_or(0.0, |v| v / max()))
                                                    on:click=move |_| pruned.update(|p| if !p.remove(&i) { p.insert(i); })
                                                >
                                                    {h}
                                                </button>
                                            }
                                        })
                                        .collect_view()}
                                </div>
                            }
                        })
                        .collect_view()}
                </div>
                <label class="prune-k">
                    {move || format!("Prune the {} least important heads ", k.get())}
                    <input
                        type="range"
                        min="0"
                        max=(LAYERS * HEADS).to_string()
                        data-testid="trained-prune-k"
                        disabled=move || importance_now().is_none()
                        prop:value=move || k.get().to_string()
                        on:input=move |ev| prune_least(event_target_value(&ev).parse().unwrap_or(0))
                    />
                </label>
                <div class="buttons">
                    <button
                        class="reset"
                        data-testid="trained-restore"
                        on:click=move |_| {
                            k.set(0);
                            pruned.update(|p| p.clear());
                        }
                    >
                        "Restore all heads"
                    </button>
                </div>
                <p data-testid="trained-contrast">{contrast}</p>
                <p class="muted">
                    "Model: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0 (see the model card shipped with this page). Weights stored in f16; everything runs in this page."
                </p>
            </Show>
        </section>
    }
}

/// Head `h` of the selected layer, as the (possibly pruned) model attends.
#[component]
fn LayerHead(h: usize, layer: RwSignal<usize>, current: ModelRun, tokens: Memo<Vec<Token>>) -> impl IntoView {
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        let (Some(canvas), Some(out)) = (canvas.get(), current.get().flatten()) else { return };
        let n = out.0.seq_len;
        let l = layer.get().min(LAYERS - 1);
        let result = draw_heatmap(&canvas, &out.0.attention[l][h * n * n..(h + 1) * n * n], n);
        draw_error.set(result.err().map(|e| format!("could not draw: {e:?}")));
    });
    // The same pattern in words, for screen readers.
    let described = move || {
        let out = current.get().flatten()?;
        let n = out.0.seq_len;
        let l = layer.get().min(LAYERS - 1);
        let pieces: Vec<String> = tokens.with(|t| t.iter().map(|t| t.piece.clone()).collect());
        (pieces.len() == n).then(|| describe_head(&out.0.attention[l][h * n * n..(h + 1) * n * n], &pieces))
    };
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        let name = format!("headlab-minilm-layer{}-head{h}.png", layer.get_untracked().min(LAYERS - 1) + 1);
        draw_error.set(download::png(&canvas, &name, 512).err());
    };
    view! {
        <figure class="head">
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid=format!("trained-heatmap-{h}")
                role="img"
                aria-label=move || format!("Attention weights of head {h} in layer {}: {}", layer.get() + 1, described().unwrap_or_default())
            ></canvas>
            <figcaption>
                <span>{format!("head {h}")}</span>
                <button class="mini" data-testid=format!("trained-png-{h}") aria-label=format!("Download head {h} as PNG") on:click=export_png>
                    "PNG"
                </button>
            </figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}
