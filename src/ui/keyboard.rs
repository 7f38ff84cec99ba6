//! Keyboard: arrow keys walk the head grids.

use leptos::prelude::document;
use wasm_bindgen::JsCast;

/// Arrow keys (and Home/End) move the focus between the elements of a grid: those inside the
/// event's current target with the same `data-nav` value as the focused one (all toggles, or all
/// heatmap buttons). Left/right go by one, up/down by a row, where a row is the elements laid out
/// at the same height. Other keys, and elements without `data-nav`, are left alone.
pub fn arrow_focus(ev: &web_sys::KeyboardEvent) {
    let step = |columns: usize| -> Option<isize> {
        Some(match ev.key().as_str() {
            "ArrowLeft" => -1,
            "ArrowRight" => 1,
            "ArrowUp" => -(columns as isize),
            "ArrowDown" => columns as isize,
            "Home" => isize::MIN,
            "End" => isize::MAX,
            _ => return None,
        })
    };
    let Some(grid) = ev.current_target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else { return };
    let Some(focused) = document().active_element() else { return };
    // Values are this crate's own identifiers ("toggle", "enlarge", "grid"), safe in a selector.
    let Some(kind) =
        focused.get_attribute("data-nav").filter(|k| k.chars().all(|c| c.is_ascii_alphanumeric()))
    else {
        return;
    };
    let Ok(list) = grid.query_selector_all(&format!("[data-nav=\"{kind}\"]")) else { return };
    let items: Vec<web_sys::HtmlElement> =
        (0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()).collect();
    let Some(at) = items.iter().position(|e| &focused == e.as_ref() as &web_sys::Element) else { return };
    let top = |e: &web_sys::HtmlElement| e.get_bounding_client_rect().top().round() as i64;
    let columns = items.iter().take_while(|e| top(e) == top(&items[0])).count().max(1);
    let Some(step) = step(columns) else { return };
    let last = items.len() as isize - 1;
    let to = match step {
        isize::MIN => 0,
        isize::MAX => last,
        s => at as isize + s,
    };
    if (0..=last).contains(&to) {
        ev.prevent_default();
        let _ = items[to as usize].focus();
    }
}
