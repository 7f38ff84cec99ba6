//! Where a checkpoint folder's bytes come from, behind one trait ([`Files`]): the reader's
//! `File`s and the page's own server in the browser (`crate::jobs::web::files`), a directory
//! natively ([`DirFiles`]: the converter and the tests), memory in the tests ([`MemoryFiles`]).

use std::future::Future;
use std::pin::Pin;

/// One file of the folder: its path as the reader's browser gives it (`all-MiniLM-L6-v2/config.json`
/// for a dropped folder, `config.json` for picked files) and its size in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The path, `/`-separated.
    pub path: String,
    /// Bytes.
    pub size: u64,
}

/// Where the files' bytes come from: the reader's `File`s in the page, a directory natively,
/// memory in the tests.
pub trait Files {
    /// Every file offered.
    fn entries(&self) -> &[Entry];

    /// `len` bytes of file `index` (of [`Files::entries`]) from byte `start`; the caller keeps
    /// the range within the file's size. The read starts when this is called, not when the
    /// future is first polled, so that a caller can have several under way.
    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_>;
}

/// A read under way: the bytes, or why they could not be had. Boxed, so that [`Files`] is a
/// trait object and the loader one function for every back end (made again for each, it was as
/// many copies of the loader in the page's wasm).
pub type Read<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + 'a>>;

/// Runs a future that never waits (the native [`Files`], whose reads are ready at once) to its
/// end.
///
/// # Panics
/// If the future waits: it would never be woken.
pub fn now<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("a checkpoint read that waits, run where nothing wakes it"),
    }
}

/// Files in memory: the tests' folders, and the bytes a page was handed.
#[derive(Clone, Debug, Default)]
pub struct MemoryFiles {
    entries: Vec<Entry>,
    bytes: Vec<Vec<u8>>,
}

impl MemoryFiles {
    /// No files.
    pub fn new() -> MemoryFiles {
        MemoryFiles::default()
    }

    /// Adds (or replaces) the file at `path`.
    pub fn put(&mut self, path: &str, bytes: Vec<u8>) {
        let entry = Entry { path: path.to_string(), size: bytes.len() as u64 };
        match self.entries.iter().position(|e| e.path == path) {
            Some(i) => {
                self.entries[i] = entry;
                self.bytes[i] = bytes;
            }
            None => {
                self.entries.push(entry);
                self.bytes.push(bytes);
            }
        }
    }

    /// Removes the file at `path`.
    pub fn remove(&mut self, path: &str) {
        if let Some(i) = self.entries.iter().position(|e| e.path == path) {
            self.entries.remove(i);
            self.bytes.remove(i);
        }
    }

    /// The bytes of the file at `path`.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.entries.iter().position(|e| e.path == path).map(|i| self.bytes[i].as_slice())
    }
}

impl Files for MemoryFiles {
    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        let bytes = &self.bytes[index];
        let range = usize::try_from(start).ok().zip(usize::try_from(start + len).ok());
        let read = match range {
            Some((a, b)) if b <= bytes.len() => Ok(bytes[a..b].to_vec()),
            _ => Err(format!("bytes {start}..{} of {}", start + len, bytes.len())),
        };
        Box::pin(std::future::ready(read))
    }
}

/// The files under a directory on disk, read as asked (never whole): the converter's and the
/// tests' way in (in the browser, where there is no disk, every read fails).
#[derive(Clone, Debug)]
pub struct DirFiles {
    root: std::path::PathBuf,
    /// The folder's name and `/`, which every path starts with.
    prefix: String,
    entries: Vec<Entry>,
}

impl DirFiles {
    /// Every file under `root` (two levels deep, as a model folder's are), paths starting with
    /// the folder's name, as a browser gives a dropped folder's.
    pub fn new(root: &std::path::Path) -> std::io::Result<DirFiles> {
        let mut entries = Vec::new();
        let name = root.file_name().map(|n| format!("{}/", n.to_string_lossy())).unwrap_or_default();
        let mut dirs = vec![(root.to_path_buf(), name.clone(), 0)];
        while let Some((dir, prefix, depth)) = dirs.pop() {
            for item in std::fs::read_dir(&dir)? {
                let item = item?;
                let name = format!("{prefix}{}", item.file_name().to_string_lossy());
                let meta = std::fs::metadata(item.path())?;
                if meta.is_dir() && depth < 2 {
                    dirs.push((item.path(), format!("{name}/"), depth + 1));
                } else if meta.is_file() {
                    entries.push(Entry { path: name, size: meta.len() });
                }
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(DirFiles { root: root.to_path_buf(), prefix: name, entries })
    }
}

impl Files for DirFiles {
    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn read(&self, index: usize, start: u64, len: u64) -> Read<'_> {
        use std::io::{Read as _, Seek, SeekFrom};
        let read = || -> std::io::Result<Vec<u8>> {
            let relative = &self.entries[index].path[self.prefix.len()..];
            let mut file = std::fs::File::open(self.root.join(relative))?;
            file.seek(SeekFrom::Start(start))?;
            let mut out = vec![0u8; len as usize];
            file.read_exact(&mut out)?;
            Ok(out)
        };
        Box::pin(std::future::ready(read().map_err(|e| e.to_string())))
    }
}

/// A path's last part, at most 80 characters, as a model's name: `models/bert-tiny/` names
/// `bert-tiny`; a path with no name of its own (empty, `.`, `..`) names nothing.
pub fn last_part(path: &str) -> Option<String> {
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    (!matches!(last, "" | "." | "..")).then(|| last.chars().take(80).collect())
}
