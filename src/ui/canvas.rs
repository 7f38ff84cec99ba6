//! Pixels into canvases: heatmaps one pixel per weight, the charts' colours under the page's
//! theme, and where a pointer is on a canvas that CSS scales.

use leptos::html;
use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{Clamped, JsCast, JsValue};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData, MouseEvent, ResizeObserver};

use crate::settings::Theme;
use crate::viz::chart::Palette;
use crate::viz::heatmap::{pool_max, rasterize_masked, rasterize_signed, Scale};

/// Draws an `n x n` attention matrix into `canvas` at most `px` pixels wide: one pixel per
/// weight up to `px`, each block's largest weight in one pixel beyond ([`pool_max`]).
pub fn draw_heatmap_within(
    canvas: &HtmlCanvasElement,
    weights: &[f32],
    n: usize,
    px: usize,
) -> Result<(), JsValue> {
    if n <= px {
        return draw_heatmap(canvas, weights, n);
    }
    let (pooled, m) = pool_max(weights, n, px);
    draw_heatmap(canvas, &pooled, m)
}

/// Runs `draw` soon, after the Effect that asks for it: drawings that many Effects ask for at
/// once (a heatmap per head, up to 256 of them) are spread over the browser's turns, about
/// [`DRAW_SLICE_MS`] of them per turn, in the order asked; the browser paints and answers the
/// reader between turns. A drawing holds what it draws (never a reactive value, whose owner
/// may be gone by then).
pub fn draw_soon(draw: impl FnOnce() + 'static) {
    DRAWINGS.with(|d| d.borrow_mut().push_back(Box::new(draw)));
    if !DRAINING.replace(true) {
        next_turn(draw_some);
    }
}

/// Drawing time per turn of the browser, milliseconds.
const DRAW_SLICE_MS: f64 = 30.0;

type Drawing = Box<dyn FnOnce()>;

thread_local! {
    static DRAWINGS: std::cell::RefCell<std::collections::VecDeque<Drawing>> = Default::default();
    static DRAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Draws queued drawings for one slice, then leaves the rest to the browser's next turn.
fn draw_some() {
    let t0 = super::browser::now_ms();
    while let Some(draw) = DRAWINGS.with(|d| d.borrow_mut().pop_front()) {
        draw();
        if super::browser::now_ms() - t0 > DRAW_SLICE_MS {
            next_turn(draw_some);
            return;
        }
    }
    DRAINING.set(false);
}

/// Calls `f` in a task of its own, after the browser's pending work.
fn next_turn(f: fn()) {
    let callback = Closure::once_into_js(f);
    if window().set_timeout_with_callback_and_timeout_and_arguments_0(callback.unchecked_ref(), 0).is_err() {
        f();
    }
}

/// Draws an `n x n` attention matrix into `canvas`, one pixel per weight.
pub fn draw_heatmap(
    canvas: &HtmlCanvasElement,
    weights: &[f32],
    n: usize,
) -> Result<(), wasm_bindgen::JsValue> {
    draw_masked_heatmap(canvas, weights, n, crate::attention::Mask::None)
}

/// [`draw_heatmap`] with the cells `mask` hides drawn as hidden ([`rasterize_masked`]).
pub fn draw_masked_heatmap(
    canvas: &HtmlCanvasElement,
    weights: &[f32],
    n: usize,
    mask: crate::attention::Mask,
) -> Result<(), wasm_bindgen::JsValue> {
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d")?.ok_or("no 2d context")?.dyn_into().map_err(|_| "not a 2d context")?;
    let pixels = rasterize_masked(weights, n, Scale::fit(weights), mask);
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&pixels), n as u32, n as u32)?;
    ctx.put_image_data(&image, 0.0, 0.0)
}

/// Draws an `n x n` matrix of signed values into `canvas`, one pixel per value, blue above zero
/// and red below ([`rasterize_signed`]).
pub fn draw_signed_heatmap(canvas: &HtmlCanvasElement, values: &[f32], n: usize) -> Result<(), JsValue> {
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d")?.ok_or("no 2d context")?.dyn_into().map_err(|_| "not a 2d context")?;
    let pixels = rasterize_signed(values, n);
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&pixels), n as u32, n as u32)?;
    ctx.put_image_data(&image, 0.0, 0.0)
}

/// The colours charts use under `theme` (the system's choice for [`Theme::Auto`]).
pub fn palette(theme: Theme) -> &'static Palette {
    let dark = match theme {
        Theme::Dark => true,
        Theme::Light => false,
        Theme::Auto => {
            window().match_media("(prefers-color-scheme: dark)").ok().flatten().is_some_and(|m| m.matches())
        }
    };
    if dark {
        &Palette::DARK
    } else {
        &Palette::LIGHT
    }
}

/// Keeps a chart's canvas at its laid-out width times the device pixel ratio (height from
/// `aspect`, height over width), and returns the scale to draw at: backing pixels per pixel of
/// a `design_width`-wide chart, so text keeps its proportion to the chart on any screen, within
/// 0.85 to 1.3 of its design size in CSS pixels (text on a phone stays readable). A
/// ResizeObserver updates both when the layout or the zoom changes; the drawing Effect reads the
/// scale and redraws. A canvas not laid out (hidden) keeps its size until it is.
pub fn fit_to_screen(canvas: NodeRef<html::Canvas>, design_width: f64, aspect: f64) -> ReadSignal<f64> {
    let (scale, set_scale) = signal(1.0);
    Effect::new(move |_| {
        let Some(el) = canvas.get() else { return };
        // The laid-out height follows the width alone, never the backing size, so that resizing
        // the backing store cannot resize the element (and loop the observer).
        let style = web_sys::HtmlElement::style(&el);
        let _ = style.set_property("aspect-ratio", &format!("{design_width} / {}", design_width * aspect));
        let fit = {
            let el = el.clone();
            move || {
                if el.client_width() <= 0 {
                    return;
                }
                let css = f64::from(el.client_width());
                let dpr = window().device_pixel_ratio().max(1.0);
                let (w, h) = ((css * dpr).round() as u32, (css * aspect * dpr).round() as u32);
                if el.width() == w && el.height() == h {
                    return;
                }
                el.set_width(w);
                el.set_height(h);
                set_scale.set(dpr * (css / design_width).clamp(0.85, 1.3));
            }
        };
        fit();
        let observer = Closure::<dyn FnMut(JsValue)>::new(move |_| fit());
        if let Ok(ro) = ResizeObserver::new(observer.as_ref().unchecked_ref()) {
            ro.observe(&el);
            on_cleanup(move || ro.disconnect());
        }
        // One small closure per mounted chart, for the page's life.
        observer.forget();
    });
    scale
}

/// Canvas pixels under a mouse event (the canvas is scaled by CSS).
pub fn canvas_point(canvas: &HtmlCanvasElement, ev: &MouseEvent) -> (f64, f64) {
    let rect = canvas.get_bounding_client_rect();
    let sx = canvas.width() as f64 / rect.width().max(1.0);
    let sy = canvas.height() as f64 / rect.height().max(1.0);
    ((ev.client_x() as f64 - rect.left()) * sx, (ev.client_y() as f64 - rect.top()) * sy)
}
