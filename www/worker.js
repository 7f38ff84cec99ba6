// headlab's web worker. The page sends the addresses of its own wasm-bindgen module and wasm;
// this loads them, and the wasm (src/jobs/web/worker.rs) takes over the conversation from there:
// it says "ready", loads the model, and runs the pieces of work the page sends.
self.onmessage = async (event) => {
  self.onmessage = null;
  const [glue, wasm] = event.data;
  try {
    const bindings = await import(glue);
    await bindings.default({ module_or_path: wasm });
  } catch (e) {
    self.postMessage(`error: the worker could not start headlab's wasm (${e})`);
  }
};
