//! A model file in JavaScript buffers, outside this thread's wasm memory: the page writes a
//! checkpoint's file there as it converts it and keeps it there for its workers; a worker reads
//! its copy from there. A decoder is built from it a tensor at a time, so the wasm memory holds
//! only the model (a wasm memory never shrinks: a file that passed through it whole would leave
//! its size behind, 1.5 GB for GPT-2 Large).
//!
//! The file is cut in pieces of at most [`PIECE`] bytes: a browser posts no buffer over 2 GiB to
//! a worker (Chromium: "The ArrayBuffer/ArrayBufferView size exceeds the supported range"), and
//! GPT-2 XL's file is 3.1 GB.

use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::JsCast;

use super::describe;
use crate::model::load::model_file::{FileBytes, FileSink};

/// The most bytes in one of a file's buffers (1 GiB).
pub const PIECE: usize = 1 << 30;

/// A model file in JavaScript `Uint8Array`s of `piece` bytes each ([`PIECE`], the last one
/// shorter), written once from the start ([`FileSink`]) and read a range at a time
/// ([`FileBytes`]).
pub struct JsFile {
    pieces: Vec<Uint8Array>,
    /// Bytes in each piece but the last.
    piece: usize,
    /// Bytes written so far.
    written: usize,
}

impl JsFile {
    /// An empty file, given its room by [`FileSink::begin`].
    pub fn new() -> JsFile {
        JsFile::in_pieces_of(PIECE)
    }

    /// An empty file to be held in pieces of `piece` bytes (tests cut a small file in several).
    pub fn in_pieces_of(piece: usize) -> JsFile {
        assert!(piece > 0, "pieces of at least a byte");
        JsFile { pieces: Vec::new(), piece, written: 0 }
    }

    /// The file in `pieces` (a worker's, from the page's message: each the first's length but
    /// the last, which is no longer), or why they are not one file.
    pub fn of(pieces: &Array) -> Result<JsFile, String> {
        let pieces: Vec<Uint8Array> = pieces
            .iter()
            .map(|p| {
                p.dyn_into::<Uint8Array>().map_err(|_| "a piece of the model file is not bytes".to_string())
            })
            .collect::<Result<_, _>>()?;
        let piece = pieces.first().map_or(PIECE, |p| p.length() as usize).max(1);
        let whole = pieces.split_last().is_none_or(|(last, rest)| {
            rest.iter().all(|p| p.length() as usize == piece) && last.length() as usize <= piece
        });
        if !whole {
            return Err("the model file's pieces are not each the first's length but the last".into());
        }
        let written = pieces.iter().map(|p| p.length() as usize).sum();
        Ok(JsFile { pieces, piece, written })
    }

    /// A copy of `bytes` (a file fetched into this thread's memory).
    pub fn copy_of(bytes: &[u8]) -> JsFile {
        let pieces = bytes.chunks(PIECE).map(Uint8Array::from).collect();
        JsFile { pieces, piece: PIECE, written: bytes.len() }
    }

    /// A copy of the file as written so far, made in JavaScript, and the list of its buffers to
    /// move with a message (for a worker: [`JsFile::of`] reads it there).
    pub fn copy(&self) -> (Array, Array) {
        let (copies, buffers) = (Array::new(), Array::new());
        for (i, piece) in self.pieces.iter().enumerate() {
            let len = self.written.saturating_sub(i * self.piece).min(self.piece) as u32;
            let copy = piece.slice(0, len);
            buffers.push(&copy.buffer());
            copies.push(&copy);
        }
        (copies, buffers)
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
        assert!(range.start <= range.end && range.end <= self.written, "a range within the file");
        let mut out = vec![0; range.len()];
        if range.is_empty() {
            return std::borrow::Cow::Owned(out);
        }
        // Each piece's part in turn: one, or more for a tensor that straddles a boundary.
        for p in range.start / self.piece..=(range.end - 1) / self.piece {
            let (start, end) = (range.start.max(p * self.piece), range.end.min((p + 1) * self.piece));
            let part =
                self.pieces[p].subarray((start - p * self.piece) as u32, (end - p * self.piece) as u32);
            part.copy_to(&mut out[start - range.start..end - range.start]);
        }
        std::borrow::Cow::Owned(out)
    }
}

impl FileSink for JsFile {
    fn begin(&mut self, len: usize) -> Result<(), String> {
        // `new Uint8Array(len)` throws a RangeError where the engine will not give that much: a
        // refusal, not a panic.
        let constructor = Uint8Array::new_with_length(0).constructor();
        let mut pieces = Vec::with_capacity(len.div_ceil(self.piece));
        for start in (0..len).step_by(self.piece) {
            let size = (len - start).min(self.piece);
            let made = Reflect::construct(&constructor, &Array::of1(&(size as f64).into()))
                .map_err(|e| format!("this browser would not hold its {len} bytes ({})", describe(&e)))?;
            pieces.push(made.unchecked_into());
        }
        (self.pieces, self.written) = (pieces, 0);
        Ok(())
    }

    fn append(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (p, at) = (self.written / self.piece, self.written % self.piece);
            let piece = self.pieces.get(p).expect("no more than the room begun");
            let n = bytes.len().min(piece.length() as usize - at);
            assert!(n > 0, "no more than the room begun");
            piece.subarray(at as u32, (at + n) as u32).copy_from(&bytes[..n]);
            (self.written, bytes) = (self.written + n, &bytes[n..]);
        }
    }

    fn outside_memory(&self) -> bool {
        true
    }
}
