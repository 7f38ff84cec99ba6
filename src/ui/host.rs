//! The page inside a host page's iframe: its height goes out to the host, and the host's
//! theme and preset messages come in, checked against the schema in [`crate::embed`].

use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{MessageEvent, ResizeObserver, Window};

use crate::embed::{refusal_line, resize_message, HostMessage, MessageError};
use crate::settings::{Frame, HostOrigin, Settings};

/// The parent window when the page is framed, `None` when it is the top page.
fn parent() -> Option<Window> {
    let own = window();
    own.parent().ok().flatten().filter(|p| !js_sys::Object::is(p.as_ref(), own.as_ref()))
}

/// Posts the content height to the parent whenever it changes, and applies valid host messages
/// to `settings`. Does nothing when the page is not framed.
pub fn connect_host(frame: &Frame, settings: RwSignal<Settings>) {
    let Some(host) = parent() else { return };
    // The height goes only to the configured origin when there is one ("*" otherwise: a height
    // is no secret, and the host snippet checks where it came from).
    let target = match &frame.host {
        HostOrigin::Only(origin) => origin.clone(),
        _ => "*".to_string(),
    };
    let last = std::rc::Rc::new(std::cell::Cell::new(0u32));
    // Posts the height when it changed, or always when `force`d (the host asked for it).
    let post = move |force: bool| {
        let Some(body) = document().body() else { return };
        let height = body.get_bounding_client_rect().height().ceil() as u32;
        if force || height != last.get() {
            last.set(height);
            // The documented message, posted as the object its JSON describes.
            if let Ok(message) = js_sys::JSON::parse(&resize_message(height)) {
                let _ = host.post_message(&message, &target);
            }
        }
    };
    let post_on_resize = post.clone();
    post(false);
    let observer = Closure::<dyn FnMut(JsValue)>::new(move |_| post_on_resize(false));
    if let (Ok(ro), Some(body)) = (ResizeObserver::new(observer.as_ref().unchecked_ref()), document().body())
    {
        ro.observe(&body);
    }
    // The observer lives as long as the page.
    observer.forget();

    let allowed = frame.host.clone();
    let refused = std::cell::Cell::new(0u32);
    let handle =
        window_event_listener(leptos::ev::message, move |ev: MessageEvent| {
            match read_host_message(&ev, &allowed) {
                Ok(HostMessage::SetTheme(theme)) => settings.update(|s| s.theme = theme),
                Ok(HostMessage::SetPreset(model)) => settings.update(|s| s.model = model),
                Ok(HostMessage::RequestSize) => post(true),
                Err(None) => {}
                Err(Some(why)) => {
                    refused.set(refused.get().saturating_add(1));
                    if let Some(line) = refusal_line(refused.get(), &why) {
                        web_sys::console::warn_1(&line.into());
                    }
                }
            }
        });
    std::mem::forget(handle);
}

/// The host's message, or why it is ignored (`None`: not meant for headlab, ignored silently).
fn read_host_message(ev: &MessageEvent, allowed: &HostOrigin) -> Result<HostMessage, Option<String>> {
    let from_parent = match (ev.source(), parent()) {
        (Some(source), Some(parent)) => js_sys::Object::is(&source, parent.as_ref()),
        _ => false,
    };
    if !from_parent {
        return Err(None);
    }
    let origin = ev.origin();
    if !allowed.allows(&origin) {
        return Err(Some(format!("origin {origin} is not the configured host")));
    }
    let json = js_sys::JSON::stringify(&ev.data())
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| Some("message is not JSON data".to_string()))?;
    HostMessage::parse(&json).map_err(|e| (e != MessageError::NotForUs).then(|| e.to_string()))
}
