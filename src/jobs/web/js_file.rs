//! A model file in a JavaScript buffer, outside this thread's wasm memory: the page writes a
//! checkpoint's file there as it converts it and keeps it there for its workers; a worker reads
//! its copy from there. A decoder is built from it a tensor at a time, so the wasm memory holds
//! only the model (a wasm memory never shrinks: a file that passed through it whole would leave
//! its size behind, 1.5 GB for GPT-2 Large).

use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::JsCast;

use super::describe;

use crate::model::load::model_file::{FileBytes, FileSink};

/// A model file in a JavaScript `Uint8Array`, written once from the start ([`FileSink`]) and
/// read a range at a time ([`FileBytes`]).
pub struct JsFile {
    array: Uint8Array,
    /// Bytes written so far.
    written: usize,
}

impl JsFile {
    /// An empty file, given its room by [`FileSink::begin`].
    pub fn new() -> JsFile {
        JsFile { array: Uint8Array::new_with_length(0), written: 0 }
    }

    /// A file whose bytes are `array`'s (a worker's, from the page's message).
    pub fn of(array: Uint8Array) -> JsFile {
        let written = array.length() as usize;
        JsFile { array, written }
    }

    /// A copy of `bytes` (a file fetched into this thread's memory).
    pub fn copy_of(bytes: &[u8]) -> JsFile {
        JsFile::of(Uint8Array::from(bytes))
    }

    /// A copy of the file as bytes written so far, made in JavaScript (for a worker: moved to it
    /// with its message).
    pub fn copy(&self) -> Uint8Array {
        self.array.slice(0, self.written as u32)
    }
}

impl Default for JsFile {
    fn default() -> JsFile {
        JsFile::new()
    }
}

impl FileBytes for JsFile {
    fn byte_len(&self) -> usize {
        self.written
    }

    fn get(&self, range: std::ops::Range<usize>) -> std::borrow::Cow<'_, [u8]> {
        assert!(range.end <= self.written, "a range within the file");
        std::borrow::Cow::Owned(self.array.subarray(range.start as u32, range.end as u32).to_vec())
    }
}

impl FileSink for JsFile {
    fn begin(&mut self, len: usize) -> Result<(), String> {
        // `new Uint8Array(len)` throws a RangeError where the engine will not give that much: a
        // refusal, not a panic.
        let constructor = self.array.constructor();
        let made = Reflect::construct(&constructor, &Array::of1(&(len as f64).into()))
            .map_err(|e| format!("this browser would not hold its {len} bytes ({})", describe(&e)))?;
        self.array = made.unchecked_into();
        self.written = 0;
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) {
        let end = self.written + bytes.len();
        assert!(end <= self.array.length() as usize, "no more than the room begun");
        self.array.subarray(self.written as u32, end as u32).copy_from(bytes);
        self.written = end;
    }

    fn outside_memory(&self) -> bool {
        true
    }
}
