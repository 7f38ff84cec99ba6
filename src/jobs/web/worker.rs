//! Inside a web worker: the page's wasm, started by `www/worker.js`, serves the page's batch
//! work ([`crate::jobs::work`], for an encoder or a decoder) instead of mounting the app (`ui::start` asks [`scope`]).
//!
//! The conversation, one message at a time (the page waits for each answer):
//! the worker says `"ready"`; the page sends the model, `[id, [Uint8Array], precision, dot form]`
//! (its model file in pieces of at most 1 GiB, [`crate::jobs::web::JsFile`], which the page
//! fetched or converted: the worker reads nothing itself; the
//! precision the page runs it at, `"f16"` or `"int8"`; and the form of the 8-bit micro-kernel
//! the page timed as faster on this CPU, [`crate::cpu::int8::DotForm`]), and the worker answers
//! `"loaded <bytes>"` once it has decoded it (and quantized it, calibrated as the page's own
//! copy, so both give the same bits), with the bytes of wasm memory it then holds; then each
//! piece of work comes as an `ArrayBuffer` and goes back as `[ArrayBuffer, bytes of memory]` (a
//! piece that asks for the other precision runs on a copy the worker makes the first
//! time: [`Copies`]). Anything that goes wrong is answered with a string that starts with
//! `"error: "` and says what, and the worker keeps serving.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, ArrayBuffer, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::attention::precision::Precision;
use crate::attention::turns::AtOnce;
use crate::cpu::int8::DotForm;
use crate::cpu::Kernel;
use crate::jobs::copies::Copies;
use crate::jobs::web::memory_bytes;
use crate::jobs::web::JsFile;
use crate::jobs::work::Piece;
use crate::model::decoder::Decoder;
use crate::model::Model;

/// The worker's scope, when this wasm runs in a dedicated worker rather than in the page.
pub fn scope() -> Option<DedicatedWorkerGlobalScope> {
    js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>().ok()
}

/// Serves the page from `scope` for as long as the worker lives.
pub fn serve(scope: DedicatedWorkerGlobalScope) {
    std::panic::set_hook(Box::new(console_error_panic_hook::hook));
    let model: Rc<RefCell<Option<Copies>>> = Rc::default();
    let reply_to = scope.clone();
    let handler = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let data = event.data();
        if let Some(message) = data.dyn_ref::<Array>() {
            let answer = match load(message) {
                Ok(m) => {
                    *model.borrow_mut() = Some(Copies::new(m));
                    format!("loaded {}", memory_bytes())
                }
                Err(e) => format!("error: {e}"),
            };
            post_text(&reply_to, &answer);
        } else if let Some(buffer) = data.dyn_ref::<ArrayBuffer>() {
            let bytes = Uint8Array::new(buffer).to_vec();
            match work(model.borrow().as_ref(), &bytes) {
                Ok(answer) => post_result(&reply_to, &answer),
                Err(e) => post_text(&reply_to, &format!("error: {e}")),
            }
        } else {
            post_text(&reply_to, "error: a message the worker does not understand");
        }
    });
    scope.set_onmessage(Some(handler.as_ref().unchecked_ref()));
    // The worker lives as long as the page keeps it: so does its handler.
    handler.forget();
    post_text(&scope, "ready");
}

/// Runs one piece of work from its bytes, and gives its result's bytes.
fn work(models: Option<&Copies>, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let models = models.ok_or("the model is not loaded in this worker")?;
    let work = Piece::decode(bytes).map_err(|e| e.to_string())?;
    Ok(models.run(&work, Kernel::Simd)?.encode())
}

/// The model the page sent: `[id, [Uint8Array], precision, dot form]`, its id, its model file in
/// pieces, the precision to run it at and the 8-bit micro-kernel's form.
fn load(message: &Array) -> Result<Model, String> {
    let id = message.get(0).as_string().ok_or("the model's message has no id")?;
    let pieces = message.get(1).dyn_into::<Array>().map_err(|_| "the model's message has no file")?;
    let file = JsFile::of(&pieces)?;
    let key = message.get(2).as_string().ok_or("the model's message has no precision")?;
    let precision =
        Precision::from_key(&key).ok_or_else(|| format!("the model's message asks for precision {key:?}"))?;
    let key = message.get(3).as_string().ok_or("the model's message has no dot form")?;
    let form =
        DotForm::from_key(&key).ok_or_else(|| format!("the model's message asks for dot form {key:?}"))?;
    crate::jobs::web::adopt_dot_form(form);
    // A decoder reads its file a tensor at a time from the message's buffer, outside this
    // worker's wasm memory, which then holds only the model (GPT-2 Large's file is 1.5 GB); an
    // encoder's file is copied in and converted whole.
    let model = crate::attention::turns::at_once(Model::from_file_in_steps(&file, id, &AtOnce));
    match model.map_err(|e| e.to_string())? {
        Model::Encoder(encoder) => {
            let mut encoder = Rc::unwrap_or_clone(encoder);
            encoder.set_precision(Kernel::Simd, precision);
            Ok(Model::Encoder(Rc::new(encoder)))
        }
        Model::Decoder(decoder) => {
            let copy = crate::attention::turns::at_once(Decoder::for_precision(&decoder, precision, &AtOnce));
            Ok(Model::Decoder(copy))
        }
    }
}

fn post_text(scope: &DedicatedWorkerGlobalScope, text: &str) {
    // A worker whose page is gone has nobody to tell.
    let _ = scope.post_message(&JsValue::from_str(text));
}

/// Posts a piece's result, `[ArrayBuffer, memory]`: its bytes, moved, and the worker's memory
/// after it ([`memory_bytes`]), which the page shows.
fn post_result(scope: &DedicatedWorkerGlobalScope, bytes: &[u8]) {
    let array = Uint8Array::from(bytes);
    let message = Array::of2(&array.buffer(), &JsValue::from_f64(memory_bytes() as f64));
    let _ = scope.post_message_with_transfer(&message, &Array::of1(&array.buffer()));
}
