//! The UI mounted in a real browser (`wasm-pack test --headless --chrome`): components render,
//! a head toggle changes the drift text, and the panic banner shows.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{Element, HtmlElement};

wasm_bindgen_test_configure!(run_in_browser);

fn document() -> web_sys::Document {
    web_sys::window().unwrap().document().unwrap()
}

/// Waits for a macrotask, by which time Leptos has run its scheduled effects.
async fn tick() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        web_sys::window()
            .unwrap()
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 10)
            .unwrap();
    });
    JsFuture::from(promise).await.unwrap();
}

/// Waits until `cond` holds (the forward pass is asynchronous), failing after about 10 seconds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tick().await;
    }
    panic!("timed out waiting for {what}");
}

fn find(root: &Element, test_id: &str) -> Element {
    root.query_selector(&format!("[data-testid='{test_id}']"))
        .unwrap()
        .unwrap_or_else(|| panic!("no element with data-testid={test_id}"))
}

fn text(root: &Element, test_id: &str) -> String {
    find(root, test_id).text_content().unwrap_or_default()
}

#[wasm_bindgen_test]
async fn mounted_app_draws_every_head_and_drift_follows_a_toggle() {
    // The app reads its settings from the URL: ask for the CPU kernel.
    let history = web_sys::window().unwrap().history().unwrap();
    history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some("?backend=cpu")).unwrap();
    let root = document().create_element("div").unwrap();
    document().body().unwrap().append_child(&root).unwrap();
    let handle = leptos::mount::mount_to(root.clone().unchecked_into(), headlab::ui::App);
    until("12 heatmaps", || root.query_selector_all("canvas.heatmap").unwrap().length() == 12).await;
    until("the drift numbers", || text(&root, "drift-cosine") == "1.000000").await;

    // Defaults: BERT-base, 12 heads, 16 tokens, every heatmap drawn at 16x16.
    let canvases = root.query_selector_all("canvas.heatmap").unwrap();
    assert_eq!(canvases.length(), 12);
    let first: web_sys::HtmlCanvasElement = canvases.get(0).unwrap().unchecked_into();
    // Heatmaps are drawn soon after their cards, a few per turn of the browser.
    until("the first heatmap drawn", || (first.width(), first.height()) == (16, 16)).await;
    // The first heatmaps may be drawn before the backend is chosen; then it names the CPU kernel.
    until("the backend badge", || text(&root, "backend-badge").contains("wasm simd128")).await;

    assert_eq!(text(&root, "drift-cosine"), "1.000000");
    assert_eq!(text(&root, "drift-active"), "12 of 12");
    find(&root, "head-toggle-2").unchecked_into::<HtmlElement>().click();
    until("drift to change", || text(&root, "drift-cosine") != "1.000000").await;
    let cosine: f64 = text(&root, "drift-cosine").parse().unwrap();
    assert!(cosine > 0.0 && cosine < 1.0, "cosine after pruning head 2: {cosine}");
    assert_eq!(text(&root, "drift-active"), "11 of 12");
    assert_eq!(find(&root, "head-toggle-2").get_attribute("aria-pressed").as_deref(), Some("false"));

    // Toggling back restores the unpruned output exactly.
    find(&root, "head-toggle-2").unchecked_into::<HtmlElement>().click();
    until("drift to return to none", || text(&root, "drift-cosine") == "1.000000").await;
    drop(handle);
    root.remove();
}

#[wasm_bindgen_test]
fn panic_banner_shows_the_message() {
    let doc = document();
    let banner = doc.create_element("div").unwrap();
    banner.set_id("panic-banner");
    banner.set_attribute("hidden", "").unwrap();
    let message = doc.create_element("span").unwrap();
    message.set_id("panic-message");
    banner.append_child(&message).unwrap();
    doc.body().unwrap().append_child(&banner).unwrap();

    headlab::ui::panic::show_panic("index out of bounds: the len is 3 but the index is 7");
    assert!(!banner.has_attribute("hidden"));
    assert_eq!(
        message.text_content().as_deref(),
        Some("index out of bounds: the len is 3 but the index is 7")
    );
    banner.remove();
}

#[wasm_bindgen_test]
async fn a_download_arrives_whole_with_its_progress_and_a_failed_one_says_so() {
    // No bytes, one, and several of the stream's pieces with an odd tail, served from a blob:
    // address (the page's own origin).
    for len in [0usize, 1, (1 << 20) + 7, (20 << 20) + 3] {
        let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i >> 16) as u8).collect();
        let array = js_sys::Uint8Array::new_with_length(len as u32);
        array.copy_from(&pattern);
        let blob = web_sys::Blob::new_with_u8_array_sequence(&js_sys::Array::of1(&array)).unwrap();
        let url = web_sys::Url::create_object_url_with_blob(&blob).unwrap();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::<(f64, Option<f64>)>::new()));
        let log = seen.clone();
        let fetched =
            headlab::jobs::web::fetch_bytes(&url, move |got, total| log.borrow_mut().push((got, total)))
                .await
                .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
        assert_eq!(fetched.len(), len);
        assert!(fetched == pattern, "{len} bytes: the download differs");
        let seen = seen.take();
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{len} bytes: progress goes forward");
        assert!(
            seen.last().is_none_or(|&(got, _)| got == len as f64),
            "{len} bytes: progress ends at the length"
        );
        assert!(
            seen.iter().all(|&(_, total)| total.is_none_or(|t| t == len as f64)),
            "{len} bytes: the total is the length"
        );
        web_sys::Url::revoke_object_url(&url).unwrap();
        // The address gone, the download fails with a sentence.
        let gone = headlab::jobs::web::fetch_bytes(&url, |_, _| {}).await;
        assert_eq!(gone, Err("the download failed".to_string()));
    }
}

/// A model file held outside the wasm memory, in pieces (the page's is cut at 1 GiB, for the
/// workers' messages; here at 7 bytes): written across the pieces' boundaries, every range read
/// back equals the bytes written, whichever pieces it spans; the copy a worker gets is the same
/// file; pieces that are not one file are refused with a sentence.
#[wasm_bindgen_test]
fn a_file_in_pieces_reads_back_every_range_and_its_copy_is_the_same_file() {
    use headlab::jobs::web::JsFile;
    use headlab::model::load::model_file::{FileBytes, FileSink};
    let bytes: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
    let mut file = JsFile::in_pieces_of(7);
    assert!(file.outside_memory());
    file.begin(bytes.len()).unwrap();
    // Appends of odd sizes, some across a boundary, one empty.
    for part in [&bytes[..3], &bytes[3..3], &bytes[3..16], &bytes[16..17], &bytes[17..]] {
        file.append(part);
    }
    assert_eq!(file.byte_len(), 40);
    for start in 0..=40 {
        for end in start..=40 {
            assert_eq!(&file.get(start..end)[..], &bytes[start..end], "{start}..{end}");
        }
    }
    let (pieces, buffers) = file.copy();
    assert_eq!((pieces.length(), buffers.length()), (6, 6), "40 bytes in pieces of 7");
    let copy = JsFile::of(&pieces).unwrap();
    assert_eq!(&copy.get(0..40)[..], &bytes[..]);
    assert_eq!(&copy.get(13..29)[..], &bytes[13..29]);
    assert_eq!(&JsFile::copy_of(&bytes).get(5..35)[..], &bytes[5..35]);
    let uneven =
        js_sys::Array::of2(&js_sys::Uint8Array::new_with_length(7), &js_sys::Uint8Array::new_with_length(8));
    assert_eq!(
        JsFile::of(&uneven).err().as_deref(),
        Some("the model file's pieces are not each the first's length but the last")
    );
    let not_bytes = js_sys::Array::of1(&"a string".into());
    assert_eq!(JsFile::of(&not_bytes).err().as_deref(), Some("a piece of the model file is not bytes"));
}
