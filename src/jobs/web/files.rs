//! A model folder's bytes in the browser, for [`crate::model::load::checkpoint::load`]: the reader's own
//! files (picked, or dropped as files or as a folder; nothing leaves their machine), or a folder
//! the handbook serves beside the page (`?model=PATH`), asked for a range at a time and only from
//! the page's own origin.

use std::cell::Cell;
use std::future::Future;

use js_sys::{Array, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    DataTransfer, File, FileSystemDirectoryEntry, FileSystemEntry, FileSystemFileEntry, Headers, RequestInit,
    RequestRedirect, Response, ResponseType,
};

use super::describe;
use crate::model::load::checkpoint::{referenced_files, CheckpointError, SERVED_NAMES};
use crate::model::load::files::{Entry, Files, Read};

/// The most files a drop or a pick may offer (a model folder has a dozen).
pub const MAX_FILES: usize = 4096;

/// The reader's files, each with its path in the folder they came from (or its bare name).
pub struct ReaderFiles {
    entries: Vec<Entry>,
    files: Vec<File>,
}

impl ReaderFiles {
    /// `files` by their paths (the first [`MAX_FILES`]).
    pub fn new(files: Vec<(String, File)>) -> ReaderFiles {
        let (entries, files) = files
            .into_iter()
            .take(MAX_FILES)
            .map(|(path, f)| (Entry { path, size: f.size() as u64 }, f))
            .unzip();
        ReaderFiles { entries, files }
    }

    /// The files an `<input type=file>` holds, by their paths in a picked folder
    /// (`webkitRelativePath`) or their names.
    pub fn from_input(list: &web_sys::FileList) -> ReaderFiles {
        let files = (0..list.length()).filter_map(|i| list.get(i)).map(|f| (relative_path(&f), f)).collect();
        ReaderFiles::new(files)
    }

    /// The files and folders of a drop. Its items are read at once (a drop's data is gone once
    /// its handler returns); the folders are walked after.
    pub fn from_drop(data: &DataTransfer) -> impl Future<Output = Result<ReaderFiles, String>> {
        let items = data.items();
        let mut roots = Vec::new();
        let mut loose = Vec::new();
        for i in 0..items.length() {
            let Some(item) = items.get(i) else { continue };
            if item.kind() != "file" {
                continue;
            }
            // An entry where the browser offers one (a folder is only reachable so); else the file.
            match item.webkit_get_as_entry().ok().flatten() {
                Some(entry) => roots.push(entry),
                None => loose.extend(item.get_as_file().ok().flatten()),
            }
        }
        if roots.is_empty() && loose.is_empty() {
            if let Some(list) = data.files() {
                loose.extend((0..list.length()).filter_map(|i| list.get(i)));
            }
        }
        async move {
            let mut files: Vec<(String, File)> = loose.into_iter().map(|f| (f.name(), f)).collect();
            for root in roots {
                walk(root, &mut files).await?;
            }
            Ok(ReaderFiles::new(files))
        }
    }
}

impl Files for ReaderFiles {
    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        // Started now (Files::read's contract); awaited below.
        let reading = self.files[index]
            .slice_with_f64_and_f64(start as f64, (start + len) as f64)
            .map(|part| JsFuture::from(part.array_buffer()));
        Box::pin(async move {
            let buffer = reading.map_err(|e| describe(&e))?.await.map_err(|e| describe(&e))?;
            let bytes = Uint8Array::new(&buffer).to_vec();
            if bytes.len() as u64 != len {
                return Err(format!(
                    "{} bytes came where {len} were asked for (did the file change?)",
                    bytes.len()
                ));
            }
            Ok(bytes)
        })
    }
}

/// A file's path in the folder a reader picked, else its name.
fn relative_path(file: &File) -> String {
    Reflect::get(file, &"webkitRelativePath".into())
        .ok()
        .and_then(|p| p.as_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| file.name())
}

/// Every file below `root` (itself, if a file), by its path from the drop (without the leading `/`).
async fn walk(root: FileSystemEntry, out: &mut Vec<(String, File)>) -> Result<(), String> {
    let mut stack = vec![root];
    while let Some(entry) = stack.pop() {
        if out.len() >= MAX_FILES {
            break;
        }
        let path = entry.full_path().trim_start_matches('/').to_string();
        if entry.is_directory() {
            let reader = entry.unchecked_into::<FileSystemDirectoryEntry>().create_reader();
            // A directory reader answers in batches until it answers none.
            loop {
                let batch = callback_promise(|ok, fail| {
                    reader.read_entries_with_callback_and_callback(&ok, &fail).map_err(|e| describe(&e))
                })
                .await?;
                let batch: Array = batch.unchecked_into();
                if batch.length() == 0 {
                    break;
                }
                stack.extend(batch.iter().map(|e| e.unchecked_into::<FileSystemEntry>()));
            }
        } else {
            let entry: FileSystemFileEntry = entry.unchecked_into();
            let file = callback_promise(|ok, fail| {
                entry.file_with_callback_and_callback(&ok, &fail);
                Ok(())
            })
            .await?;
            out.push((path, file.unchecked_into()));
        }
    }
    Ok(())
}

/// The value a callback-style browser call passes to its success callback.
async fn callback_promise(
    call: impl FnOnce(js_sys::Function, js_sys::Function) -> Result<(), String>,
) -> Result<JsValue, String> {
    let mut started = Ok(());
    let mut call = Some(call);
    let promise = Promise::new(&mut |ok, fail| {
        if let Some(call) = call.take() {
            started = call(ok, fail);
        }
    });
    started?;
    JsFuture::from(promise).await.map_err(|e| describe(&e))
}

/// A model folder on the page's own server: the files it has of those a model folder may hold,
/// found by asking for each, with their sizes.
pub struct ServedFiles {
    /// The folder's address, with its trailing `/`.
    base: String,
    entries: Vec<Entry>,
    /// Whether a request failed in a way that asking again could mend (the network, a busy
    /// server), as opposed to a file the folder lacks or holds wrong.
    in_transit: Cell<bool>,
}

/// Why a served folder could not be listed, and whether asking again could help.
pub struct Unlisted {
    /// The file concerned and the problem.
    pub error: CheckpointError,
    /// Whether the failure was in transit (the network, a busy server).
    pub in_transit: bool,
}

impl ServedFiles {
    /// The folder at `path` (resolved against the page's address), or why it cannot be read.
    pub async fn list(path: &str) -> Result<ServedFiles, Unlisted> {
        let refuse = |problem: String| Unlisted {
            error: CheckpointError { file: path.to_string(), problem },
            in_transit: false,
        };
        let base = same_origin(path).map_err(refuse)?;
        let mut served = ServedFiles { base, entries: Vec::new(), in_transit: Cell::new(false) };
        // The names a folder may hold; an index or modules.json names more.
        let mut wanted: Vec<String> = SERVED_NAMES.iter().rev().map(|n| n.to_string()).collect();
        let mut asked = Vec::new();
        while let Some(name) = wanted.pop() {
            if asked.contains(&name) || asked.len() >= MAX_FILES {
                continue;
            }
            asked.push(name.clone());
            let size = served.size(&name).await.map_err(|problem| Unlisted {
                error: CheckpointError { file: format!("{}{name}", folder_path(path)), problem },
                in_transit: served.in_transit.get(),
            })?;
            let Some(size) = size else { continue };
            served.entries.push(Entry { path: name.clone(), size });
            if matches!(name.as_str(), "model.safetensors.index.json" | "modules.json") && size <= 16 << 20 {
                let text = served.read(served.entries.len() - 1, 0, size).await.unwrap_or_default();
                wanted.extend(referenced_files(&name, &String::from_utf8_lossy(&text)));
            }
        }
        if !served.entries.iter().any(|e| e.path == "config.json") {
            let problem = format!("missing: the server has no {}config.json", served.base);
            return Err(Unlisted {
                error: CheckpointError { file: "config.json".into(), problem },
                in_transit: false,
            });
        }
        Ok(served)
    }

    /// Whether a request failed in transit, so that loading again could help.
    pub fn failed_in_transit(&self) -> bool {
        self.in_transit.get()
    }

    /// The problem of `response` to a request for `url`, if any: a redirect (never followed:
    /// the page reads only where the link points), or an answer other than `ok` (a 404 is not
    /// a problem here: the caller decides).
    fn check(&self, response: &Response, url: &str) -> Result<(), String> {
        if response.type_() == ResponseType::Opaqueredirect || response.redirected() {
            return Err(format!(
                "the server redirected {url} elsewhere; the page reads a model only from where its link points, and follows no redirect"
            ));
        }
        let status = response.status();
        // A busy or failing server may answer next time; a missing or forbidden file will not.
        if matches!(status, 408 | 429) || status >= 500 {
            self.in_transit.set(true);
        }
        Ok(())
    }

    /// `name`'s size, or `None` when the server has no such file.
    async fn size(&self, name: &str) -> Result<Option<u64>, String> {
        let init = RequestInit::new();
        init.set_method("HEAD");
        init.set_redirect(RequestRedirect::Manual);
        let url = format!("{}{}", self.base, name);
        let response = fetch(&url, &init).await.inspect_err(|_| self.in_transit.set(true))?;
        self.check(&response, &url)?;
        match response.status() {
            404 | 410 => Ok(None),
            s if !response.ok() => Err(format!("the server answered HTTP {s}")),
            _ => {
                let length = response.headers().get("content-length").ok().flatten();
                length
                    .and_then(|l| l.trim().parse::<u64>().ok())
                    .map(Some)
                    .ok_or_else(|| "the server does not say the file's size (no Content-Length)".to_string())
            }
        }
    }
}

impl Files for ServedFiles {
    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        let url = format!("{}{}", self.base, self.entries[index].path);
        let whole = start == 0 && len == self.entries[index].size;
        // The request goes out now (Files::read's contract); its answer is awaited below.
        let request = (len > 0).then(|| {
            let init = RequestInit::new();
            init.set_redirect(RequestRedirect::Manual);
            let headers = Headers::new().map_err(|e| describe(&e))?;
            headers.set("range", &format!("bytes={start}-{}", start + len - 1)).map_err(|e| describe(&e))?;
            init.set_headers(&headers);
            Ok::<_, String>(fetch(&url, &init))
        });
        Box::pin(async move {
            let Some(request) = request else {
                return Ok(Vec::new());
            };
            let response = request?.await.inspect_err(|_| self.in_transit.set(true))?;
            self.check(&response, &url)?;
            match response.status() {
                206 => {}
                200 if whole => {}
                200 => {
                    return Err(
                        "the server does not answer range requests (it sent the whole file for a part)"
                            .into(),
                    )
                }
                s => return Err(format!("the server answered HTTP {s}")),
            }
            let buffer = JsFuture::from(response.array_buffer().map_err(|e| describe(&e))?)
                .await
                .map_err(|e| describe(&e))
                .inspect_err(|_| self.in_transit.set(true))?;
            let bytes = Uint8Array::new(&buffer).to_vec();
            if bytes.len() as u64 != len {
                return Err(format!("{} bytes came where {len} were asked for", bytes.len()));
            }
            Ok(bytes)
        })
    }
}

/// `path` as a folder's path in a message (with its trailing `/`).
fn folder_path(path: &str) -> String {
    format!("{}/", path.trim_end_matches('/'))
}

/// `path` resolved against the page's address, as a folder address ending in `/`, if it is on
/// the page's own origin (the link's `model=` was checked for its form when it was read; this
/// checks where it leads).
fn same_origin(path: &str) -> Result<String, String> {
    let location = web_sys::window().ok_or("no window")?.location();
    let page = location.href().map_err(|e| describe(&e))?;
    let url = web_sys::Url::new_with_base(&format!("{}/", path.trim_end_matches('/')), &page)
        .map_err(|_| "not a path the page can resolve".to_string())?;
    if url.origin() != location.origin().map_err(|e| describe(&e))? {
        return Err("only folders on this page's own server are loaded, never another site".into());
    }
    url.set_search("");
    url.set_hash("");
    Ok(url.href())
}

/// Sends the request now; the future answers with its response.
fn fetch(url: &str, init: &RequestInit) -> impl Future<Output = Result<Response, String>> {
    let sent =
        web_sys::window().ok_or("no window").map(|w| JsFuture::from(w.fetch_with_str_and_init(url, init)));
    async move {
        let response = sent?.await.map_err(|e| format!("could not be fetched ({})", describe(&e)))?;
        Ok(response.unchecked_into())
    }
}
