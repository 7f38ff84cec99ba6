//! The page's web workers: every core of the reader's machine for the trained model's batch
//! work (the pruning curves, the quality of the reader's set of heads).
//!
//! Each worker runs `www/worker.js`, which loads this page's own wasm ([`super::worker`] then
//! serves), fetches the model from the page's origin and checks its hash. Work goes over as
//! bytes ([`crate::model::work`]), copied, never shared: nothing here needs `SharedArrayBuffer`,
//! so the pool works in an iframe on a handbook page that is not cross-origin isolated. Results
//! are bit for bit those of the page's own thread (the same wasm code on the same pieces).
//!
//! [`Workers`] is what the panel holds: it starts the pool the first time work comes (not when
//! the page opens), runs pieces there, and when the pool cannot be had or a worker fails, runs
//! them on the page's thread instead and says why.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures_channel::oneshot;
use js_sys::{Array, ArrayBuffer, Uint8Array};
use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use web_sys::{ErrorEvent, Event, MessageEvent, Worker, WorkerOptions, WorkerType};

use super::browser::{now_ms, yield_to_browser};
use crate::cpu::Kernel;
use crate::model::bert::Bert;
use crate::model::curves::Pace;
use crate::model::work::{Done, Work};

/// The worker's script, copied next to `index.html` by trunk.
const WORKER_URL: &str = "worker.js";

/// Workers started when the link does not say (`?threads=`): one per logical core the browser
/// reports, at most this many (each holds its own 90 MB copy of the model).
pub const AUTO_MAX: usize = 4;

/// One worker and the answer it owes.
struct Member {
    worker: Worker,
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
        Ok(Member { worker, reply, _on_message: on_message, _on_error: on_error })
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

    /// Waits for `want` after posting `message`.
    async fn expect(&self, message: &JsValue, want: &str) -> Result<(), String> {
        let answer = self.call(message, None).await?;
        match answer.as_string() {
            Some(text) if text == want => Ok(()),
            _ => Err(format!("a worker answered {answer:?} where it should say {want:?}")),
        }
    }

    /// Runs `work` in this worker.
    async fn run(&self, work: &Work) -> Result<Done, String> {
        let bytes = Uint8Array::from(work.encode().as_slice());
        let answer = self.call(&bytes.buffer(), Some(&Array::of1(&bytes.buffer()))).await?;
        let buffer =
            answer.dyn_into::<ArrayBuffer>().map_err(|_| "a worker answered with no result".to_string())?;
        let done = Done::decode(&Uint8Array::new(&buffer).to_vec()).map_err(|e| e.to_string())?;
        if work.accepts(&done) {
            Ok(done)
        } else {
            Err("a worker answered with a result of the wrong shape".to_string())
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// A piece waiting for a worker, and where its result goes.
struct Task {
    work: Work,
    done: oneshot::Sender<Result<Done, String>>,
}

/// Running workers, each with the model loaded, and the pieces waiting for them.
struct Pool {
    queue: Rc<RefCell<VecDeque<Task>>>,
    idle: Rc<RefCell<Vec<Rc<Member>>>>,
    /// Why the pool stopped working, once it has.
    broken: Rc<RefCell<Option<String>>>,
}

impl Pool {
    /// Starts `size` workers and loads the model in each.
    async fn start(size: usize, model_url: &str) -> Result<Pool, String> {
        let (glue, wasm) = loader_urls().ok_or("this page's loader was not found")?;
        let model = absolute(model_url);
        let members: Vec<Rc<Member>> =
            (0..size).map(|_| Member::spawn().map(Rc::new)).collect::<Result<_, _>>()?;
        // All at once: each starts the wasm and fetches the model (from the browser's cache).
        let started: Vec<oneshot::Receiver<Result<(), String>>> = members
            .iter()
            .map(|m| {
                let (m, (glue, wasm, model)) = (m.clone(), (glue.clone(), wasm.clone(), model.clone()));
                let (tx, rx) = oneshot::channel();
                spawn_local(async move {
                    let urls = Array::of2(&JsValue::from_str(&glue), &JsValue::from_str(&wasm));
                    let ready = m.expect(&urls, "ready").await;
                    let loaded = match ready {
                        Ok(()) => m.expect(&JsValue::from_str(&model), "loaded").await,
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
        Ok(Pool { queue: Rc::default(), idle: Rc::new(RefCell::new(members)), broken: Rc::default() })
    }

    /// Runs `pieces` on the workers, as many at once as there are workers; results in order.
    async fn run(&self, pieces: Vec<Work>) -> Result<Vec<Done>, String> {
        let waiting: Vec<_> = pieces
            .into_iter()
            .map(|work| {
                let (done, rx) = oneshot::channel();
                self.queue.borrow_mut().push_back(Task { work, done });
                rx
            })
            .collect();
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
    Ready(Rc<Pool>),
    /// It could not be started, or it broke (the note says why).
    Failed,
}

/// Where the panel's batch work runs: on `threads` workers, or on the page's own thread when
/// that is 1, or when the workers cannot be had.
pub struct Workers {
    threads: usize,
    model_url: &'static str,
    state: RefCell<PoolState>,
    /// Why the work runs on the page's thread although more were asked for, once known.
    pub note: RwSignal<Option<String>>,
    /// Threads the last work ran on (0 before any ran).
    pub used: RwSignal<usize>,
    /// How fast the work whose FLOPs are known ran ([`Work::flops`]), the pool's start left out.
    pub pace: RwSignal<Pace>,
}

impl Workers {
    /// Work on `threads` threads, the workers loading the model from `model_url`.
    pub fn new(threads: usize, model_url: &'static str) -> Workers {
        Workers {
            threads,
            model_url,
            state: RefCell::new(PoolState::Idle),
            note: RwSignal::new(None),
            used: RwSignal::new(0),
            pace: RwSignal::new(Pace::default()),
        }
    }

    /// Whether work goes to the workers (more than one thread asked for, and they have not
    /// failed).
    pub fn parallel(&self) -> bool {
        self.running_on() > 1
    }

    /// Threads the work runs on now: the workers, or the page's one.
    pub fn running_on(&self) -> usize {
        match &*self.state.borrow() {
            PoolState::Failed => 1,
            _ => self.threads,
        }
    }

    /// The pool, started on first use; `None` with one thread, or when it failed.
    async fn pool(&self) -> Option<Rc<Pool>> {
        if self.threads < 2 {
            return None;
        }
        loop {
            let wait = match &mut *self.state.borrow_mut() {
                PoolState::Ready(pool) if pool.broken.borrow().is_none() => return Some(pool.clone()),
                PoolState::Ready(_) | PoolState::Failed => return None,
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
        let started = Pool::start(self.threads, self.model_url).await;
        let next = match started {
            Ok(pool) => PoolState::Ready(Rc::new(pool)),
            Err(e) => self.failed(e),
        };
        if let PoolState::Starting(waiters) = self.state.replace(next) {
            for w in waiters {
                let _ = w.send(());
            }
        }
        match &*self.state.borrow() {
            PoolState::Ready(pool) => Some(pool.clone()),
            _ => None,
        }
    }

    fn failed(&self, why: String) -> PoolState {
        self.note.set(Some(format!(
            "Computing on this page's thread only: the {} workers could not be used ({why}).",
            self.threads
        )));
        PoolState::Failed
    }

    /// Runs `pieces` for `bert`: on the workers, or here with the browser's turn between pieces
    /// while `wanted()`; `None` once it is not.
    pub async fn run(&self, bert: &Bert, pieces: Vec<Work>, wanted: impl Fn() -> bool) -> Option<Vec<Done>> {
        let flops: Option<u64> = pieces.iter().map(Work::flops).sum();
        if let Some(pool) = self.pool().await {
            let started = now_ms();
            match pool.run(pieces.clone()).await {
                Ok(done) => {
                    self.used.set(self.threads);
                    self.timed(flops, now_ms() - started);
                    return wanted().then_some(done);
                }
                Err(e) => {
                    let state = self.failed(e);
                    *self.state.borrow_mut() = state;
                }
            }
        }
        let (mut out, started) = (Vec::with_capacity(pieces.len()), now_ms());
        for work in &pieces {
            yield_to_browser().await;
            if !wanted() {
                return None;
            }
            out.push(work.run(bert, Kernel::Simd));
        }
        self.used.set(1);
        self.timed(flops, now_ms() - started);
        Some(out)
    }

    /// Adds work done elsewhere on the CPU kernel (`flops` in `ms`) to the page's pace.
    pub fn record(&self, flops: u64, ms: f64) {
        self.timed(Some(flops), ms);
    }

    fn timed(&self, flops: Option<u64>, ms: f64) {
        if let Some(flops) = flops {
            self.pace.update(|p| p.record(flops, ms));
        }
    }
}

/// The page's threads when the link does not say: the browser's logical cores, at most
/// [`AUTO_MAX`].
pub fn auto_threads() -> usize {
    (window().navigator().hardware_concurrency() as usize).clamp(1, AUTO_MAX)
}

/// The addresses of this page's wasm-bindgen module and wasm, as the loader chose them: from
/// `<html data-glue data-wasm>`, where the loader of a release build notes which of its two builds
/// it loaded (`scripts/relaxed-loader.py`), else (a debug build) from trunk's preload links.
fn loader_urls() -> Option<(String, String)> {
    let href = |selector: &str| {
        document()
            .query_selector(selector)
            .ok()
            .flatten()
            .and_then(|e| e.get_attribute("href"))
            .map(|h| absolute(&h))
    };
    let noted = |name: &str| document().document_element()?.get_attribute(name).map(|h| absolute(&h));
    let glue = noted("data-glue").or_else(|| href("link[rel=modulepreload][href$='.js']"))?;
    let wasm = noted("data-wasm").or_else(|| href("link[rel=preload][href$='_bg.wasm']"))?;
    Some((glue, wasm))
}

/// `url` against the page's address.
fn absolute(url: &str) -> String {
    let base = window().location().href().unwrap_or_default();
    web_sys::Url::new_with_base(url, &base).map(|u| u.href()).unwrap_or_else(|_| url.to_string())
}

fn describe(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .unwrap_or_else(|| format!("{e:?}"))
}
