//! Files the reader saves from the page: CSV text, SVG documents and PNG images of canvases. Nothing leaves the
//! page; the browser saves what the page built.

use leptos::prelude::document;
use wasm_bindgen::{JsCast, JsValue};

use crate::jobs::web::describe;
use web_sys::{Blob, BlobPropertyBag, CanvasRenderingContext2d, HtmlAnchorElement, HtmlCanvasElement, Url};

/// Saves `href` as `filename` through a temporary link (attached, as Firefox requires).
fn save(href: &str, filename: &str) -> Result<(), JsValue> {
    let doc = document();
    let a: HtmlAnchorElement = doc.create_element("a")?.dyn_into()?;
    a.set_href(href);
    a.set_download(filename);
    a.set_hidden(true);
    let body = doc.body().ok_or("no body")?;
    body.append_child(&a)?;
    a.click();
    body.remove_child(&a)?;
    Ok(())
}

/// Saves `text` as a CSV file.
pub fn csv(filename: &str, text: &str) -> Result<(), String> {
    text_file(filename, text, "text/csv;charset=utf-8")
}

/// Saves `text`, an SVG document, as an SVG file.
pub fn svg(filename: &str, text: &str) -> Result<(), String> {
    text_file(filename, text, "image/svg+xml;charset=utf-8")
}

/// Saves `text` as a file of type `mime`.
fn text_file(filename: &str, text: &str, mime: &str) -> Result<(), String> {
    let run = || -> Result<(), JsValue> {
        let options = BlobPropertyBag::new();
        options.set_type(mime);
        let parts = js_sys::Array::of1(&JsValue::from_str(text));
        let blob = Blob::new_with_str_sequence_and_options(&parts, &options)?;
        let url = Url::create_object_url_with_blob(&blob)?;
        let saved = save(&url, filename);
        Url::revoke_object_url(&url)?;
        saved
    };
    run().map_err(|e| format!("could not save {filename}: {}", describe(&e)))
}

/// Saves `canvas` as a PNG, scaled up by a whole factor (without smoothing, so each weight stays
/// a sharp square) until it is at least `min_side` pixels on its shorter side.
pub fn png(canvas: &HtmlCanvasElement, filename: &str, min_side: u32) -> Result<(), String> {
    let run = || -> Result<(), JsValue> {
        let (w, h) = (canvas.width().max(1), canvas.height().max(1));
        let scale = min_side.div_ceil(w.min(h)).clamp(1, 64);
        let url = if scale == 1 {
            canvas.to_data_url_with_type("image/png")?
        } else {
            let big: HtmlCanvasElement = document().create_element("canvas")?.dyn_into()?;
            big.set_width(w * scale);
            big.set_height(h * scale);
            let ctx: CanvasRenderingContext2d = big.get_context("2d")?.ok_or("no 2d context")?.dyn_into()?;
            ctx.set_image_smoothing_enabled(false);
            ctx.draw_image_with_html_canvas_element_and_dw_and_dh(
                canvas,
                0.0,
                0.0,
                f64::from(w * scale),
                f64::from(h * scale),
            )?;
            big.to_data_url_with_type("image/png")?
        };
        save(&url, filename)
    };
    run().map_err(|e| format!("could not save {filename}: {}", describe(&e)))
}

/// The start of every file name: what was computed ("headlab-bert-base-n16-seed42").
pub fn stem(settings: &crate::settings::Settings) -> String {
    use crate::settings::ModelChoice;
    let model = match settings.model {
        ModelChoice::Trained => {
            // Exports name the precision their numbers came from; the f16 default keeps its name.
            let precision = match settings.precision {
                crate::attention::precision::Precision::F16 => String::new(),
                p => format!("-{}", p.key()),
            };
            return format!("headlab-{}{precision}", ModelChoice::Trained.id());
        }
        ModelChoice::Custom { d_model, num_heads } => format!("custom-{d_model}x{num_heads}"),
        preset => preset.id().to_string(),
    };
    format!("headlab-{model}-n{}-seed{}", settings.seq_len, settings.seed)
}
