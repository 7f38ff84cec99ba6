//! The page's web workers: every core of the reader's machine for the trained model's batch work
//! (the importance sweeps, the pruning curves, the quality of the reader's set of heads, the
//! heads' roles), as a [`Pool`].
//!
//! Each worker runs `www/worker.js`, which loads this page's own wasm ([`super::worker`] then
//! serves); the page sends it the model file it already fetched and checked (a copy each: no
//! worker fetches or hashes it again). Work goes over as
//! bytes ([`crate::jobs::work`]), copied, never shared: nothing here needs `SharedArrayBuffer`,
//! so the pool works in an iframe on a handbook page that is not cross-origin isolated. Results
//! are bit for bit those of the page's own thread (the same wasm code on the same pieces).
//!
//! The pool starts the first time work comes (not when the page opens). When it cannot be had or
//! a worker fails, it answers with why, and the engine runs the pieces on the page's thread.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures_channel::oneshot;
use js_sys::{Array, ArrayBuffer, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use web_sys::{ErrorEvent, Event, MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::attention::precision::Precision;
use crate::jobs::host::LocalFuture;
use crate::jobs::pool::{Pool, Priority};
use crate::jobs::web::{describe, settled_dot_form};
use crate::jobs::work::{Done, Piece};

/// The worker's script, copied next to `index.html` by trunk.
const WORKER_URL: &str = "worker.js";

/// Workers started when the link does not say (`?threads=`): one per logical core the browser
/// reports, at most this many (each holds its own 90 MB copy of the model).
pub const AUTO_MAX: usize = 4;

/// One worker and the answer it owes.
struct Member {
    worker: Worker,
    /// Bytes of wasm memory it last said it holds.
    memory: std::cell::Cell<u64>,
    reply: Rc<RefCell<Option<oneshot::Sender<JsValue>>>>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(Event)>,
}

impl Member {
    fn spawn() -> Result<Member, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(WORKER_URL, &options).map_err(|e| describe(&e))?;
        let reply: Rc<RefCell<Option<oneshot::Sender<JsValue>>>> = Rc::default();
        let answer = reply.clone();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
            if let Some(tx) = answer.borrow_mut().take() {
                let _ = tx.send(e.data());
            }
        });
        let answer = reply.clone();
        // A script that cannot load fires a plain `Event`; an error inside the worker, an
        // `ErrorEvent` with its message.
        let on_error = Closure::<dyn FnMut(Event)>::new(move |e: Event| {
            let why = e
                .dyn_ref::<ErrorEvent>()
                .map(|e| e.message())
                .unwrap_or_else(|| "its script did not load".into());
            let text = format!("error: a worker stopped: {why}");
            if let Some(tx) = answer.borrow_mut().take() {
                let _ = tx.send(JsValue::from_str(&text));
            }
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let memory = std::cell::Cell::new(0);
        Ok(Member { worker, memory, reply, _on_message: on_message, _on_error: on_error })
    }

    /// Posts `message` (moving `transfer`'s buffers) and waits for the worker's answer.
    async fn call(&self, message: &JsValue, transfer: Option<&Array>) -> Result<JsValue, String> {
        let (tx, rx) = oneshot::channel();
        *self.reply.borrow_mut() = Some(tx);
        match transfer {
            Some(t) => self.worker.post_message_with_transfer(message, t),
            None => self.worker.post_message(message),
        }
        .map_err(|e| describe(&e))?;
        let answer = rx.await.map_err(|_| "a worker stopped answering".to_string())?;
        match answer.as_string() {
            Some(text) => match text.strip_prefix("error: ") {
                Some(e) => Err(e.to_string()),
                None => Ok(answer),
            },
            None => Ok(answer),
        }
    }

    /// Waits for `want` after posting `message` (moving `transfer`'s buffers).
    async fn expect(&self, message: &JsValue, transfer: Option<&Array>, want: &str) -> Result<(), String> {
        let answer = self.call(message, transfer).await?;
        match answer.as_string() {
            Some(text) if text == want => Ok(()),
            _ => Err(format!("a worker answered {answer:?} where it should say {want:?}")),
        }
    }

    /// Sends the model (`message`, moving `transfer`'s buffers) and waits for `"loaded <bytes>"`,
    /// noting the worker's memory.
    async fn load(&self, message: &JsValue, transfer: &Array) -> Result<(), String> {
        let answer = self.call(message, Some(transfer)).await?;
        let bytes = answer.as_string().and_then(|t| t.strip_prefix("loaded ")?.parse::<u64>().ok());
        let bytes =
            bytes.ok_or_else(|| format!("a worker answered {answer:?} where it should say it loaded"))?;
        self.memory.set(bytes);
        Ok(())
    }

    /// Runs `work` in this worker.
    async fn run(&self, work: &Piece) -> Result<Done, String> {
        let bytes = Uint8Array::from(work.encode().as_slice());
        let answer = self.call(&bytes.buffer(), Some(&Array::of1(&bytes.buffer()))).await?;
        let answer =
            answer.dyn_into::<Array>().map_err(|_| "a worker answered with no result".to_string())?;
        if let Some(memory) = answer.get(1).as_f64() {
            self.memory.set(memory as u64);
        }
        let buffer = answer
            .get(0)
            .dyn_into::<ArrayBuffer>()
            .map_err(|_| "a worker answered with no result".to_string())?;
        // The engine checks that the result fits the piece.
        Done::decode(&Uint8Array::new(&buffer).to_vec()).map_err(|e| e.to_string())
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// A piece waiting for a worker, and where its result goes.
struct Task {
    work: Piece,
    priority: Priority,
    done: oneshot::Sender<Result<Done, String>>,
}

/// Running workers, each with the model loaded, and the pieces waiting for them.
struct Crew {
    /// Every worker, busy or not.
    members: Vec<Rc<Member>>,
    queue: Rc<RefCell<VecDeque<Task>>>,
    idle: Rc<RefCell<Vec<Rc<Member>>>>,
    /// Why the pool stopped working, once it has.
    broken: Rc<RefCell<Option<String>>>,
}

impl Crew {
    /// Starts `size` workers and loads the model in each.
    async fn start(size: usize, model: &Rc<ModelFile>, precision: Precision) -> Result<Crew, String> {
        let (glue, wasm) = loader_urls().ok_or("this page's loader was not found")?;
        // The 8-bit form they run in, the page's (timed now if not yet settled). Before they are
        // spawned: nothing may await between a spawn and its handlers, or a worker that fails to
        // start reports it to nobody.
        let form = settled_dot_form().await;
        let members: Vec<Rc<Member>> =
            (0..size).map(|_| Member::spawn().map(Rc::new)).collect::<Result<_, _>>()?;
        // All at once: each starts the wasm and decodes its copy of the model file.
        let started: Vec<oneshot::Receiver<Result<(), String>>> = members
            .iter()
            .map(|m| {
                let (m, (glue, wasm), model) = (m.clone(), (glue.clone(), wasm.clone()), model.clone());
                let (tx, rx) = oneshot::channel();
                spawn_local(async move {
                    let urls = Array::of2(&JsValue::from_str(&glue), &JsValue::from_str(&wasm));
                    let ready = m.expect(&urls, None, "ready").await;
                    let loaded = match ready {
                        Ok(()) => {
                            // Each worker gets its own copy, made in JavaScript once this one
                            // is ready (one copy per turn of the page's thread) and moved to it,
                            // not cloned again by the post: the page keeps the file.
                            let (pieces, buffers) = model.bytes.copy();
                            let message = Array::of4(
                                &JsValue::from_str(&model.id),
                                &pieces,
                                &JsValue::from_str(precision.key()),
                                &JsValue::from_str(form.key()),
                            );
                            m.load(&message, &buffers).await
                        }
                        Err(e) => Err(e),
                    };
                    let _ = tx.send(loaded);
                });
                rx
            })
            .collect();
        for rx in started {
            rx.await.map_err(|_| "a worker stopped starting".to_string())??;
        }
        let idle = Rc::new(RefCell::new(members.clone()));
        Ok(Crew { members, queue: Rc::default(), idle, broken: Rc::default() })
    }

    /// Runs `pieces` on the workers, as many at once as there are workers, `priority` among the
    /// pieces waiting; results in order.
    async fn run(&self, pieces: Vec<Piece>, priority: Priority) -> Result<Vec<Done>, String> {
        let waiting: Vec<_> = {
            let mut queue = self.queue.borrow_mut();
            // Urgent pieces go after the urgent ones already waiting, before the rest.
            let mut at = match priority {
                Priority::Now => {
                    queue.iter().position(|t| t.priority == Priority::Background).unwrap_or(queue.len())
                }
                Priority::Background => queue.len(),
            };
            pieces
                .into_iter()
                .map(|work| {
                    let (done, rx) = oneshot::channel();
                    queue.insert(at, Task { work, priority, done });
                    at += 1;
                    rx
                })
                .collect()
        };
        // Every idle worker takes to the queue; the busy ones come back to it when done.
        let idle: Vec<Rc<Member>> = self.idle.borrow_mut().drain(..).collect();
        for member in idle {
            spawn_local(serve(member, self.queue.clone(), self.idle.clone(), self.broken.clone()));
        }
        let mut out = Vec::with_capacity(waiting.len());
        for rx in waiting {
            let broken = || self.broken.borrow().clone().unwrap_or_else(|| "a worker stopped".into());
            out.push(rx.await.map_err(|_| broken())??);
        }
        Ok(out)
    }
}

/// One worker's loop: pieces from the queue until it is empty (skipping those nobody waits for
/// any more), then back to the idle ones. A failure breaks the pool: every waiting piece hears
/// why, and the worker is not used again.
async fn serve(
    member: Rc<Member>,
    queue: Rc<RefCell<VecDeque<Task>>>,
    idle: Rc<RefCell<Vec<Rc<Member>>>>,
    broken: Rc<RefCell<Option<String>>>,
) {
    loop {
        let Some(task) = queue.borrow_mut().pop_front() else { break };
        if task.done.is_canceled() {
            continue;
        }
        match member.run(&task.work).await {
            Ok(done) => {
                let _ = task.done.send(Ok(done));
            }
            Err(e) => {
                *broken.borrow_mut() = Some(e.clone());
                let _ = task.done.send(Err(e.clone()));
                for t in queue.borrow_mut().drain(..) {
                    let _ = t.done.send(Err(e.clone()));
                }
                idle.borrow_mut().clear();
                return;
            }
        }
    }
    idle.borrow_mut().push(member);
}

/// Where the pool stands.
enum PoolState {
    /// Not asked for yet.
    Idle,
    /// Starting; these wait for it.
    Starting(Vec<oneshot::Sender<()>>),
    /// Running.
    Ready(Rc<Crew>),
    /// It could not be started, or it broke; why.
    Failed(String),
}

/// A model file ([`crate::model::load::model_file`]'s format) and its id, as the page holds it for its
/// workers: outside its wasm memory.
pub struct ModelFile {
    /// [`crate::model::load::model_file::file_id`] of the bytes.
    pub id: String,
    /// The file.
    pub bytes: super::JsFile,
}

/// `threads` web workers, started the first time work comes, each given the model's file.
pub struct WebWorkers {
    threads: usize,
    model: Rc<ModelFile>,
    precision: Precision,
    state: RefCell<PoolState>,
}

impl WebWorkers {
    /// Workers for `threads` threads (at least 2: one thread is the page's own), each running
    /// the model at `precision`.
    pub fn new(threads: usize, model: Rc<ModelFile>, precision: Precision) -> WebWorkers {
        WebWorkers { threads, model, precision, state: RefCell::new(PoolState::Idle) }
    }

    /// The running crew, started on first use; why not, when it cannot be had.
    async fn crew(&self) -> Result<Rc<Crew>, String> {
        loop {
            let wait = match &mut *self.state.borrow_mut() {
                PoolState::Ready(crew) => match crew.broken.borrow().clone() {
                    None => return Ok(crew.clone()),
                    Some(why) => return Err(why),
                },
                PoolState::Failed(why) => return Err(why.clone()),
                PoolState::Starting(waiters) => {
                    let (tx, rx) = oneshot::channel();
                    waiters.push(tx);
                    Some(rx)
                }
                state @ PoolState::Idle => {
                    *state = PoolState::Starting(Vec::new());
                    None
                }
            };
            match wait {
                Some(rx) => {
                    let _ = rx.await;
                }
                None => break,
            }
        }
        let next = match Crew::start(self.threads, &self.model, self.precision).await {
            Ok(crew) => PoolState::Ready(Rc::new(crew)),
            Err(e) => PoolState::Failed(e),
        };
        if let PoolState::Starting(waiters) = self.state.replace(next) {
            for w in waiters {
                let _ = w.send(());
            }
        }
        match &*self.state.borrow() {
            PoolState::Ready(crew) => Ok(crew.clone()),
            PoolState::Failed(why) => Err(why.clone()),
            _ => Err("the workers did not start".into()),
        }
    }
}

impl Pool for WebWorkers {
    fn threads(&self) -> usize {
        self.threads
    }

    fn ready(&self) -> LocalFuture<'_, Result<(), String>> {
        Box::pin(async move { self.crew().await.map(drop) })
    }

    fn memory(&self) -> Vec<u64> {
        match &*self.state.borrow() {
            PoolState::Ready(crew) => crew.members.iter().map(|m| m.memory.get()).collect(),
            _ => Vec::new(),
        }
    }

    fn run(&self, pieces: Vec<Piece>, priority: Priority) -> LocalFuture<'_, Result<Vec<Done>, String>> {
        Box::pin(async move {
            let crew = self.crew().await?;
            let done = crew.run(pieces, priority).await;
            if let Err(why) = &done {
                *self.state.borrow_mut() = PoolState::Failed(why.clone());
            }
            done
        })
    }
}

/// The page's threads when the link does not say: the browser's logical cores, at most
/// [`AUTO_MAX`].
pub fn auto_threads() -> usize {
    let cores = web_sys::window().map_or(1.0, |w| w.navigator().hardware_concurrency());
    (cores as usize).clamp(1, AUTO_MAX)
}

/// The addresses of this page's wasm-bindgen module and wasm, as the loader chose them: from
/// `<html data-glue data-wasm>`, where the loader of a release build notes which of its two builds
/// it loaded (`scripts/relaxed-loader.py`), else (a debug build) from trunk's preload links.
fn loader_urls() -> Option<(String, String)> {
    let document = web_sys::window()?.document()?;
    let href = |selector: &str| {
        document
            .query_selector(selector)
            .ok()
            .flatten()
            .and_then(|e| e.get_attribute("href"))
            .map(|h| absolute(&h))
    };
    let noted = |name: &str| document.document_element()?.get_attribute(name).map(|h| absolute(&h));
    let glue = noted("data-glue").or_else(|| href("link[rel=modulepreload][href$='.js']"))?;
    let wasm = noted("data-wasm").or_else(|| href("link[rel=preload][href$='_bg.wasm']"))?;
    Some((glue, wasm))
}

/// `url` against the page's address.
fn absolute(url: &str) -> String {
    let base = web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default();
    web_sys::Url::new_with_base(url, &base).map(|u| u.href()).unwrap_or_else(|_| url.to_string())
}
